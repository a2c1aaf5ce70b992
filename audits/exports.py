"""CSV reports of an audit's pages, issues and links, streamed row by row.

Memory stays flat however big the audit is: rows come from ``.iterator()`` in
chunks and each is written to the response as soon as it is formatted (the
``Echo`` pattern from Django's "Outputting CSV" how-to). Column names are part
of the contract with whoever imports these files, so they only ever grow at the
end. The row generators here feed the XLSX workbook too (audits.xlsx_export).
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterable, Iterator

from django.db.models import OuterRef, Subquery
from django.http import StreamingHttpResponse

from crawler.catalogue import CATALOGUE

from . import broken, validation
from .models import Audit, GoneIssue, Issue, LinkEdge, Page, PageChange

CHUNK_SIZE = 2000

# A spreadsheet treats a cell starting with one of these as a formula, so a
# crawled title like =HYPERLINK(...) would run on the reader's machine (OWASP
# "CSV Injection"). Prefixing a quote makes it plain text. Every text cell is
# also quoted: a spreadsheet set to split on ";" would otherwise start a new
# cell inside "a;=cmd()", after the check above.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class Echo:
    """A file-like object whose write() hands back what it was given."""

    def write(self, value: str) -> str:
        return value


def neutralise(value) -> str | int | float:
    """One CSV cell: None becomes empty, booleans 0/1, formula-like text gets a leading '."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


# Excel reads a CSV without a byte order mark in the machine's legacy code page
# (Windows-1252 and the like), turning every non-ASCII title into mojibake; with
# it, Excel reads UTF-8. Python's "utf-8-sig" and most CSV readers skip it.
BOM = "\ufeff"


def _stream(header: list[str], rows: Iterable[Iterable]) -> Iterator[str]:
    writer = csv.writer(Echo(), quoting=csv.QUOTE_NONNUMERIC)
    yield BOM + writer.writerow(header)
    for row in rows:
        yield writer.writerow([neutralise(cell) for cell in row])


