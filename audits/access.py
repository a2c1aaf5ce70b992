"""Per-object authorisation: a person reaches only their own audits and sites.

Every view that takes an audit or site id goes through these; another person's
answers 404 (not 403), so ids leak nothing.
"""

from django.shortcuts import get_object_or_404

from .models import Audit, Site


def audit_for_user(request, audit_id: int) -> Audit:
    # One being deleted is gone for its owner at once (audits.purge.delete_soon), and for its site's.
    return get_object_or_404(Audit, pk=audit_id, owner=request.user, deleting=False, site__deleting=False)


def site_for_user(request, site_id: int) -> Site:
    return get_object_or_404(Site, pk=site_id, owner=request.user, deleting=False)
