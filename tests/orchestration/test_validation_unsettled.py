"""The unknown verdicts that fail a validation's gate (``validation.unsettled``), counted from the stored verdicts
alone, and the checklist's whys that read the robots.txt the validation crawled by, parsed once a checklist."""

from __future__ import annotations

import protego
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits import validation
from audits.models import Audit, Issue, RecheckedIssue
from audits.services import follow_up_fields
from crawler.urls import url_hash
from tests.factories import SITE, make_audit, make_issue

pytestmark = pytest.mark.django_db


def verdict(check: Audit, result: str, code: str, path: str, severity: str, target: str = "") -> RecheckedIssue:
    url = f"{SITE}{path}"
    return RecheckedIssue.objects.create(audit=check, result=result, key=url_hash(f"{code}|{url}|{target}"),
                                         url_hash=url_hash(url), url=url, code=code, severity=severity,
                                         message=code, target_url=target)


@pytest.fixture
def check(owner) -> Audit:
    """A validation whose robots.txt now keeps /private out, with a verdict of every kind the gate tells apart."""
    source = make_audit(owner, status=Audit.Status.COMPLETED)
    check = make_audit(owner, **follow_up_fields(source, Audit.Mode.VALIDATE))
    Audit.objects.filter(pk=check.pk).update(status=Audit.Status.COMPLETED, respect_robots=True, robots_status="ok",
                                             robots_http_status=200, robots_body="User-agent: *\nDisallow: /private\n")
    check.refresh_from_db()
    for n in range(3):  # its re-check could not run: robots.txt now refuses the URL
        verdict(check, "unknown", "http_4xx", f"/private/{n}", "critical")
    verdict(check, "unknown", "canonical_bad_target", "/a", "critical", target=f"{SITE}/b")  # across the site
    verdict(check, "unknown", "hreflang_error", "/a", "warning")  # the page's own tags: its page check's
    verdict(check, "unknown", "hreflang_error", "/a", "warning", target=f"{SITE}/fr")  # a return link: site-wide
    verdict(check, "fixed", "http_4xx", "/c", "critical")
    verdict(check, "still", "http_4xx", "/d", "critical")
    ignored = verdict(check, "unknown", "http_4xx", "/private/ignored", "critical")
    make_issue(check, "http_4xx", ignored.url, key=ignored.key, review=Issue.Review.IGNORED)  # ignored since
    return check


@pytest.mark.parametrize(("severities", "expected"), [
    (["critical"], 3), (["critical", "warning"], 4), (["warning"], 1), (["notice"], 0), ([], 0),
])
def test_it_counts_the_unknowns_a_validation_could_have_settled_as_the_checklist_reads_them(check, severities,
                                                                                           expected):
    assert validation.unsettled(check, severities) == expected
    # The very ones the checklist shows unknown and not across the whole site.
    assert expected == sum(1 for v in validation.verdicts(check)
                           if v.result == "unknown" and v.severity in severities and not v.spans_site)


def test_it_counts_them_in_one_statement_over_the_stored_verdicts(check):
    """No pass over the verdicts' whys: those look up each URL's page and read the stored robots.txt."""
    with CaptureQueriesContext(connection) as ctx:
        assert validation.unsettled(check, ["critical"]) == 3
    (query,) = ctx.captured_queries
    assert "audits_recheckedissue" in query["sql"] and "audits_page" not in query["sql"]


def test_a_full_audit_has_nothing_unsettled(owner):
    audit = make_audit(owner, status=Audit.Status.COMPLETED)
    with CaptureQueriesContext(connection) as ctx:
        assert validation.unsettled(audit, ["critical"]) == 0
    assert not ctx.captured_queries


def test_the_checklist_parses_the_robots_txt_it_was_crawled_by_once(check, monkeypatch):
    """Not once a batch of verdicts: a robots.txt may be 512 KB, and a re-check of 100,000 issues is 50 batches."""
    parsed = []
    real = protego.Protego.parse

    def counted(content):
        parsed.append(content)
        return real(content)

    monkeypatch.setattr(protego.Protego, "parse", counted)
    monkeypatch.setattr(validation, "FETCH_BATCH", 1)
    whys = [v.why for v in validation.verdicts(check) if v.url.startswith(f"{SITE}/private/")]
    assert whys == ["robots.txt now disallows this URL: it was not fetched this time."] * 3
    assert len(parsed) == 1
