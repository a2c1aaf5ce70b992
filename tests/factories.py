"""Builders for test rows, written directly (no crawler needed), and a finished audit made of them."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from audits.inline import run_audit_inline
from audits.models import Audit, Issue, LinkEdge, Page
from audits.services import new_audit
from crawler.catalogue import CATALOGUE
from crawler.urls import url_hash

SITE = "https://shop.example"


def make_audit(owner, **fields) -> Audit:
    """An audit row on the owner's site for its start URL, as the form would make it (nothing enqueued)."""
    fields.setdefault("start_url", f"{SITE}/")
    return new_audit(owner, **fields)


def completed_audit(owner, **fields) -> Audit:
    """``make_audit``, crawled here and now (``run_audit_inline``); it must complete."""
    audit = make_audit(owner, **fields)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    return audit


def make_page(audit, url=f"{SITE}/", **fields) -> Page:
    fields.setdefault("status_code", 200)
    fields.setdefault("content_type", "text/html")
    fields.setdefault("final_url", url)
    return Page.objects.create(audit=audit, url=url, url_hash=url_hash(url), **fields)


def make_issue(audit, code, url, *, page=None, target_url="", message=None, key=None, **fields) -> Issue:
    fields.setdefault("severity", CATALOGUE[code].severity.value)
    return Issue.objects.create(
        audit=audit, page=page, url=url, url_hash=url_hash(url), code=code, target_url=target_url,
        message=message or CATALOGUE[code].title, key=key or url_hash(f"{code}|{url}|{target_url}"), **fields,
    )


def make_link(audit, source, target, *, anchor="", tag="a", internal=True) -> LinkEdge:
    return LinkEdge.objects.create(
        audit=audit, source_hash=url_hash(source),
        source_url=source, target_hash=url_hash(target), target_url=target, tag=tag, anchor_text=anchor,
        internal=internal,
    )


def make_finished_audit(owner, *, status=Audit.Status.COMPLETED, **fields) -> Audit:
    """An audit with a home page, a few good pages, a 404, a redirect, issues and links.

    Counters match the rows, as the crawl would leave them.
    """
    now = timezone.now()
    audit = make_audit(
        owner, status=status, phase=Audit.Phase.DONE if status == Audit.Status.COMPLETED else Audit.Phase.CRAWLING,
        started_at=now - timedelta(seconds=90), finished_at=now, origin=SITE, **fields,
    )
    home = make_page(audit, f"{SITE}/", title="Shop home page with a decent title", depth=0, total_ms=120,
                     word_count=400, h1_count=1, indexable=True, outlinks=4)
    about = make_page(audit, f"{SITE}/about", title="About us", depth=1, total_ms=320, inlinks=1)
    make_page(audit, f"{SITE}/blog/", title="Blog", depth=1, total_ms=700, inlinks=1)
    gone = make_page(audit, f"{SITE}/gone", status_code=404, depth=1, total_ms=40, inlinks=2, title="Not found")
    make_page(audit, f"{SITE}/old", status_code=200, depth=1, total_ms=1500, final_url=f"{SITE}/about",
              redirect_chain=[[f"{SITE}/old", 301, f"{SITE}/about"]])
    make_page(audit, f"{SITE}/style.css", kind=Page.Kind.RESOURCE, content_type="text/css", depth=1)
    make_page(audit, "https://elsewhere.example/dead", kind=Page.Kind.EXTERNAL, status_code=None,
              fetch_error="dns_failure", fetch_error_detail="elsewhere.example does not exist", depth=1)

    make_link(audit, home.url, about.url, anchor="About")
    make_link(audit, home.url, f"{SITE}/blog/", anchor="Blog")
    make_link(audit, home.url, gone.url, anchor="Gone away")
    make_link(audit, about.url, gone.url, anchor="Old link")
    make_link(audit, home.url, "https://elsewhere.example/dead", anchor="Partner", internal=False)

    make_issue(audit, "http_4xx", gone.url, page=gone, message="The page answered 404")
    make_issue(audit, "broken_link_internal", home.url, page=home, target_url=gone.url,
               message="Link to a page that answers 404")
    make_issue(audit, "broken_link_internal", about.url, page=about, target_url=gone.url,
               message="Link to a page that answers 404")
    make_issue(audit, "meta_description_missing", home.url, page=home)
    make_issue(audit, "title_length", about.url, page=about, message="Title is 8 characters long")
    Audit.objects.filter(pk=audit.pk).update(
        pages_crawled=7, pages_discovered=7, issues_critical=3, issues_warning=1, issues_notice=1,
    )
    audit.refresh_from_db()
    return audit
