"""Fetcher behaviour with well-meaning servers: results, decoding, redirects,
retries, link checks, TLS and the client pools. Hostile servers are in
test_fetch_hostile.py."""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import gzip
import io
import ssl
import time
import zlib

import pytest
import trustme

from crawler import fetch as fetch_module
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.retry import parse_retry_after
from crawler.types import FetchError, Hop
from tests.crawler.hostile_server import (
    OK_HTML,
    HostileServer,
    Request,
    Sleeps,
    SpyBackend,
    StubResolver,
    redirect_to,
    respond,
    response_bytes,
    send,
    static,
)

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=1.0, deadline=3.0)
PAGE = (
    b"<!doctype html><html><head><title>Fetch me</title></head><body>"
    + b"<p>word</p>" * 500
    + b"</body></html>"
)


def fetch(server: HostileServer, path: str, *, policy: FetchPolicy = POLICY, sleep=None, **kwargs):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(policy, guard, sleep=sleep or Sleeps()) as fetcher:
            return await fetcher.fetch(server.url(path), **kwargs)

    return asyncio.run(run())


def check(server: HostileServer, path: str):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, sleep=Sleeps()) as fetcher:
            return await fetcher.check(server.url(path))

    return asyncio.run(run())


# -- the result of a plain fetch ------------------------------------------------------


def test_an_html_page_comes_back_with_body_headers_and_timings(server):
    server.route(
        "/page",
        static(PAGE, headers={"Content-Type": 'text/HTML; Charset="ISO-8859-1"', "X-Thing": "yes"}),
    )
    result = fetch(server, "/page")
    assert result.ok and result.error is None
    assert result.status == 200
    assert result.body == PAGE
    assert result.size == len(PAGE)
    assert result.content_type == "text/html" and result.charset == "iso-8859-1"
    assert result.is_html
    assert result.headers["x-thing"] == "yes"
    assert all(name == name.lower() for name in result.headers)
    assert 0 < result.ttfb <= result.elapsed
    assert result.final_url == result.url == server.url("/page")
    assert result.redirects == () and result.attempts == 1 and result.method == "GET"


def test_requests_carry_the_user_agent_and_ask_only_for_gzip_and_deflate(server):
    fetch(server, "/ok")
    headers = server.headers_of("/ok")[0]
    assert headers["user-agent"] == POLICY.user_agent
    assert headers["accept-encoding"] == "gzip, deflate"
    assert "authorization" not in headers and "cookie" not in headers


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),  # the zlib-wrapped form the RFC means
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send
        ("gzip, gzip", lambda data: gzip.compress(gzip.compress(data))),
        ("deflate, gzip", lambda data: gzip.compress(zlib.compress(data))),
        ("identity", lambda data: data),
    ],
)
def test_compressed_bodies_are_decoded_and_size_counts_wire_bytes(server, coding, encode):
    wire = encode(PAGE)
    server.route("/z", static(wire, headers={"Content-Encoding": coding}))
    result = fetch(server, "/z")
    assert result.error is None, result.error_detail
    assert result.body == PAGE
    assert result.size == len(wire)


