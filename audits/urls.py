from django.urls import path

from . import views

urlpatterns = [
    path("", views.audit_list, name="audit-list"),
    path("audits/<int:audit_id>/", views.audit_detail, name="audit-detail"),
]
