"""Delta mode: a full crawl that asks the site what changed since an earlier audit and parses only that."""

from __future__ import annotations

import dataclasses

import pytest

import crawler.page
from audits import thresholds
from audits.crawl import reuse
from audits.inline import run_audit_inline
from audits.models import Audit, Issue, LinkEdge, Page
from crawler.reading import reading
from tests.factories import make_audit
from tests.versioned_site import VersionedSite

pytestmark = pytest.mark.django_db

CHANGED = (3, 57, 120, 121, 199)


@pytest.fixture
def parses(monkeypatch):
    """The URLs whose HTML the crawl parsed, in this process."""
    seen: list[str] = []
    real = crawler.page.parse_html

    def counting(body, url, **kwargs):
        seen.append(url)
        return real(body, url, **kwargs)

    monkeypatch.setattr(crawler.page, "parse_html", counting)
    return seen


def audit_of(owner, site, **fields) -> Audit:
    audit = make_audit(owner, start_url=site.url(), allow_private=True, check_external=False, max_pages=1000,
                       max_depth=50, **fields)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


def facts(audit: Audit) -> dict:
    """What an audit says about the site, without what differs by run (ids, timings, reuse marks)."""
    pages = {p["url"]: p for p in Page.objects.filter(audit=audit).values(
        "url", "kind", "status_code", "title", "description", "canonical", "h1_count", "word_count", "indexable",
        "content_hash", "depth", "inlinks", "outlinks", "in_sitemap", "etag", "last_modified", "body_hash")}
    # slow_response is a timing too: each audit judges it on its own fetch.
    issues = set(Issue.objects.filter(audit=audit).exclude(code="slow_response")
                 .values_list("key", "code", "url", "target_url", "severity"))
    edges = sorted(LinkEdge.objects.filter(audit=audit).values_list("source_url", "target_url", "tag", "anchor_text"))
    return {"pages": pages, "issues": issues, "edges": edges}


@pytest.mark.parametrize("validators", ["etag", "date", "none"])
def test_a_delta_audit_parses_exactly_the_changed_pages_and_matches_a_full_audit(
        owner, fast_settings, parses, validators):
    with VersionedSite(200, validators=validators) as site:
        first = audit_of(owner, site)
        for n in CHANGED:
            site.bump(n)
        site.reset_counts()
        parses.clear()
        delta = audit_of(owner, site, mode=Audit.Mode.DELTA, source=first)
        delta_parses = sorted(parses)
        answered_in_full = dict(site.full)
        full = audit_of(owner, site)

    changed = {site.url(f"/p/{n}") for n in CHANGED}
    # The home page is the start step's, fetched in full every time.
    assert set(delta_parses) == changed | {site.url()}
    reused = dict(Page.objects.filter(audit=delta, kind=Page.Kind.PAGE, status_code=200)
                  .values_list("url", "unchanged_since"))
    assert {url for url, since in reused.items() if since is None} == changed | {site.url()}
    assert {since for since in reused.values() if since is not None} == {first.pk}
    if validators != "none":
        # Answered 304 without a body: only the changed pages (and the start page) came in full.
        assert set(answered_in_full) == {f"/p/{n}" for n in CHANGED} | {"/p/0"}
    # A whole, correct audit: the same pages, issues and links as a full crawl of the site as it is now.
    assert facts(delta) == facts(full)
    described = Issue.objects.filter(audit=delta, code="meta_description_missing")
    assert described.count() == 200 - len(CHANGED)


def test_a_delta_of_a_delta_says_since_which_audit_the_page_is_unchanged(owner, fast_settings, owner_client):
    with VersionedSite(30) as site:
        first = audit_of(owner, site)
        delta = audit_of(owner, site, mode=Audit.Mode.DELTA, source=first)
        second = audit_of(owner, site, mode=Audit.Mode.DELTA, source=delta)
    for audit in (delta, second):
        since = Page.objects.filter(audit=audit, kind=Page.Kind.PAGE, status_code=200).exclude(url=site.url())
        assert set(since.values_list("unchanged_since", flat=True)) == {first.pk}
        assert since.count() == 29
    body = owner_client.get(since.first().get_absolute_url()).content.decode()
    assert 'id="page-unchanged"' in body and f"since audit <a href=\"/audits/{first.pk}/\">{first.pk}</a>" in body
    body = owner_client.get(second.get_absolute_url()).content.decode()
    assert "29 pages unchanged since audit" in body


