"""Validation: re-check only what carried an earlier audit's issues, and judge each of those issues.

A validation audit (``Audit.Mode.VALIDATE``) fetches the URLs that carried the
source audit's issues (ignored ones left out) and the targets of its link
issues, follows no link beyond them, and runs the link checks again at
finalize. Its baseline is the source, so the diff finalize stores is the
verdict: an issue reported again is still there, one gone is fixed or unknown
(``audits.diff.GONE_ISSUES_SQL``, with the site-wide checks unknown). Finalize
keeps each verdict with a copy of the issue (``RecheckedIssue``): the checklist
reads only those, whatever becomes of the source afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Q

from crawler.catalogue import (
    CATALOGUE,
    FRAGMENT_CODES,
    LINK_CODES,
    PAGE_AND_CROSS_CODES,
    SITE_READ_CODES,
    SITE_WIDE_CODES,
    START_CODES,
)
from crawler.page import REDIRECT_TAG
from crawler.robots import Robots
from crawler.types import UNVERIFIED_STATUSES, FetchError
from crawler.urls import InvalidURL, normalize, origin_of, url_hash

from .diff import IGNORED_IN_SQL, SPANS_SITE_SQL
from .knobs import knob
from .models import Audit, IgnoreRule, Issue, LinkEdge, Page

# Hashes per IN (...) lookup, as the crawl's (audits.crawl.admission).
LOOKUP_BATCH = 500

RESULTS = ("still", "unknown", "fixed")
RESULT_LABELS = {"still": "Still there", "unknown": "Unknown", "fixed": "Fixed"}


@dataclass(frozen=True, slots=True)
class Target:
    """A URL the validation fetches: as the source audit stored it, or an unstored link target."""

    url: str
    kind: str
    depth: int


def settle_ignores(source: Audit) -> int:
    """Mark ignored the open issues of ``source`` that a person has ignored since (and reviewed the ones
    reviewed on a validation of it); how many changed.

    A site's ignore rule is applied to whichever audit was latest, often a
    validation, and an issue marked on a validation is that validation's row;
    the next validation of ``source`` re-checks what is open in it. So both
    are carried to ``source`` first: ignored stays ignored.
    """
    changed = IgnoreRule.objects.apply_to(source) + source.adopt_validation_marks()
    if changed:
        source.rescore()
    return changed


def checked(source: Audit):
    """The source's issues a validation re-checks: all but the ignored."""
    return Issue.objects.filter(audit=source).exclude(review=Issue.Review.IGNORED)


def start_rechecks(audit: Audit) -> frozenset[str]:
    """The codes of the source's re-checked issues that the start step judges from the sitemaps and
    the http:// probe (SITE_READ_CODES): what a validation's start reads them for."""
    if audit.source is None:
        return frozenset()
    return frozenset(checked(audit.source).filter(code__in=SITE_READ_CODES).order_by()
                     .values_list("code", flat=True).distinct())


def source_origin(audit: Audit) -> str:
    """Where the re-checked audit crawled; empty once it is deleted."""
    return Audit.objects.filter(pk=audit.source_id).values_list("origin", flat=True).first() or ""


def targets(source: Audit) -> Iterator[Target]:
    """The URLs that carried the source's issues, and their link issues' targets, each once.

    Site-wide issues need the whole crawl, so their URLs are fetched only if
    another issue needs them (a page's own hreflang tags are its page check's: its
    URL is fetched); start issues (robots.txt, sitemaps) are the start step's.
    """
    issues = checked(source).exclude(Q(code__in=SITE_WIDE_CODES) & ~Q(code__in=PAGE_AND_CROSS_CODES, target_url=""))
    hashes = set(issues.exclude(page=None).values_list("url_hash", flat=True))
    linked = set(issues.filter(code__in=LINK_CODES).exclude(target_url="").values_list("target_url", flat=True))
    # A missing anchor's target is "URL#fragment": the page is fetched, to read its anchors again, and so
    # is where it redirected to in the source (the check judges a redirect by the page it lands on).
    pointed = {target.split("#", 1)[0] for target in issues.filter(code__in=FRAGMENT_CODES).values_list(
        "target_url", flat=True)}
    linked |= pointed
    hashes |= {url_hash(url) for url in linked} | _landings(source, sorted(url_hash(url) for url in pointed))
    ordered = sorted(hashes)
    seen = set()
    for start in range(0, len(ordered), LOOKUP_BATCH):
        stored = Page.objects.filter(audit=source, url_hash__in=ordered[start:start + LOOKUP_BATCH])
        for url, kind, depth in stored.values_list("url", "kind", "depth"):
            seen.add(url)
            yield Target(url, kind, depth)
    for url in sorted(linked - seen):
        try:
            internal = origin_of(url) == source.origin
        except InvalidURL:
            continue
        yield Target(url, Page.Kind.PAGE if internal else Page.Kind.EXTERNAL, 1)


