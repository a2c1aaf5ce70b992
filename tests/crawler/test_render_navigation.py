"""The rendered page is the one URL asked for: the document request is served whatever Chromium's spelling of
that URL, and a script or refresh that navigates away leaves the page as it was, the move noted."""

from __future__ import annotations

import asyncio

import pytest

from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.render import Renderer
from tests.render_site import RenderSite

pytestmark = pytest.mark.browser


def render(site: RenderSite, pages: list[tuple[str, bytes]], *, settle: float = 0.0):
    """Each (path, body) rendered in turn by one browser; and the pages it holds ``settle`` s after the last."""
    guard = AddressGuard(allowed_targets=[("127.0.0.1", site.server.port)])

    async def go():
        policy = FetchPolicy(connect_timeout=1.0, read_timeout=2.0, deadline=5.0)
        async with Fetcher(policy, guard) as fetcher, Renderer(fetcher, deadline=3.0) as renderer:
            results = [await renderer.render(site.url(path), body) for path, body in pages]
            await asyncio.sleep(settle)
            return results, renderer.open_pages

    return asyncio.run(go())


PAGE = b"<!doctype html><html><head><title>Shop search</title></head><body><h1>Results</h1>%s</body></html>"


def test_a_page_whose_url_chromium_spells_otherwise_is_still_rendered():
    paths = ["/search?q=it's", "/search?q=a%20b&x=[1]", "/caf\u00e9/"]
    with RenderSite() as site:
        results, _ = render(site, [(path, PAGE % b"") for path in paths])
    for path, rendered in zip(paths, results, strict=True):
        assert rendered.problem == "", (path, rendered.detail)
        assert b"<title>Shop search</title>" in rendered.html, path


def test_a_page_that_navigates_away_by_script_or_refresh_is_read_as_it_was_and_the_move_noted():
    leaving = [b"<script>location.href = '/elsewhere';</script>",
               b"<script>setTimeout(() => location.replace('/elsewhere'), 50);</script>",
               b'<meta http-equiv="refresh" content="0; url=/elsewhere">']
    with RenderSite() as site:
        results, _ = render(site, [("/start", PAGE % how) for how in leaving])
    for how, rendered in zip(leaving, results, strict=True):
        assert rendered.problem == "", (how, rendered.detail)
        assert b"<title>Shop search</title>" in rendered.html and b"<h1>Results</h1>" in rendered.html, how
        assert [url for url, _ in rendered.blocked] == [rendered.url.rsplit("/", 1)[0] + "/elsewhere"], how


def test_requests_a_page_left_running_end_with_it_and_never_hold_the_next_pages_back():
    from tests.crawler.hostile_server import HostileServer, respond, static

    async def slow(request, reader, writer, server):
        await asyncio.sleep(3)
        return await respond(request, writer, server, body=b"late", headers={"Content-Type": "text/plain"})

    with HostileServer() as server:
        server.route("/slow", slow)
        server.route("/b.js", static(b"document.getElementById('root').textContent = 'script ran';",
                                     headers={"Content-Type": "application/javascript"}))
        greedy = b"<!doctype html><title>Greedy</title><script>for (let i = 0; i < 40; i++) fetch('/slow?n=' + i);</script>"
        second = b"<!doctype html><title>Second</title><div id=root></div><script src='/b.js'></script>"
        guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

        async def go():
            policy = FetchPolicy(connect_timeout=1.0, read_timeout=5.0, deadline=5.0)
            async with (Fetcher(policy, guard, concurrency=8) as fetcher,
                        Renderer(fetcher, deadline=1.5, slots=1) as renderer):
                first = await renderer.render(server.url("/greedy"), greedy)
                return first, await renderer.render(server.url("/second"), second)

        first, then = asyncio.run(go())
        asked = server.requests["/slow"]
    assert first.idle is False  # its requests were still running when its time was up
    assert then.problem == "" and b"script ran" in then.html
    assert asked <= 16, "the first page's requests ended with it, not all 40 sent after"


def test_windows_a_page_opens_by_link_or_form_are_closed_not_left_to_pile_up():
    storm = (b"<!doctype html><title>Popups</title><a id=a target=_blank href='/x'>x</a>"
             b"<form id=f target=_blank action='/y'></form><script>for (let i = 0; i < 10; i++) "
             b"{ document.getElementById('a').click(); document.getElementById('f').submit(); }</script>")
    with RenderSite() as site:
        # A window opens a moment after its click: counted a second after the last page.
        (first, second), left = render(site, [("/storm", storm), ("/after", PAGE % b"")], settle=1.0)
    assert first.problem == "" and second.problem == "" and b"Shop search" in second.html
    assert left == 0
