"""CSV downloads of an audit: streamed, so an audit of any size costs the same memory."""

from __future__ import annotations

from . import exports
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
