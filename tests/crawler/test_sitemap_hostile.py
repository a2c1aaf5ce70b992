"""Hostile sitemaps: text and XML files built to exhaust memory, and sitemap
indexes of tarpits that would hold discovery far past the start task's timeout."""

from __future__ import annotations

import asyncio
import gzip
import socket
import subprocess
import sys
import time
import tracemalloc

from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.sitemap import MAX_EMPTY_ENTRIES, discover_sitemaps, parse_sitemap
from tests.crawler.hostile_server import HostileServer, head_bytes, send, static

NS = b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def traced_parse(data: bytes, **kwargs) -> tuple[tuple[str, list[str], str], int]:
    tracemalloc.start()
    try:
        result = parse_sitemap(data, **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


# ---------------------------------------------------------------- text form


def test_a_gzip_text_sitemap_of_short_lines_is_read_without_joining_or_splitting_it():
    # 4 MiB of "ab\n" is 1.4 M lines from 13 KB on the wire: the whole-file
    # join/decode/splitlines this replaces peaked at ~100 MB.
    data = gzip.compress(b"ab\n" * (1400 * 1024), 9)
    (kind, locs, problem), peak = traced_parse(data)
    assert (kind, locs, problem) == ("invalid", [], "neither XML nor a list of URLs")
    assert peak < 1024 * 1024


def test_a_text_sitemap_stops_reading_at_the_url_cap():
    data = gzip.compress(b"".join(b"https://e.com/%d\n" % i for i in range(300_000)), 9)
    (kind, locs, problem), peak = traced_parse(data, max_urls=10)
    assert kind == "urlset"
    assert locs == [f"https://e.com/{i}" for i in range(10)]
    assert "more than 10 URLs" in problem
    assert peak < 1024 * 1024


def test_a_text_line_cut_by_a_chunk_boundary_is_read_whole_and_an_overlong_line_is_skipped():
    first = b"x" * (64 * 1024 - 10) + b"\nhttps://e.com/straddles-the-boundary\r\n"
    overlong = b"https://e.com/" + b"y" * (300 * 1024) + b"\n"
    data = b"\xef\xbb\xbf" + first + overlong + b"  HTTPS://E.com/Last \rnot http://e.com/x\n"
    kind, locs, problem = parse_sitemap(data)
    assert (kind, problem) == ("urlset", "")
    assert locs == ["https://e.com/straddles-the-boundary", "HTTPS://E.com/Last"]


# ---------------------------------------------------------------- XML form


def test_an_xml_sitemap_of_entries_without_loc_stops_after_the_empty_entry_cap():
    data = gzip.compress(
        b"<urlset %s>%s<url><loc>https://e.com/late</loc></url></urlset>"
        % (NS, b"<url><lastmod>x</lastmod></url>" * (MAX_EMPTY_ENTRIES + 5000)),
        9,
    )
    started = time.perf_counter()
    kind, locs, problem = parse_sitemap(data)
    assert (kind, locs) == ("urlset", [])
    assert problem == f"stopped after {MAX_EMPTY_ENTRIES} entries without a URL"
    assert time.perf_counter() - started < 1.0


def test_entries_without_loc_below_the_cap_are_counted_in_the_problem():
    data = b"<urlset %s><url/><url><loc>https://e.com/a</loc></url><url><loc></loc></url></urlset>"
    assert parse_sitemap(data % NS) == (
        "urlset",
        ["https://e.com/a"],
        "1 <loc> entries without a usable URL; 1 entries without <loc>",
    )


# lxml's tree lives in C, out of tracemalloc's sight, so the bound is on the
# peak RSS of a fresh interpreter: 1.5 M finished <x/> children of the root
# kept whole cost ~170 MB there.
_RSS_SCRIPT = """
import gzip, resource, sys
from crawler.sitemap import parse_sitemap
data = gzip.compress(b"<urlset>" + b"<x/>" * 1_500_000 + b"</urlset>", 1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = parse_sitemap(data)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(result[0], (after - before) // 1024)
"""


def test_every_finished_element_of_an_xml_sitemap_is_dropped_whatever_its_name():
    out = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert out[0] == "urlset"
    assert int(out[1]) < 30  # MB of growth while parsing 6 MB of markup


def test_a_root_that_is_not_a_sitemap_is_refused_within_the_root_window():
    data = b"<?xml version='1.0'?>\n<!--" + b"c" * (400 * 1024) + b"-->" + b"<feed/>" * 10
    kind, locs, problem = parse_sitemap(data)
    assert (kind, locs) == ("invalid", [])
    assert "no <urlset> or <sitemapindex> in the first" in problem
    nested = b"<html><body>" + b"<url><loc>https://e.com/a</loc></url>" * 3 + b"</body></html>"
    assert parse_sitemap(nested)[2] == "root element <html> is not <urlset> or <sitemapindex>"


# ---------------------------------------------------------------- discovery budget


def tarpit_index(server: HostileServer, count: int) -> None:
    # Each child is a distinct URL on /drip: headers, then a byte every 0.5 s.
    locs = b"".join(
        b"<sitemap><loc>%s/drip?interval=0.5&amp;n=%d</loc></sitemap>" % (server.origin.encode(), i)
        for i in range(count)
    )
    body = b"<sitemapindex %s>%s</sitemapindex>" % (NS, locs)
    server.route("/index.xml", static(body, headers={"Content-Type": "application/xml"}))


def run_discovery(server: HostileServer, *, deadline: float, **kwargs):
    policy = FetchPolicy(deadline=deadline, read_timeout=deadline, max_retries=0)
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def go():
        async with Fetcher(policy, guard) as fetcher:
            started = time.monotonic()
            report = await discover_sitemaps(
                fetcher, server.origin, [server.url("/index.xml")], **kwargs
            )
            return report, time.monotonic() - started

    return asyncio.run(go())


def test_sitemap_discovery_stops_at_its_time_budget_and_keeps_what_it_read():
    with HostileServer() as server:
        tarpit_index(server, 20)
        report, elapsed = run_discovery(server, deadline=30.0, budget=1.0)
    assert elapsed < 10.0  # one 30 s fetch deadline would have been the floor
    assert [(f.kind, f.url_count) for f in report.files] == [("index", 20), ("unreachable", 0)]
    assert "sitemap time budget" in report.files[1].problem
    assert report.files[1].url.startswith(server.url("/drip"))
    assert report.problems == ("the 1 s sitemap time budget ran out; 19 more files were not read",)
    assert server.requests["/drip"] == 1


def test_sitemap_discovery_gives_up_after_failures_in_a_row():
    with HostileServer() as server:
        tarpit_index(server, 20)
        report, elapsed = run_discovery(server, deadline=0.3)
    assert server.requests["/drip"] == 3
    assert [f.kind for f in report.files] == ["index"] + ["unreachable"] * 3
    assert report.problems == (
        "3 sitemap files in a row timed out or were unreachable; 17 more files were not read",
    )
    assert elapsed < 5.0  # trying all 20 would take 6 s


# ---------------------------------------------------------------- a sitemap larger than the memory budget


def test_a_sitemap_near_the_50_mib_limit_is_read_through_a_spool_not_held_in_memory(tmp_path):
    """sitemaps.org allows 50 MiB a file, a third of a crawl's memory budget: the fetched body
    goes to a spooled file and is parsed from there, so neither it nor a copy is ever in memory."""
    pad = b"<image:image><image:loc>https://e.com/%s.png</image:loc></image:image>" % (b"i" * 600)
    count = 40_000
    entries = b"".join(b"<url><loc>%s/p/%d</loc>%s</url>" % (b"ORIGIN", i, pad) for i in range(count))
    files = tmp_path / "site"
    files.mkdir()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    origin = f"http://127.0.0.1:{port}"
    body = (b'<urlset %s xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">%s</urlset>'
            % (NS, entries)).replace(b"ORIGIN", origin.encode())
    assert len(body) > 27 * 1024 * 1024
    (files / "sitemap.xml").write_bytes(body)
    del body, entries
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(files)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port)
        guard = AddressGuard(allowed_targets=[("127.0.0.1", port)])

        async def go():
            async with Fetcher(FetchPolicy(deadline=30.0), guard) as fetcher:
                tracemalloc.start()
                try:
                    report = await discover_sitemaps(fetcher, origin, [f"{origin}/sitemap.xml"])
                    return report, tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()

        report, peak = asyncio.run(go())
    finally:
        server.terminate()
        server.wait(10)
    assert len(report.urls) == count and report.files[0].kind == "urlset"
    # The URLs themselves (40,000 strings, kept twice while collected) are most of it.
    assert peak < 16 * 1024 * 1024, peak


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {port}")


