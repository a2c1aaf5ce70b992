"""Run-to-run diff: what changed between an audit and an earlier audit of the same site.

Issues are matched by their stable key (``issue_rows.issue_key``), pages by their
URL's hash. Everything here is a set-based statement over the two audits' rows,
through the unique (audit, key) and (audit, url_hash) indexes: no per-issue
Python, so it stays cheap at 100,000 issues (``benchmarks/bench_diff.py``).

``record`` writes the diff of an audit against its baseline at finalize, and a
validation's verdict on each issue it re-checked. The same SELECTs, unwritten,
answer the compare view for any two audits of a site.
``carry_triage`` gives an audit's issues a person's marks and the site's ignore
rules: at finalize, and for an audit that failed or was cancelled when it ended.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import connection
from django.db.models import Case, Count, Exists, OuterRef, Q, Subquery, Value, When

from crawler.catalogue import (
    ANSWER_CODES,
    LINK_CODES,
    PAGE_AND_CROSS_CODES,
    SITE_READ_CODES,
    SITE_WIDE_CODES,
    START_CODES,
)

from .missing_anchors import TARGET_ANCHORS, TARGET_ANCHORS_FROM
from .models import (
    Audit,
    GoneIssue,
    IgnoreRule,
    Issue,
    Page,
    PageChange,
    RecheckedIssue,
    Severity,
    Site,
)


def _codes(codes) -> str:
    """A literal SQL list of issue codes (catalogue names: lower-case letters, digits and underscores)."""
    if not all(code.isidentifier() and code.islower() for code in codes):
        raise ValueError(f"not an issue code: {sorted(codes)}")
    return ", ".join(f"'{code}'" for code in sorted(codes))


# Link issues are keyed on their anchor text too (one per link on a page), so
# one whose anchor alone changed is the same broken link: matched on code, page
# and target, through issue_audit_code_url, for the few link issues a key misses.
ANCHORED_CODES = frozenset({"broken_link_internal", "broken_link_external", "broken_resource"})
# The answers that say the URL is broken: one is fixed only by an answer that is not.
BROKEN_ANSWER_CODES = frozenset({"http_4xx", "http_5xx", "fetch_failed"})
SAME_LINK_SQL = f"""
    b.code IN ({_codes(ANCHORED_CODES)})
    AND EXISTS (SELECT 1 FROM audits_issue a WHERE a.audit_id = %(audit)s AND a.code = b.code
                AND a.url_hash = b.url_hash AND a.target_url = b.target_url)
"""

# Whether %(audit)s holds the outer issue b ignored, matched as ``marked_in`` matches: by key, or a link issue
# whose key it lacks by code, page and target (a link SAME_LINK_SQL calls the same, its anchor text changed).
IGNORED_IN_SQL = f"""
    (EXISTS (SELECT 1 FROM audits_issue i WHERE i.audit_id = %(audit)s AND i.key = b.key AND i.review = 'ignored')
     OR (b.code IN ({_codes(ANCHORED_CODES)})
         AND NOT EXISTS (SELECT 1 FROM audits_issue i WHERE i.audit_id = %(audit)s AND i.key = b.key)
         AND EXISTS (SELECT 1 FROM audits_issue i WHERE i.audit_id = %(audit)s AND i.code = b.code
                     AND i.url_hash = b.url_hash AND i.target_url = b.target_url AND i.review = 'ignored')))
