"""The progress panel: recent speed and the estimate from it, a bar that agrees with its text, the
checks-only phase, how an audit that ended reads, and a poll that outlived its session."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from audits.models import Audit, FrontierURL, Issue, Page
from audits.views import LIVE_TOTALS_SECONDS
from tests.factories import SITE, make_audit, make_finished_audit, make_page

pytestmark = pytest.mark.django_db


def running(owner, **counters):
    audit = make_audit(owner, status=Audit.Status.RUNNING, phase=Audit.Phase.CRAWLING, origin=SITE,
                       started_at=timezone.now() - timedelta(seconds=120), max_pages=counters.pop("max_pages", 100))
    Audit.objects.filter(pk=audit.pk).update(**counters)
    audit.refresh_from_db()
    return audit


def dd(body: str, name: str) -> str:
    return body.split(f'<dd id="{name}">')[1].split("</dd>")[0]


def crawled(audit, count: int, seconds_ago: float, prefix: str, kind=Page.Kind.PAGE):
    at = timezone.now() - timedelta(seconds=seconds_ago)
    for n in range(count):
        make_page(audit, f"{SITE}/{prefix}/{n}", kind=kind, crawled_at=at)


def test_speed_is_the_last_30_seconds_and_the_estimate_follows_it(owner_client, owner):
    with time_machine.travel(timezone.now(), tick=False):
        audit = running(owner, pages_crawled=40, pages_discovered=80)
        crawled(audit, 25, 100, "early")  # a fast start, two minutes ago...
        crawled(audit, 15, 10, "lately")  # ...and 15 pages in the last 30 s
        crawled(audit, 30, 5, "assets", kind=Page.Kind.RESOURCE)  # checks are not pages
        body = owner_client.get(audit.get_absolute_url()).content.decode()
    # 15 pages in 30 s is 0.5 pages/s (since the start it would be 40 in 120 s, 0.33);
    # the 40 pages left at that speed take 80 s.
    assert dd(body, "speed").startswith("0.50 pages/s") and "last 30 s" in dd(body, "speed")
    assert dd(body, "eta") == "about 1 min 20 s left"


def test_a_crawl_that_stalled_has_no_speed_and_no_estimate(owner_client, owner):
    with time_machine.travel(timezone.now(), tick=False):
        audit = running(owner, pages_crawled=40, pages_discovered=80)
        crawled(audit, 40, 90, "before")
        body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert dd(body, "speed").startswith("0.00 pages/s") and dd(body, "eta") == "—"


def test_the_bar_and_the_text_share_one_target_the_smaller_of_max_pages_and_discovered(owner_client, owner):
    audit = running(owner, max_pages=20, pages_crawled=10, pages_discovered=1203)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert dd(body, "pages-crawled").startswith("10 of 20 ") and "1,203 discovered" in dd(body, "pages-crawled")
    assert 'aria-valuenow="50"' in body and "width: 50%" in body

    Audit.objects.filter(pk=audit.pk).update(max_pages=500, pages_discovered=40)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert dd(body, "pages-crawled") == "10 of 40 discovered" and 'aria-valuenow="25"' in body


def test_once_the_pages_are_done_the_phase_counts_the_checks_left(owner_client, owner):
    with time_machine.travel(timezone.now(), tick=False):
        audit = running(owner, max_pages=20, pages_crawled=20, pages_discovered=90)
        rows = [FrontierURL(audit=audit, url=f"https://elsewhere.example/{n}", url_hash=f"e{n}",
                            kind=Page.Kind.EXTERNAL) for n in range(1945)]
        rows += [FrontierURL(audit=audit, url=f"{SITE}/img/{n}.png", url_hash=f"r{n}", kind=Page.Kind.RESOURCE,
                             state=FrontierURL.State.LEASED, chunk=4) for n in range(2)]
        rows += [FrontierURL(audit=audit, url=f"{SITE}/done/{n}", url_hash=f"d{n}", kind=Page.Kind.EXTERNAL,
                             state=FrontierURL.State.DONE) for n in range(50)]
        FrontierURL.objects.bulk_create(rows)
        crawled(audit, 60, 10, "checked", kind=Page.Kind.EXTERNAL)  # 2 checks a second lately
        body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert dd(body, "phase") == "Checking 1,945 external links and 2 resources"
    # 1,947 checks left at 2 a second.
    assert dd(body, "eta") == "about 16 min 14 s left"


def test_while_pages_remain_the_phase_is_crawling(owner_client, owner):
    audit = running(owner, max_pages=20, pages_crawled=12, pages_discovered=90)
    FrontierURL.objects.create(audit=audit, url="https://elsewhere.example/", url_hash="e", kind=Page.Kind.EXTERNAL)
    assert dd(owner_client.get(audit.get_absolute_url()).content.decode(), "phase") == "Crawling"


@pytest.mark.parametrize(("status", "phase", "label"), [
    (Audit.Status.CANCELLED, Audit.Phase.CRAWLING, "Cancelled while crawling"),
    (Audit.Status.FAILED, Audit.Phase.STARTING, "Failed while starting"),
    (Audit.Status.COMPLETED, Audit.Phase.DONE, "Done"),
])
def test_an_ended_audit_reads_as_ended_not_as_its_last_phase(owner_client, owner, status, phase, label):
    audit = make_audit(owner, status=status, phase=phase, failed_phase=phase if status != "completed" else "",
                       started_at=timezone.now() - timedelta(seconds=100), finished_at=timezone.now())
    Audit.objects.filter(pk=audit.pk).update(pages_crawled=50, pages_discovered=50)
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert dd(body, "phase") == label
    # No "lately" for an audit that ended: the run's average, said so.
    assert dd(body, "speed").startswith("0.50 pages/s") and "average" in dd(body, "speed")
    assert dd(body, "eta") == "finished"


def test_a_cancelled_audit_says_once_who_cancelled_it_and_when(owner_client, owner):
    audit = running(owner, pages_crawled=12, pages_discovered=40)
    with time_machine.travel(timezone.now(), tick=False):
        when = timezone.localtime()
        response = owner_client.post(reverse("audit-cancel", args=[audit.pk]), follow=True)
    body = response.content.decode()
    # The banner says it; a flash saying the same again would read as a second event.
    assert 'class="messages"' not in body
    banner = body.split('id="failure-banner"')[1].split("</section>")[0]
    note = f"Cancelled by owner at {when:%H:%M}; everything crawled before is kept."
    assert re.sub(r"\s+", " ", banner).count(note) == 1
    assert body.count("Cancelled by owner") == 1
    assert "Error code" not in banner and "<code>cancelled</code>" not in body
    assert dd(body, "phase") == "Cancelled while crawling"


@pytest.mark.parametrize("deleted", [True, False])
def test_a_poll_of_a_deleted_or_strangers_audit_reloads_the_page_instead_of_polling_on(
        client, owner, stranger, deleted):
    audit = running(owner)
    url = reverse("audit-progress", args=[audit.pk])
    if deleted:
        client.force_login(owner)
        audit.delete()
    else:
        client.force_login(stranger)
    response = client.get(url, HTTP_HX_REQUEST="true")
    # The same answer either way, so a stranger learns nothing about which ids exist.
    assert response.status_code == 404 and response["HX-Refresh"] == "true"
    assert response.content == b""
    # Without htmx it is the ordinary 404 page.
    response = client.get(url)
    assert response.status_code == 404 and "HX-Refresh" not in response


def test_a_poll_after_the_session_ended_reloads_the_page_to_sign_in(client, owner):
    audit = running(owner)
    client.force_login(owner)
    page = audit.get_absolute_url()
    assert 'hx-trigger="every 2s"' in client.get(page).content.decode()
    client.logout()
    url = reverse("audit-progress", args=[audit.pk])
    # htmx would follow a redirect and swap the login page into the audit page: it reloads instead...
    poll = client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=f"http://testserver{page}")
    assert poll.status_code == 204 and poll["HX-Refresh"] == "true" and poll.content == b""
    # ...and the reload, a plain request, is sent to sign in and back.
    reload = client.get(page)
    assert reload.status_code == 302
    assert reload["Location"] == f"{reverse('login')}?next={page}"
    # A plain request to the poll's URL is redirected as before.
    assert client.get(url).status_code == 302


def test_a_running_audits_poll_counts_its_issues_and_pages_at_most_every_few_seconds(owner_client, owner):
    cache.clear()
    audit = make_finished_audit(owner, status=Audit.Status.RUNNING)
    url = reverse("audit-progress", args=[audit.pk])
    with CaptureQueriesContext(connection) as first:
        assert owner_client.get(url, HTTP_HX_REQUEST="true").status_code == 200
    with CaptureQueriesContext(connection) as second:
        body = owner_client.get(url, HTTP_HX_REQUEST="true").content.decode()

    def totals(ctx):
        return [q["sql"] for q in ctx.captured_queries
                if 'FROM "audits_issue"' in q["sql"] and "GROUP BY" in q["sql"]]

    assert totals(first) and not totals(second)
    assert 'id="summary"' in body  # the table is still shown, from the last count
    assert LIVE_TOTALS_SECONDS == 15  # the README: the totals while it runs are at most 15 s old
    cache.clear()


def test_an_ended_audits_page_counts_afresh(owner_client, owner):
    cache.clear()
    audit = make_finished_audit(owner)
    owner_client.get(reverse("audit-detail", args=[audit.pk]))
    Issue.objects.filter(audit=audit).update(review=Issue.Review.IGNORED)
    body = owner_client.get(reverse("audit-detail", args=[audit.pk])).content.decode()
    assert 'id="code-broken_link_internal"' not in body


def test_a_resumed_audit_counts_the_time_it_ran_not_the_weekend_it_stood_cancelled(owner_client, owner):
    friday = timezone.now() - timedelta(days=3)
    with time_machine.travel(friday, tick=False):
        audit = running(owner, pages_crawled=30, pages_discovered=60)  # started two minutes before Friday
        audit.cancel()
    with time_machine.travel(friday + timedelta(days=3), tick=False):
        assert audit.reopen_for_resume()
        # Queued again, it has run two minutes, not three days.
        assert dd(owner_client.get(audit.get_absolute_url()).content.decode(), "elapsed") == "2 min 00 s"
        assert audit.resume_crawl()
    with time_machine.travel(friday + timedelta(days=3, seconds=60), tick=False):
        Audit.objects.filter(pk=audit.pk).update(pages_crawled=60, status=Audit.Status.COMPLETED,
                                                 phase=Audit.Phase.DONE, finished_at=timezone.now())
        body = owner_client.get(audit.get_absolute_url()).content.decode()
    # 120 s on Friday and 60 s on Monday: 60 pages in 180 s, not in three days.
    assert dd(body, "elapsed") == "3 min 00 s"
    assert dd(body, "speed").startswith("0.33 pages/s") and "average" in dd(body, "speed")


def test_a_crawl_the_site_asked_to_pause_counts_the_wait_down_instead_of_looking_stuck(owner_client, owner):
    with time_machine.travel(timezone.now(), tick=False):
        audit = running(owner, max_pages=20, pages_crawled=12, pages_discovered=90,
                        site_paused_until=timezone.now() + timedelta(seconds=95))
        body = owner_client.get(audit.get_absolute_url()).content.decode()
        assert dd(body, "phase") == "Waiting 1 min 35 s: the site asked for a pause (Retry-After)"
        # A pause that has ended is no news: the phase is the crawl again.
        Audit.objects.filter(pk=audit.pk).update(site_paused_until=timezone.now() - timedelta(seconds=1))
        assert dd(owner_client.get(audit.get_absolute_url()).content.decode(), "phase") == "Crawling"
