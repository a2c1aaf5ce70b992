"""Issues on their way into the table, from the crawl and from finalize alike.

An issue is unique per audit on a stable key, so writing the same one twice (a
retried chunk, a re-run finalize) leaves one row: inserts ignore conflicts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from django.utils import timezone

from crawler.types import Finding
from crawler.urls import url_hash

from .models import Issue
from .sql import db_datetime, insert_rows


def issue_key(code: str, url: str, target: str | None = None, extra: str = "") -> str:
    """What makes an issue the same issue in a retry, a re-run and the next audit of the site."""
    raw = "\x1f".join((code, url, target or "", extra))
    return hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def issue_for(audit_id: int, page_id: int | None, url: str, finding: Finding, key: str | None = None) -> Issue:
    """The unsaved row for ``finding`` on ``url``.

    ``key`` replaces the default stable key when a check keys its issues on
    more than the code, URL, target and message.
    """
    if key is None:
        key = issue_key(finding.code, url, finding.target_url, finding.variant)
    return Issue(
        audit_id=audit_id, page_id=page_id, url=url, url_hash=url_hash(url), code=finding.code, severity=finding.severity.value,
        message=finding.message[:2000], target_url=finding.target_url or "", key=key,
    )


ISSUE_COLUMNS = ["audit_id", "page_id", "url", "url_hash", "code", "severity", "message", "target_url", "key", "review",
                 "change", "created_at"]


def insert_issues(issues: Iterable[Issue]) -> None:
    """Insert ``issues``, ignoring the ones whose key the audit has already."""
    now = db_datetime(timezone.now())
    insert_rows(Issue, ISSUE_COLUMNS, [
        (i.audit_id, i.page_id, i.url, i.url_hash, i.code, i.severity, i.message, i.target_url, i.key, i.review, i.change, now)
        for i in issues
    ])