def test_a_delta_audit_whose_source_was_deleted_crawls_everything_in_full(owner, fast_settings):
    with VersionedSite(30) as site:
        first = audit_of(owner, site)
        delta = make_audit(owner, start_url=site.url(), allow_private=True, check_external=False,
                           mode=Audit.Mode.DELTA, source=first)
        first.delete()
        site.reset_counts()
        run_audit_inline(delta.pk)
        assert sum(site.full.values()) == 30 and not site.not_modified
    delta.refresh_from_db()
    assert delta.status == Audit.Status.COMPLETED
    assert not Page.objects.filter(audit=delta).exclude(unchanged_since=None).exists()


def test_a_delta_audit_of_a_site_that_moved_crawls_everything_in_full(owner, fast_settings):
    with VersionedSite(10) as site:
        first = audit_of(owner, site)
        # As if the site had answered on another origin then (http, before its move to https).
        Audit.objects.filter(pk=first.pk).update(origin="https://elsewhere.example")
        site.reset_counts()
        delta = audit_of(owner, site, mode=Audit.Mode.DELTA, source=first)
        assert not site.not_modified
    assert not Page.objects.filter(audit=delta).exclude(unchanged_since=None).exists()
    assert reuse.refusal(delta) == f"audit {first.pk} crawled the site at https://elsewhere.example, " \
                                   f"and it answers at {delta.origin} now."


def test_a_delta_audit_whose_source_another_crawler_version_read_crawls_everything_in_full(
        owner, fast_settings, owner_client):
    """After an upgrade that reads pages otherwise (a new check, other default thresholds), reused
    pages would keep the old reading's links and issues: none is reused until a crawl reads them anew."""
    with VersionedSite(10) as site:
        first = audit_of(owner, site)
        assert first.reading == reading()
        Audit.objects.filter(pk=first.pk).update(reading="0" * 16)  # as an older release stored it
        site.reset_counts()
        delta = audit_of(owner, site, mode=Audit.Mode.DELTA, source=first)
        assert not site.not_modified and sum(site.full.values()) == 10
        again = audit_of(owner, site, mode=Audit.Mode.DELTA, source=delta)
    assert not Page.objects.filter(audit=delta).exclude(unchanged_since=None).exists()
    assert Page.objects.filter(audit=again).exclude(unchanged_since=None).count() == 9
    # The delta's page says why it reused nothing; the next one has nothing to explain.
    body = owner_client.get(delta.get_absolute_url()).content.decode()
    assert f"Every page was fetched in full: audit {first.pk} was read by another version" in body
    assert 'id="reuse-refusal"' not in owner_client.get(again.get_absolute_url()).content.decode()


def test_a_delta_audit_after_an_upgrade_that_changed_a_default_threshold_crawls_everything_in_full(
        owner, fast_settings, owner_client, monkeypatch):
    """Neither audit set the threshold: the source judged by the old default (Audit.judged_by), the delta by the
    new one, so a reused page's issues would be the old default's. Compared by what each judges by, not by the
    overrides each stored (none)."""
    with VersionedSite(10) as site:
        first = audit_of(owner, site)
        assert first.thresholds == {} and first.judged_by["title_max"] == 60
        monkeypatch.setattr(thresholds, "DEFAULTS", dataclasses.replace(thresholds.DEFAULTS, title_max=70))
        site.reset_counts()
        delta = audit_of(owner, site, mode=Audit.Mode.DELTA, source=first)
        assert not site.not_modified and sum(site.full.values()) == 10
        again = audit_of(owner, site, mode=Audit.Mode.DELTA, source=delta)
    assert delta.thresholds == {} and delta.check_settings().title_max == 70
    assert reuse.refusal(delta) == f"audit {first.pk} judged pages by other thresholds."
    assert reuse.source_of(delta) is None
    assert not Page.objects.filter(audit=delta).exclude(unchanged_since=None).exists()
    # Both judged by the new default: the next delta reuses what did not change.
    assert reuse.refusal(again) is None
    assert Page.objects.filter(audit=again).exclude(unchanged_since=None).count() == 9
    body = owner_client.get(delta.get_absolute_url()).content.decode()
    assert f"Every page was fetched in full: audit {first.pk} judged pages by other thresholds." in body