"""

# A baseline issue the audit did not report: fixed when this audit could have
# reported it and did not, unknown when it could not say.
# - A broken external link, when the crawler was offline this time (the
#   site-level notice): its page answered, but nobody could check the link.
# - A site-wide check's, in a partial audit (a validation): it was not re-run. A page's
#   own tags (PAGE_AND_CROSS_CODES with no target) are its page check's, judged below.
# - A start step's (robots.txt, sitemaps): the start always runs again, but reads the
#   sitemaps and probes http:// only when robots.txt lets it crawl the start page; a
#   validation goes on without them, and their issues are unknown. So is a one-a-site
#   code (all but a sitemap's) reported under another key: the start page lands on another origin.
#   Unknown too when the start read them but could not judge: the http:// probe gave no verdict
#   (Audit.http_unsure: no answer, a 5xx, a status refusing crawlers), the sitemaps were read in part (an invalid file may be among the unread),
#   robots.txt could not be read (whether it is missing is not known).
# - A link's: fixed when its source page answered, was parsed (and rendered) if it was then, and either no longer links
#   the target or the target answered without error below 400 (and without a
#   redirect, for a redirecting link); else unknown: an external target that
#   refuses crawlers (UNVERIFIED_STATUSES) is never reported, so says nothing.
# - The URL's own answer: fixed if the URL answered (a page row with no fetch
#   error), and, for a broken answer (4xx, 5xx, a failure), answered below 400:
#   a page that went from 404 to 500 is not fixed. Its content's and its links':
#   only if it answered 2xx as a page, not as a redirect (whose landing page has
#   issues of its own), and was parsed (and rendered) if it was then: a page now cut at
#   the size cap, served as another type, or whose render failed, was never checked.
# - A duplicate's (title, description or content): unknown while a page that shared it last
#   time was not crawled this time or failed (a 5xx, a timeout, a limit): the
#   duplicate may still be there. One that now answers 4xx or redirects is gone.
# Ignored issues are left out, as from every total.
# Whether the outer issue b is a check across the whole site, which a partial audit never re-runs: a page's own
# tags (PAGE_AND_CROSS_CODES with no target) are its page check's (audits.validation.site_wide).
SPANS_SITE_SQL = f"""(b.code IN ({_codes(SITE_WIDE_CODES)})
     AND NOT (b.code IN ({_codes(PAGE_AND_CROSS_CODES)}) AND b.target_url = ''))"""
# Start codes left unjudged by a read that came short: by sitemaps_partly_read (sitemap_invalid), else
# by robots_txt_unavailable.
START_UNREAD = frozenset({"sitemap_invalid", "robots_txt_missing"})
_TWIN_GONE_SQL = """
    EXISTS (SELECT 1 FROM audits_page bp
            JOIN audits_page tw ON tw.audit_id = bp.audit_id AND tw.kind = 'page' AND tw.{column} = bp.{column}
                               AND tw.url_hash <> bp.url_hash
            WHERE bp.audit_id = %(base)s AND bp.url_hash = b.url_hash
              AND NOT EXISTS (SELECT 1 FROM audits_page ap WHERE ap.audit_id = %(audit)s AND ap.url_hash = tw.url_hash
                              AND ap.fetch_error = '' AND ap.status_code < 500))
