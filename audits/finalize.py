"""Cross-page checks, run once the crawl is over, as set-based SQL over pages and links.

Each check is one query that returns the rows to report; issues are written in
batches with insert-or-ignore on their stable key, so running finalize twice
(django-q2 redelivers, the watchdog re-enqueues) reports everything once. The SQL
runs unchanged on SQLite and PostgreSQL (SQLite before 3.33 counts inlinks with
the help of Python: _count_inlinks_here).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from functools import lru_cache

from django.conf import settings
from django.db import connection, transaction
from django.db.models import CharField, F, Q, Value
from django.db.models.functions import Concat

from crawler.catalogue import finding
from crawler.soft404 import says_not_found
from crawler.types import NOT_SITE_FAULTS, FetchError, is_unverified
from crawler.urls import InvalidURL, normalize, url_hash

from . import depths, diff, notices
from .issue_rows import insert_issues, issue_for, issue_key
from .missing_anchors import missing_anchors
from .models import Audit, FrontierURL, Issue, Page, Severity
from .sql import placeholders, stream_rows

log = logging.getLogger(__name__)

BATCH = 1000


# Every link to a target page that is broken or redirects, from one pass over
# the audit's edges: each edge comes through link_audit_source by its audit
# prefix, its target through the unique (audit, url_hash) on pages. No index by
# target is needed, so finalize does not wait for Inlink's build, which only a
# page's "linked from" list reads (inlinks.build, after the audit ends). Written as
# CROSS JOIN so SQLite, which has no statistics on a fresh audit, keeps that
# order; PostgreSQL plans it as any inner join (with fresh statistics, a hash
# join of the audit's edges).
# Broken: the target's final result is 4xx, 5xx or a failure of the site's.
# Redirecting: an internal link (a, area) to a target that redirects to a page
# that answers. hreflang alternates and form actions are not links a visitor
# follows (a broken hreflang target is an hreflang_error: hreflang_targets); a
# redirect's edge to where it landed is judged on the redirect's row (redirects_to_broken).
LINK_TARGETS_SQL = f"""
    SELECT e.source_url, s.id, e.target_url, e.tag, e.anchor_text, e.internal,
           t.status_code, t.fetch_error, t.redirect_count, t.final_url
    FROM audits_linkedge e
    CROSS JOIN audits_page t
    LEFT JOIN audits_page s ON s.audit_id = e.audit_id AND s.url_hash = e.source_hash
    WHERE e.audit_id = %s AND t.audit_id = e.audit_id AND t.url_hash = e.target_hash
      AND e.tag NOT IN ('form', 'hreflang', 'redirect')
      AND (t.status_code >= 400 OR (t.fetch_error <> '' AND t.fetch_error NOT IN ({placeholders(len(NOT_SITE_FAULTS))}))
           OR (t.redirect_count > 0 AND t.fetch_error = '' AND t.status_code < 400
               AND e.internal AND e.tag IN ('a', 'area')))
"""
# Each page's inlinks (a and area edges to it) from one grouped pass over the
# audit's edges, joined to its pages; the outer join gives pages nobody links
# any more their 0, and only rows whose count changes are written (a second
# finalize after a resume rewrites few). One statement for both databases
# (UPDATE ... FROM, which SQLite has from 3.33; _count_inlinks_here before);
# a per-page subquery would read the audit's edges once per page.
INLINK_COUNTS_SQL = (
    "SELECT target_hash, COUNT(*) AS n FROM audits_linkedge "
    "WHERE audit_id = %s AND tag IN ('a', 'area') GROUP BY target_hash"
)
INLINKS_SQL = f"""
    UPDATE audits_page AS p SET inlinks = c.n
    FROM (SELECT q.id, COALESCE(g.n, 0) AS n FROM audits_page q
          LEFT JOIN ({INLINK_COUNTS_SQL}) g ON g.target_hash = q.url_hash
          WHERE q.audit_id = %s) AS c
    WHERE p.id = c.id AND p.inlinks <> c.n
