"""The event loop crawls run on: uvloop where it is installed, else asyncio's own.

A crawl is one event loop driving many sockets at once, and the loop's own
bookkeeping (selector, transports, callbacks) is a good part of what a fetch
costs; uvloop implements the same loop on libuv in C, for less CPU a page
(the measurement is noted with the dependency in pyproject.toml). httpcore's ``AnyIOBackend``, which the fetcher's
connection pools dial through, runs on anyio's asyncio backend and so on any
asyncio loop, uvloop included (tests/crawler/test_loop.py re-runs the fetch
tests there). uvloop is a dependency on every platform it supports (not
Windows), where this falls back to the standard loop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

try:  # pragma: no cover - which branch runs depends on the platform
    import uvloop
except ImportError:  # Windows, or an install without it
    uvloop = None

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    return uvloop.new_event_loop() if uvloop is not None else asyncio.new_event_loop()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the crawl loop."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coroutine)