"""
# The page was parsed this time if it was parsed then: a page now cut at the size cap, served
# as another type, or whose parse or checks broke, has no links or content anybody checked.
# Rendered too if rendered then: a failed render leaves the raw HTML, which lacks what scripts add.
_PARSED_SQL = """NOT EXISTS (SELECT 1 FROM audits_page p WHERE p.id = b.page_id
     AND ((p.head_facts IS NOT NULL AND {alias}.head_facts IS NULL) OR (p.rendered AND NOT {alias}.rendered)))"""
# An anchor_missing issue not reported again is fixed when its page was parsed and none of its links that name
# fragments of the target (b.target_url is the target and "#fragment") reached a target left unjudged
# (missing_anchors.TARGET_ANCHORS): one that failed, moved past a redirect to an unjudged page, or kept no anchors.
_ANCHOR_GONE_SQL = f"""NOT EXISTS (
    SELECT 1 FROM audits_linkedge e
    WHERE e.audit_id = %(audit)s AND e.source_hash = b.url_hash AND e.fragments <> '' AND e.tag IN ('a', 'area')
      AND substr(b.target_url, 1, length(e.target_url) + 1) = e.target_url || '#'
      AND NOT EXISTS (SELECT 1 FROM {TARGET_ANCHORS_FROM}
                      WHERE t.audit_id = e.audit_id AND t.url_hash = e.target_hash AND {TARGET_ANCHORS} IS NOT NULL))"""
GONE_ISSUES_SQL = f"""
    SELECT CASE WHEN b.code = 'broken_link_external'
                     AND EXISTS (SELECT 1 FROM audits_issue n WHERE n.audit_id = %(audit)s
                                 AND n.code = 'external_links_unchecked')
                THEN 'unknown'
                WHEN %(partial)s AND {SPANS_SITE_SQL} THEN 'unknown'
                WHEN b.code IN ({_codes(SITE_READ_CODES)}) AND NOT %(site_read)s THEN 'unknown'
                WHEN b.code = 'http_not_redirected' AND %(http_unsure)s THEN 'unknown'
                WHEN b.code IN ({_codes(START_UNREAD)})
                     AND EXISTS (SELECT 1 FROM audits_issue n WHERE n.audit_id = %(audit)s
                                 AND n.code = CASE WHEN b.code = 'sitemap_invalid' THEN 'sitemaps_partly_read'
                                                   ELSE 'robots_txt_unavailable' END)
                THEN 'unknown'
                WHEN b.code IN ({_codes(START_CODES)}) THEN
                    CASE WHEN b.code <> 'sitemap_invalid'
                              AND EXISTS (SELECT 1 FROM audits_issue n WHERE n.audit_id = %(audit)s AND n.code = b.code)
                         THEN 'unknown' ELSE 'fixed' END
                WHEN b.code = 'title_duplicate' AND {_TWIN_GONE_SQL.format(column="title")} THEN 'unknown'
                WHEN b.code = 'duplicate_content' AND {_TWIN_GONE_SQL.format(column="content_hash")} THEN 'unknown'
                WHEN b.code = 'meta_description_duplicate' AND {_TWIN_GONE_SQL.format(column="description_hash")}
                THEN 'unknown'
                WHEN b.code = 'anchor_missing' THEN
                    CASE WHEN EXISTS (SELECT 1 FROM audits_page s WHERE s.audit_id = %(audit)s
                                      AND s.url_hash = b.url_hash AND s.fetch_error = ''
                                      AND s.status_code BETWEEN 200 AND 299 AND s.redirect_count = 0
                                      AND {_PARSED_SQL.format(alias="s")})
                          AND {_ANCHOR_GONE_SQL}
                         THEN 'fixed' ELSE 'unknown' END
                WHEN b.code IN ({_codes(LINK_CODES - {"redirect_broken_target"})}) THEN
                    CASE WHEN EXISTS (SELECT 1 FROM audits_page s WHERE s.audit_id = %(audit)s
                                      AND s.url_hash = b.url_hash AND s.fetch_error = ''
                                      AND s.status_code BETWEEN 200 AND 299 AND s.redirect_count = 0
                                      AND {_PARSED_SQL.format(alias="s")})
                          AND (NOT EXISTS (SELECT 1 FROM audits_linkedge e WHERE e.audit_id = %(audit)s
                                           AND e.source_hash = b.url_hash AND e.target_url = b.target_url)
                               OR EXISTS (SELECT 1 FROM audits_linkedge e
                                          JOIN audits_page t ON t.audit_id = e.audit_id AND t.url_hash = e.target_hash
                                          WHERE e.audit_id = %(audit)s AND e.source_hash = b.url_hash
                                            AND e.target_url = b.target_url
                                            AND t.fetch_error = '' AND t.status_code < 400
                                            AND (b.code <> 'redirect_internal_link' OR t.redirect_count = 0)))
                         THEN 'fixed' ELSE 'unknown' END
                WHEN EXISTS (SELECT 1 FROM audits_page c
                             WHERE c.audit_id = %(audit)s AND c.url_hash = b.url_hash AND c.fetch_error = ''
                               AND ((b.code IN ({_codes(ANSWER_CODES - BROKEN_ANSWER_CODES)}))
                                    OR (b.code IN ({_codes(BROKEN_ANSWER_CODES)}) AND c.status_code < 400)
                                    OR (b.code NOT IN ({_codes(ANSWER_CODES)})
                                        AND c.status_code BETWEEN 200 AND 299 AND c.redirect_count = 0
                                        AND {_PARSED_SQL.format(alias="c")})))
                THEN 'fixed' ELSE 'unknown' END AS change,
           b.key, b.url, b.code, b.severity, b.message, b.target_url
    FROM audits_issue b
    WHERE b.audit_id = %(base)s AND b.review <> 'ignored'
      AND NOT EXISTS (SELECT 1 FROM audits_issue a WHERE a.audit_id = %(audit)s AND a.key = b.key)
      AND NOT ({SAME_LINK_SQL})
