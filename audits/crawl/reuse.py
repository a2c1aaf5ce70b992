"""A delta crawl's reuse of an earlier audit: the validators to ask with, and the unchanged pages' rows.

A page the server calls unchanged (``crawler.revalidate``) is not parsed. Its
facts, outlinks and page-level issues come from the source audit's rows, and
then go through the writer like any parsed page's: the edges are written, the
link targets admitted, and the cross-page checks see a whole site. Only the
body is the source's: the checks that read the answer (status, timing,
headers) or the context (in_sitemap) are judged again on this fetch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from django.db import connection

from crawler.anchors import loaded
from crawler.catalogue import CROSS_PAGE_CODES, PAGE_AND_CROSS_CODES, START_CODES
from crawler.checks import RESPONSE_CODES, PageContext, run_response_checks
from crawler.fetch import HTML_TYPES
from crawler.page import PageOutcome, guarded_checks
from crawler.revalidate import Validators
from crawler.types import Canonical, Link, PageFacts
from crawler.urls import url_hash

from ..models import Audit, FrontierURL, Issue, Page
from ..secrets import SecretUnreadable
from ..sql import placeholders
from ..thresholds import settings_of
from .admission import LOOKUP_BATCH
from .session import site_access
from .setup import CrawlSetup, internal_test

# The issues a page's own checks reported, which an unchanged page keeps; the
# cross-page ones are for this audit's finalize to judge again.
NOT_CARRIED = CROSS_PAGE_CODES | START_CODES
# The checks that read the answer or the context: judged on this fetch. Only
# their findings about a link on the page (with a target) are the body's, and kept.
REJUDGED = frozenset(RESPONSE_CODES)
# A rendered audit's page that carries these was stored as its HTML alone.
RENDER_FAILURES = ("render_failed", "render_timeout")
# What a reused page's row takes from the source row, beside what PageFacts carries.
_PAGE_FIELDS = ["id", "url_hash", "status_code", "content_type", "size_bytes", "title", "description", "canonical",
                "h1_count", "word_count", "robots", "content_hash", "body_hash", "etag", "last_modified",
                "unchanged_since", "rendered", "raw_facts", "outlinks", "head_facts", "anchors"]


def source_of(audit: Audit) -> int | None:
    """The audit a delta crawl reuses, or None: another mode, a deleted source, or one crawled otherwise
    (``refusal``). The site's access is read again: every chunk reads it, so one changed since the
    start (logged in now, anonymous then) would see other pages than the source did."""
    if audit.mode != Audit.Mode.DELTA or audit.source_id is None:
        return None
    access = site_access(audit)
    try:
        now = access.identity() if access is not None else ""
    except SecretUnreadable:
        return None
    if now != audit.access_identity:
        return None
    return audit.source_id if refusal(audit) is None else None


def refusal(audit: Audit) -> str | None:
    """Why a delta crawl reuses nothing of its source, in words for its page; None when it may reuse it.

    The stored edges say internal or not against their audit's origin: a site
    that moved (http to https, a new host) is crawled in full. So is one crawled
    as someone else (logged in now, anonymous then), whose pages differ though a
    server may answer 304 by a page's date alone. So is one whose checks judged
    by other thresholds: its page issues would be wrong here. So is one read
    another way: rendered or not (a reused page keeps whose reading it was), as
    another user agent (servers vary pages by it), or by another version of the
    crawler (``crawler.reading``).
    """
    source = Audit.objects.filter(pk=audit.source_id, deleting=False).values(
        "origin", "access_identity", "render", "user_agent", "reading", "thresholds", "judged_by").first()
    if source is None:
        return "the audit it would reuse is deleted."
    name = f"audit {audit.source_id}"
    if source["origin"] != audit.origin:
        return f"{name} crawled the site at {source['origin']}, and it answers at {audit.origin} now."
    if source["access_identity"] != audit.access_identity:
        return f"{name} was crawled with other access to the site (another login, or none)."
    if source["render"] != audit.render:
        return f"{name} rendered pages otherwise."
    if source["user_agent"] != audit.user_agent:
        return f"{name} was crawled as another user agent."
    if source["reading"] != audit.reading:
        return f"{name} was read by another version of Siteward's crawler."
    if settings_of(source["thresholds"], source["judged_by"]) != audit.check_settings():
        return f"{name} judged pages by other thresholds."
    return None


def validators(source_id: int, hashes: list[str]) -> dict[str, Validators]:
    """Validators of the source audit's pages among ``hashes`` that answered 200 directly.

    A page that redirected or failed last time is fetched in full: there is nothing to revalidate.
    So is a page the browser rendered, or failed to: what it showed came from its scripts and
    their requests, which an unchanged HTML shell (an app's index.html) says nothing about,
    and a page stored unrendered for want of a browser is to be rendered when there is one.
    So is an HTML page without head facts (stored before they were, or not
    parsed): its meta robots cannot be told from its headers'. A page whose
    robots or canonical came from its headers is asked without the ETag and
    date: a 304 need not repeat those headers (RFC 9110 15.4.5), and an
    unchanged body still reuses the page (``body_hash``), judged on headers that say them.
    """
    found: dict[str, Validators] = {}
    unrendered = Issue.objects.filter(audit_id=source_id, code__in=RENDER_FAILURES, page__isnull=False).values("page_id")
    for start in range(0, len(hashes), LOOKUP_BATCH):
        rows = Page.objects.filter(
            audit_id=source_id, url_hash__in=hashes[start:start + LOOKUP_BATCH], kind=Page.Kind.PAGE,
            status_code=200, redirect_count=0, fetch_error="", rendered=False,
        ).exclude(etag="", last_modified="", body_hash="").exclude(
            head_facts__isnull=True, content_type__in=HTML_TYPES,
        ).exclude(
            id__in=unrendered,
        ).values_list("url_hash", "etag", "last_modified", "body_hash", "robots", "canonical", "head_facts",
                      "content_type")
        for digest, etag, modified, body, robots, canonical, head, content_type in rows:
            if _said_by_headers(robots, canonical, head):
                etag = modified = ""
            found[digest] = Validators(etag, modified, body, content_type, (head or {}).get("charset", ""))
    return found


# Directives that say what no directive says: a header sending only these changes nothing.
NEUTRAL_DIRECTIVES = frozenset({"all", "index", "follow"})


def _said_by_headers(robots: str, canonical: str, head: dict | None) -> bool:
    """Whether a stored page's robots directives or canonical came from X-Robots-Tag or a Link header."""
    head = head or {}
    if set(filter(None, robots.split(","))) - set(head.get("robots", ())) - NEUTRAL_DIRECTIVES:
        return True
    return head.get("link_canonical", False) or (bool(canonical) and not head.get("canonicals"))


@dataclass(frozen=True, slots=True)
class Carried:
    """What a reused page's row and issues take from the source audit."""

    since: int  # the audit whose parse the page carries (the source's own source, when it was reused too)
    body_hash: str
    issues: tuple[dict, ...]
    rendered: bool = False  # a rendered page's facts are the browser's, and its HTML's are kept
    raw_facts: dict | None = None
    outlinks: int = 0


def revive(audit_id: int, source_id: int, outcomes: list[PageOutcome],
           crawl: CrawlSetup) -> tuple[list[PageOutcome], dict[str, Carried]]:
    """``outcomes`` with each unchanged page's facts restored from the source audit, and the links admission needs.

    Four reads a sub-batch: the page rows, the edges admission may act on
    (``_unseen_targets``), the issues, and which pages the sitemap lists.
    A reused page's ``outlinks`` are only those edges: its stored outlink count
    is ``Carried.outlinks``, and its edges are copied by ``copy_edges``. Its
    findings are those of the checks that read this answer (``_rejudged``). An
    unchanged page whose source row is gone (a deleted audit) stays without
    facts; it is stored as fetched.
    """
    wanted = {url_hash(o.url): o for o in outcomes if o.unchanged}
    if not wanted:
        return outcomes, {}
    rows = {row["url_hash"]: row for row in Page.objects.filter(
        audit_id=source_id, url_hash__in=list(wanted)).values(*_PAGE_FIELDS)}
    links: dict[str, list[Link]] = {}
    depths = {digest: wanted[digest].depth for digest in rows}
    for digest, url, tag, text, nofollow in _unseen_targets(audit_id, source_id, depths):
        links.setdefault(digest, []).append(Link(url, tag, text, (), nofollow))
    issues: dict[int, list[dict]] = {}
    for issue in Issue.objects.filter(audit_id=source_id, page_id__in=[r["id"] for r in rows.values()]).exclude(
            code__in=NOT_CARRIED - PAGE_AND_CROSS_CODES).exclude(
            code__in=PAGE_AND_CROSS_CODES, target_url__gt="").exclude(code__in=REJUDGED, target_url="").values(
            "page_id", "url", "code", "severity", "message", "target_url", "key"):
        issues.setdefault(issue.pop("page_id"), []).append(issue)
    listed = set(FrontierURL.objects.filter(audit_id=audit_id, url_hash__in=list(rows), in_sitemap=True)
                 .values_list("url_hash", flat=True))
    carried: dict[str, Carried] = {}
    revived = []
    for o in outcomes:
        digest = url_hash(o.url)
        row = rows.get(digest) if o.unchanged else None
        if row is None:
            revived.append(o)
            continue
        revived.append(_rejudged(_revived(o, row, tuple(links.get(digest, ()))), crawl, digest in listed))
        carried[digest] = Carried(row["unchanged_since"] or source_id, row["body_hash"],
                                  tuple(issues.get(row["id"], ())), row["rendered"], row["raw_facts"],
                                  row["outlinks"])
    return revived, carried


# A reused page's edges: admission is handed only those whose target this
# audit's frontier has not linked, or holds deeper than the source's depth + 1.
# Most of a page's links (navigation, footers) were queued long before, so the
# frontier is joined by its unique key in the database and only the rest leave it.
SOURCE_EDGES_SQL = """
    SELECT e.id, e.source_hash, e.target_url, e.tag, e.anchor_text, e.nofollow, f.linked, f.depth
    FROM audits_linkedge e
    LEFT JOIN audits_frontierurl f ON f.audit_id = %s AND f.url_hash = e.target_hash
    WHERE e.audit_id = %s AND e.source_hash IN ({sources}) AND (f.id IS NULL OR NOT f.linked OR f.depth > %s)
"""
# The reused pages' edges, copied in the database as they were.
COPY_EDGES_SQL = """
    INSERT INTO audits_linkedge (audit_id, source_hash, source_url, target_hash, target_url, tag, anchor_text,
                                 nofollow, internal, fragments)
    SELECT %s, source_hash, source_url, target_hash, target_url, tag, anchor_text, nofollow, internal, fragments
    FROM audits_linkedge WHERE audit_id = %s AND source_hash IN ({sources})
"""


def _unseen_targets(audit_id: int, source_id: int, depths: dict[str, int]) -> list[tuple]:
    """(source hash, target URL, tag, anchor, nofollow) of the sources' edges admission may act on, in written order.

    ``depths``: each source's depth in this audit. Besides targets not yet
    linked, an edge to one queued deeper than the source's depth + 1 is kept:
    admission then gives the target the shorter path.
    """
    sources = list(depths)
    edges = []
    with connection.cursor() as cursor:
        for start in range(0, len(sources), LOOKUP_BATCH):
            part = sources[start:start + LOOKUP_BATCH]
            nearest = min(depths[source] for source in part) + 1
            cursor.execute(SOURCE_EDGES_SQL.format(sources=placeholders(len(part))),
                           [audit_id, source_id, *part, nearest])
            for *edge, linked, depth in cursor.fetchall():
                if not linked or depth > depths[edge[1]] + 1:
                    edges.append(edge)
    # Admission takes a target's first offer: the order the source audit wrote them in.
    edges.sort()
    return [tuple(edge[1:]) for edge in edges]


def copy_edges(audit_id: int, source_id: int, sources: list[str]) -> None:
    """Copy the source audit's edges of ``sources`` (reused pages) into this audit."""
    with connection.cursor() as cursor:
        for start in range(0, len(sources), LOOKUP_BATCH):
            part = sources[start:start + LOOKUP_BATCH]
            cursor.execute(COPY_EDGES_SQL.format(sources=placeholders(len(part))), [audit_id, source_id, *part])


def _revived(o: PageOutcome, row: dict, outlinks: tuple[Link, ...]) -> PageOutcome:
    """``o`` with the source row's status, type, size and facts: none for a row that had none (not HTML).

    The robots directives and canonicals are the HTML's alone (``head_facts``):
    the writer adds this answer's X-Robots-Tag and Link header to them, as for
    a parsed page.
    """
    head = row["head_facts"]
    facts = None
    if head is not None:
        facts = PageFacts(
            title=row["title"] or None, descriptions=(row["description"],) if row["description"] else (),
            robots=frozenset(head.get("robots", ())),
            canonicals=tuple(Canonical(url, in_head) for url, in_head in head.get("canonicals", ())),
            h1_count=row["h1_count"], word_count=row["word_count"], content_hash=row["content_hash"],
            base_url=head.get("base", ""), anchors=loaded(row["anchors"]),
        )
    # The page is what it was: its status, type, charset and size; the validators of
    # this answer when it sent new ones (a 304 may), else the stored ones.
    headers = {"etag": row["etag"], "last-modified": row["last_modified"], **dict(o.result.headers)}
    if o.result.status == 304:
        # Present as they were unless the 304 says them again; their values are not kept, only that they were sent.
        for name in (head or {}).get("kept", ()):
            headers.setdefault(name, "")
    result = dataclasses.replace(o.result, status=row["status_code"], content_type=row["content_type"],
                                 charset=(head or {}).get("charset") or None, size=row["size_bytes"], headers=headers)
    return dataclasses.replace(o, result=result, facts=facts, outlinks=outlinks)


def _rejudged(o: PageOutcome, crawl: CrawlSetup, in_sitemap: bool) -> PageOutcome:
    """A revived ``o`` with the findings of the checks that read this answer or the context (REJUDGED)."""
    ctx = PageContext(crawl.checks, internal_test(crawl.scope), in_sitemap=in_sitemap)
    findings, problem = guarded_checks(run_response_checks, o.result, o.facts, ctx)
    return dataclasses.replace(o, findings=findings, problem=problem or o.problem)
