"""An audit of a loopback ``LoginSite`` logged in through its form, run in-process to its end."""

from __future__ import annotations

from audits.inline import run_audit_inline
from audits.models import Audit, SiteAccess
from tests.factories import make_audit
from tests.login_site import PASSWORD, USER, LoginSite


def audit_behind_login(owner, site: LoginSite, *, login_path: str = "/login/", success: str = r"Members",
                       **fields) -> Audit:
    """Crawl ``site`` from its home page with the form login at ``login_path``; the audit, refreshed."""
    fields = {"max_pages": 40, "max_depth": 3, "concurrency": 1, **fields}
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, **fields)
    access = SiteAccess(site=audit.site)
    access.set_login(site.url(login_path), {"username": USER}, {"password": PASSWORD}, success)
    access.save()
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    return audit