"""

# A validation's verdict on each issue of its source it re-checked (the ignored ones it did not): reported again
# (still there, a link whose anchor text alone changed too), else what its gone issue says (fixed or unknown).
# Copied in the source's words, so the checklist is what the validation judged whatever becomes of the source.
RECHECKED_SQL = f"""
    INSERT INTO audits_recheckedissue (audit_id, result, key, url_hash, url, code, severity, message, target_url)
    SELECT %(audit)s,
           CASE WHEN EXISTS (SELECT 1 FROM audits_issue a WHERE a.audit_id = %(audit)s AND a.key = b.key)
                     OR ({SAME_LINK_SQL})
                THEN 'still'
                ELSE COALESCE((SELECT g.change FROM audits_goneissue g
                               WHERE g.audit_id = %(audit)s AND g.key = b.key), 'unknown') END,
           b.key, b.url_hash, b.url, b.code, b.severity, b.message, b.target_url
    FROM audits_issue b
    WHERE b.audit_id = %(base)s AND b.review <> 'ignored'
"""

# Pages (kind 'page') that are new, gone or different. Removed: a page last time
# that this audit neither stored nor found a link to (the frontier is still there
# at finalize); one found but left uncrawled by the limits is not called removed.
# A link past the depth limit or the patterns never enters the frontier, so the
# audit's link edges count too: grouped by target once (edges have no index by
# target), then joined, which both databases do as one hash or indexed pass.
# An audit crawled within narrower limits than its baseline (a smaller depth or
# page limit, other patterns) calls no page removed: pages beyond the new limits
# are not linked from any page it crawled, yet they need not be gone.
_PAGE_COLUMNS = "change, url_hash, url, status_before, status_after, title_before, title_after, " \
                "canonical_before, canonical_after, indexable_before, indexable_after, content_changed"
PAGE_CHANGES_SQL = f"""
    SELECT {_PAGE_COLUMNS} FROM (
        SELECT 'added' AS change, a.url_hash, a.url, NULL AS status_before, a.status_code AS status_after,
               '' AS title_before, a.title AS title_after, '' AS canonical_before, a.canonical AS canonical_after,
               NULL AS indexable_before, a.indexable AS indexable_after, FALSE AS content_changed, a.id AS seq
        FROM audits_page a
        WHERE a.audit_id = %(audit)s AND a.kind = 'page'
          AND NOT EXISTS (SELECT 1 FROM audits_page b WHERE b.audit_id = %(base)s AND b.url_hash = a.url_hash)
        UNION ALL
        SELECT 'removed', b.url_hash, b.url, b.status_code, NULL, b.title, '', b.canonical, '',
               b.indexable, NULL, FALSE, b.id
        FROM audits_page b
        LEFT JOIN (SELECT e.target_hash FROM audits_linkedge e WHERE e.audit_id = %(audit)s
                   GROUP BY e.target_hash) l ON l.target_hash = b.url_hash
        WHERE b.audit_id = %(base)s AND b.kind = 'page' AND l.target_hash IS NULL AND NOT %(narrower)s
          AND NOT EXISTS (SELECT 1 FROM audits_page a WHERE a.audit_id = %(audit)s AND a.url_hash = b.url_hash)
          AND NOT EXISTS (SELECT 1 FROM audits_frontierurl f
                          WHERE f.audit_id = %(audit)s AND f.url_hash = b.url_hash)
        UNION ALL
        SELECT 'changed', a.url_hash, a.url, b.status_code, a.status_code, b.title, a.title, b.canonical,
               a.canonical, b.indexable, a.indexable, a.content_hash <> b.content_hash, a.id
        FROM audits_page a
        JOIN audits_page b ON b.audit_id = %(base)s AND b.url_hash = a.url_hash
        WHERE a.audit_id = %(audit)s AND a.kind = 'page'
          AND (COALESCE(a.status_code, -1) <> COALESCE(b.status_code, -1) OR a.title <> b.title
               OR a.canonical <> b.canonical OR a.indexable <> b.indexable OR a.content_hash <> b.content_hash)
    ) AS changes
