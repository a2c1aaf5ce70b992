"""A delta crawl's reuse of an earlier audit: the validators to ask with, and the unchanged pages' rows.

A page the server calls unchanged (``crawler.revalidate``) is not parsed. Its
facts, outlinks and page-level issues come from the source audit's rows, and
then go through the writer like any parsed page's: the edges are written, the
link targets admitted, and the cross-page checks see a whole site.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from crawler.catalogue import CROSS_PAGE_CODES, START_CODES
from crawler.page import PageOutcome
from crawler.revalidate import Validators
from crawler.types import Canonical, Link, PageFacts
from crawler.urls import url_hash

from ..models import Audit, Issue, LinkEdge, Page
from .admission import LOOKUP_BATCH

# The issues a page's own checks reported, which an unchanged page keeps; the
# cross-page ones are for this audit's finalize to judge again.
NOT_CARRIED = CROSS_PAGE_CODES | START_CODES
# What a reused page's row takes from the source row, beside what PageFacts carries.
_PAGE_FIELDS = ["id", "url_hash", "status_code", "content_type", "size_bytes", "title", "description", "canonical",
                "h1_count", "word_count", "robots", "content_hash", "body_hash", "etag", "last_modified",
                "unchanged_since", "rendered", "raw_facts"]


def source_of(audit: Audit) -> int | None:
    """The audit a delta crawl reuses, or None (another mode, or its source was deleted)."""
    return audit.source_id if audit.mode == Audit.Mode.DELTA else None


def validators(source_id: int, hashes: list[str]) -> dict[str, Validators]:
    """Validators of the source audit's pages among ``hashes`` that answered 200 directly.

    A page that redirected or failed last time is fetched in full: there is nothing to revalidate.
    """
    found: dict[str, Validators] = {}
    for start in range(0, len(hashes), LOOKUP_BATCH):
        rows = Page.objects.filter(
            audit_id=source_id, url_hash__in=hashes[start:start + LOOKUP_BATCH], kind=Page.Kind.PAGE,
            status_code=200, redirect_count=0, fetch_error="",
        ).exclude(etag="", last_modified="", body_hash="").values_list("url_hash", "etag", "last_modified", "body_hash")
        found.update((digest, Validators(etag, modified, body)) for digest, etag, modified, body in rows)
    return found


@dataclass(frozen=True, slots=True)
class Carried:
    """What a reused page's row and issues take from the source audit."""

    since: int  # the audit whose parse the page carries (the source's own source, when it was reused too)
    body_hash: str
    issues: tuple[dict, ...]
    rendered: bool = False  # a rendered page's facts are the browser's, and its HTML's are kept
    raw_facts: dict | None = None


def revive(source_id: int, outcomes: list[PageOutcome]) -> tuple[list[PageOutcome], dict[str, Carried]]:
    """``outcomes`` with each unchanged page's facts and outlinks restored from the source audit.

    Three reads a sub-batch: the page rows, their edges, their issues. An
    unchanged page whose source row is gone (a deleted audit) stays without
    facts; it is stored as fetched.
    """
    wanted = {url_hash(o.url): o for o in outcomes if o.unchanged}
    if not wanted:
        return outcomes, {}
    rows = {row["url_hash"]: row for row in Page.objects.filter(
        audit_id=source_id, url_hash__in=list(wanted)).values(*_PAGE_FIELDS)}
    links: dict[str, list[Link]] = {}
    edges = LinkEdge.objects.filter(audit_id=source_id, source_hash__in=list(rows)).order_by("id")
    for digest, url, tag, text, nofollow in edges.values_list("source_hash", "target_url", "tag", "anchor_text",
                                                              "nofollow"):
        links.setdefault(digest, []).append(Link(url, tag, text, (), nofollow))
    issues: dict[int, list[dict]] = {}
    for issue in Issue.objects.filter(audit_id=source_id, page_id__in=[r["id"] for r in rows.values()]).exclude(
            code__in=NOT_CARRIED).values("page_id", "url", "code", "severity", "message", "target_url", "key"):
        issues.setdefault(issue.pop("page_id"), []).append(issue)
    carried: dict[str, Carried] = {}
    revived = []
    for o in outcomes:
        digest = url_hash(o.url)
        row = rows.get(digest) if o.unchanged else None
        if row is None:
            revived.append(o)
            continue
        revived.append(_revived(o, row, tuple(links.get(digest, ()))))
        carried[digest] = Carried(row["unchanged_since"] or source_id, row["body_hash"],
                                  tuple(issues.get(row["id"], ())), row["rendered"], row["raw_facts"])
    return revived, carried


def _revived(o: PageOutcome, row: dict, outlinks: tuple[Link, ...]) -> PageOutcome:
    facts = PageFacts(
        title=row["title"] or None, descriptions=(row["description"],) if row["description"] else (),
        robots=frozenset(filter(None, row["robots"].split(","))),
        canonicals=(Canonical(row["canonical"]),) if row["canonical"] else (),
        h1_count=row["h1_count"], word_count=row["word_count"], content_hash=row["content_hash"],
    )
    # The page is what it was: its status, type and size; the validators of
    # this answer when it sent new ones (a 304 may), else the stored ones.
    headers = {"etag": row["etag"], "last-modified": row["last_modified"], **dict(o.result.headers)}
    result = dataclasses.replace(o.result, status=row["status_code"], content_type=row["content_type"],
                                 size=row["size_bytes"], headers=headers)
    return dataclasses.replace(o, result=result, facts=facts, outlinks=outlinks)