def test_a_body_fetched_into_a_file_is_decoded_there_and_replaces_what_the_file_held(server):
    text = b"User-agent: *\n" + b"Disallow: /a\n" * 5000
    server.route("/s.txt", static(gzip.compress(text), headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"}))
    into = io.BytesIO(b"an earlier answer " * 10_000)
    result = fetch(server, "/s.txt", into=into)
    assert result.error is None and result.body is None
    assert into.getvalue() == text
    capped = fetch(server, "/s.txt", into=into, max_bytes=1000)
    assert capped.error is FetchError.DECOMPRESSION_LIMIT and into.getvalue() == text[:1000]
    server.route("/none", static(b"", status=204))
    assert fetch(server, "/none", into=into).status == 204 and into.getvalue() == b""
    server.route("/br", static(b"\x8bjunk", headers={"Content-Encoding": "br"}))
    into.write(b"left over")
    assert fetch(server, "/br", into=into).status == 200 and into.getvalue() == b""


def test_concatenated_gzip_members_are_all_decoded(server):
    server.route(
        "/members",
        static(
            gzip.compress(b"<p>one</p>") + gzip.compress(b"<p>two</p>"),
            headers={"Content-Encoding": "gzip"},
        ),
    )
    assert fetch(server, "/members").body == b"<p>one</p><p>two</p>"


def test_a_body_that_is_not_the_gzip_it_claims_is_a_protocol_error(server):
    server.route("/fake-gzip", static(PAGE, headers={"Content-Encoding": "gzip"}))
    result = fetch(server, "/fake-gzip")
    assert result.error is FetchError.PROTOCOL_ERROR
    assert result.body is None
    assert "gzip" in result.error_detail


@pytest.mark.parametrize(
    "content_type", ["application/pdf", "image/png", "application/octet-stream"]
)
def test_non_html_is_recorded_from_headers_without_reading_the_body(server, content_type):
    result = fetch(server, f"/type?ct={content_type}&size=2000000")
    assert result.error is None and result.status == 200
    assert result.content_type == content_type
    assert result.headers["content-length"] == "2000000"
    assert result.body is None
    assert result.size == 0


def test_keep_body_true_keeps_any_type_and_false_keeps_none(server):
    server.route(
        "/robots.txt",
        static(b"User-agent: *\nDisallow: /x\n", headers={"Content-Type": "text/plain"}),
    )
    assert fetch(server, "/robots.txt", keep_body=True).body == b"User-agent: *\nDisallow: /x\n"
    assert fetch(server, "/robots.txt").body is None
    assert fetch(server, "/ok", keep_body=False).body is None


def test_max_bytes_caps_one_call_and_keep_body_true_gets_the_prefix(server):
    # robots.txt: read at most the cap and keep what was read (RFC 9309 2.5).
    text = b"User-agent: *\n" + b"Disallow: /a\n" * 2000
    server.route("/big.txt", static(text, headers={"Content-Type": "text/plain"}))
    result = fetch(server, "/big.txt", keep_body=True, max_bytes=4096)
    assert result.error is FetchError.BODY_TOO_LARGE
    assert result.body == text[:4096]
    assert result.size <= 4096 + 64 * 1024


def test_a_capped_html_page_keeps_no_truncated_body(server):
    server.route("/page", static(PAGE))
    result = fetch(server, "/page", max_bytes=1000)
    assert result.error is FetchError.BODY_TOO_LARGE
    assert result.body is None


def test_keep_body_true_gets_the_decoded_prefix_at_the_decompression_cap(server):
    text = b"Disallow: /a\n" * 10_000
    server.route(
        "/gz.txt",
        static(
            gzip.compress(text), headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"}
        ),
    )
    result = fetch(server, "/gz.txt", keep_body=True, max_bytes=5000)
    assert result.error is FetchError.DECOMPRESSION_LIMIT
    assert result.body == text[:5000]


def test_an_empty_body_is_an_empty_result_not_an_error(server):
    server.route("/empty", static(b""))
    result = fetch(server, "/empty")
    assert result.error is None and result.body == b"" and result.size == 0


# -- redirects ----------------------------------------------------------------------


def test_a_redirect_chain_is_followed_and_every_hop_recorded(server):
    result = fetch(server, "/chain?n=3")
    assert result.status == 200 and result.body == OK_HTML
    assert result.final_url == server.url("/ok")
    assert result.redirects == (
        Hop(server.url("/chain?n=3"), 302, server.url("/chain?n=2")),
        Hop(server.url("/chain?n=2"), 302, server.url("/chain?n=1")),
        Hop(server.url("/chain?n=1"), 302, server.url("/chain?n=0")),
        Hop(server.url("/chain?n=0"), 302, server.url("/ok")),
    )
    assert result.attempts == 5


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_each_redirect_status_is_followed(server, status):
    result = fetch(server, f"/redirect?to=/ok&status={status}")
    assert result.status == 200
    assert result.redirects[0].status == status


def test_a_3xx_without_location_is_a_final_answer(server):
    server.route("/nowhere", static(b"", status=302))
    result = fetch(server, "/nowhere")
    assert result.status == 302 and result.error is None and result.redirects == ()


def test_exactly_max_redirects_hops_are_allowed(server):
    policy = FetchPolicy(read_timeout=1.0, deadline=3.0, max_redirects=3)
    passing = fetch(server, "/chain?n=2", policy=policy)  # three hops, then /ok
    assert passing.status == 200 and len(passing.redirects) == 3
    result = fetch(server, "/chain?n=3", policy=policy)
    assert result.error is FetchError.TOO_MANY_REDIRECTS
    assert len(result.redirects) == 4  # the fourth is recorded, not followed
    assert server.requests["/chain"] == 3 + 4


def test_credentials_go_to_their_own_origin_and_never_across(server):
    with HostileServer() as other:
        server.route("/hop-away", redirect_to(other.url("/ok")))
        server.route("/hop-home", redirect_to("/ok"))
        guard = AddressGuard(
            allowed_targets=[("127.0.0.1", server.port), ("127.0.0.1", other.port)]
        )
        base = f"http://user:secret@127.0.0.1:{server.port}"

        async def run():
            async with Fetcher(POLICY, guard) as fetcher:
                return [
                    await fetcher.fetch(base + "/hop-away"),
                    await fetcher.fetch(base + "/hop-home"),
                ]

        away, home = asyncio.run(run())
        assert away.status == 200 and home.status == 200
        assert server.headers_of("/hop-away")[0]["authorization"].startswith("Basic ")
        assert server.headers_of("/ok")[0]["authorization"].startswith("Basic ")
        assert "authorization" not in other.headers_of("/ok")[0]
        assert "secret" not in away.final_url and "secret" not in home.final_url


def test_a_fragment_never_goes_on_the_wire_nor_into_the_final_url(server):
    server.route("/hop-fragment", redirect_to("/ok#from-the-redirect"))
    results = [fetch(server, path) for path in ("/ok#section", "/ok?q=1#", "/hop-fragment")]
    assert [r.status for r in results] == [200, 200, 200]
    assert [r.final_url for r in results] == [server.url("/ok"), server.url("/ok?q=1"), server.url("/ok")]
    assert all("#" not in seen.target for seen in server.seen)


# -- retries ------------------------------------------------------------------------


def test_a_5xx_then_success_is_a_success_on_the_second_attempt(server):
    sleeps = Sleeps()
    result = fetch(server, "/flaky?fail=1&code=503", sleep=sleeps)
    assert result.status == 200 and result.error is None
    assert result.attempts == 2
    assert server.requests["/flaky"] == 2
    assert len(sleeps.calls) == 1


def test_a_server_that_always_fails_gets_at_most_one_plus_max_retries_requests(server):
    sleeps = Sleeps()
    result = fetch(server, "/status?code=500", sleep=sleeps)
    assert server.requests["/status"] == 1 + POLICY.max_retries
    assert result.status == 500 and result.error is None and result.broken
    assert result.attempts == 3
    # Exponential backoff with jitter: attempt n waits within [base*2^n/2, base*2^n].
    assert 0.25 <= sleeps.calls[0] <= 0.5
    assert 0.5 <= sleeps.calls[1] <= 1.0


@pytest.mark.parametrize("code", [400, 401, 403, 404, 410, 451])
def test_other_4xx_are_never_retried(server, code):
    result = fetch(server, f"/status?code={code}")
    assert result.status == code and result.attempts == 1
    assert server.requests["/status"] == 1


def test_408_is_retried(server):
    fetch(server, "/status?code=408")
    assert server.requests["/status"] == 3


def test_retry_after_seconds_is_honoured(server):
    server.route("/ra", _retry_after_once("5"))
    sleeps = Sleeps()
    assert fetch(server, "/ra", sleep=sleeps).status == 200
    assert sleeps.calls == [5.0]


def test_retry_after_as_an_http_date_is_honoured(server):
    sleeps = Sleeps()
    server.route("/ra-date", _retry_after_once(None, in_seconds=8))
    assert fetch(server, "/ra-date", sleep=sleeps).status == 200
    assert len(sleeps.calls) == 1 and 6.0 <= sleeps.calls[0] <= 8.0


@pytest.mark.parametrize(
    "query", ["code=429&retry_after=999999", "code=503&retry_after=31", "code=503&retry_in=600"]
)
def test_retry_after_beyond_the_cap_gives_up_as_rate_limited(server, query):
    sleeps = Sleeps()
    result = fetch(server, f"/status?{query}", sleep=sleeps)
    assert result.error is FetchError.RATE_LIMITED
    assert "cap" in result.error_detail
    assert server.requests["/status"] == 1 and sleeps.calls == []


def test_a_429_that_never_lifts_ends_rate_limited_after_the_retries(server):
    result = fetch(server, "/status?code=429&retry_after=1")
    assert result.error is FetchError.RATE_LIMITED and result.status == 429
    assert server.requests["/status"] == 3


def test_a_500_with_a_huge_retry_after_is_just_a_500(server):
    result = fetch(server, "/status?code=500&retry_after=999999")
    assert result.status == 500 and result.error is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5", 5.0),
        ("0", 0.0),
        (" 120 ", 120.0),
        ("9" * 40, float("inf")),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # in the past: no wait
        ("soon", None),
        ("", None),
        (None, None),
        ("-5", None),
        ("1.5", None),
    ],
)
def test_retry_after_parsing(value, expected):
    assert parse_retry_after(value, now=time.time()) == expected