"""

ISSUE_CHANGES = ("new", "persisting", "fixed", "unknown")
PAGE_CHANGES = ("added", "removed", "changed")


def _params(audit: Audit, base: Audit) -> dict:
    """The two audits, whether ``audit`` re-ran only part of the checks (a validation), and whether
    it crawled within narrower limits than ``base`` (PAGE_CHANGES_SQL's removed pages)."""
    narrower = (audit.max_depth < base.max_depth or audit.max_pages < base.max_pages
                or (audit.include_patterns, audit.exclude_patterns) != (base.include_patterns, base.exclude_patterns))
    return {"audit": audit.pk, "base": base.pk, "partial": audit.mode == Audit.Mode.VALIDATE, "narrower": narrower,
            # None: the start step never read the sitemaps (robots.txt disallowed the start page).
            "site_read": audit.sitemap_found is not None, "http_unsure": bool(audit.http_unsure)}


def baseline_for(audit: Audit) -> Audit | None:
    """The audit ``audit`` is compared with: the one given beforehand, else the site's previous completed one.

    A scheduled run's is the previous scheduled run, when there is one: its news alerts, and an audit run
    between the two (a CI job on the command line, a press of Run now), which alerts nobody, must not make
    what it found old news. But not one of an earlier schedule: scheduled in February, audited by hand
    until June and scheduled again in July, the first July run is compared with June's, or everything
    found since February would alert as new. That run is the earlier schedule's when another audit
    was made after it and before the schedule last went live (``Site.scheduled_since``).
    """
    if audit.baseline_id:
        return Audit.objects.filter(pk=audit.baseline_id).first()
    earlier = Audit.comparable().filter(site_id=audit.site_id, pk__lt=audit.pk)
    if audit.trigger == Audit.Trigger.SCHEDULE:
        last = earlier.filter(trigger=Audit.Trigger.SCHEDULE).order_by("-pk").first()
        set_at = Site.objects.filter(pk=audit.site_id).values_list("scheduled_since", flat=True).first()
        if last is not None and not (set_at and earlier.filter(pk__gt=last.pk, created_at__lt=set_at).exists()):
            return last
    return audit.previous_completed()


def in_audit(audit_id: int):
    """Issues of ``audit_id`` with the same key as the outer issue row."""
    return Issue.objects.filter(audit_id=audit_id, key=OuterRef("key"))


def same_issue(audit_id: int) -> Q:
    """Whether ``audit_id`` has the outer issue: by key, or a link issue by code, page and target (SAME_LINK_SQL)."""
    there = Issue.objects.filter(audit_id=audit_id)
    same_link = there.filter(code=OuterRef("code"), url_hash=OuterRef("url_hash"), target_url=OuterRef("target_url"))
    return Q(Exists(there.filter(key=OuterRef("key")))) | (Q(code__in=ANCHORED_CODES) & Q(Exists(same_link)))


def marked_in(audit_id: int, **mark) -> Q:
    """Whether ``audit_id`` holds the outer issue marked so (``MARKS``): by key; a link issue whose key it lacks
    (its anchor text changed) by code, page and target. Not by the link when the key is there: two links
    from one page to one dead target are two issues, and ignoring one says nothing of the other."""
    there = Issue.objects.filter(audit_id=audit_id)
    by_key = there.filter(key=OuterRef("key"))
    same_link = there.filter(code=OuterRef("code"), url_hash=OuterRef("url_hash"), target_url=OuterRef("target_url"),
                             **mark)
    return Q(Exists(by_key.filter(**mark))) | (
        Q(code__in=ANCHORED_CODES) & ~Q(Exists(by_key)) & Q(Exists(same_link)))


def marked_on_validations(source_id: int, **mark) -> Q:
    """Whether a validation of ``source_id`` holds the outer issue (one of the source's) marked so, matched as
    ``marked_in`` matches: by key, or a link issue whose key that validation lacks by code, page and target."""
    marked = Issue.objects.filter(audit__source_id=source_id, audit__mode=Audit.Mode.VALIDATE, **mark)
    # The validation holding the mark has no issue with the source issue's key (OuterRef of the OuterRef).
    keyed_there = Issue.objects.filter(audit_id=OuterRef("audit_id"), key=OuterRef(OuterRef("key")))
    by_link = marked.filter(code=OuterRef("code"), url_hash=OuterRef("url_hash"),
                            target_url=OuterRef("target_url")).exclude(Exists(keyed_there))
    return Q(key__in=marked.values("key")) | (Q(code__in=ANCHORED_CODES) & Q(Exists(by_link)))


def link_echoes(audit: Audit, chosen):
    """The issues a mark on ``chosen`` (issues of ``audit``) reaches by link beyond those by key (``Audit.set_review``):
    on the audit a validation re-checked, or the validations of a whole audit, a link issue whose key ``audit``
    lacks (its anchor text changed) with the code, page and target of one chosen, as ``marked_in`` matches."""
    if audit.mode == Audit.Mode.VALIDATE:
        others = Audit.objects.filter(pk=audit.source_id)
    else:
        others = Audit.objects.filter(source=audit, mode=Audit.Mode.VALIDATE)
    same_link = chosen.filter(code=OuterRef("code"), url_hash=OuterRef("url_hash"), target_url=OuterRef("target_url"))
    return Issue.objects.filter(audit__in=others.filter(deleting=False), code__in=ANCHORED_CODES).exclude(
        Exists(Issue.objects.filter(audit_id=audit.pk, key=OuterRef("key")))).filter(Exists(same_link))


# What a person's mark on an issue can be, as carried to the next audit: ignored, reviewed, or reopened.
MARKS = ({"review": Issue.Review.IGNORED}, {"review": Issue.Review.REVIEWED},
         {"review": Issue.Review.OPEN, "reopened": True})


def new_issues(audit: Audit, base: Audit):
    return Issue.objects.filter(audit=audit).exclude(same_issue(base.pk))


def persisting_issues(audit: Audit, base: Audit):
    return Issue.objects.filter(audit=audit).filter(same_issue(base.pk))


def gone_issues(audit: Audit, base: Audit, change: str | None = None, *, limit: int | None = None,
                offset: int = 0) -> list[dict]:
    """Baseline issues this audit did not report, as dicts, optionally only fixed or only unknown."""
    sql = f"SELECT * FROM ({GONE_ISSUES_SQL}) AS gone"
    params = _params(audit, base)
    if change:
        sql += " WHERE change = %(change)s"
        params["change"] = change
    order = " ORDER BY CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, code, url"
    return _dicts(sql + order, params, limit, offset)


def page_changes(audit: Audit, base: Audit, change: str | None = None, *, limit: int | None = None,
                 offset: int = 0) -> list[PageChange]:
    """Pages added, removed or changed between ``base`` and ``audit``, as unsaved PageChange rows."""
    sql = f"SELECT * FROM ({PAGE_CHANGES_SQL}) AS pages"
    params = _params(audit, base)
    if change:
        sql += " WHERE change = %(change)s"
        params["change"] = change
    rows = _dicts(sql + " ORDER BY change, url", params, limit, offset)
    return [PageChange(audit=audit, **row) for row in rows]


def _dicts(sql: str, params: dict, limit: int | None, offset: int) -> list[dict]:
    if limit is not None:
        sql += " LIMIT %(limit)s OFFSET %(offset)s"
        params = {**params, "limit": limit, "offset": offset}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def record(audit: Audit) -> dict | None:
    """Write ``audit``'s diff against its baseline; run inside finalize's transaction.

    Idempotent: a second finalize replaces what the first wrote. Also carries
    review forward and applies the site's ignore rules (``carry_triage``).
    Returns the counts (None without a baseline).
    """
    base = baseline_for(audit)
    GoneIssue.objects.filter(audit=audit).delete()
    PageChange.objects.filter(audit=audit).delete()
    RecheckedIssue.objects.filter(audit=audit).delete()
    issues = Issue.objects.filter(audit=audit)
    if base is None:
        issues.exclude(change=Issue.Change.NONE).update(change=Issue.Change.NONE)
        carry_triage(audit, None)
        audit.set_baseline(None, None)
        return None
    issues.update(change=Case(When(same_issue(base.pk), then=Value(Issue.Change.PERSISTING)),
                              default=Value(Issue.Change.NEW)))
    if audit.mode == Audit.Mode.VALIDATE:
        _keep_judged_severity(issues, base)
    carry_triage(audit, base)
    _persisting_back(issues, base)  # after: the carry-back asks the issues still new
    params = _params(audit, base)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO audits_goneissue (audit_id, change, key, url, code, severity, message, target_url) "
            f"SELECT %(audit)s, change, key, url, code, severity, message, target_url FROM ({GONE_ISSUES_SQL}) AS g",
            params)
        cursor.execute(
            f"INSERT INTO audits_pagechange (audit_id, {_PAGE_COLUMNS}) "
            f"SELECT %(audit)s, {_PAGE_COLUMNS} FROM ({PAGE_CHANGES_SQL}) AS p", params)
    if audit.mode == Audit.Mode.VALIDATE:
        keep_rechecked(audit, base)
    counts = stored_counts(audit)
    audit.set_baseline(base, counts)
    return counts


