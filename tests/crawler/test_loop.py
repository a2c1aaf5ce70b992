"""The crawl's event loop: uvloop where installed, asyncio's own otherwise.

Crawls run on ``crawler.loop`` (the library benchmark, and the audit's crawl
thread), so the behaviour the rest of tests/crawler proves on asyncio's loop
must hold on uvloop too: the tests below that exercise sockets, TLS, timeouts
and hostile servers are imported from their modules and run again here with
uvloop as the loop ``asyncio.run`` creates. The servers stay on asyncio's loop
(``HostileServer`` pins it), so only the client side changes.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from crawler import loop as crawl_loop

if sys.platform == "win32":
    pytest.skip("uvloop has no Windows build; crawls use asyncio's loop", allow_module_level=True)

import uvloop  # noqa: E402 - a dependency everywhere else, so a missing one fails here

# Re-run on uvloop. Imported names are collected as tests of this module.
from tests.crawler.test_crawl_site import (  # noqa: E402,F401
    full,
    test_broken_internal_pages_are_reported_with_their_status,
    test_each_page_is_fetched_once_although_many_pages_link_to_it,
    test_every_linked_page_is_found_at_its_click_depth,
    test_the_calendar_trap_stops_at_its_budget,
    test_the_redirect_is_recorded_hop_by_hop,
)
from tests.crawler.test_fetch import (  # noqa: E402,F401
    ca,
    test_a_certificate_for_another_host_is_a_tls_error,
    test_a_certificate_from_an_unknown_ca_is_a_tls_error,
    test_a_trusted_certificate_is_fetched_over_https,
    test_an_unread_redirect_body_closes_its_connection_instead_of_being_read_as_the_next_answer,
    test_compressed_bodies_are_decoded_and_size_counts_wire_bytes,
    test_connections_are_reused_across_fetches_redirects_and_head_checks,
    test_requests_beyond_the_concurrency_wait_before_their_deadline_starts,
    test_tls_verifies_the_host_name_while_dialling_the_pinned_address,
)
from tests.crawler.test_fetch_hostile import (  # noqa: E402,F401
    bombs,
    test_a_body_cut_short_is_incomplete_and_never_kept,
    test_a_compression_bomb_is_stopped_at_the_decoded_cap_in_bounded_memory,
    test_a_declared_2gb_body_stops_right_after_the_headers,
    test_a_redirect_loop_is_detected_without_hammering,
    test_a_redirect_to_a_refused_address_never_connects_there,
    test_a_refused_connection_fails_quickly,
    test_a_server_that_closes_without_answering_is_a_connect_failure_retried,
    test_a_server_that_never_answers_is_a_read_timeout_retried_with_backoff,
    test_an_endless_chunked_body_stops_at_the_cap_in_bounded_memory,
    test_chunk_framing_counts_against_the_wire_cap,
    test_malformed_http_is_a_protocol_error_without_a_hang,
    test_tarpit_is_cut_at_the_deadline,
)


@pytest.fixture(scope="module", autouse=True)
def on_uvloop():
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(None)


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def test_the_imported_tests_really_run_on_uvloop():
    assert asyncio.run(_loop_type()) is uvloop.Loop


def test_the_crawl_loop_is_uvloop_where_it_is_installed():
    asyncio.set_event_loop_policy(None)  # crawler.loop chooses, not the policy
    try:
        assert crawl_loop.run(_loop_type()) is uvloop.Loop
    finally:
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def test_without_uvloop_the_crawl_loop_is_asyncios_own(monkeypatch):
    monkeypatch.setattr(crawl_loop, "uvloop", None)
    asyncio.set_event_loop_policy(None)
    try:
        loop_type = crawl_loop.run(_loop_type())
    finally:
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    assert loop_type is not uvloop.Loop
    assert issubclass(loop_type, asyncio.BaseEventLoop)
