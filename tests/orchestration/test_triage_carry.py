"""A person's marks last: they follow an issue to the next audit from wherever the person last made them."""

from __future__ import annotations

import pytest

from audits import thresholds
from audits.models import Audit, IgnoreRule, Issue
from audits.services import follow_up_fields
from crawler.checks import CheckSettings
from tests.editable_site import EditableSite

from .test_run_diff import (
    BROKEN_404,
    BROKEN_LINK,
    completed_audit_of,
    first_version,
    issue,
    mark,
    reviews,
)

pytestmark = pytest.mark.django_db
SCHEDULED = {"trigger": Audit.Trigger.SCHEDULE}


@pytest.fixture
def site(monkeypatch):
    """The editable site of test_run_diff, with slow_response out of the way as there."""
    monkeypatch.setattr(thresholds, "DEFAULTS", CheckSettings(slow_ms=600_000))
    with EditableSite(sitemap=True) as editable:
        yield editable


def test_marks_made_on_a_run_between_two_scheduled_runs_carry_to_the_next_scheduled_run(owner, site, fast_settings):
    """A scheduled run is compared with the previous scheduled one; the person triaged the Run now in between."""
    first_version(site)
    nightly = completed_audit_of(owner, site, **SCHEDULED)
    mark(site, nightly, Issue.Review.IGNORED, BROKEN_LINK)
    by_hand = completed_audit_of(owner, site)
    assert reviews(site, by_hand)[BROKEN_LINK] == Issue.Review.IGNORED
    mark(site, by_hand, Issue.Review.IGNORED, BROKEN_404)
    mark(site, by_hand, Issue.Review.OPEN, BROKEN_LINK)  # the person changed their mind
    next_night = completed_audit_of(owner, site, **SCHEDULED)
    assert next_night.baseline_id == nightly.pk
    assert reviews(site, next_night)[BROKEN_404] == Issue.Review.IGNORED
    assert reviews(site, next_night)[BROKEN_LINK] == Issue.Review.OPEN


def test_an_issue_reviewed_then_ignored_on_a_validation_is_ignored_on_the_audit_and_the_next(owner, site, fast_settings):
    first_version(site)
    first = completed_audit_of(owner, site)
    first.set_review(Issue.objects.filter(pk=issue(site, first, *BROKEN_404).pk), Issue.Review.REVIEWED)
    check = completed_audit_of(owner, site, **follow_up_fields(first, Audit.Mode.VALIDATE))
    assert reviews(site, check)[BROKEN_404] == Issue.Review.REVIEWED
    check.set_review(Issue.objects.filter(pk=issue(site, check, *BROKEN_404).pk), Issue.Review.IGNORED)
    # The audit it re-checked says so too: the next validation of it leaves the issue out.
    assert reviews(site, first)[BROKEN_404] == Issue.Review.IGNORED
    again = completed_audit_of(owner, site)
    assert reviews(site, again)[BROKEN_404] == Issue.Review.IGNORED


def test_a_reviewed_issue_missing_for_a_night_is_still_reviewed_when_it_comes_back(owner, site: EditableSite,
                                                                                  fast_settings):
    first_version(site)
    first = completed_audit_of(owner, site)
    mark(site, first, Issue.Review.REVIEWED, BROKEN_404)
    site.set(**{"/broken": (503, "down for the night")})
    missed = completed_audit_of(owner, site)
    assert BROKEN_404 not in reviews(site, missed)
    site.set(**{"/broken": None})  # a 404 again
    again = completed_audit_of(owner, site)
    assert reviews(site, again)[BROKEN_404] == Issue.Review.REVIEWED


def test_an_issue_reopened_on_a_run_between_stays_open_though_an_older_run_ignored_it(owner, site, fast_settings):
    first_version(site)
    nightly = completed_audit_of(owner, site, **SCHEDULED)
    mark(site, nightly, Issue.Review.IGNORED, BROKEN_404)
    site.set(**{"/broken": (503, "down for the night")})
    missed = completed_audit_of(owner, site, **SCHEDULED)
    assert BROKEN_404 not in reviews(site, missed)
    site.set(**{"/broken": None})  # a 404 again
    by_hand = completed_audit_of(owner, site)
    assert reviews(site, by_hand)[BROKEN_404] == Issue.Review.IGNORED  # carried over the night it was missing
    mark(site, by_hand, Issue.Review.OPEN, BROKEN_404)
    next_night = completed_audit_of(owner, site, **SCHEDULED)
    assert next_night.baseline_id == missed.pk
    assert reviews(site, next_night)[BROKEN_404] == Issue.Review.OPEN


def test_a_mark_made_on_an_older_audit_after_a_newer_one_ran_is_the_one_carried(owner, site, fast_settings):
    """The alert links to the scheduled run; the person ignores there after a Run now has finished."""
    first_version(site)
    nightly = completed_audit_of(owner, site, **SCHEDULED)
    by_hand = completed_audit_of(owner, site)
    nightly.set_review(Issue.objects.filter(pk=issue(site, nightly, *BROKEN_404).pk), Issue.Review.IGNORED)
    assert reviews(site, by_hand)[BROKEN_404] == Issue.Review.IGNORED  # the newer audit holds it too
    next_night = completed_audit_of(owner, site, **SCHEDULED)
    assert reviews(site, next_night)[BROKEN_404] == Issue.Review.IGNORED


def test_a_mark_made_on_one_validation_reaches_the_audit_and_its_other_validations(owner, site, fast_settings):
    first_version(site)
    first = completed_audit_of(owner, site)
    older = completed_audit_of(owner, site, **follow_up_fields(first, Audit.Mode.VALIDATE))
    newer = completed_audit_of(owner, site, **follow_up_fields(first, Audit.Mode.VALIDATE))
    older.set_review(Issue.objects.filter(pk=issue(site, older, *BROKEN_404).pk), Issue.Review.IGNORED)
    assert all(reviews(site, audit)[BROKEN_404] == Issue.Review.IGNORED for audit in (first, newer))
    newer.refresh_from_db()
    assert newer.issues_critical == Issue.objects.filter(audit=newer, severity="critical").exclude(
        review=Issue.Review.IGNORED).count()
    again = completed_audit_of(owner, site)
    assert reviews(site, again)[BROKEN_404] == Issue.Review.IGNORED


def test_an_issue_a_person_reopened_stays_open_under_the_sites_ignore_rule(owner, site, fast_settings):
    """The site page says to open again from the issues table what a rule ignored: that must last."""
    first_version(site)
    first = completed_audit_of(owner, site)
    IgnoreRule.objects.create(site=first.site, code="http_4xx").apply_to(first)
    assert reviews(site, first)[BROKEN_404] == Issue.Review.IGNORED
    first.set_review(Issue.objects.filter(pk=issue(site, first, *BROKEN_404).pk), Issue.Review.OPEN)
    second = completed_audit_of(owner, site)
    assert reviews(site, second)[BROKEN_404] == Issue.Review.OPEN
    # Ignored again by hand, it is ignored again, and the rule goes on ignoring it.
    second.set_review(Issue.objects.filter(pk=issue(site, second, *BROKEN_404).pk), Issue.Review.IGNORED)
    third = completed_audit_of(owner, site)
    assert reviews(site, third)[BROKEN_404] == Issue.Review.IGNORED
    assert not issue(site, third, *BROKEN_404).reopened