def test_retry_after_http_date_is_measured_from_now():
    now = datetime.datetime(2030, 1, 1, 12, 0, 0, tzinfo=datetime.UTC).timestamp()
    assert parse_retry_after("Tue, 01 Jan 2030 12:00:30 GMT", now=now) == 30.0


def test_retry_after_http_date_is_measured_from_the_servers_own_date_header():
    # The server's clock is 20 minutes ahead of ours; it means "30 s from now".
    now = datetime.datetime(2030, 1, 1, 12, 0, 0, tzinfo=datetime.UTC).timestamp()
    sent = "Tue, 01 Jan 2030 12:20:00 GMT"
    assert parse_retry_after("Tue, 01 Jan 2030 12:20:30 GMT", now=now, server_date=sent) == 30.0
    # A Date header that does not parse is no reference: our clock is used.
    assert parse_retry_after("Tue, 01 Jan 2030 12:00:30 GMT", now=now, server_date="soon") == 30.0


def _retry_after_once(value: str | None, in_seconds: float | None = None):
    calls = {"n": 0}

    async def handler(request: Request, reader, writer, server) -> None:
        calls["n"] += 1
        if calls["n"] > 1:
            await respond(request, writer, server, body=OK_HTML)
            return
        if in_seconds is not None:
            value_now = email.utils.formatdate(time.time() + in_seconds, usegmt=True)
        else:
            value_now = value
        await respond(request, writer, server, status=429, headers={"Retry-After": value_now})

    return handler