def _landings(source: Audit, hashes: list[str]) -> set[str]:
    """Where the pages among ``hashes`` redirected to in ``source`` (its pages' one outlink), by URL hash."""
    landed: set[str] = set()
    for start in range(0, len(hashes), LOOKUP_BATCH):
        landed.update(LinkEdge.objects.filter(audit=source, tag=REDIRECT_TAG, source_hash__in=hashes[
            start:start + LOOKUP_BATCH]).values_list("target_hash", flat=True))
    return landed


def page_count(source: Audit) -> int:
    """How many pages a validation of ``source`` fetches: its page budget."""
    return sum(1 for target in targets(source) if target.kind == Page.Kind.PAGE)


# One row per re-checked issue of the source, as finalize judged it (audits.diff.RECHECKED_SQL): read from the
# validation's own rows, so it stays whatever becomes of the source. One ignored on the validation since leaves
# at once, matched as its verdict was (a link whose anchor text changed by code, page and target).
CHECKLIST_SQL = f"""
    SELECT b.result, b.code, b.severity, b.url, b.target_url, b.message
    FROM audits_recheckedissue b
    WHERE b.audit_id = %(audit)s AND NOT {IGNORED_IN_SQL}
"""
# The unknown verdicts a validation could have settled (``unsettled``): the checklist's, less the site-wide checks.
UNSETTLED_SQL = f"""
    SELECT COUNT(*) FROM audits_recheckedissue b
    WHERE b.audit_id = %(audit)s AND b.result = 'unknown' AND NOT {SPANS_SITE_SQL} AND NOT {IGNORED_IN_SQL}
"""
ORDER = " ORDER BY CASE result WHEN 'still' THEN 0 WHEN 'unknown' THEN 1 ELSE 2 END, " \
        "CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, code, url"


@dataclass(frozen=True, slots=True)
class Verdict:
    result: str
    code: str
    severity: str
    url: str
    target_url: str
    message: str
    start_why: str = ""  # a start code's unknown: what happened at the validation's start (``start_whys``)
    url_why: str = ""  # a page's or a link's unknown: what the validation's fetch of its URL says (``url_whys``)

    @property
    def type(self):
        return CATALOGUE.get(self.code)

    @property
    def title(self) -> str:
        return self.type.title if self.type else self.code

    @property
    def spans_site(self) -> bool:
        """A check across the whole site, which a validation never re-runs: its issue is unknown by design."""
        return site_wide(self.code, self.target_url)

    @property
    def why(self) -> str:
        """Why an unknown is unknown; empty for the other results."""
        if self.result != "unknown":
            return ""
        if self.spans_site:
            return "A check across the whole site: a validation, which re-fetches a few URLs, cannot re-run it."
        if self.start_why or self.url_why:
            return self.start_why or self.url_why
        if self.code in LINK_CODES:
            return ("The page or the link's target could not be fetched this time, or the page now redirects, "
                    "or the page was rendered last time and could not be this time.")
        if self.code in FRAGMENT_CODES:
            return ("The page, or the page its link points at, could not be read this time: it failed, redirects "
                    "somewhere it did not before (a validation follows no new link), is not HTML, or has more "
                    "anchors than are kept.")
        return ("The URL could not be fetched this time, or was not checked as a page: it failed, now redirects, "
                "is no longer read as HTML, its checks broke, or it was rendered last time and could not be this time.")


