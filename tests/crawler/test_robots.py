"""robots.txt decisions under RFC 9309.

The decision (``robots_from_result``) is pure, so most behaviour is proven on
byte fixtures; ``load_robots`` is then run against real servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
import tracemalloc

import pytest

from crawler.robots import MAX_ROBOTS_BYTES, Robots, decode_robots, robots_from_result
from crawler.types import FetchError, FetchResult, Hop
from tests.crawler.hostile_server import HostileServer, head_bytes, send

UA = "SitewardBot/0.1 (+self-hosted site audit)"
ROBOTS_URL = "https://example.com/robots.txt"


def fetched(status=200, body=b"", content_type="text/plain", **kw) -> FetchResult:
    return FetchResult(
        url=ROBOTS_URL,
        final_url=kw.pop("final_url", ROBOTS_URL),
        status=status,
        body=body,
        content_type=content_type,
        **kw,
    )


def allowed(robots: Robots, path: str) -> bool:
    return robots.allowed("https://example.com" + path, UA)


# ---------------------------------------------------------------- 2xx bodies


def test_rules_of_a_plain_robots_txt_are_applied_to_our_user_agent():
    body = (
        b"User-agent: *\nDisallow: /private\n\n"
        b"User-agent: SitewardBot\nDisallow: /no-audit/\nAllow: /no-audit/ok\n"
    )
    robots = robots_from_result(fetched(body=body))
    assert robots.status == "ok"
    assert not allowed(robots, "/no-audit/x")
    assert allowed(robots, "/no-audit/ok")
    # Our own group replaces the * group (RFC 9309 section 2.2.1).
    assert allowed(robots, "/private")
    assert not robots.allowed("https://example.com/private", "OtherBot/1.0")


def test_a_utf8_bom_does_not_hide_the_first_line():
    robots = robots_from_result(fetched(body=b"\xef\xbb\xbfUser-agent: *\nDisallow: /x\n"))
    assert not allowed(robots, "/x")
    assert not robots.body.startswith("\ufeff")


def test_crlf_and_bare_cr_line_endings_are_read():
    crlf = robots_from_result(fetched(body=b"User-agent: *\r\nDisallow: /a\r\nDisallow: /b\r\n"))
    cr = robots_from_result(fetched(body=b"User-agent: *\rDisallow: /a\rDisallow: /b\r"))
    for robots in (crlf, cr):
        assert not allowed(robots, "/a")
        assert not allowed(robots, "/b")
        assert allowed(robots, "/c")


def test_invalid_utf8_is_replaced_and_the_other_rules_still_apply():
    body = b"User-agent: *\nDisallow: /caf\xe9\xff\nDisallow: /admin\n"
    robots = robots_from_result(fetched(body=body))
    assert robots.status == "ok"
    assert "\ufffd" in robots.body
    assert not allowed(robots, "/admin/users")
    assert allowed(robots, "/public")


def test_nul_bytes_never_reach_the_stored_text():
    robots = robots_from_result(fetched(body=b"User-agent: *\x00\nDisallow: /a\n"))
    assert "\x00" not in robots.body


def test_an_html_page_served_with_200_holds_no_rules_and_allows_everything():
    body = (
        b"<!doctype html><html><head><title>Home</title></head><body><p>Welcome</p></body></html>"
    )
    robots = robots_from_result(fetched(body=body, content_type="text/html"))
    assert robots.status == "ok"
    assert allowed(robots, "/")
    assert allowed(robots, "/anything")
    assert "HTML" in robots.detail


def test_an_empty_robots_txt_allows_everything():
    robots = robots_from_result(fetched(body=b""))
    assert robots.status == "ok"
    assert allowed(robots, "/x")


def test_crawl_delay_of_a_day_is_capped():
    robots = robots_from_result(fetched(body=b"User-agent: *\nCrawl-delay: 86400\n"))
    assert robots.crawl_delay(UA) == 30.0
    assert robots.crawl_delay(UA, cap=5.0) == 5.0


def test_a_small_crawl_delay_is_kept_and_a_bad_one_ignored():
    assert robots_from_result(fetched(body=b"User-agent: *\nCrawl-delay: 1.5\n")).crawl_delay(
        UA
    ) == pytest.approx(1.5)
    assert (
        robots_from_result(fetched(body=b"User-agent: *\nCrawl-delay: soon\n")).crawl_delay(UA)
        is None
    )
    assert robots_from_result(fetched(body=b"User-agent: *\nDisallow:\n")).crawl_delay(UA) is None


def test_sitemap_lines_are_listed_in_order_without_duplicates():
    body = (
        b"Sitemap: https://example.com/a.xml\nUser-agent: *\nDisallow:\n"
        b"sitemap: https://example.com/b.xml.gz\nSitemap: https://example.com/a.xml\n"
    )
    assert robots_from_result(fetched(body=body)).sitemaps == (
        "https://example.com/a.xml",
        "https://example.com/b.xml.gz",
    )


def test_robots_txt_itself_is_always_allowed():
    robots = robots_from_result(fetched(body=b"User-agent: *\nDisallow: /\n"))
    assert not allowed(robots, "/page")
    assert allowed(robots, "/robots.txt")


def test_only_the_first_512000_bytes_are_read_up_to_the_last_full_line():
    head = b"User-agent: *\nDisallow: /early\n"
    padding = b"# padding line\n" * ((600 * 1024) // 15)
    body = head + padding + b"Disallow: /late\n"
    robots = robots_from_result(fetched(body=body))
    assert not allowed(robots, "/early")
    assert allowed(robots, "/late")
    assert len(robots.body.encode()) <= MAX_ROBOTS_BYTES
    assert robots.body.endswith("\n")
    assert "512000" in robots.detail


def test_a_line_cut_by_the_size_cap_is_dropped_not_half_read():
    # "Disallow: /private-area" cut after "Disallow: /" would block the whole site.
    head = b"User-agent: *\n" + b"#" * (MAX_ROBOTS_BYTES - 14 - 12) + b"\n"
    body = head + b"Disallow: /private-area\n"
    assert len(head) + len(b"Disallow: /") == MAX_ROBOTS_BYTES
    robots = robots_from_result(fetched(body=body))
    assert allowed(robots, "/")
    assert allowed(robots, "/private-area")


def test_a_body_cut_by_the_fetcher_at_the_cap_keeps_its_complete_lines():
    body = b"User-agent: *\nDisallow: /a\nDisallow: /bb"
    robots = robots_from_result(fetched(body=body, error=FetchError.BODY_TOO_LARGE))
    assert robots.status == "ok"
    assert not allowed(robots, "/a")
    assert allowed(robots, "/b")
    assert decode_robots(body, truncated=True) == "User-agent: *\nDisallow: /a\n"


# ---------------------------------------------------------------- error statuses


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451])
def test_a_4xx_robots_txt_allows_everything(status):
    robots = robots_from_result(fetched(status=status, body=b"User-agent: *\nDisallow: /\n"))
    assert robots.status == "missing"
    assert robots.body == ""
    assert allowed(robots, "/")
    assert allowed(robots, "/private")


@pytest.mark.parametrize("error", [FetchError.INCOMPLETE_BODY, FetchError.DEADLINE_EXCEEDED, FetchError.READ_TIMEOUT,
                                   FetchError.PROTOCOL_ERROR, FetchError.DECOMPRESSION_LIMIT])
def test_a_4xx_robots_txt_whose_error_page_then_breaks_still_allows_everything(error):
    robots = robots_from_result(FetchResult(url=ROBOTS_URL, final_url=ROBOTS_URL, status=404, error=error,
                                            error_detail="the body broke off"))
    assert (robots.status, robots.http_status) == ("missing", 404)
    assert allowed(robots, "/private")


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
def test_a_5xx_or_429_robots_txt_allows_nothing(status):
    # Protego alone reads this HTML error page as allow-all.
    page = b"<html><body><h1>503 Service Unavailable</h1></body></html>"
    robots = robots_from_result(fetched(status=status, body=page, content_type="text/html"))
    assert robots.status == "unavailable"
    assert robots.body == ""
    assert not allowed(robots, "/")
    assert not allowed(robots, "/index.html")
    assert robots.crawl_delay(UA) is None


@pytest.mark.parametrize(
    "error",
    [
        FetchError.CONNECT_TIMEOUT,
        FetchError.READ_TIMEOUT,
        FetchError.DEADLINE_EXCEEDED,
        FetchError.CONNECT_FAILED,
        FetchError.DNS_FAILURE,
        FetchError.TLS_ERROR,
        FetchError.PROTOCOL_ERROR,
        FetchError.INCOMPLETE_BODY,
        FetchError.SSRF_BLOCKED,
        FetchError.RATE_LIMITED,
    ],
)
def test_a_robots_txt_that_cannot_be_fetched_allows_nothing(error):
    robots = robots_from_result(
        FetchResult(url=ROBOTS_URL, final_url=ROBOTS_URL, error=error, error_detail="boom")
    )
    assert robots.status == "unavailable"
    assert not allowed(robots, "/")
    assert "boom" in robots.detail


def hops(n: int) -> tuple[Hop, ...]:
    return tuple(
        Hop(f"https://example.com/r{i}", 301, f"https://example.com/r{i + 1}") for i in range(n)
    )


def test_a_robots_txt_reached_within_five_redirects_is_obeyed():
    robots = robots_from_result(fetched(body=b"User-agent: *\nDisallow: /x\n", redirects=hops(5)))
    assert robots.status == "ok"
    assert not allowed(robots, "/x")


def test_a_robots_txt_behind_six_redirects_is_treated_as_absent():
    # Documented choice: RFC 9309 section 2.3.1.2 lets a crawler treat it as
    # "unavailable" (its 4xx case), i.e. allow all, as Google does.
    robots = robots_from_result(fetched(body=b"User-agent: *\nDisallow: /\n", redirects=hops(6)))
    assert robots.status == "missing"
    assert allowed(robots, "/x")
    assert "redirects" in robots.detail


@pytest.mark.parametrize(
    "error",
    [
        FetchError.TOO_MANY_REDIRECTS,
        FetchError.REDIRECT_LOOP,
        FetchError.REDIRECT_BLOCKED_SCHEME,
    ],
)
def test_redirects_that_never_reach_a_file_are_treated_as_absent(error):
    robots = robots_from_result(
        FetchResult(url=ROBOTS_URL, final_url=ROBOTS_URL, status=301, error=error)
    )
    assert robots.status == "missing"
    assert allowed(robots, "/")


# ---------------------------------------------------------------- stored form


def test_from_stored_gives_the_same_decisions_as_the_original():
    body = b"\xef\xbb\xbfUser-agent: *\r\nDisallow: /a\r\nAllow: /a/ok\r\nCrawl-delay: 99\r\nSitemap: https://example.com/s.xml\r\n"
    original = robots_from_result(fetched(body=body))
    stored = Robots.from_stored(original.status, original.http_status, original.body)
    for path in ("/", "/a", "/a/ok", "/a/no", "/b"):
        assert allowed(stored, path) == allowed(original, path)
    assert stored.crawl_delay(UA) == original.crawl_delay(UA) == 30.0
    assert stored.sitemaps == original.sitemaps


@pytest.mark.parametrize(
    ("status", "http_status", "expected"),
    [("missing", 404, True), ("unavailable", 503, False), ("ignored", 200, True)],
)
def test_from_stored_statuses_decide_without_rules(status, http_status, expected):
    robots = Robots.from_stored(status, http_status, None)
    assert allowed(robots, "/anything") is expected
    assert robots.detail


def test_an_ignored_robots_txt_allows_everything_but_still_lists_sitemaps():
    body = "User-agent: *\nDisallow: /\nCrawl-delay: 10\nSitemap: https://example.com/s.xml\n"
    robots = Robots.from_stored("ignored", 200, body)
    assert allowed(robots, "/")
    assert robots.crawl_delay(UA) is None
    assert robots.sitemaps == ("https://example.com/s.xml",)


def test_an_unknown_status_is_refused():
    with pytest.raises(ValueError, match="status"):
        Robots.from_stored("maybe", 200, "")


def test_from_stored_decides_the_same_in_another_process():
    body = robots_from_result(fetched(body=b"User-agent: *\nDisallow: /a\nCrawl-delay: 7\n")).body
    paths = ["/", "/a", "/a/b", "/b"]
    script = (
        "import json, sys\n"
        "from crawler.robots import Robots\n"
        "args = json.loads(sys.stdin.read())\n"
        "r = Robots.from_stored('ok', 200, args['body'])\n"
        "print(json.dumps([[r.allowed('https://example.com' + p, args['ua']) for p in args['paths']],"
        " r.crawl_delay(args['ua'])]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps({"body": body, "ua": UA, "paths": paths}),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    here = Robots.from_stored("ok", 200, body)
    assert json.loads(out.stdout) == [[allowed(here, p) for p in paths], 7.0]


# ---------------------------------------------------------------- over loopback
#
# load_robots against pytest-httpserver on 127.0.0.1 through the real Fetcher
# (its guard allows loopback only because the test says so).


@pytest.fixture
def server(httpserver_ipv4):
    return httpserver_ipv4


def fast_fetcher():
    from crawler.fetch import Fetcher, FetchPolicy
    from crawler.net import AddressGuard

    policy = FetchPolicy(
        connect_timeout=1.0,
        read_timeout=0.5,
        deadline=3.0,
        max_retries=1,
        backoff_base=0.01,
        backoff_cap=0.05,
        retry_after_cap=0.1,
    )
    return Fetcher(policy, AddressGuard(allow_private=True))


def load(origin: str, **kwargs) -> Robots:
    from crawler.robots import load_robots

    async def go() -> Robots:
        async with fast_fetcher() as fetcher:
            return await load_robots(fetcher, origin, **kwargs)

    return asyncio.run(go())


def origin_of_server(server) -> str:
    return server.url_for("/").rstrip("/")


def requested_paths(server) -> list[str]:
    return [request.path for request, _ in server.log]


def test_loopback_503_html_robots_allows_nothing_and_no_page_is_requested(server):
    page = "<html><body><h1>Service Unavailable</h1><p>User-agent: *</p></body></html>"
    server.expect_request("/robots.txt").respond_with_data(
        page, status=503, content_type="text/html"
    )
    origin = origin_of_server(server)
    robots = load(origin)
    assert robots.status == "unavailable"
    assert robots.http_status == 503
    assert not robots.allowed(origin + "/", UA)
    assert not robots.allowed(origin + "/about", UA)
    assert set(requested_paths(server)) == {"/robots.txt"}


@pytest.mark.parametrize("status", [401, 403, 404, 410])
def test_loopback_4xx_robots_allows_everything(server, status):
    server.expect_request("/robots.txt").respond_with_data(
        "User-agent: *\nDisallow: /\n", status=status
    )
    origin = origin_of_server(server)
    robots = load(origin)
    assert (robots.status, robots.http_status) == ("missing", status)
    assert robots.allowed(origin + "/private", UA)


def test_loopback_robots_is_fetched_once(server):
    server.expect_request("/robots.txt").respond_with_data("User-agent: *\nDisallow: /x\n")
    origin = origin_of_server(server)
    robots = load(origin)
    assert robots.status == "ok"
    assert not robots.allowed(origin + "/x", UA)
    assert requested_paths(server) == ["/robots.txt"]


# A one-shot server in its own process, so tracemalloc sees only the client:
# it declares 10 MiB, sends a rule at the top, 600 KiB of padding, a rule past
# the parse limit, then padding up to 10 MiB (if the client is still reading).
_BIG_ROBOTS_SERVER = r"""
import socket
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
print(server.getsockname()[1], flush=True)
conn, _ = server.accept()
conn.recv(65536)
total = 10 * 1024 * 1024
head = b"User-agent: *\nDisallow: /early\n"
line = b"# padding to push the next rule past the parse limit\n"
padding = line * ((600 * 1024) // len(line) + 1)
rule = b"Disallow: /private\n"
sent = 0
try:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % total)
    for part in (head, padding, rule):
        conn.sendall(part)
        sent += len(part)
    filler = line * 1200
    while sent < total:
        chunk = filler[: total - sent]
        conn.sendall(chunk)
        sent += len(chunk)
