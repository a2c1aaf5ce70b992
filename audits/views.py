"""Screens. Function views that render a whole page or, for HTMX requests, a partial of it."""

from django.core.paginator import Paginator
from django.shortcuts import render

from .access import audit_for_user
from .models import Audit


def audit_list(request):
    audits = Audit.objects.filter(owner=request.user).order_by("-created_at", "-id")
    page = Paginator(audits, 25).get_page(request.GET.get("page"))
    return render(request, "audits/audit_list.html", {"page_obj": page})


def audit_detail(request, audit_id):
    audit = audit_for_user(request, audit_id)
    return render(request, "audits/audit_detail.html", {"audit": audit})