def site_wide(code: str, target_url: str) -> bool:
    """Whether an issue is a check across the whole site, which a validation cannot re-run (not a page's own tags)."""
    return code in SITE_WIDE_CODES and not (code in PAGE_AND_CROSS_CODES and not target_url)


def crawled_by(audit: Audit) -> Robots | None:
    """The robots.txt the validation crawled by; None when it did not (its start failed before reading it)."""
    if not audit.respect_robots or audit.robots_status != "ok":
        return None
    return Robots.from_stored(audit.robots_status, audit.robots_http_status, audit.robots_body)


def url_whys(audit: Audit, rows: list[tuple], robots: Robots | None) -> dict[tuple[str, str], str]:
    """Why the unknown page and link verdicts among ``rows`` (CHECKLIST_SQL's) are unknown, by (url, target): what
    ``audit`` stored of the URL, else of a link's target; ``robots`` is what it crawled by (``crawled_by``). A row
    that says nothing (the URL answered 2xx as a page: its render or its checks failed) leaves ``Verdict.why``'s
    general words."""
    asked = [(url, target if code in LINK_CODES else "") for result, code, _, url, target, _ in rows
             if result == "unknown" and code not in START_CODES and not site_wide(code, target)]
    hashes = sorted({url_hash(url) for pair in asked for url in pair if url})
    pages = {}
    for start in range(0, len(hashes), LOOKUP_BATCH):
        found = Page.objects.filter(audit=audit, url_hash__in=hashes[start:start + LOOKUP_BATCH]).annotate(
            parsed=ExpressionWrapper(Q(head_facts__isnull=False), output_field=BooleanField()))
        pages.update((row[0], row[1:]) for row in found.values_list(
            "url_hash", "fetch_error", "status_code", "redirect_count", "final_url", "parsed"))
    agent = audit.user_agent or knob("USER_AGENT")

    def said(url: str, *, target: bool = False) -> str:
        what, whom = ("The link's target", "the link's target") if target else ("It", "this URL")
        page = pages.get(url_hash(url))
        if page is None:
            if robots is not None and not robots.allowed(url, agent):
                return f"robots.txt now disallows {whom}: it was not fetched this time."
            return (f"{what} was not fetched this time: it is outside the crawl's limits now (another origin, "
                    "an excluded path, the logout URL), or the crawl stopped before it.")
        error, status, redirects, final, parsed = page
        if error:
            return f"{what} gave no answer this time: {_failure(error)}."
        if target:  # one that answered says nothing unless its answer does: the page's render or checks may be why
            return (f"{what} answered {status} this time, as servers answer crawlers they refuse: it says nothing "
                    "of the link." if status in UNVERIFIED_STATUSES else "")
        if redirects:
            return f"{what} now redirects to {final}: the URL itself was not checked as a page."
        if status is None or not 200 <= status < 300:
            return f"{what} answered {status} this time."
        if not parsed:
            return f"{what} was not read as an HTML page this time (served as another type, or cut at the size cap)."
        return ""

    return {(url, target): said(url) or (said(target, target=True) if target else "") for url, target in asked}


_NOT_READ = "so the sitemaps and the http:// address were not read."