"""


# The hreflang checks read the audit's hreflang edges through link_hreflang, a
# partial index of those edges alone (most sites have few or none); the other
# ends through the unique (audit, url_hash) keys of pages and the frontier.
HREFLANG_TARGETS_SQL = """
    SELECT e.source_url, e.source_hash, s.id, e.target_url, e.anchor_text, t.kind, t.status_code, t.redirect_count,
           t.final_url, t.fetch_error, t.content_type, t.indexable, t.canonical, t.canonical_hash,
           t.url_hash, f.skip_reason
    FROM audits_linkedge e
    JOIN audits_page s ON s.audit_id = e.audit_id AND s.url_hash = e.source_hash
    LEFT JOIN audits_page t ON t.audit_id = e.audit_id AND t.url_hash = e.target_hash
    LEFT JOIN audits_frontierurl f ON f.audit_id = e.audit_id AND f.url_hash = e.target_hash
    WHERE e.audit_id = %s AND e.tag = 'hreflang' AND s.redirect_count = 0
      AND (f.skip_reason = %s
           OR t.fetch_error <> '' OR t.status_code <> 200 OR t.redirect_count > 0
           OR (t.kind = 'page' AND t.content_type IN (%s, %s) AND NOT t.indexable)
           OR (t.kind = 'page' AND t.canonical_hash <> '' AND t.canonical_hash <> t.url_hash))
"""

HREFLANG_RETURN_SQL = """
    SELECT e.source_url, s.id, e.target_url, e.anchor_text
    FROM audits_linkedge e
    JOIN audits_page s ON s.audit_id = e.audit_id AND s.url_hash = e.source_hash
    JOIN audits_page t ON t.audit_id = e.audit_id AND t.url_hash = e.target_hash
    WHERE e.audit_id = %s AND e.tag = 'hreflang' AND e.target_hash <> e.source_hash
      AND s.redirect_count = 0 AND (s.canonical_hash = '' OR s.canonical_hash = s.url_hash)
      AND t.kind = 'page' AND t.status_code = 200 AND t.redirect_count = 0 AND t.fetch_error = ''
      AND t.content_type IN (%s, %s)
      AND NOT EXISTS (
          SELECT 1 FROM audits_linkedge r
          WHERE r.audit_id = e.audit_id AND r.source_hash = e.target_hash
            AND r.target_hash = e.source_hash AND r.tag = 'hreflang')
"""


def run_finalize(audit_id: int) -> bool:
    audit = Audit.objects.get(pk=audit_id)
    if audit.status != Audit.Status.FINALIZING:
        return False
    tries = settings.SITEWARD["MAX_CHUNK_ATTEMPTS"]
    if audit.count_attempt("finalize") > tries:  # before the work: a worker killed in it counts too
        audit.fail_step("finalize", tries)
        return False
    audit.beat()
    if connection.vendor == "postgresql":
        # A fresh audit's rows have no planner statistics yet, and without them
        # PostgreSQL picks nested loops that turn the duplicate checks quadratic.
        # Edges, frontier rows and issues only for the columns the checks and the
        # diff join and filter on: their URL and text columns are most of the bytes
        # to sample. Issues too: the diff's anti-join by key otherwise takes the
        # audit's 100,000 issues for one and compares every pair (bench_diff).
        with connection.cursor() as cursor:
            cursor.execute(
                "ANALYZE audits_page,"
                " audits_linkedge (audit_id, source_hash, target_hash, tag, internal),"
                " audits_frontierurl (audit_id, url_hash, in_sitemap, linked, skip_reason),"
                " audits_issue (audit_id, key, code, url_hash)"
            )
    with transaction.atomic():
        _update_page_columns(audit)
        depths.settle(audit)
        if audit.mode != Audit.Mode.VALIDATE:  # a validation crawls too little to count a page's inlinks
            escalate_linked_noindex(audit)
    for check in VALIDATION_CHECKS if audit.mode == Audit.Mode.VALIDATE else CHECKS:
        if not Audit.objects.filter(pk=audit.pk, status=Audit.Status.FINALIZING).exists():
            return False  # cancelled or deleted meanwhile
        with transaction.atomic():
            _insert(check(audit.pk))
        audit.beat()
    with transaction.atomic():
        # Cancelled since the last check: its frontier stays for a resume, and no diff or score is written.
        if not Audit.objects.select_for_update().filter(pk=audit.pk, status=Audit.Status.FINALIZING).exists():
            return False
        # Before the frontier goes: the diff reads it to tell "removed" from "not reached".
        diff.record(audit)
        audit.recount()
        # Without ignored issues (the diff's carried-forward and rules), and the score; the diff counted its changes.
        audit.rescore(recount_changes=False)
        # Scratch state no screen needs. Link edges stay (inlinks, links.csv), and
        # so do the chunk rows: one per chunk, they are the record of its attempts.
        FrontierURL.objects.filter(audit=audit).delete()
        if not audit.finish():  # SQLite has no row lock: a cancel that came in between undoes all of it
            transaction.set_rollback(True)
            return False
        return True


def _insert(issues: Iterable[Issue]) -> None:
    """Insert a check's issues in batches, so a big audit's never sit in memory at once."""
    rows = iter(issues)
    while batch := list(itertools.islice(rows, BATCH)):
        insert_issues(batch)


def _update_page_columns(audit: Audit) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audits_page SET in_sitemap = TRUE WHERE audit_id = %s AND url_hash IN "
            "(SELECT url_hash FROM audits_frontierurl WHERE audit_id = %s AND in_sitemap)",
            [audit.pk, audit.pk],
        )
        if not has_update_from():
            _count_inlinks_here(cursor, audit.pk)
        else:
            cursor.execute(INLINKS_SQL, [audit.pk, audit.pk])


# CHECKS.md: a noindex page is escalated when linked from many pages. Ten
# internal links to it (inlinks counts links) mean navigation or a hub, not a stray link to a draft.
NOINDEX_MANY_INLINKS = 10
# The one page check whose stored findings finalize may raise (the command's report writes them again).
ESCALATED_CODE = "noindex"


# Links to the redirects that land on each page: a link to /old that redirects to
# /new reaches /new. One grouped pass over the audit's redirect edges.
VIA_REDIRECTS_SQL = """
    SELECT e.target_hash, SUM(r.inlinks) FROM audits_linkedge e
    JOIN audits_page r ON r.audit_id = e.audit_id AND r.url_hash = e.source_hash
    WHERE e.audit_id = %s AND e.tag = 'redirect' GROUP BY e.target_hash