except OSError:
    pass
conn.close()
"""


def test_loopback_ten_megabyte_robots_is_read_only_to_the_cap():
    server = subprocess.Popen(
        [sys.executable, "-c", _BIG_ROBOTS_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        origin = f"http://127.0.0.1:{int(server.stdout.readline())}"
        fast_fetcher()  # imports done before measuring
        tracemalloc.start()
        try:
            robots = load(origin)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        server.kill()
        server.wait(timeout=5)
    assert robots.status == "ok"
    assert not robots.allowed(origin + "/early", UA)
    assert robots.allowed(origin + "/private", UA)
    assert len(robots.body.encode()) <= MAX_ROBOTS_BYTES
    # A few copies of the 512,000-byte prefix at most; the 10 MiB never arrives.
    assert peak < 3 * 1024 * 1024


def redirect_chain(server, length: int, final_body: str) -> None:
    server.expect_request("/robots.txt").respond_with_data(
        "", status=301, headers={"Location": "/r1"}
    )
    for i in range(1, length):
        server.expect_request(f"/r{i}").respond_with_data(
            "", status=302, headers={"Location": f"/r{i + 1}"}
        )
    server.expect_request(f"/r{length}").respond_with_data(final_body)


def test_loopback_robots_reached_through_five_redirects_is_obeyed(server):
    redirect_chain(server, 5, "User-agent: *\nDisallow: /x\n")
    origin = origin_of_server(server)
    robots = load(origin)
    assert robots.status == "ok"
    assert not robots.allowed(origin + "/x", UA)


def test_loopback_robots_behind_six_redirects_is_treated_as_absent(server):
    # Our documented choice (RFC 9309 section 2.3.1.2): past five redirects the
    # file counts as "unavailable" in the RFC's sense, so every URL is allowed.
    redirect_chain(server, 6, "User-agent: *\nDisallow: /\n")
    origin = origin_of_server(server)
    robots = load(origin)
    assert robots.status == "missing"
    assert robots.allowed(origin + "/anything", UA)
    # The sixth hop is never requested, let alone the file behind it.
    asked = [request.path for request, _ in server.log]
    assert asked == ["/robots.txt", "/r1", "/r2", "/r3", "/r4", "/r5"]


def test_loopback_robots_that_hangs_allows_nothing(server):
    def slow(request):
        time.sleep(1.2)
        return "User-agent: *\nDisallow:\n"

    server.expect_request("/robots.txt").respond_with_handler(slow)
    origin = origin_of_server(server)
    robots = load(origin)
    assert robots.status == "unavailable"
    assert not robots.allowed(origin + "/", UA)


def test_loopback_robots_on_a_closed_port_allows_nothing():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    origin = f"http://127.0.0.1:{port}"
    robots = load(origin)
    assert robots.status == "unavailable"
    assert not robots.allowed(origin + "/", UA)


def test_loopback_ignored_robots_allows_everything_and_keeps_sitemaps(server):
    server.expect_request("/robots.txt").respond_with_data(
        "User-agent: *\nDisallow: /\nSitemap: /s.xml\nSitemap: https://example.com/s.xml\n"
    )
    origin = origin_of_server(server)
    robots = load(origin, ignore=True)
    assert robots.status == "ignored"
    assert robots.allowed(origin + "/", UA)
    assert "https://example.com/s.xml" in robots.sitemaps


def test_a_robots_txt_answered_in_a_compression_we_cannot_read_crawls_nothing():
    """Read as empty it would allow every URL, whatever rules it holds (a CDN sending br regardless)."""
    robots = robots_from_result(fetched(body=None, error_detail="Content-Encoding br was not requested"))
    assert robots.status == "unavailable" and "br was not requested" in robots.detail
    assert not allowed(robots, "/")


def test_loopback_404_robots_whose_body_breaks_off_allows_everything():
    with HostileServer() as server:
        async def broken_404(request, reader, writer, srv):
            head = head_bytes(404, {"Content-Type": "text/html", "Content-Length": "5000", "Connection": "close"})
            await send(writer, srv, request.path, head + b"<html>Not found" + b" " * 85)
            writer.close()

        server.route("/robots.txt", broken_404)
        robots = load(server.origin)
        assert (robots.status, robots.http_status) == ("missing", 404)
        assert robots.allowed(server.origin + "/private", UA)