def keep_rechecked(audit: Audit, source: Audit) -> None:
    """Copy each issue of ``source`` that the validation ``audit`` re-checked, with its verdict (RECHECKED_SQL).

    After its gone issues, whose change is the verdict on those it did not report; ``record`` has cleared the
    copies an earlier finalize wrote, with the rest of the diff.
    """
    with connection.cursor() as cursor:
        cursor.execute(RECHECKED_SQL, {"audit": audit.pk, "base": source.pk})


# Codes whose severity the crawl's context sets, not the page: a noindex page is critical when the sitemap lists
# it or many pages link to it (finalize.escalate_linked_noindex). A validation sees neither, so one it reports
# again keeps its source's severity and message: its checklist, its issue rows and the command's gate then agree.
CONTEXT_SEVERITY_CODES = frozenset({"noindex"})


def _keep_judged_severity(issues, base: Audit) -> None:
    """Give a validation's re-reported CONTEXT_SEVERITY_CODES issues the severity and message of the source's."""
    then = Issue.objects.filter(audit_id=base.pk, key=OuterRef("key"))
    issues.filter(code__in=CONTEXT_SEVERITY_CODES, change=Issue.Change.PERSISTING).filter(
        Exists(then.exclude(severity=OuterRef("severity")))).update(
        severity=Subquery(then.values("severity")[:1]), message=Subquery(then.values("message")[:1]))


