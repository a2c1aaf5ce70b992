"""Orchestration fixtures: a loopback grid site and a chunk writer on it (the cluster
fixtures live in tests/conftest.py)."""

import pytest

from audits.crawl.chunk import claim, lease_items
from audits.crawl.setup import crawl_setup
from audits.crawl.start import run_start
from audits.crawl.writer import ChunkWriter
from audits.dispatch import InlineDispatcher
from tests.factories import make_audit

from .grid_site import GridSite


@pytest.fixture
def grid_site():
    with GridSite(pages=40) as site:
        yield site


@pytest.fixture
def chunk_writer(owner, grid_site, fast_settings):
    """A started audit of the grid site, chunk 1 claimed: its writer and the URLs it leased."""
    audit = make_audit(owner, start_url=grid_site.url("/"), allow_private=True)
    run_start(audit.pk, InlineDispatcher())
    audit.refresh_from_db()
    held = claim(audit.pk, 1)
    items = lease_items(audit, held)
    return ChunkWriter(audit, held, crawl_setup(audit)), items
