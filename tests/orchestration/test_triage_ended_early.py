"""A person's marks and the site's ignore rules reach an audit that failed or was cancelled, as they reach a
completed one: once its chunks have stopped writing, by the ended-audit task the watchdog enqueues."""

from __future__ import annotations

from datetime import timedelta

import pytest

from audits import inlinks, tasks, thresholds
from audits.crawl import writer
from audits.models import Audit, IgnoreRule, Issue, Severity
from audits.services import cancel_audit
from crawler.checks import CheckSettings
from tests.editable_site import EditableSite

from .test_run_diff import (
    BROKEN_404,
    BROKEN_LINK,
    TITLE_MISSING,
    audit_of,
    completed_audit_of,
    fail_in_finalize,
    first_version,
    issue,
    reviews,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def site(monkeypatch):
    """The editable site of test_run_diff, with slow_response out of the way as there."""
    monkeypatch.setattr(thresholds, "DEFAULTS", CheckSettings(slow_ms=600_000))
    with EditableSite(sitemap=True) as editable:
        yield editable


def triaged_first(owner, site: EditableSite) -> Audit:
    """A completed first audit with the 404 ignored by a person, and a site rule ignoring missing titles."""
    first_version(site)
    first = completed_audit_of(owner, site)
    first.set_review(Issue.objects.filter(pk=issue(site, first, *BROKEN_404).pk), Issue.Review.IGNORED)
    IgnoreRule.objects.create(site=first.site, code="title_missing")
    return first


def counters(audit: Audit) -> dict[str, int]:
    audit.refresh_from_db()
    return {severity: getattr(audit, f"issues_{severity}") for severity in Severity.values}


def not_ignored(audit: Audit) -> dict[str, int]:
    shown = audit.issues.exclude(review=Issue.Review.IGNORED)
    return {severity: shown.filter(severity=severity).count() for severity in Severity.values}


def test_a_failed_audit_takes_the_sites_marks_and_ignore_rules_and_counts_without_them(owner, site, fast_settings):
    triaged_first(owner, site)
    failed = audit_of(owner, site, finalize=fail_in_finalize)
    assert failed.status == Audit.Status.FAILED
    assert reviews(site, failed)[BROKEN_404] == reviews(site, failed)[TITLE_MISSING] == Issue.Review.OPEN
    stored = failed.issues.count()

    assert inlinks.ended_unindexed().filter(pk=failed.pk).exists()  # the watchdog enqueues index_links for it
    assert tasks.index_links(failed.pk) == "indexed"

    assert reviews(site, failed)[BROKEN_404] == Issue.Review.IGNORED
    assert reviews(site, failed)[TITLE_MISSING] == Issue.Review.IGNORED
    assert counters(failed) == not_ignored(failed)
    # Two fewer than it stores: the link checks of a stopped audit add the broken links to it (open).
    links = failed.issues.filter(code="broken_link_internal").count()
    assert links and sum(counters(failed).values()) == stored + links - 2
    assert failed.score is None  # a partial crawl has no score


def test_a_cancelled_audits_issues_written_after_the_cancel_are_marked_too(owner, site, fast_settings, monkeypatch):
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "LEASE_SECONDS": 60}  # the chunk's lease lives on
    triaged_first(owner, site)
    insert = writer.insert_issues
    early = []

    def cancel_then_insert(issues):
        # The dashboard's cancel lands as the chunk is about to store the 404's issue: it stores it after.
        if not early and any(row.url == site.url("/broken") for row in issues):
            audit_id = issues[0].audit_id
            assert cancel_audit(Audit.objects.get(pk=audit_id))
            early.append(tasks.index_links(audit_id))
        return insert(issues)

    monkeypatch.setattr(writer, "insert_issues", cancel_then_insert)
    cancelled = audit_of(owner, site)
    assert cancelled.status == Audit.Status.CANCELLED
    assert early == ["nothing to do"]  # a chunk held the audit: its writes were not over

    assert tasks.index_links(cancelled.pk) == "indexed"

    assert reviews(site, cancelled)[BROKEN_404] == Issue.Review.IGNORED
    assert counters(cancelled) == not_ignored(cancelled)


def test_a_mark_a_person_changed_on_the_failed_audit_stands_when_it_fails_again_after_a_resume(owner, site,
                                                                                              fast_settings):
    triaged_first(owner, site)
    failed = audit_of(owner, site, finalize=fail_in_finalize)
    assert tasks.index_links(failed.pk) == "indexed"
    failed.set_review(Issue.objects.filter(pk=issue(site, failed, *BROKEN_404).pk), Issue.Review.OPEN)
    assert tasks.index_links(failed.pk) == "nothing to do"  # a second delivery

    assert failed.reopen_for_resume()
    assert failed.fail(Audit.ErrorCode.INTERNAL_ERROR, "failed again")
    assert tasks.index_links(failed.pk) == "indexed"

    assert reviews(site, failed)[BROKEN_404] == Issue.Review.OPEN
    assert reviews(site, failed)[TITLE_MISSING] == Issue.Review.IGNORED
    assert counters(failed) == not_ignored(failed)


def test_a_failed_audit_takes_a_mark_from_runs_before_its_baseline_when_the_baseline_missed_the_issue(
        owner, site, fast_settings):
    triaged_first(owner, site)
    site.set(**{"/broken": (503, "down for the night")})
    missed = completed_audit_of(owner, site)
    assert BROKEN_404 not in reviews(site, missed)
    site.set(**{"/broken": None})  # a 404 again
    failed = audit_of(owner, site, finalize=fail_in_finalize)
    assert tasks.index_links(failed.pk) == "indexed"
    assert reviews(site, failed)[BROKEN_404] == Issue.Review.IGNORED


def test_a_failed_audit_lists_the_broken_links_among_the_pages_it_fetched(owner, site, fast_settings, client):
    """Finalize never ran, but the 404 it fetched is no less broken: 'no broken links' would be false."""
    first_version(site)
    failed = audit_of(owner, site, finalize=fail_in_finalize)
    assert BROKEN_LINK not in reviews(site, failed)  # finalize's checks never ran

    assert tasks.index_links(failed.pk) == "indexed"

    assert reviews(site, failed)[BROKEN_LINK] == Issue.Review.OPEN
    assert counters(failed) == not_ignored(failed)
    assert tasks.index_links(failed.pk) == "nothing to do"
    client.force_login(owner)
    listed = client.get(f"{failed.get_absolute_url()}broken/").content.decode()
    assert site.url("/broken") in listed and "No broken links" not in listed
    assert not failed.issues.filter(code__in=["duplicate_content", "orphan_page", "deep_page"]).exists()


def test_an_audit_stopped_during_finalize_waits_for_its_finalize_task_before_the_ended_step(owner, site,
                                                                                          fast_settings, settings):
    """The check finalize was running inserts its issues after the cancel: marked and counted only after."""
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600}
    first_version(site)

    def cancelled_in_finalize(audit_id: int) -> None:  # a person's cancel: the finalize task may run on
        assert cancel_audit(Audit.objects.get(pk=audit_id))

    stopped = audit_of(owner, site, finalize=lambda audit_id: (Audit.objects.get(pk=audit_id).begin_finalize(),
                                                               cancelled_in_finalize(audit_id)))
    assert (stopped.status, stopped.failed_phase) == (Audit.Status.CANCELLED, Audit.Phase.FINALIZING)
    assert tasks.index_links(stopped.pk) == "nothing to do"
    Audit.objects.filter(pk=stopped.pk).update(finished_at=stopped.finished_at - timedelta(seconds=601))
    assert tasks.index_links(stopped.pk) == "indexed"