# -- link checks ------------------------------------------------------------------------


def test_check_uses_head_when_the_server_supports_it(server):
    result = check(server, "/ok")
    assert result.status == 200 and result.method == "HEAD"
    assert [r.method for r in server.seen] == ["HEAD"]
    assert result.body is None


@pytest.mark.parametrize("refusal", [405, 501])
def test_check_falls_back_to_get_when_head_is_refused(server, refusal):
    async def head_refused(request: Request, reader, writer, server) -> None:
        status = refusal if request.method == "HEAD" else 200
        await respond(request, writer, server, status=status, body=PAGE)

    server.route("/no-head", head_refused)
    result = check(server, "/no-head")
    assert result.status == 200 and result.method == "GET"
    assert [r.method for r in server.seen] == ["HEAD", "GET"]
    assert result.body is None
    assert result.attempts == 2


def test_check_falls_back_to_get_when_head_gets_a_malformed_answer(server):
    async def head_broken(request: Request, reader, writer, server) -> None:
        if request.method == "HEAD":
            writer.write(b"HTTP/1.1 BROKEN\r\n\r\n")
            await writer.drain()
        else:
            await respond(request, writer, server, body=PAGE)

    server.route("/bad-head", head_broken)
    result = check(server, "/bad-head")
    assert result.status == 200 and result.method == "GET"


def test_check_reports_a_404_without_a_get(server):
    result = check(server, "/missing")
    assert result.status == 404 and result.broken
    assert [r.method for r in server.seen] == ["HEAD"]


# -- TLS ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


def _tls_server(ca: trustme.CA, *identities: str, **cert_args) -> HostileServer:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*identities, **cert_args).configure_cert(context)
    return HostileServer(ssl_context=context)


def _client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def _fetch_tls(url: str, port: int, *, verify, resolver=None):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", port)], resolver=resolver)

    async def run():
        async with Fetcher(POLICY, guard, verify=verify, sleep=Sleeps()) as fetcher:
            return await fetcher.fetch(url)

    return asyncio.run(run())


def test_the_default_tls_context_is_built_once_per_process_not_per_fetcher(ca):
    """Loading the CA bundle costs tens of milliseconds, and the orchestrator
    makes a Fetcher for every chunk of every audit."""
    fetch_module.default_ssl_context.cache_clear()
    with HostileServer() as plain:
        result = _fetch_tls(plain.url("/ok"), plain.port, verify=True)
    assert result.status == 200
    with _tls_server(ca, "127.0.0.1") as tls:
        result = _fetch_tls(tls.url("/ok"), tls.port, verify=True)
    assert result.error is FetchError.TLS_ERROR  # the default context does not trust the test CA
    assert fetch_module.default_ssl_context.cache_info().misses == 1


def test_a_certificate_from_an_unknown_ca_is_a_tls_error(ca):
    with _tls_server(ca, "127.0.0.1") as tls:
        result = _fetch_tls(tls.url("/ok"), tls.port, verify=True)
    assert result.error is FetchError.TLS_ERROR
    assert "certificate" in result.error_detail.lower()


def test_a_trusted_certificate_is_fetched_over_https(ca):
    with _tls_server(ca, "127.0.0.1") as tls:
        result = _fetch_tls(tls.url("/ok"), tls.port, verify=_client_context(ca))
        assert tls.requests["/ok"] == 1
    assert result.status == 200 and result.body == OK_HTML


