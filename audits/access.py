"""Per-object authorisation: a person reaches only their own audits.

Every view that takes an audit id goes through ``audit_for_user``; another
person's audit answers 404 (not 403), so ids leak nothing.
"""

from django.shortcuts import get_object_or_404

from .models import Audit


def audit_for_user(request, audit_id: int) -> Audit:
    return get_object_or_404(Audit, pk=audit_id, owner=request.user)
