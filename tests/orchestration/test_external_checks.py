"""External checks in an audit: they run beside the crawl, so slow DNS for other sites
never holds the site's pages back; and when nearly all of them fail at DNS or connect,
finalize says once that the crawler was offline instead of reporting each link broken.

The audited sites are loopback servers; every external name is answered by a stub
resolver put into the chunk's guard (no real DNS). A second loopback server stands
for a real external site that answers.
"""

from __future__ import annotations

import dataclasses
import socket
import time

import pytest

from audits import notices
from audits.crawl import chunk as crawl_chunk
from audits.finalize import run_finalize
from audits.inline import run_steps
from audits.models import Audit, Page
from crawler.net import AddressGuard
from crawler.types import FetchError
from tests.crawler.hostile_server import HostileServer, StubResolver, static
from tests.factories import SITE, make_audit, make_link, make_page

from .starting import started

pytestmark = pytest.mark.django_db

SLOW_DNS = 2.0


def html(*links: str) -> bytes:
    anchors = "".join(f'<a href="{href}">to {href}</a> ' for href in links)
    return (f"<!doctype html><html lang=en><head><title>A page of the external checks test site</title></head>"
            f"<body><h1>Links out</h1>{anchors}</body></html>").encode()


@pytest.fixture
def site():
    with HostileServer() as server:
        yield server


def resolve_with(monkeypatch, resolver) -> None:
    """The chunks' guard asks ``resolver`` about every name (the loopback sites are numeric)."""
    real = crawl_chunk.crawl_setup
    guard = AddressGuard(allow_private=True, resolver=resolver)
    monkeypatch.setattr(crawl_chunk, "crawl_setup", lambda audit: dataclasses.replace(real(audit), guard=guard))


def slow_nxdomain(host: str, port: int) -> list[str]:
    time.sleep(SLOW_DNS)  # a blocking lookup, as getaddrinfo is
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def test_pages_are_written_long_before_externals_whose_dns_takes_seconds(owner, site, fast_settings, monkeypatch):
    pages = [f"/p/{n}" for n in range(1, 50)]
    externals = [f"http://slow-{n}.test/" for n in range(30)]
    # Pages and externals interleaved on the start page, so every lease holds both.
    site.route("/", static(html(*[link for pair in zip(pages, externals, strict=False) for link in pair],
                                *pages[len(externals):])))
    for path in pages:
        site.route(path, static(html()))
    resolve_with(monkeypatch, slow_nxdomain)
    audit, dispatcher = started(owner, site, check_external=True, max_pages=100)
    batches: list[tuple[float, set[str]]] = []

    def on_batch(outcomes, issues, kinds) -> None:
        batches.append((time.monotonic(), {o.url for o in outcomes}))

    began = time.monotonic()
    run_steps(dispatcher, on_batch=on_batch)

    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    page_urls = {site.url(path) for path in pages}
    last_page = max(i for i, (_, urls) in enumerate(batches) if urls & page_urls)
    first_external = min(i for i, (_, urls) in enumerate(batches) if urls & set(externals))
    assert last_page < first_external  # every page was stored before any external check settled
    assert batches[last_page][0] - began < SLOW_DNS
    assert set(audit.pages.filter(kind=Page.Kind.PAGE).values_list("url", flat=True)) >= page_urls
    stored = audit.pages.filter(kind=Page.Kind.EXTERNAL)
    assert stored.count() == 30 and set(stored.values_list("fetch_error", flat=True)) == {"dns_failure"}


def test_an_offline_audit_gets_one_notice_instead_of_a_warning_per_unreachable_link(
        owner, site, fast_settings, monkeypatch):
    with HostileServer() as elsewhere:
        elsewhere.route("/fine", static(html()))  # /missing answers the server's own 404
        gone = [f"http://gone-{n}.test/page" for n in range(25)]
        site.route("/", static(html(*gone, elsewhere.url("/missing"), elsewhere.url("/fine"))))
        resolve_with(monkeypatch, StubResolver({}))  # every name: NXDOMAIN
        audit, dispatcher = started(owner, site, check_external=True)
        run_steps(dispatcher)

    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    notice = audit.issues.get(code="external_links_unchecked")
    assert notice.page is None and notice.url == audit.start_url and notice.severity == "notice"
    assert "could not reach the internet; external links unchecked" in notice.message
    assert "25 of 27" in notice.message
    broken = audit.issues.filter(code="broken_link_external")
    assert list(broken.values_list("target_url", "message")) == [
        (elsewhere.url("/missing"), f"External link “to {elsewhere.url('/missing')}” answered 404")]
    # The unreachable links are still there to see, as unchecked rows.
    assert audit.pages.filter(url__in=gone, fetch_error="dns_failure").count() == 25