def carry_triage(audit: Audit, base: Audit | None) -> None:
    """Give ``audit``'s issues the marks a person last gave them, then the site's ignore rules; the caller rescores.

    An issue keeps its mark from the newest audit holding it (``_mark_sources``:
    the latest audit, its validations, the baseline; or, when those missed it, up
    to CARRY_BACK runs before); then the rules mark the matching issues still open
    ignored (a first audit, with no ``base``, gets its rules too). Finalize runs it
    for a completed audit (``record``), the ended-audit step for a failed or
    cancelled one (``audits.inlinks.build``). Idempotent: only issues open and not
    reopened by a person change.
    """
    issues = Issue.objects.filter(audit=audit)
    if base is not None:
        # Ignored (or reviewed) on a validation of the baseline is so on the baseline: that validation's rows are
        # where a person did it.
        if base.adopt_validation_marks():
            base.rescore()
        sources = _mark_sources(audit, base)
        _carry_marks(issues, sources)
        _carry_marks_back(issues, base, sources)
    # After the carried-forward decisions, so an issue a person reviewed stays reviewed.
    IgnoreRule.objects.apply_to(audit)


# Runs before the baseline asked about an issue the baseline lacks: a week of nightly runs.
CARRY_BACK = 7


def _persisting_back(issues, base: Audit) -> None:
    """A new issue on a page the baseline did not read (it failed or answered 5xx that night) that an earlier
    run reported, up to CARRY_BACK runs back, is persisting: missing from the baseline was no fix, and an
    alert or a --fail-on-new gate must not take it for news. On a page the baseline read, it is new."""
    unseen = issues.filter(change=Issue.Change.NEW).exclude(Exists(Page.objects.filter(
        audit_id=base.pk, url_hash=OuterRef("url_hash"), fetch_error="", status_code__lt=500)))
    for earlier in _runs_before(base):
        if not unseen.exists():
            return
        unseen.filter(same_issue(earlier)).update(change=Issue.Change.PERSISTING)


# A mark made on a validation is made on the audit it re-checked too (Audit.set_review): its newest few
# validations are asked only for issues that audit lacks, so each finalize runs a bounded number of UPDATEs.
VALIDATIONS_ASKED = 3


def _mark_sources(audit: Audit, base: Audit) -> list[int]:
    """Where a person last marked the issues ``audit`` found, newest first: the validations of the site's
    latest whole audit, that audit, then the baseline's validations and the baseline. The latest audit is
    not always the baseline (a scheduled run is compared with the previous scheduled one), and a mark made
    on a run between them (Run now, a CI job, a validation) is the person's latest word."""
    sources: list[int] = []
    for whole in (audit.previous_completed(), base):
        if whole is None or whole.pk in sources:
            continue
        sources += Audit.objects.filter(source=whole, mode=Audit.Mode.VALIDATE, status=Audit.Status.COMPLETED,
                                        deleting=False).order_by("-pk").values_list("pk", flat=True)[:VALIDATIONS_ASKED]
        sources.append(whole.pk)
    return sources


def _carry_marks(issues, sources: list[int]) -> None:
    """Each open issue takes its mark (ignored, reviewed or reopened: ``MARKS``) from the first of ``sources``
    holding it; one there open stays open whatever older ones say."""
    absent = Q()
    for source in sources:
        _take_marks(issues.filter(review=Issue.Review.OPEN, reopened=False), source, absent)
        absent &= ~same_issue(source)


