"""Small builders for test rows (plain functions: the models are simple enough)."""

import hashlib

from audits.models import Audit, Issue, Page


def make_audit(owner, **fields) -> Audit:
    fields.setdefault("start_url", "https://example.com/")
    return Audit.objects.create(owner=owner, **fields)


def make_page(audit, url="https://example.com/", **fields) -> Page:
    fields.setdefault("status_code", 200)
    fields.setdefault("content_type", "text/html")
    return Page.objects.create(audit=audit, url=url, url_hash=hashlib.blake2b(url.encode(), digest_size=16).hexdigest(), final_url=url, **fields)


def make_issue(audit, page=None, code="title_missing", key=None, **fields) -> Issue:
    from crawler.catalogue import CATALOGUE

    url = page.url if page else "https://example.com/"
    fields.setdefault("severity", CATALOGUE[code].severity.value)
    fields.setdefault("message", CATALOGUE[code].title)
    return Issue.objects.create(audit=audit, page=page, url=url, code=code,
                                key=key or f"{code}-{url}"[:32], **fields)
