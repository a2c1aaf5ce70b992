"""The audit page: live progress that stops polling, the summary, charts and the failure banner."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from audits.models import Audit, ChunkLease
from crawler.catalogue import CATALOGUE
from tests.factories import make_audit, make_finished_audit, make_issue, make_page

pytestmark = pytest.mark.django_db


def running_audit(owner):
    audit = make_audit(owner, status=Audit.Status.RUNNING, phase=Audit.Phase.CRAWLING,
                       started_at=timezone.now() - timedelta(seconds=20), max_pages=100)
    Audit.objects.filter(pk=audit.pk).update(pages_crawled=40, pages_discovered=80, current_window=6,
                                             issues_warning=1)
    make_page(audit, "https://shop.example/just-now", title="Fresh")
    make_issue(audit, "h1_missing", "https://shop.example/just-now")
    audit.refresh_from_db()
    return audit


def test_a_running_audit_polls_its_progress_every_two_seconds(owner_client, owner):
    # The clock stands still: the rate and the time left are computed from "now",
    # and a slow render must not move them.
    with time_machine.travel(timezone.now(), tick=False):
        audit = running_audit(owner)
        body = owner_client.get(audit.get_absolute_url()).content.decode()
    progress_url = reverse("audit-progress", args=[audit.pk])
    assert f'hx-get="{progress_url}" hx-trigger="every 2s"' in body
    assert "40 of 80 discovered" in body and "6 in flight" in body and "Crawling" in body
    assert "https://shop.example/just-now" in body  # pages appear as they are crawled
    assert "H1 missing" in body  # and so do issues


def test_the_progress_partial_is_200_while_running_and_286_once_ended(owner_client, owner):
    audit = running_audit(owner)
    url = reverse("audit-progress", args=[audit.pk])
    response = owner_client.get(url, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert b"<html" not in response.content and b'id="audit-body"' in response.content

    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.COMPLETED, phase=Audit.Phase.DONE,
                                             finished_at=timezone.now())
    response = owner_client.get(url, HTTP_HX_REQUEST="true")
    assert response.status_code == 286
    body = response.content.decode()
    assert "hx-trigger" not in body and "Completed" in body


def test_an_htmx_request_for_the_audit_page_gets_only_the_partial(owner_client, owner):
    audit = make_finished_audit(owner)
    response = owner_client.get(audit.get_absolute_url(), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert b"<html" not in response.content and b'id="summary"' in response.content


def test_a_finished_audit_summarises_issues_by_severity_and_code_with_why_and_fix(owner_client, owner):
    audit = make_finished_audit(owner)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert "3 critical" in body and "1 warnings" in body and "1 notices" in body
    broken = CATALOGUE["broken_link_internal"]
    assert broken.title in body and broken.why in body and broken.fix in body
    assert 'id="code-broken_link_internal-critical"' in body
    # Critical codes come first.
    assert body.index('id="code-http_4xx-') < body.index('id="code-meta_description_missing-')
    assert body.index('id="code-meta_description_missing-') < body.index('id="code-title_length-')
    assert "hx-trigger" not in body
    for csv_name in ("export-pages", "export-issues", "export-links"):
        assert reverse(csv_name, args=[audit.pk]) in body


def test_the_charts_are_inline_svg_drawn_from_the_pages(owner_client, owner):
    audit = make_finished_audit(owner)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert '<svg class="chart" id="chart-status"' in body
    assert '<svg class="chart" id="chart-depth"' in body
    assert '<svg class="chart" id="chart-time"' in body
    # Five pages (kind=page): four 2xx and one 4xx; external and resource rows are not pages.
    assert "<title>2xx: 4</title>" in body and "<title>4xx: 1</title>" in body
    assert "<title>0: 1</title>" in body and "<title>1: 4</title>" in body
    assert "<title>&lt;250: 1</title>" in body and "<title>&lt;2s: 1</title>" in body
    assert "<script" not in body.split('id="charts"')[1].split("</section>")[0]


def test_the_depth_chart_counts_pages_past_its_last_bar(owner_client, owner):
    audit = make_finished_audit(owner)
    for depth in (29, 30, 31, 45):
        make_page(audit, f"https://shop.example/deep/{depth}", depth=depth)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    chart = body.split('id="chart-depth"')[1].split("</svg>")[0]
    assert "<title>29: 1</title>" in chart and "<title>30+: 3</title>" in chart
    # Every page (kind=page) is in a bar: the five of the finished audit and the four deep ones.
    assert sum(int(n) for n in re.findall(r"<title>[^<:]+: (\d+)</title>", chart)) == 9


def test_a_failed_audit_says_why_at_the_top_and_keeps_its_results(owner_client, owner):
    audit = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="robots_unreachable",
                                error_detail="robots.txt answered 503 three times", failed_phase="starting")
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    banner = body.split('id="failure-banner"')[1].split("</section>")[0]
    assert "stopped early after 7 pages: robots.txt is unreachable, so nothing may be crawled" in banner
    assert "robots.txt answered 503 three times" in banner
    assert "<code>robots_unreachable</code>" in banner
    assert "Resolving the start URL, robots.txt and sitemaps" in banner
    assert reverse("audit-resume", args=[audit.pk]) in banner
    assert reverse("audit-rerun", args=[audit.pk]) in banner
    # Everything crawled before the stop is still there.
    assert CATALOGUE["http_4xx"].title in body and 'id="chart-status"' in body


@pytest.mark.parametrize(("status", "phase", "said"), [
    (Audit.Status.FAILED, Audit.Phase.CRAWLING, "before them: none of their issues are here"),
    (Audit.Status.CANCELLED, Audit.Phase.CRAWLING, "before them: none of their issues are here"),
    (Audit.Status.FAILED, Audit.Phase.FINALIZING, "while they ran: their issues are incomplete"),
])
def test_a_stopped_audit_says_its_cross_page_checks_did_not_run_to_the_end(owner_client, owner, status, phase,
                                                                           said):
    audit = make_finished_audit(owner, status=status, failed_phase=phase, error_code="stalled")
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    banner = re.sub(r"\s+", " ", body.split('id="failure-banner"')[1].split("</section>")[0])
    assert f"run when a crawl finishes, and this audit stopped {said}" in banner
    assert "Broken links and resources are checked among the pages it fetched" in banner

    # With no issue at all, only what was looked for is said to be clean.
    audit.issues.all().delete()
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert "No issues found on the pages crawled before it stopped." in body
    assert "No issues found.<" not in body


def test_a_completed_audit_has_no_note_about_cross_page_checks(owner_client, owner):
    audit = make_finished_audit(owner)
    audit.issues.all().delete()
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert 'id="cross-page-note"' not in body and "No issues found.<" in body


def test_the_audit_page_needs_a_handful_of_queries_whatever_its_size(owner_client, owner,
                                                                     django_assert_max_num_queries):
    audit = make_finished_audit(owner)
    for n in range(60):
        make_page(audit, f"https://shop.example/p/{n}", depth=2 + n % 3, total_ms=50 * n)
    # Two more for an ended audit's issues by section (a count and one GROUP BY).
    with django_assert_max_num_queries(11):
        assert owner_client.get(audit.get_absolute_url()).status_code == 200


def test_the_audit_list_shows_status_and_counts(owner_client, owner):
    make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled")
    body = owner_client.get(reverse("audit-list")).content.decode()
    assert "https://shop.example/" in body and "status-failed" in body and reverse("audit-new") in body


def test_an_audit_whose_next_chunk_waits_in_the_queue_says_it_is_waiting_for_a_worker(owner_client, owner):
    audit = running_audit(owner)
    ChunkLease.objects.create(audit=audit, number=3, state=ChunkLease.State.QUEUED)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert '<dd id="window">waiting for a worker</dd>' in body
    ChunkLease.objects.filter(audit=audit).update(state=ChunkLease.State.LEASED)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert "waiting for a worker" not in body and "6 in flight" in body


def test_an_audit_crawled_in_chunks_side_by_side_says_how_many_run_and_how_many_wait(owner_client, owner):
    audit = running_audit(owner)
    for number in (1, 2, 3):
        ChunkLease.objects.create(audit=audit, number=number, state=ChunkLease.State.LEASED)
    ChunkLease.objects.create(audit=audit, number=4, state=ChunkLease.State.QUEUED)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert (f'<dd id="window">3 chunks side by side, up to {audit.concurrency} in flight; '
            "1 more waiting for a worker</dd>") in body
