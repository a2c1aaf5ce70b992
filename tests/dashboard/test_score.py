"""The health score: its formula, where it is stored and recomputed, and where people see it."""

import pytest
from django.urls import reverse

from audits import score
from audits.finalize import run_finalize
from audits.models import Audit, Issue, Page
from tests.factories import SITE, make_finished_audit, make_issue, make_page

pytestmark = pytest.mark.django_db


def scored_audit(owner, **fields):
    """Eight healthy pages: one with a critical issue (and a warning), one with only a warning, one with
    only a notice; and URLs that are not pages the score counts, each with a critical issue."""
    audit = make_finished_audit(owner, **fields)
    Page.objects.filter(audit=audit).delete()
    Issue.objects.filter(audit=audit).delete()
    pages = [make_page(audit, f"{SITE}/p{n}", title=f"Page {n}") for n in range(8)]
    make_issue(audit, "http_5xx", pages[0].url, page=pages[0])
    make_issue(audit, "h1_missing", pages[0].url, page=pages[0])
    make_issue(audit, "h1_missing", pages[1].url, page=pages[1])
    make_issue(audit, "title_length", pages[2].url, page=pages[2])
    for page in (
        make_page(audit, f"{SITE}/gone", status_code=404),
        make_page(audit, f"{SITE}/moved", redirect_count=1, final_url=f"{SITE}/p1"),
        make_page(audit, f"{SITE}/down", status_code=None, fetch_error="read_timeout"),
        make_page(audit, f"{SITE}/app.js", kind=Page.Kind.RESOURCE, content_type="text/javascript"),
    ):
        make_issue(audit, "http_5xx", page.url, page=page)
    make_issue(audit, "robots_txt_missing", f"{SITE}/robots.txt")  # no page of its own
    return audit


def test_the_score_weighs_pages_with_critical_issues_fully_and_pages_with_only_warnings_by_half(owner):
    audit = scored_audit(owner)
    assert score.breakdown(audit) == {"pages": 8, "critical": 1, "warning": 1}
    assert score.compute(audit) == 81  # 100 × (1 − (1 + 0.5) / 8) = 81.25


def test_ignored_issues_are_left_out_and_reviewed_ones_still_count(owner):
    audit = scored_audit(owner)
    Issue.objects.filter(audit=audit, code="h1_missing").update(review=Issue.Review.REVIEWED)
    assert score.compute(audit) == 81
    Issue.objects.filter(audit=audit, code="http_5xx", url=f"{SITE}/p0").update(review=Issue.Review.IGNORED)
    assert score.breakdown(audit) == {"pages": 8, "critical": 0, "warning": 2}
    assert score.compute(audit) == 88  # 87.5, rounded half up
    Issue.objects.filter(audit=audit, code="h1_missing").update(review=Issue.Review.IGNORED)
    assert score.compute(audit) == 100


def test_an_audit_without_a_page_that_answered_has_no_score(owner):
    audit = make_finished_audit(owner)
    Page.objects.filter(audit=audit).update(status_code=503)
    assert score.compute(audit) is None


def test_finalize_stores_the_score_and_a_running_audit_has_none(owner):
    audit = scored_audit(owner, status=Audit.Status.FINALIZING)
    assert run_finalize(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED and audit.score == 81

    running = scored_audit(owner, status=Audit.Status.RUNNING)
    running.rescore()
    assert Audit.objects.get(pk=running.pk).score is None


def test_triage_recomputes_the_score(owner_client, owner):
    audit = scored_audit(owner)
    audit.rescore()
    critical = list(Issue.objects.filter(audit=audit, url=f"{SITE}/p0").values_list("id", flat=True))
    owner_client.post(reverse("issue-review", args=[audit.pk]), {"mark": "ignored", "issue": critical})
    assert Audit.objects.get(pk=audit.pk).score == 94  # only /p1's warning is left: 100 × (1 − 0.5 / 8)
    owner_client.post(reverse("issue-review", args=[audit.pk]), {"mark": "open", "issue": critical})
    assert Audit.objects.get(pk=audit.pk).score == 81


def test_the_audit_page_shows_the_score_with_its_formula(owner_client, owner):
    audit = scored_audit(owner)
    audit.rescore()
    page = owner_client.get(audit.get_absolute_url()).content.decode()
    assert '<span class="stat" id="score-value">81</span> / 100' in page
    assert "(1 of 8 pages with a critical issue, 1 more with a warning)" in page
    assert f"Score = {score.FORMULA}" in page


def test_the_audit_list_shows_the_score_and_prints_numbers_as_the_audit_page_does(owner_client, owner):
    audit = scored_audit(owner)
    audit.rescore()
    Audit.objects.filter(pk=audit.pk).update(pages_crawled=2939, issues_notice=1204)
    running = make_finished_audit(owner, status=Audit.Status.RUNNING, start_url="https://running.example/")
    listing = owner_client.get(reverse("audit-list")).content.decode()
    assert "<td>2,939</td>" in listing and "<td>1,204</td>" in listing and "2939" not in listing
    row = listing[listing.index(audit.get_absolute_url()):]
    assert '<td class="score"><span title="Health score' in row and ">81</span>" in row[:600]
    running_row = listing[listing.index(running.get_absolute_url()):]
    assert '<td class="score">—</td>' in running_row[:600]
    detail = owner_client.get(audit.get_absolute_url()).content.decode()
    assert "2,939" in detail


def test_the_site_page_draws_the_score_trend_of_its_completed_audits(owner_client, owner):
    audits = [scored_audit(owner) for _ in range(3)]
    Issue.objects.filter(audit=audits[1], severity="critical").update(review=Issue.Review.IGNORED)
    for audit in audits:
        audit.rescore()
    assert [Audit.objects.get(pk=a.pk).score for a in audits] == [81, 88, 81]
    page = owner_client.get(audits[0].site.get_absolute_url()).content.decode()
    chart = page[page.index('id="trend-score"'):page.index("</svg>", page.index('id="trend-score"'))]
    assert chart.count("<circle") == 3 and ": 88</title>" in chart and "Health score" in chart
    history = page[page.index('id="audit-history"'):]
    assert history.count('<td class="score">') == 3
