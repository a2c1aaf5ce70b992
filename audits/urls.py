from django.urls import path

from . import views

urlpatterns = [
    path("", views.audit_list, name="audit-list"),
    path("audits/new/", views.audit_new, name="audit-new"),
    path("audits/<int:audit_id>/", views.audit_detail, name="audit-detail"),
    path("audits/<int:audit_id>/progress/", views.audit_progress, name="audit-progress"),
    path("audits/<int:audit_id>/issues/", views.issue_list, name="issue-list"),
    path("audits/<int:audit_id>/pages/", views.page_list, name="page-list"),
    path("audits/<int:audit_id>/pages/<int:page_id>/", views.page_detail, name="page-detail"),
    path("audits/<int:audit_id>/export/pages.csv", views.export_pages, name="export-pages"),
    path("audits/<int:audit_id>/export/issues.csv", views.export_issues, name="export-issues"),
    path("audits/<int:audit_id>/export/links.csv", views.export_links, name="export-links"),
    # Actions change state, so they answer POST only (and the CSRF middleware checks the token).
    path("audits/<int:audit_id>/cancel/", views.audit_cancel, name="audit-cancel"),
    path("audits/<int:audit_id>/resume/", views.audit_resume, name="audit-resume"),
    path("audits/<int:audit_id>/rerun/", views.audit_rerun, name="audit-rerun"),
    path("audits/<int:audit_id>/delete/", views.audit_delete, name="audit-delete"),
]
