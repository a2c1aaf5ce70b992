from django.urls import path

from . import (
    broken_views,
    change_views,
    export_views,
    issue_views,
    page_views,
    site_access_views,
    site_views,
    views,
)
from .triage_views import issue_ignore_rule, issue_review

urlpatterns = [
    path("", views.audit_list, name="audit-list"),
    path("audits/new/", views.audit_new, name="audit-new"),
    path("audits/<int:audit_id>/", views.audit_detail, name="audit-detail"),
    path("audits/<int:audit_id>/progress/", views.audit_progress, name="audit-progress"),
    path("audits/<int:audit_id>/issues/", issue_views.issue_list, name="issue-list"),
    path("audits/<int:audit_id>/pages/", page_views.page_list, name="page-list"),
    path("audits/<int:audit_id>/pages/<int:page_id>/", page_views.page_detail, name="page-detail"),
    path("audits/<int:audit_id>/export/pages.csv", export_views.export_pages, name="export-pages"),
    path("audits/<int:audit_id>/export/issues.csv", export_views.export_issues, name="export-issues"),
    path("audits/<int:audit_id>/export/links.csv", export_views.export_links, name="export-links"),
    path("audits/<int:audit_id>/export/broken.csv", export_views.export_broken, name="export-broken"),
    path("audits/<int:audit_id>/export/verdicts.csv", export_views.export_verdicts, name="export-verdicts"),
    path("audits/<int:audit_id>/export/audit.xlsx", export_views.export_xlsx, name="export-xlsx"),
    path("audits/<int:audit_id>/export/report.html", export_views.export_report, name="export-report"),
    path("audits/<int:audit_id>/broken/", broken_views.broken_list, name="broken-list"),
    path("audits/<int:audit_id>/broken/sources/", broken_views.broken_sources, name="broken-sources"),
    path("audits/<int:audit_id>/export/changes.csv", change_views.export_changes, name="export-changes"),
    path("audits/<int:audit_id>/compare/<int:other_id>/", change_views.audit_compare, name="audit-compare"),
    path("sites/", site_views.site_list, name="site-list"),
    path("sites/<int:site_id>/", site_views.site_detail, name="site-detail"),
    # Actions change state, so they answer POST only (and the CSRF middleware checks the token).
    path("audits/<int:audit_id>/cancel/", views.audit_cancel, name="audit-cancel"),
    path("audits/<int:audit_id>/resume/", views.audit_resume, name="audit-resume"),
    path("audits/<int:audit_id>/rerun/", views.audit_rerun, name="audit-rerun"),
    path("audits/<int:audit_id>/validate/", views.audit_follow_up, {"mode": "validate"}, name="audit-validate"),
    path("audits/<int:audit_id>/delta/", views.audit_follow_up, {"mode": "delta"}, name="audit-delta"),
    path("audits/<int:audit_id>/delete/", views.audit_delete, name="audit-delete"),
    path("sites/<int:site_id>/schedule/", site_views.site_schedule, name="site-schedule"),
    path("sites/<int:site_id>/pause/", site_views.site_pause, name="site-pause"),
    path("sites/<int:site_id>/resume/", site_views.site_resume, name="site-resume"),
    path("sites/<int:site_id>/run/", site_views.site_run, name="site-run"),
    path("sites/<int:site_id>/delete/", site_views.site_delete, name="site-delete"),
    # GET shows the access form (secrets never rendered), POST saves it.
    path("sites/<int:site_id>/access/", site_access_views.site_access, name="site-access"),
    path("audits/<int:audit_id>/issues/review/", issue_review, name="issue-review"),
    path("audits/<int:audit_id>/issues/ignore-rule/", issue_ignore_rule, name="issue-ignore-rule"),
    path("sites/<int:site_id>/rules/", site_views.site_rule_add, name="site-rule-add"),
    path("sites/<int:site_id>/rules/<int:rule_id>/delete/", site_views.site_rule_delete, name="site-rule-delete"),
]
