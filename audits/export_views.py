"""Downloads of an audit: CSVs streamed, the XLSX workbook spooled to disk, the HTML report.

Each costs the same memory whatever the audit's size (see audits.exports,
audits.xlsx_export and audits.report).
"""

from __future__ import annotations

from . import exports, report, xlsx_export
from .tables import audit_view


@audit_view("GET")
def export_pages(request, audit):
    return exports.csv_response(f"audit-{audit.pk}-pages.csv", exports.PAGE_COLUMNS, exports.page_rows(audit))


@audit_view("GET")
def export_issues(request, audit):
    return exports.csv_response(f"audit-{audit.pk}-issues.csv", exports.ISSUE_COLUMNS, exports.issue_rows(audit))


@audit_view("GET")
def export_links(request, audit):
    return exports.csv_response(f"audit-{audit.pk}-links.csv", exports.LINK_COLUMNS, exports.link_rows(audit))


@audit_view("GET")
def export_broken(request, audit):
    return exports.csv_response(f"audit-{audit.pk}-broken.csv", exports.BROKEN_COLUMNS, exports.broken_rows(audit))


@audit_view("GET")
def export_xlsx(request, audit):
    return xlsx_export.workbook_response(audit)


@audit_view("GET")
def export_report(request, audit):
    return report.report_response(audit)
