"""The audit as one XLSX workbook: pages, issues, broken links by target and links, a sheet each.

Memory stays bounded however big the audit is: the rows come from the same
generators as the CSVs (audits.exports, read in chunks), openpyxl's write-only
mode streams each sheet to a temporary file as rows are appended and writes
strings inline (no shared-strings table held in memory), and the finished
workbook is a temporary file on disk that the response streams and then
deletes.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable

from django.http import FileResponse

from . import exports
from .models import Audit

CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
# Excel opens no more rows than this per sheet, header included, and repairs
# (truncates, with a warning) a cell holding more characters than this.
EXCEL_MAX_ROWS = 1_048_576
EXCEL_MAX_CELL = 32_767
# XML 1.0 forbids these: the C0 controls (openpyxl.cell.cell.ILLEGAL_CHARACTERS_RE),
# and U+FFFE, U+FFFF and lone surrogates, which a page can hold as &#xFFFF; and
# which lxml (under openpyxl) refuses, failing the whole download.
ILLEGAL_CHARACTERS_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# The workbook is for sharing and is written while the person waits (openpyxl
# writes about 76,000 cells a second): each sheet stops at this many rows, with
# a note, and the CSV download of the same table has every row.
WORKBOOK_MAX_ROWS = 100_000


def sheets(audit: Audit) -> list[tuple[str, list[str], Iterable[Iterable]]]:
    """(sheet title, header, rows) in workbook order; rows are generators, read once."""
    return [
        ("Pages", exports.PAGE_COLUMNS, exports.page_rows(audit)),
        ("Issues", exports.ISSUE_COLUMNS, exports.issue_rows(audit)),
        ("Broken links", exports.BROKEN_COLUMNS, exports.broken_rows(audit)),
        ("Links", exports.LINK_COLUMNS, exports.link_rows(audit)),
    ]


def cell(value, as_text=None):
    """One cell: text Excel can hold, and never a formula.

    XML 1.0 forbids most control characters (openpyxl raises on them), so they
    go first: a title "\\x01=cmd()" must not become "=cmd()" after the check.
    openpyxl takes a string opening with "=" for a formula, so ``as_text`` (a
    cell typed as text) holds it; every other string is text already. Nothing
    gets the CSVs' leading apostrophe, which a workbook would show as written
    ("'-50% sale").
    """
    if not isinstance(value, str):
        return exports.neutralise(value)  # None as empty, booleans 0/1
    value = ILLEGAL_CHARACTERS_RE.sub("", value)
    if len(value) > EXCEL_MAX_CELL:
        value = value[: EXCEL_MAX_CELL - 1] + "…"
    if value.startswith("=") and as_text is not None:
        return as_text(value)
    return value


def write_workbook(audit: Audit, target, *, max_rows: int = WORKBOOK_MAX_ROWS) -> None:
    """Write the audit's workbook to ``target`` (a path or a binary file).

    A sheet whose rows would pass ``max_rows`` (header included) keeps one row
    fewer and ends with a note saying so: the CSV download of the same table
    has every row.
    """
    # Imported here: openpyxl adds about 6 MB to every process that loads the URLs
    # (web, workers, the audit command), and only a workbook download needs it.
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell

    workbook = Workbook(write_only=True)
    for title, header, rows in sheets(audit):
        sheet = workbook.create_sheet(title)

        def text(value, sheet=sheet):
            written = WriteOnlyCell(sheet, value=value)
            written.data_type = "s"  # an inline string: shown as typed, never evaluated
            return written

        sheet.append(header)
        rows = iter(rows)
        room = max_rows - 2  # the header, and the note should one be needed
        for written, row in enumerate(rows):
            if written == room:
                after = next(rows, None)
                if after is None:  # the last row: it fits where the note would go
                    sheet.append([cell(value, text) for value in row])
                else:
                    sheet.append([f"Only the first {room:,} rows are in this workbook; "
                                  f"the CSV download of this table has them all."])
                break
            sheet.append([cell(value, text) for value in row])
    workbook.save(target)


def workbook_response(audit: Audit) -> FileResponse:
    # Deleted when closed, which the response does once it has sent the file.
    spool = tempfile.NamedTemporaryFile(prefix=f"siteward-audit-{audit.pk}-", suffix=".xlsx")  # noqa: SIM115
    try:
        write_workbook(audit, spool)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    response = FileResponse(spool, as_attachment=True, filename=f"audit-{audit.pk}.xlsx", content_type=CONTENT_TYPE)
    # A report is personal data about someone's site: never cache it on the way.
    response["Cache-Control"] = "private, no-store"
    return response
