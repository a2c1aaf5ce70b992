import pytest

from tests.crawler.hostile_server import HostileServer


@pytest.fixture
def server():
    """A fresh HostileServer on 127.0.0.1 (test modules using pytest-httpserver override it)."""
    with HostileServer() as running:
        yield running


@pytest.fixture
def window_wakes(monkeypatch):
    """How often the window's scheduler has woken (a list of one count): a busy loop wakes thousands of times."""
    import crawler.window as window_module

    wakes = [0]
    real_wait = window_module.wait_for_wake

    async def counting_wait(*args):
        wakes[0] += 1
        await real_wait(*args)

    monkeypatch.setattr(window_module, "wait_for_wake", counting_wait)
    return wakes