"""


def escalate_linked_noindex(audit: Audit) -> int:
    """Make critical the noindex warnings of pages with at least NOINDEX_MANY_INLINKS internal links to them; how many.

    After the inlink counts: the page checks ran before anything was known of
    the page's inlinks. Links to a redirect that lands on the page count too.
    Only warnings change, so running finalize again changes nothing.
    """
    warned = list(Issue.objects.filter(audit=audit, code=ESCALATED_CODE, severity=Severity.WARNING)
                  .values_list("id", "page__url_hash", "page__inlinks"))
    if not warned:
        return 0
    via = dict(stream_rows(VIA_REDIRECTS_SQL, [audit.pk])) if any(n < NOINDEX_MANY_INLINKS for *_, n in warned) else {}
    by_count: dict[int, list[int]] = {}
    for pk, digest, inlinks in warned:
        if (n := (inlinks or 0) + (via.get(digest) or 0)) >= NOINDEX_MANY_INLINKS:
            by_count.setdefault(n, []).append(pk)
    for n, ids in by_count.items():
        for start in range(0, len(ids), BATCH):
            Issue.objects.filter(pk__in=ids[start:start + BATCH]).update(
                severity=Severity.CRITICAL,
                message=Concat(F("message"), Value(f" but {n} internal links point to it"), output_field=CharField()))
    return sum(len(ids) for ids in by_count.values())


def has_update_from() -> bool:
    """Whether the database takes UPDATE ... FROM (SQLite from 3.33; Django supports 3.31)."""
    return connection.vendor != "sqlite" or connection.Database.sqlite_version_info >= (3, 33)


def _count_inlinks_here(cursor, audit_id: int) -> None:
    """INLINKS_SQL for SQLite before 3.33 (Django supports 3.31): no UPDATE ... FROM.

    The grouped counts come back here (one row per linked URL) and only the
    pages whose count changes are written: a per-page subquery instead would
    read every edge of the audit once per page, as there is no index by target.
    """
    cursor.execute(INLINK_COUNTS_SQL, [audit_id])
    counts = dict(cursor.fetchall())
    cursor.execute("SELECT id, url_hash, inlinks FROM audits_page WHERE audit_id = %s", [audit_id])
    changed = [(counts.get(digest, 0), pk) for pk, digest, n in cursor.fetchall() if counts.get(digest, 0) != n]
    cursor.executemany("UPDATE audits_page SET inlinks = %s WHERE id = %s", changed)


@lru_cache(maxsize=1024)
def _why_broken(status: int | None, error: str) -> str:
    # Cached: a big audit asks this for every edge to a broken target, with a
    # handful of distinct (status, error) pairs.
    if error:
        try:
            return f"failed: {FetchError(error).label}"
        except ValueError:
            return f"failed: {error}"
    return f"answered {status}"


# --- the checks ----------------------------------------------------------------------


def link_targets(audit_id: int) -> Iterator[Issue]:
    """Links and resources whose target is broken, and internal links to targets that redirect.

    A broken target's final result is 4xx, 5xx or a failure; hreflang
    alternates are not links a visitor follows: a broken one is an
    hreflang_error (hreflang_targets), not a broken resource. When the
    crawler was offline (``notices``), other sites' targets it could not reach
    are left to the one site-level notice.
    """
    params = [audit_id, *sorted(NOT_SITE_FAULTS)]
    offline = notices.external_reach(audit_id).offline
    for source, source_id, target, tag, anchor, internal, status, error, redirects, final in stream_rows(
            LINK_TARGETS_SQL, params):
        if offline and not internal and error in notices.UNREACHABLE:
            continue
        if redirects and not error and status is not None and status < 400:
            f = finding("redirect_internal_link", f"Links to {target}, which redirects to {final}", target)
            yield issue_for(audit_id, source_id, source, f)
            continue
        why = _why_broken(status, error)
        if tag in ("a", "area"):
            if internal:
                f = finding("broken_link_internal", f"Link “{anchor or target}” {why}", target)
            else:
                if is_unverified(status, error):
                    continue  # recorded on the external URL's row as unverified, not reported broken
                f = finding("broken_link_external", f"External link “{anchor or target}” {why}", target)
        else:
            f = finding("broken_resource", f"{tag} resource {why}", target)
        # One row per (source, target, anchor text): the anchor is part of the key.
        yield issue_for(audit_id, source_id, source, f, key=issue_key(f.code, source, target, anchor))


# A chain that loops or runs past the hop limit never ends at a page: it is a
# redirect_loop (a page check), not a redirect to a broken target as well.
ENDLESS_REDIRECTS = (FetchError.REDIRECT_LOOP.value, FetchError.TOO_MANY_REDIRECTS.value)


def redirects_to_broken(audit_id: int) -> Iterator[Issue]:
    sql = """
        SELECT id, url, final_url, status_code, fetch_error FROM audits_page
        WHERE audit_id = %s AND redirect_count > 0 AND kind <> 'external'
          AND (status_code >= 400 OR fetch_error <> '') AND fetch_error NOT IN (%s, %s)
    """
    for page_id, url, final, status, error in stream_rows(sql, [audit_id, *ENDLESS_REDIRECTS]):
        yield issue_for(audit_id, page_id, url,
                        finding("redirect_broken_target", f"Redirects to {final}, which {_why_broken(status, error)}"))


def bad_canonicals(audit_id: int) -> Iterator[Issue]:
    sql = """
        SELECT p.id, p.url, p.canonical, t.status_code, t.redirect_count, t.fetch_error, t.indexable, t.kind, f.skip_reason
        FROM audits_page p
        LEFT JOIN audits_page t ON t.audit_id = p.audit_id AND t.url_hash = p.canonical_hash
        LEFT JOIN audits_frontierurl f ON f.audit_id = p.audit_id AND f.url_hash = p.canonical_hash
        WHERE p.audit_id = %s AND p.kind = 'page' AND p.canonical_hash <> '' AND p.canonical_hash <> p.url_hash
    """
    for page_id, url, canonical, status, redirects, error, indexable, kind, skip in stream_rows(sql, [audit_id]):
        if skip == FetchError.BLOCKED_BY_ROBOTS.value:
            why = "is blocked by robots.txt"
        elif status is None and not error:
            continue  # the target was never fetched (out of scope or past the limits): nothing to say
        elif error or (status and status >= 400):
            why = _why_broken(status, error)
        elif redirects:
            why = "redirects"
        elif kind == "page" and status == 200 and not indexable:
            why = "is noindex"
        else:
            continue
        yield issue_for(audit_id, page_id, url, finding("canonical_bad_target", f"Canonical {canonical} {why}", canonical))


HTML_TYPES = ("text/html", "application/xhtml+xml")


def hreflang_targets(audit_id: int) -> Iterator[Issue]:
    """hreflang alternates that are not a 200, indexable, self-canonical page.

    One issue per (page, alternate), naming every reason found; a page's own
    self-reference counts (a noindex page with an hreflang set is told so). Only
    targets the crawl fetched (or refused by robots.txt) say anything; one never
    fetched is not guessed at. Pages reached through a redirect are skipped as
    sources: their edges repeat those of the page they land on, which reports
    them itself.

    Indexes: the audit's hreflang edges come through link_hreflang; both page
    ends through the unique (audit, url_hash) on pages, the robots verdict
    through the unique (audit, url_hash) on the frontier: one indexed lookup per
    hreflang edge (SQLite's plan).
    """
    robots = FetchError.BLOCKED_BY_ROBOTS.value
    params = [audit_id, robots, *HTML_TYPES]
    for (source, source_hash, source_id, target, lang, kind, status, redirects, final, error, ctype, indexable,
         canonical, canonical_hash, digest, skip) in stream_rows(HREFLANG_TARGETS_SQL, params):
        if kind is None:
            if skip != robots:
                continue
            reasons = ["is blocked by robots.txt"]
        elif error in NOT_SITE_FAULTS:
            continue  # our failure, not the site's
        elif kind == "external" and is_unverified(status, error):
            continue  # the other site refuses robots: no evidence either way
        elif error or status is None or status >= 400:
            reasons = [_why_broken(status, error)]
        elif redirects:
            reasons = [f"redirects to {final}"]
        else:
            reasons = [] if status == 200 else [f"answers {status}"]
            if kind == "page" and ctype in HTML_TYPES and status == 200 and not indexable:
                reasons.append("is noindex")
            if kind == "page" and canonical_hash and canonical_hash != digest:
                reasons.append(f"is canonicalised to {canonical}")
            if not reasons:
                continue
        # A page naming itself while noindex or canonicalised elsewhere sends both
        # signals at once; said as such, so it doesn't read as another page's fault.
        named = "names this page, which" if digest == source_hash else f"alternate {target}"
        # Keyed apart from the return-link issue on the same (page, alternate).
        yield issue_for(audit_id, source_id, source, finding(
            "hreflang_error", f"hreflang “{lang}” {named} {' and '.join(reasons)}", target),
            key=issue_key("hreflang_error", source, target, "target"))


def hreflang_return_links(audit_id: int) -> Iterator[Issue]:
    """Alternates that do not list the page back: A says B is its French version, B does not name A.

    Only alternates the crawl fetched as an HTML 200 page (not a redirect) are
    judged; alternates on other sites, or never fetched, are not. A page's own
    self-reference is not a pair, and a page canonicalised elsewhere (a sorted
    variant repeating its page's set) is owed no return links.

    Indexes: the audit's hreflang edges come through link_hreflang; the NOT
    EXISTS probe for B -> A is one seek in it (audit, source_hash = B), reading
    only B's own alternates; both page ends go through the unique (audit,
    url_hash) on pages.
    """
    for source, source_id, target, lang in stream_rows(HREFLANG_RETURN_SQL, [audit_id, *HTML_TYPES]):
        yield issue_for(audit_id, source_id, source, finding(
            "hreflang_error", f"hreflang “{lang}” alternate {target} does not link back to this page", target),
            key=issue_key("hreflang_error", source, target, "return"))


# Pages that linked URLs redirect to: a link to a redirect reaches the page it lands on.
REDIRECTED_TO_SQL = """
    SELECT r.final_url FROM audits_page r
    JOIN audits_frontierurl f ON f.audit_id = r.audit_id AND f.url_hash = r.url_hash
    WHERE r.audit_id = %s AND r.kind = 'page' AND r.redirect_count > 0 AND f.linked
"""


def _reached_by_redirect(audit_id: int) -> set[str]:
    """Hashes of the pages a linked URL redirects to: links reach them through the redirect."""
    found = set()
    for (final,) in stream_rows(REDIRECTED_TO_SQL, [audit_id]):
        try:
            found.add(url_hash(normalize(final)))
        except InvalidURL:
            continue
    return found


def sitemap_problems(audit_id: int) -> Iterator[Issue]:
    """Orphans (in the sitemap, never linked) and sitemap URLs that fail, redirect, are not indexable or robots-blocked.

    A sitemap page that a linked URL redirects to is reached by links, so it is no orphan.
    When the page limit left linked pages unfetched, their links are unknown: an
    unlinked sitemap page may be linked from one of them, so it is a notice that says so.
    """
    via_redirect = _reached_by_redirect(audit_id)
    orphan = _orphan_finding(FrontierURL.objects.filter(
        audit_id=audit_id, kind=Page.Kind.PAGE, linked=True, state=FrontierURL.State.PENDING, skip_reason="",
    ).count())
    sql = """
        SELECT p.id, p.url, f.linked, p.status_code, p.redirect_count, p.fetch_error, p.indexable,
               p.canonical_hash, p.url_hash, p.content_type
        FROM audits_frontierurl f
        JOIN audits_page p ON p.audit_id = f.audit_id AND p.url_hash = f.url_hash
        WHERE f.audit_id = %s AND f.in_sitemap
    """
    for page_id, url, linked, status, redirects, error, indexable, canonical_hash, digest, ctype in stream_rows(sql, [audit_id]):
        if not linked and digest not in via_redirect:
            yield issue_for(audit_id, page_id, url, orphan)
        problem = None
        if error and error not in NOT_SITE_FAULTS:
            problem = _why_broken(status, error)
        elif redirects:
            problem = "redirects"
        elif status is not None and status != 200:
            problem = f"answers {status}"
        elif status == 200 and ctype in ("text/html", "application/xhtml+xml") and not indexable:
            problem = "is noindex"
        elif canonical_hash and canonical_hash != digest:
            problem = "is canonicalised to another URL"
        if problem:
            yield issue_for(audit_id, page_id, url, finding("sitemap_bad_url", f"Sitemap lists this URL, which {problem}"))
    # Listed URLs robots.txt refuses were never fetched, so have no page row: the frontier keeps them (start).
    blocked = """
        SELECT url, linked FROM audits_frontierurl WHERE audit_id = %s AND in_sitemap AND skip_reason = %s
    """
    for url, linked in stream_rows(blocked, [audit_id, FetchError.BLOCKED_BY_ROBOTS.value]):
        if not linked:
            yield issue_for(audit_id, None, url, orphan)
        yield issue_for(audit_id, None, url, finding(
            "sitemap_bad_url", "Sitemap lists this URL, which is blocked by robots.txt"))


def _orphan_finding(unfetched: int):
    """The orphan finding, for a crawl that read every linked page or one that left ``unfetched`` of them."""
    if not unfetched:
        return finding("orphan_page", "Listed in the sitemap but no crawled page links to it")
    return finding("orphan_page", f"Listed in the sitemap and no crawled page links to it, but the page limit left "
                                  f"{unfetched} linked page(s) unfetched, which may link to it", severity=Severity.NOTICE)


# The pages a search engine would index as themselves: a redirect is not a page
# of its own, and a page canonicalised elsewhere is already declared a copy, so
# neither is a duplicate of the page it names.
_INDEXED = ("kind = 'page' AND indexable AND redirect_count = 0"
            " AND (canonical_hash = '' OR canonical_hash = url_hash)")


def _duplicates(audit_id: int, column: str, code: str, label: str, shown: str | None = None) -> Iterator[Issue]:
    # `column` (grouped by) and `shown` (quoted in the message) are our own column names, never user input.
    sql = f"""
        SELECT p.id, p.url, p.{shown or column}, g.n
        FROM audits_page p
        JOIN (SELECT {column} AS value, COUNT(*) AS n FROM audits_page
              WHERE audit_id = %s AND {_INDEXED} AND {column} <> ''
              GROUP BY {column} HAVING COUNT(*) > 1) g ON g.value = p.{column}
        WHERE p.audit_id = %s AND {_INDEXED}
    """
    for page_id, url, value, count in stream_rows(sql, [audit_id, audit_id]):
        quoted = value if column != "content_hash" else "identical body text"
        yield issue_for(audit_id, page_id, url, finding(
            code, f"{label} shared with {count - 1} other page{'s' if count > 2 else ''}: {quoted[:120]}"))


def duplicate_titles(audit_id: int) -> Iterator[Issue]:
    return _duplicates(audit_id, "title", "title_duplicate", "Title")


def duplicate_descriptions(audit_id: int) -> Iterator[Issue]:
    return _duplicates(audit_id, "description_hash", "meta_description_duplicate", "Description", "description")


def duplicate_content(audit_id: int) -> Iterator[Issue]:
    return _duplicates(audit_id, "content_hash", "duplicate_content", "Content")


def deep_pages(audit_id: int) -> Iterator[Issue]:
    deepest = Audit.objects.get(pk=audit_id).check_settings().deep_depth
    sql = """
        SELECT p.id, p.url, p.depth FROM audits_page p
        JOIN audits_frontierurl f ON f.audit_id = p.audit_id AND f.url_hash = p.url_hash
        WHERE p.audit_id = %s AND p.kind = 'page' AND f.linked AND p.depth > %s
    """
    for page_id, url, depth in stream_rows(sql, [audit_id, deepest]):
        yield issue_for(audit_id, page_id, url, finding(
            "deep_page", f"{depth} clicks from the start page (more than {deepest})"))


def large_images(audit_id: int) -> Iterator[Issue]:
    """Images whose answer declares more bytes than the audit allows (their bodies are never read)."""
    largest = Audit.objects.get(pk=audit_id).check_settings().large_image_bytes
    sql = """
        SELECT id, url, size_bytes FROM audits_page
        WHERE audit_id = %s AND kind = 'resource' AND status_code = 200 AND content_type LIKE 'image/%%'
          AND size_bytes > %s
    """
    for page_id, url, size in stream_rows(sql, [audit_id, largest]):
        yield issue_for(audit_id, page_id, url, finding(
            "large_image", f"Image is {size / 1000:,.0f} KB (more than {largest / 1000:,.0f} KB)"))


def soft_404s(audit_id: int) -> Iterator[Issue]:
    """Pages that answered 200 with the site's "not found" page (the start step's probe), or whose title says so.

    A site that answers a URL that cannot exist with its start page (an app's
    shell, a catch-all rewrite) gives no "not found" page to compare with: its
    copies of the start page are duplicate_content's, and only titles count.
    """
    probe, origin = Audit.objects.filter(pk=audit_id).values_list("not_found_hash", "origin").first() or ("", "")
    if probe and Page.objects.filter(Q(depth=0) | Q(url=origin + "/"), audit_id=audit_id, kind=Page.Kind.PAGE,
                                     status_code=200, content_hash=probe).exists():
        probe = ""  # the start page's, or the home page's below a start URL deeper in the site
    sql = """
        SELECT id, url, title, content_hash FROM audits_page
        WHERE audit_id = %s AND kind = 'page' AND status_code = 200 AND (content_hash = %s OR title != '')
    """
    for page_id, url, title, content in stream_rows(sql, [audit_id, probe or None]):
        if probe and content == probe:
            why = "Same text as the page this site answers, with 200, for a URL that does not exist"
        elif says_not_found(title):
            why = f"Answered 200, but its title says it was not found: “{title}”"
        else:
            continue
        yield issue_for(audit_id, page_id, url, finding("soft_404", why))


CHECKS = [
    link_targets, redirects_to_broken, bad_canonicals, hreflang_targets,
    hreflang_return_links, sitemap_problems, duplicate_titles, duplicate_descriptions, duplicate_content,
    deep_pages, soft_404s, large_images, notices.external_links_unchecked, notices.links_to_sibling_origin,
    notices.crawl_traps_skipped, missing_anchors,
]
# A validation fetched only some URLs: the checks of links between them run
# again, the site-wide ones cannot (their issues end unknown: audits.diff).
VALIDATION_CHECKS = [link_targets, redirects_to_broken, notices.external_links_unchecked, missing_anchors]
# What an audit that stopped early (failed, cancelled) can still say: links among the pages it fetched.
# The site-wide checks (duplicates, orphans, canonicals...) would judge a part as if it were the whole.
STOPPED_CHECKS = [link_targets, redirects_to_broken, missing_anchors]


def check_stopped_links(audit: Audit) -> None:
    """A stopped audit's broken links and resources and missing anchors, among what it fetched; its keys make
    a second run harmless."""
    for check in STOPPED_CHECKS:
        _insert(check(audit.pk))