def csv_response(filename: str, header: list[str], rows: Iterable[Iterable]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_stream(header, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    # A report is personal data about someone's site: never cache it on the way.
    response["Cache-Control"] = "private, no-store"
    return response


PAGE_COLUMNS = [
    "url", "final_url", "kind", "status_code", "fetch_error", "fetch_error_detail", "content_type",
    "depth", "title", "description", "canonical", "h1_count", "word_count", "indexable", "in_sitemap",
    "robots", "inlinks", "outlinks", "size_bytes", "ttfb_ms", "total_ms", "redirect_chain", "crawled_at",
]


def page_rows(audit: Audit) -> Iterator[list]:
    fields = [c for c in PAGE_COLUMNS if c != "redirect_chain"] + ["redirect_chain"]
    rows = Page.objects.filter(audit=audit).order_by("id").values_list(*fields)
    position = PAGE_COLUMNS.index("redirect_chain")
    for values in rows.iterator(chunk_size=CHUNK_SIZE):
        row = list(values[:-1])
        # The chain is stored as [[url, status, location], ...]; a compact
        # "status url -> location" list is what a spreadsheet reader can use.
        chain = values[-1] or []
        row.insert(position, " | ".join(_hop_text(hop) for hop in chain))
        yield row


def _hop_text(hop) -> str:
    if isinstance(hop, list | tuple) and len(hop) >= 3:
        return f"{hop[1]} {hop[0]} -> {hop[2]}"
    return json.dumps(hop)


# For link issues (a broken link, a link to a redirect) "page_url" is the page
# the link is on and "target_url" the URL it points at.
ISSUE_COLUMNS = [
    "severity", "code", "title", "page_url", "target_url", "message", "review", "page_status_code",
]


def issue_rows(audit: Audit) -> Iterator[list]:
    rows = (
        Issue.objects.filter(audit=audit).order_by("id")
        .values_list("severity", "code", "url", "target_url", "message", "review", "page__status_code")
    )
    for severity, code, url, target, message, review, status in rows.iterator(chunk_size=CHUNK_SIZE):
        issue_type = CATALOGUE.get(code)
        yield [severity, code, issue_type.title if issue_type else code, url, target, message, review, status]


LINK_COLUMNS = ["source_url", "target_url", "tag", "anchor_text", "nofollow", "internal", "target_status_code",
                "target_fetch_error"]


def link_rows(audit: Audit) -> Iterator[list]:
    # The target's status comes from its Page row through the (audit, url_hash)
    # unique index, one indexed lookup per link; targets never fetched stay empty.
    target = Page.objects.filter(audit=audit, url_hash=OuterRef("target_hash"))
    rows = (
        # By source page: the (audit, source_hash) index gives that order, where one by id would sort every edge first.
        LinkEdge.objects.filter(audit=audit).order_by("source_hash", "id")
        .annotate(
            target_status=Subquery(target.values("status_code")[:1]),
            target_error=Subquery(target.values("fetch_error")[:1]),
        )
        .values_list("source_url", "target_url", "tag", "anchor_text", "nofollow", "internal",
                     "target_status", "target_error")
    )
    yield from rows.iterator(chunk_size=CHUNK_SIZE)


# Broken links by target (audits.broken): one row per dead URL, most linked first.
# "linking_pages" counts distinct source pages, "links" the broken-link issues
# (a page linking twice with two anchors is one page, two links); "sources"
# names the first BROKEN_SOURCES of them, the screen lists them all.
BROKEN_COLUMNS = ["target_url", "kind", "status_code", "fetch_error", "failure", "linking_pages", "links",
                  "sources", "redirected"]
BROKEN_SOURCES = 10
# Targets decorated together (two queries a batch, audits.broken.describe): an
# IN list well under the 999 bound parameters of SQLite builds before 3.32.
BROKEN_BATCH = 500


def broken_rows(audit: Audit) -> Iterator[list]:
    groups = broken.targets(audit).order_by(*broken.TARGET_SORTS["-sources"]).iterator(chunk_size=CHUNK_SIZE)
    while batch := list(itertools.islice(groups, BROKEN_BATCH)):
        for row in broken.describe(audit, batch, preview=BROKEN_SOURCES):
            yield [row["target_url"], row["scope"], row["status_code"], row["fetch_error"], row["failure"],
                   row["sources"], row["links"], " | ".join(s["url"] for s in row["sources_preview"]),
                   row["redirected"]]


# What changed since the baseline audit (audits.diff): issues new, persisting,
# fixed or unknown, then pages added, removed or changed. Empty without a baseline.
# Ignored issues are left out, as the panel and the lists the changes link to leave them out.
CHANGE_COLUMNS = ["change", "kind", "severity", "code", "title", "url", "target_url", "detail"]


def change_rows(audit: Audit) -> Iterator[list]:
    if audit.change_counts is None:
        return
    issues = (Issue.objects.filter(audit=audit).exclude(change="").exclude(review=Issue.Review.IGNORED)
              .order_by("change", "id")
              .values_list("change", "severity", "code", "url", "target_url", "message"))
    gone = (GoneIssue.objects.filter(audit=audit).order_by("change", "id")
            .values_list("change", "severity", "code", "url", "target_url", "message"))
    for queryset in (issues, gone):
        for change, severity, code, url, target, message in queryset.iterator(chunk_size=CHUNK_SIZE):
            issue_type = CATALOGUE.get(code)
            yield [change, "issue", severity, code, issue_type.title if issue_type else code, url, target, message]
    for page in PageChange.objects.filter(audit=audit).order_by("change", "id").iterator(chunk_size=CHUNK_SIZE):
        detail = ", ".join(page.what_changed()) if page.change == PageChange.Change.CHANGED else (
            f"status {page.status_after or '—'}" if page.change == PageChange.Change.ADDED
            else f"was status {page.status_before or '—'}")
        yield [page.change, "page", "", "", "", page.url, "", detail]


# A validation's verdict on each issue it re-checked (audits.validation), in the
# checklist's order: still there, then unknown, then fixed. The screen shows the
# first rows only; this has every one. "message" is the re-checked issue's detail,
# "why" says why an unknown could not be judged (empty for the other results).
VERDICT_COLUMNS = ["result", "severity", "code", "title", "url", "target_url", "message", "why"]


def verdict_rows(audit: Audit) -> Iterator[list]:
    for v in validation.verdicts(audit):
        yield [v.result, v.severity, v.code, v.title, v.url, v.target_url, v.message, v.why]