def test_a_certificate_for_another_host_is_a_tls_error(ca):
    with _tls_server(ca, "elsewhere.test") as tls:
        result = _fetch_tls(tls.url("/ok"), tls.port, verify=_client_context(ca))
    assert result.error is FetchError.TLS_ERROR
    assert "mismatch" in result.error_detail.lower() or "match" in result.error_detail.lower()


def test_an_expired_certificate_is_a_tls_error(ca):
    expired = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    with _tls_server(
        ca, "127.0.0.1", not_before=expired - datetime.timedelta(days=30), not_after=expired
    ) as tls:
        result = _fetch_tls(tls.url("/ok"), tls.port, verify=_client_context(ca))
    assert result.error is FetchError.TLS_ERROR
    assert "expired" in result.error_detail.lower()


def test_tls_verifies_the_host_name_while_dialling_the_pinned_address(ca):
    # The certificate names only site.test; the connection goes to the
    # address the guard checked. Success shows SNI and verification used the
    # name, and the spy shows the dial used the IP.
    with _tls_server(ca, "site.test") as tls:
        spy = SpyBackend()
        guard = AddressGuard(
            allowed_targets=[("127.0.0.1", tls.port)],
            resolver=StubResolver({"site.test": [["127.0.0.1"]]}),
        )

        async def run():
            async with Fetcher(
                POLICY, guard, verify=_client_context(ca), network_backend=spy
            ) as fetcher:
                return await fetcher.fetch(f"https://site.test:{tls.port}/ok")

        result = asyncio.run(run())
    assert result.status == 200, result.error_detail
    assert spy.dialed == [("127.0.0.1", tls.port)]


# -- pools ------------------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [4, 10])  # one pool; three pools, one not full
def test_requests_beyond_the_concurrency_wait_before_their_deadline_starts(server, concurrency):
    # Three slow requests per slot at once. Exactly ``concurrency`` are ever in
    # flight (none waits inside a pool), and none is charged for the time it queued.
    state = {"now": 0, "peak": 0}

    async def slow(request: Request, reader, writer, server) -> None:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        try:
            await asyncio.sleep(0.3)
            await respond(request, writer, server, body=OK_HTML)
        finally:
            state["now"] -= 1

    server.route("/slow", slow)
    policy = FetchPolicy(read_timeout=1.0, deadline=0.8)
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(policy, guard, concurrency=concurrency) as fetcher:
            urls = [server.url("/slow")] * (3 * concurrency)
            return await asyncio.gather(*(fetcher.fetch(url) for url in urls))

    results = asyncio.run(run())
    assert [r.status for r in results] == [200] * (3 * concurrency)
    assert state["peak"] == concurrency


def test_connections_are_reused_across_fetches_redirects_and_head_checks(server):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, concurrency=4) as fetcher:
            results = [await fetcher.fetch(server.url("/keep-alive")) for _ in range(3)]
            results.append(await fetcher.fetch(server.url("/keep-alive-redirect")))
            results.append(await fetcher.check(server.url("/keep-alive")))
            return results

    results = asyncio.run(run())
    assert [r.status for r in results] == [200] * 5
    assert server.requests["/keep-alive"] == 5 and server.requests["/keep-alive-redirect"] == 1
    assert server.connections == 1


def test_an_unread_redirect_body_closes_its_connection_instead_of_being_read_as_the_next_answer(server):
    """A keep-alive 302 whose body is too large to drain: the body's second
    half arrives after the head, so reusing the connection would read it as
    the answer to the next request."""
    body = b"<html>" + b"moved " * 8000 + b"</html>"

    async def moved(request, reader, writer, server) -> bool:
        data = response_bytes(status=302, body=body, headers={"Location": "/keep-alive"},
                              keep_alive=True)
        await send(writer, server, request.path, data[:-1000])
        await asyncio.sleep(0.05)
        await send(writer, server, request.path, data[-1000:])
        return True

    server.route("/moved", moved)
    guard = AddressGuard(allowed_targets=[("127.0.0.1", server.port)])

    async def run():
        async with Fetcher(POLICY, guard, concurrency=1) as fetcher:
            return [await fetcher.fetch(server.url("/moved")) for _ in range(2)]

    results = asyncio.run(run())
    assert [(r.status, r.body) for r in results] == [(200, OK_HTML)] * 2
    assert [r.redirects[0].status for r in results] == [302, 302]
    # Each 302's connection was closed; each /keep-alive then reused the next.
    assert server.requests["/moved"] == 2 and server.requests["/keep-alive"] == 2
    assert server.connections == 3
