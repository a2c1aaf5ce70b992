"""A redirect loop is reported once, as a loop: it is not also a redirect to a broken
page, since it never ends anywhere. Found after a real crawl of a loopback site."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite
from tests.scripted_site import html_page as page

pytestmark = pytest.mark.django_db




def test_a_redirect_loop_is_a_loop_and_not_a_redirect_to_a_broken_page(owner, fast_settings):
    site = ScriptedSite()
    with site:
        site.pages.update({
            "/": page("Home", "/loop-a", "/moved"),
            "/loop-a": Answer(status=301, headers={"Location": "/loop-b"}),
            "/loop-b": Answer(status=301, headers={"Location": "/loop-a"}),
            "/moved": Answer(status=301, headers={"Location": "/gone"}),
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    found = set(Issue.objects.filter(audit=audit, code__in=["redirect_loop", "redirect_broken_target"])
                .values_list("code", "url"))
    assert found == {("redirect_loop", site.url("/loop-a")), ("redirect_broken_target", site.url("/moved"))}
