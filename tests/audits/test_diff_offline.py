"""A run made offline cannot say a broken external link was fixed: it is unknown."""

import pytest

from audits import diff
from audits.models import GoneIssue
from tests.factories import SITE, make_finished_audit, make_issue

pytestmark = pytest.mark.django_db

DEAD = "https://gone.example.org/page"


def two_runs(owner, *, offline: bool):
    before = make_finished_audit(owner)
    make_issue(before, "broken_link_external", f"{SITE}/", target_url=DEAD, key="ext")
    after = make_finished_audit(owner)  # its home page answered again; the link was not reported
    if offline:
        make_issue(after, "external_links_unchecked", f"{SITE}/", key="offline")
    diff.record(after)
    return GoneIssue.objects.get(audit=after, key="ext")


def test_a_broken_external_link_missing_from_an_offline_run_is_unknown_not_fixed(owner):
    assert two_runs(owner, offline=True).change == "unknown"


def test_a_broken_external_link_missing_from_a_connected_run_is_fixed(owner):
    assert two_runs(owner, offline=False).change == "fixed"
