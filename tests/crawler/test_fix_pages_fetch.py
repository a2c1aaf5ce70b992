"""Pages over the read cap, separate X-Robots-Tag headers, and one budget for a link check,
each through a real Fetcher against a loopback server."""

from __future__ import annotations

import asyncio
import gzip
import time

import pytest

from crawler.checks import CheckSettings, PageContext
from crawler.directives import header_robots_directives
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.page import process_page
from crawler.types import FetchError
from tests.crawler.hostile_server import (
    HostileServer,
    Request,
    Sleeps,
    head_bytes,
    respond,
    send,
    static,
)

KiB = 1024
CAP = 64 * KiB
POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=5.0, max_body_bytes=CAP,
                     max_decoded_bytes=2 * CAP)
PAGE = b"<!doctype html><html><head><title>Big</title></head><body>" + b"<p>words</p>" * 20_000 + b"</body></html>"


def _guard(server: HostileServer) -> AddressGuard:
    return AddressGuard(allowed_targets=[("127.0.0.1", server.port)])


def _page(server: HostileServer, path: str, policy: FetchPolicy = POLICY):
    async def run():
        async with Fetcher(policy, _guard(server), sleep=Sleeps()) as fetcher:
            ctx = PageContext(CheckSettings(), is_internal=lambda url: True)
            return await process_page(fetcher, server.url(path), 1, ctx)

    return asyncio.run(run())


async def _endless_html(request: Request, reader, writer, server) -> None:
    head = head_bytes(200, {"Content-Type": "text/html", "Transfer-Encoding": "chunked"})
    await send(writer, server, request.path, head)
    chunk = b"4000\r\n" + b"<p>x</p>" * 0x800 + b"\r\n"
    while server.bytes_sent[request.path] < 16 * CAP:
        await send(writer, server, request.path, chunk)


@pytest.mark.parametrize("path", ["/declared", "/chunked", "/gzip"])
def test_a_2xx_html_page_past_the_read_cap_is_a_large_page_not_a_fetch_failure(server, path):
    assert len(PAGE) > 2 * CAP and len(gzip.compress(PAGE)) < CAP
    server.route("/declared", static(PAGE))  # Content-Length past the cap: refused unread
    server.route("/chunked", _endless_html)  # cut at the wire cap
    server.route("/gzip", static(gzip.compress(PAGE), headers={"Content-Encoding": "gzip"}))  # decoded cap
    outcome = _page(server, path)
    assert outcome.result.status == 200
    assert outcome.result.error is None
    assert not outcome.result.broken
    codes = [f.code for f in outcome.findings]
    assert "large_html" in codes and "fetch_failed" not in codes
    [large] = [f for f in outcome.findings if f.code == "large_html"]
    assert large.message.startswith("HTML is too large to read (")
    assert outcome.facts is None and outcome.outlinks == () and outcome.problem == ""


def test_an_error_page_too_large_to_read_is_its_status_not_a_fetch_failure(server):
    server.route("/gone", static(PAGE, status=404))
    outcome = _page(server, "/gone")
    assert (outcome.result.status, outcome.result.error) == (404, None)
    codes = [f.code for f in outcome.findings]
    assert "http_4xx" in codes and "fetch_failed" not in codes


def _robots_headers(lines: list[str]):
    async def handler(request: Request, reader, writer, server) -> None:
        body = b"<!doctype html><html><head><title>Robots lines</title></head><body><p>x</p></body></html>"
        headers = [("Content-Type", "text/html"), ("Content-Length", str(len(body))), ("Connection", "close")]
        await send(writer, server, request.path, head_bytes(200, headers + [("X-Robots-Tag", v) for v in lines]) + body)

    return handler


def test_a_noindex_in_its_own_x_robots_tag_header_is_not_taken_for_the_agent_named_in_another(server):
    server.route("/two", _robots_headers(["otherbot: nofollow", "noindex"]))
    outcome = _page(server, "/two")
    assert header_robots_directives(outcome.result.headers["x-robots-tag"]) == {"noindex"}
    codes = [f.code for f in outcome.findings]
    assert "noindex" in codes and "nofollow" not in codes


def test_an_agent_prefix_still_holds_for_the_rest_of_its_own_x_robots_tag_header(server):
    server.route("/one", _robots_headers(["googlebot: nofollow", "otherbot: noindex, noarchive"]))
    outcome = _page(server, "/one")
    assert header_robots_directives(outcome.result.headers["x-robots-tag"]) == {"nofollow"}
    assert header_robots_directives("otherbot: nofollow, noindex") == frozenset()


def test_a_head_refused_link_check_keeps_to_one_total_budget(server):
    async def slow_405_then_slow_page(request: Request, reader, writer, server) -> None:
        await asyncio.sleep(0.6 if request.method == "HEAD" else 3.0)
        if request.method == "HEAD":
            await respond(request, writer, server, status=405)
        else:
            await respond(request, writer, server, body=b"<html>ok</html>")

    server.route("/slow", slow_405_then_slow_page)
    policy = FetchPolicy(connect_timeout=1.0, read_timeout=2.0, deadline=5.0, total_budget=1.0, max_retries=0)

    async def run():
        async with Fetcher(policy, _guard(server), sleep=Sleeps()) as fetcher:
            started = time.monotonic()
            result = await fetcher.check(server.url("/slow"))
            return result, time.monotonic() - started

    result, took = asyncio.run(run())
    # HEAD took 0.6 s of the 1 s budget; the GET fallback had the 0.4 s left, not a budget of its own.
    assert result.error is FetchError.DEADLINE_EXCEEDED
    assert took < 2.0  # a GET not cut at the budget would wait the page's 3 s
    assert result.attempts == 2 and result.method == "GET"
    assert result.elapsed == pytest.approx(took, abs=0.1)