def start_whys(audit: Audit) -> dict[str, str]:
    """Why the start codes' issues (START_CODES) are unknown, by code, from what ``audit``'s start stored.

    Its sitemaps unread (``sitemap_found`` None): robots.txt refused the start page, which has no row
    then, or the start page gave no answer, whose row says how. Else an issue is unknown because it was
    reported again for another address (the start page lands elsewhere now), or because the start read
    it but could not judge it: the http:// probe got no answer, the sitemaps or robots.txt were read short.
    """
    whys = {code: f"Reported again this time for {url}: the start page now lands elsewhere, and this address "
                  "was not read again."
            for code, url in Issue.objects.filter(audit=audit, code__in=START_CODES).order_by("url")
            .values_list("code", "url")}
    if audit.http_unsure:
        whys["http_not_redirected"] = f"The http:// form could not be judged this time: {audit.http_unsure}."
    # The start read them in part (audits.diff.START_UNREAD).
    short = dict(Issue.objects.filter(audit=audit, code__in=["sitemaps_partly_read", "robots_txt_unavailable"])
                 .order_by("url").values_list("code", "message"))
    if "sitemaps_partly_read" in short:
        whys["sitemap_invalid"] = ("The sitemaps were read only in part this time, and this file may be among "
                                   f"those not read: {short['sitemaps_partly_read']}")
    if "robots_txt_unavailable" in short:
        whys["robots_txt_missing"] = f"robots.txt could not be read this time: {short['robots_txt_unavailable']}"
    if audit.sitemap_found is None:
        try:
            start = url_hash(normalize(audit.start_url))
        except InvalidURL:
            start = ""
        row = Page.objects.filter(audit=audit, url_hash=start).values_list("status_code", "fetch_error").first()
        if row is None:
            why = f"robots.txt now disallows the start page, {_NOT_READ}"
        elif row[0] is None and row[1]:
            why = f"The start page gave no answer this time ({_failure(row[1])}), {_NOT_READ}"
        else:
            why = "The sitemaps and the http:// address were not read this time."
        whys.update(dict.fromkeys(SITE_READ_CODES, why))
    return whys


def _failure(error: str) -> str:
    """A stored fetch error as people read it."""
    try:
        return FetchError(error).label.lower()
    except ValueError:
        return error.replace("_", " ")


def checklist(audit: Audit, *, limit: int | None = None) -> list[Verdict]:
    """The validation's verdict on each re-checked issue: still there first, then unknown, then fixed."""
    return list(verdicts(audit, limit=limit))


# Verdicts read from the cursor this many at a time: a re-check of 100,000 issues never holds them all
# (a server-side cursor on PostgreSQL, whose client-side one fetches the whole result first).
FETCH_BATCH = 2000


def verdicts(audit: Audit, *, limit: int | None = None) -> Iterator[Verdict]:
    """``checklist``'s verdicts one at a time, for a report of any size."""
    if audit.mode != Audit.Mode.VALIDATE:
        return
    sql = f"SELECT * FROM ({CHECKLIST_SQL}) AS v" + ORDER
    params = {"audit": audit.pk}
    if limit is not None:
        sql += " LIMIT %(limit)s"
        params["limit"] = limit
    whys = start_whys(audit)
    robots = crawled_by(audit)  # once: a body of up to 512 KB, parsed again for every batch otherwise
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(FETCH_BATCH):
            answers = url_whys(audit, rows, robots)
            yield from (Verdict(*row, start_why=whys.get(row[1], "") if row[0] == "unknown" else "",
                                url_why=answers.get((row[3], row[4] if row[1] in LINK_CODES else ""), ""))
                        for row in rows)


def unsettled(audit: Audit, severities) -> int:
    """How many unknown verdicts at ``severities`` this validation could have settled and did not.

    Its re-check did not run or came short: the URL was not fetched, not read as
    a page or broken another way, robots.txt now refuses it, the start page gave
    no answer, the http:// probe, sitemaps or robots.txt read short. The checks across
    the whole site (``Verdict.spans_site``) are left out: no validation ever
    settles them, and counting them would fail every re-check of such an issue.

    Counted in SQL over the stored verdicts, as the checklist reads them: never a pass over their whys.
    """
    chosen = sorted(set(severities))
    if audit.mode != Audit.Mode.VALIDATE or not chosen:
        return 0
    params = {"audit": audit.pk, **{f"severity_{n}": severity for n, severity in enumerate(chosen)}}
    listed = ", ".join(f"%(severity_{n})s" for n in range(len(chosen)))
    with connection.cursor() as cursor:
        cursor.execute(f"{UNSETTLED_SQL} AND b.severity IN ({listed})", params)
        return cursor.fetchone()[0]


def counts(audit: Audit) -> dict[str, int] | None:
    """{result: n} for a finished validation; None for any other audit."""
    if audit.mode != Audit.Mode.VALIDATE or audit.status != Audit.Status.COMPLETED:
        return None
    found = {result: 0 for result in RESULTS}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT result, COUNT(*) FROM ({CHECKLIST_SQL}) AS v GROUP BY result", {"audit": audit.pk})
        found.update(dict(cursor.fetchall()))
    return found
