import pytest

from tests.crawler.hostile_server import HostileServer


@pytest.fixture
def server():
    """A fresh HostileServer on 127.0.0.1 (test modules using pytest-httpserver override it)."""
    with HostileServer() as running:
        yield running