def _carry_marks_back(issues, base: Audit, sources: list[int]) -> None:
    """Mark the issues the baseline lacks as the latest earlier run to report them had (ignored or reviewed),
    up to CARRY_BACK runs back.

    Missing from the baseline (its page failed those nights, a smaller crawl)
    is not a person's decision undone. Each run is asked only about issues
    that none of the runs after it (nor the mark ``sources``) reported, so a mark a person took off later wins.
    """
    absent = Q()
    for source in sources:  # the baseline among them
        absent &= ~same_issue(source)
    for earlier in _runs_before(base):
        if Issue.objects.filter(audit_id=earlier).filter(~Q(review=Issue.Review.OPEN) | Q(reopened=True)).exists():
            # Persisting ones are on the baseline, which ``absent`` excludes: cut first, cheaply. Not "new only":
            # an audit that failed or was cancelled has no diff, so its issues have no change.
            _take_marks(issues.filter(review=Issue.Review.OPEN, reopened=False).exclude(
                change=Issue.Change.PERSISTING), earlier, absent)
        absent &= ~same_issue(earlier)


def _take_marks(unmarked, source: int, absent: Q) -> None:
    """Give the ``unmarked`` issues that no newer source holds (``absent``) the marks ``source`` has for them."""
    for mark in MARKS:
        unmarked.filter(absent).filter(marked_in(source, **mark)).update(**mark)


def _runs_before(base: Audit) -> Iterator[int]:
    """The audits ``base`` was compared with, its baseline's, and so on: CARRY_BACK of them at most, latest first."""
    earlier = base.baseline_id
    for _ in range(CARRY_BACK):
        if earlier is None:
            return
        yield earlier
        earlier = Audit.objects.filter(pk=earlier).values_list("baseline_id", flat=True).first()


def stored_counts(audit: Audit, *, include_ignored: bool = False) -> dict:
    """{"issues": {change: {severity: n}}, "pages": {change: n}} from the rows ``record`` wrote.

    Ignored issues are left out, as from every total (a new issue a site's rule
    ignores is no news, and must not send an alert), unless ``include_ignored``.
    """
    issues = {change: {severity: 0 for severity in Severity.values} for change in ISSUE_CHANGES}
    rows = Issue.objects.filter(audit=audit).exclude(change="")
    if not include_ignored:
        rows = rows.exclude(review=Issue.Review.IGNORED)
    for row in (rows.values("change", "severity")
                .annotate(n=Count("id")).order_by()):
        issues[row["change"]][row["severity"]] = row["n"]
    for row in GoneIssue.objects.filter(audit=audit).values("change", "severity").annotate(n=Count("id")).order_by():
        issues[row["change"]][row["severity"]] = row["n"]
    pages = {change: 0 for change in PAGE_CHANGES}
    for row in PageChange.objects.filter(audit=audit).values("change").annotate(n=Count("id")).order_by():
        pages[row["change"]] = row["n"]
    return {"issues": issues, "pages": pages}


def live_counts(audit: Audit, base: Audit) -> dict:
    """The same counts as ``stored_counts`` for any two audits, computed now (the compare view)."""
    issues = {change: {severity: 0 for severity in Severity.values} for change in ISSUE_CHANGES}
    for name, queryset in (("new", new_issues(audit, base)), ("persisting", persisting_issues(audit, base))):
        for row in queryset.values("severity").annotate(n=Count("id")).order_by():
            issues[name][row["severity"]] = row["n"]
    params = _params(audit, base)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT change, severity, COUNT(*) FROM ({GONE_ISSUES_SQL}) AS g GROUP BY change, severity",
                       params)
        for change, severity, n in cursor.fetchall():
            issues[change][severity] = n
        cursor.execute(f"SELECT change, COUNT(*) FROM ({PAGE_CHANGES_SQL}) AS p GROUP BY change", params)
        pages = {change: 0 for change in PAGE_CHANGES}
        pages.update(dict(cursor.fetchall()))
    return {"issues": issues, "pages": pages}


def totals(counts: dict | None) -> dict:
    """{change: n} summed over severities, for a one-line summary."""
    if not counts:
        return {}
    return {change: sum(by_severity.values()) for change, by_severity in counts["issues"].items()}
