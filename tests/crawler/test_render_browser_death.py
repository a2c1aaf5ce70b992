"""The rendering browser's own bounds: one that dies (crashed, killed for its memory) is launched again and the
chunk goes on rendering; a page's console flood is kept to a bounded list."""

from __future__ import annotations

import asyncio
import contextlib

import psutil
import pytest

from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.render import MAX_LAUNCHES, MAX_NOTES, Renderer
from tests.render_site import RenderSite

pytestmark = pytest.mark.browser


def _kill_browsers() -> int:
    killed = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):  # a child that ended since it was listed
            if "chrom" in process.name().lower():
                killed.append(process)
    for process in killed:
        with contextlib.suppress(psutil.NoSuchProcess):  # a renderer goes with its browser
            process.kill()
    psutil.wait_procs(killed, timeout=5)
    return len(killed)


def test_a_browser_that_dies_is_launched_again_and_the_next_pages_render():
    with RenderSite(pages=2) as site:
        shell = site.answer("/app/0")[2]
        guard = AddressGuard(allowed_targets=[("127.0.0.1", site.server.port)])

        async def go():
            policy = FetchPolicy(connect_timeout=1.0, read_timeout=2.0, deadline=5.0)
            async with Fetcher(policy, guard) as fetcher, Renderer(fetcher, deadline=5.0) as renderer:
                first = await renderer.render(site.url("/app/0"), shell)
                results = []
                for _ in range(MAX_LAUNCHES):
                    assert _kill_browsers()
                    await asyncio.sleep(0.5)  # Playwright notices the pipe close
                    results.append(await renderer.render(site.url("/app/1"), shell))
                return first, results

        first, results = asyncio.run(go())
    assert first.problem == "" and b"App page 0" in first.html
    # Each death is followed by a fresh browser, up to MAX_LAUNCHES launches in all (the first counts);
    # after that a page says the browser kept dying.
    *revived, spent = results
    assert [r.problem for r in revived] == [""] * (MAX_LAUNCHES - 1)
    assert all(b"App page 1" in r.html for r in revived)
    assert spent.problem == "render_failed" and "died 3 times" in spent.detail


def test_a_page_logging_errors_in_a_loop_keeps_a_bounded_list_of_them():
    flood = (b"<!doctype html><html><head><title>Noisy page</title></head><body><script>"
             b"for (let i = 0; i < 5000; i++) console.error('noise ' + i);</script></body></html>")
    with RenderSite() as site:
        guard = AddressGuard(allowed_targets=[("127.0.0.1", site.server.port)])

        async def go():
            policy = FetchPolicy(connect_timeout=1.0, read_timeout=2.0, deadline=5.0)
            async with Fetcher(policy, guard) as fetcher, Renderer(fetcher, deadline=5.0) as renderer:
                return await renderer.render(site.url("/noisy"), flood)

        rendered = asyncio.run(go())
    assert rendered.problem == "" and b"Noisy page" in rendered.html
    assert len(rendered.errors) == MAX_NOTES and rendered.errors[0] == "noise 0"
