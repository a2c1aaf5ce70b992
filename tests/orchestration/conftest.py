"""Orchestration fixtures: a loopback grid site (the cluster fixtures live in tests/conftest.py)."""

import pytest

from .grid_site import GridSite


@pytest.fixture
def grid_site():
    with GridSite(pages=40) as site:
        yield site