# ---------------------------------------------------------------- answers whose bodies are not worth reading


def discover(server: HostileServer, listed: list[str], **kwargs):
    policy = FetchPolicy(deadline=5.0, read_timeout=5.0, max_retries=0)
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def go():
        async with Fetcher(policy, guard) as fetcher:
            return await discover_sitemaps(fetcher, server.origin, listed, **kwargs)

    return asyncio.run(go())


def test_a_sitemap_declaring_more_than_the_cap_is_refused_before_its_first_byte():
    with HostileServer() as server:
        report = discover(server, [server.url("/declared-huge")], max_bytes=1024 * 1024)
        sent = server.bytes_sent["/declared-huge"]
    assert [(f.kind, f.problem) for f in report.files] == [("invalid", f"larger than {1024 * 1024} bytes")]
    assert sent < 256 * 1024, "the crawler stopped reading at the head, not at the cap"


def test_a_sitemap_answering_404_with_a_body_that_breaks_off_is_an_answered_404_not_an_unreachable_file():
    with HostileServer() as server:
        async def broken_404(request, reader, writer, srv):
            head = head_bytes(404, {"Content-Type": "text/html", "Content-Length": "50000", "Connection": "close"})
            await send(writer, srv, request.path, head + b"<html>Not found")
            writer.close()

        server.route("/sitemap.xml", broken_404)
        report = discover(server, [server.url("/sitemap.xml")])
    assert [(f.kind, f.status, f.problem) for f in report.files] == [("unreachable", 404, "answered 404")]
