"""Downloads of an audit: CSVs streamed, the XLSX workbook spooled to disk, the HTML report.

Each costs the same memory whatever the audit's size (see audits.exports,
audits.xlsx_export and audits.report).
"""

from __future__ import annotations

from . import exports, report, xlsx_export
from .tables import audit_view

# The CSV downloads: file name part -> (header, row generator).
CSV_TABLES = {
    "pages": (exports.PAGE_COLUMNS, exports.page_rows),
    "issues": (exports.ISSUE_COLUMNS, exports.issue_rows),
    "links": (exports.LINK_COLUMNS, exports.link_rows),
    "broken": (exports.BROKEN_COLUMNS, exports.broken_rows),
    # A validation's verdicts; any other audit has none (the header alone).
    "verdicts": (exports.VERDICT_COLUMNS, exports.verdict_rows),
}


def _csv_view(table: str):
    header, rows = CSV_TABLES[table]

    @audit_view("GET")
    def view(request, audit):
        return exports.csv_response(f"audit-{audit.pk}-{table}.csv", header, rows(audit))

    view.__name__ = f"export_{table}"
    return view


export_pages = _csv_view("pages")
export_issues = _csv_view("issues")
export_links = _csv_view("links")
export_broken = _csv_view("broken")
export_verdicts = _csv_view("verdicts")


@audit_view("GET")
def export_xlsx(request, audit):
    return xlsx_export.workbook_response(audit)


@audit_view("GET")
def export_report(request, audit):
    return report.report_response(audit)
