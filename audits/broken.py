"""Broken links by target: one row per dead URL, with how many pages link to it and from where.

A broken-link issue is one row per (source page, target, anchor text), so a
site with one dead page linked from its footer has as many issues as pages.
People fix targets, not rows: this groups the audit's broken_link_internal and
broken_link_external issues by target_url in SQL (GROUP BY over the (audit,
code) index), and decorates only the rows on screen (or one batch of an export)
with two more queries: the targets' Page rows for their status or failure, and
the first few sources of each target.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models import Count, Min, Q, QuerySet

from crawler.types import FetchError
from crawler.urls import url_hash

from .models import Issue, Page
from .sql import placeholders

INTERNAL = "broken_link_internal"
EXTERNAL = "broken_link_external"
SCOPES = {"internal": INTERNAL, "external": EXTERNAL}
SCOPE_OF = {code: scope for scope, code in SCOPES.items()}

# Whitelisted orders of the targets table (tables.sort_choice); the URL breaks
# ties so a page of the table is the same on every request.
TARGET_SORTS = {
    "-sources": ["-sources", "target_url"],
    "sources": ["sources", "target_url"],
    "url": ["target_url"],
    "-url": ["-target_url"],
}

# The first few sources of each target of a batch, in URL order, ignored links
# left out as in broken_issues. Grouped by (target, source) before numbering: a
# source linking twice to a target (two anchors) is two issues but one linking
# page. ROW_NUMBER() is in SQLite from 3.25 and in every PostgreSQL Django supports.
FIRST_SOURCES_SQL = """
    SELECT target_url, url, page_id FROM (
        SELECT target_url, url, page_id,
               ROW_NUMBER() OVER (PARTITION BY target_url ORDER BY url) AS n
        FROM (SELECT target_url, url, MIN(page_id) AS page_id FROM audits_issue
              WHERE audit_id = %s AND code IN (%s, %s) AND review <> %s AND target_url IN ({targets})
              GROUP BY target_url, url) AS linking
    ) AS ranked
    WHERE n <= %s
    ORDER BY target_url, n
"""


def broken_issues(audit) -> QuerySet[Issue]:
    # Ignored links are left out, as from the audit's totals (audits.summary): a
    # person dismissed them (one by one or by a site's ignore rule), so they are
    # not work to do. Reviewed ones stay: acknowledged is not fixed.
    return Issue.objects.filter(audit=audit, code__in=(INTERNAL, EXTERNAL)).exclude(review=Issue.Review.IGNORED)


def targets(audit, *, scope: str = "", q: str = "") -> QuerySet:
    """One dict per broken target: target_url, code, sources (distinct linking pages) and links (issue rows).

    ``scope`` is "internal" or "external" (anything else means both); ``q`` a
    case-insensitive substring of the target URL. Unordered: callers order by
    one of TARGET_SORTS.
    """
    issues = broken_issues(audit)
    if scope in SCOPES:
        issues = issues.filter(code=SCOPES[scope])
    if q:
        issues = issues.filter(target_url__icontains=q)
    return issues.values("target_url", "code").annotate(sources=Count("url", distinct=True), links=Count("id"))


def totals(audit) -> dict:
    """How many targets are dead, inside and outside the site, and how many pages link to one."""
    return broken_issues(audit).aggregate(
        internal=Count("target_url", distinct=True, filter=Q(code=INTERNAL)),
        external=Count("target_url", distinct=True, filter=Q(code=EXTERNAL)),
        pages=Count("url", distinct=True),
    )


def describe(audit, rows: Iterable[dict], *, preview: int) -> list[dict]:
    """``rows`` from ``targets()`` with each target's fetch result and its first ``preview`` sources.

    Two queries whatever the number of rows: keep the batch to a few hundred
    targets (the window on screen, one chunk of an export).
    """
    rows = [dict(row) for row in rows]
    if not rows:
        return rows
    hashes = {url_hash(row["target_url"]): row for row in rows}
    for row in rows:
        row.update(scope=SCOPE_OF.get(row["code"], ""), page_id=None, status_code=None, redirected=False,
                   fetch_error="", fetch_error_detail="", sources_preview=[])
    # The target's own row: the unique (audit, url_hash) index, one lookup for all.
    fetched = Page.objects.filter(audit=audit, url_hash__in=list(hashes)).values_list(
        "url_hash", "id", "status_code", "redirect_count", "fetch_error", "fetch_error_detail")
    for digest, page_id, status, redirects, error, detail in fetched:
        hashes[digest].update(page_id=page_id, status_code=status, redirected=bool(redirects),
                              fetch_error=error, fetch_error_detail=detail)
    for row in rows:
        row["failure"] = failure_text(row["fetch_error"], row["fetch_error_detail"])
    by_target = {row["target_url"]: row for row in rows}
    sql = FIRST_SOURCES_SQL.format(targets=placeholders(len(by_target)))
    with connection.cursor() as cursor:
        cursor.execute(sql, [audit.pk, INTERNAL, EXTERNAL, Issue.Review.IGNORED.value, *by_target, preview])
        for target, source, page_id in cursor.fetchall():
            by_target[target]["sources_preview"].append({"url": source, "page_id": page_id})
    return rows


def failure_text(error: str, detail: str = "") -> str:
    """A fetch error in words ("Host name could not be resolved: …"), empty when there was none."""
    if not error:
        return ""
    try:
        label = FetchError(error).label
    except ValueError:
        label = error
    return f"{label}: {detail}" if detail and detail != label else label


def sources(audit, target_url: str) -> QuerySet:
    """Every page linking to ``target_url``, one dict each (url, page_id, links), in URL order.

    Paginate it (tables.window): a dead footer link on a big site has
    thousands of sources.
    """
    return (
        broken_issues(audit).filter(target_url=target_url)
        .values("url").annotate(page_id=Min("page_id"), links=Count("id")).order_by("url")
    )