def finalizing_audit(owner, failures: dict[str, int], answered: dict[int, int]) -> Audit:
    """An audit ready for finalize whose home page links to external targets that failed
    (``failures``: fetch error -> how many) or answered (status -> how many)."""
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    make_page(audit, f"{SITE}/")
    targets = [(error, None) for error, count in failures.items() for _ in range(count)]
    targets += [("", status) for status, count in answered.items() for _ in range(count)]
    for n, (error, status) in enumerate(targets):
        url = f"https://site{n}.example/"
        make_page(audit, url, kind=Page.Kind.EXTERNAL, status_code=status, fetch_error=error)
        make_link(audit, f"{SITE}/", url, anchor=f"partner {n}", internal=False)
    return audit


def test_an_audit_below_the_threshold_keeps_a_warning_per_broken_link(owner):
    # 17 of 20 failed before reaching a server; a TLS failure came from one.
    audit = finalizing_audit(owner, {"dns_failure": 10, "connect_failed": 4, "connect_timeout": 3,
                                     "tls_error": 3}, {})
    assert run_finalize(audit.pk)
    assert not audit.issues.filter(code="external_links_unchecked").exists()
    assert audit.issues.filter(code="broken_link_external").count() == 20


def test_dns_and_connect_failures_at_ninety_percent_make_the_notice_and_a_404_stays_reported(owner):
    audit = finalizing_audit(owner, {"dns_failure": 10, "connect_failed": 5, "connect_timeout": 3,
                                     FetchError.WORKER_LOST.value: 5}, {404: 1, 200: 1})
    assert run_finalize(audit.pk)
    # 18 of 20 tried (a lost worker tried nothing): exactly 90%.
    assert audit.issues.filter(code="external_links_unchecked").count() == 1
    assert list(audit.issues.filter(code="broken_link_external").values_list("message", flat=True)) == [
        "External link “partner 23” answered 404"]

    # A second finalize (a redelivered task) keeps the one notice.
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING)
    assert run_finalize(audit.pk)
    assert audit.issues.filter(code="external_links_unchecked").count() == 1


@pytest.mark.parametrize(("attempted", "unreachable", "offline"), [
    (20, 18, True),  # the edge: 90% of 20
    (20, 17, False),  # 85%
    (19, 19, False),  # too few to say
    (20, 20, True),
    (1000, 900, True),
    (1000, 899, False),  # 89.9%: no rounding up
    (0, 0, False),
])
def test_the_offline_threshold_is_ninety_percent_of_at_least_twenty(attempted, unreachable, offline):
    assert notices.looks_offline(attempted, unreachable) is offline


def test_an_external_link_answering_429_is_unverified_not_broken(owner, site, fast_settings):
    with HostileServer() as elsewhere:
        elsewhere.route("/busy", static(html(), status=429))
        elsewhere.route("/refused", static(html(), status=403))
        site.route("/", static(html(elsewhere.url("/busy"), elsewhere.url("/refused"), elsewhere.url("/missing"))))
        audit, dispatcher = started(owner, site, check_external=True)
        run_steps(dispatcher)

    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED
    busy = audit.pages.get(url=elsewhere.url("/busy"))
    assert (busy.kind, busy.status_code) == (Page.Kind.EXTERNAL, 429)
    # Only the 404 is broken: throttling and refusing crawlers say nothing about the page.
    assert list(audit.issues.filter(code="broken_link_external").values_list("target_url", flat=True)) == [
        elsewhere.url("/missing")]
