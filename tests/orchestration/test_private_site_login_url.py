"""A login URL saved with the return address it was copied with (``/login/?next=/dashboard``) still
tells an expired session: the site sends there with another ``next``, and the crawl logs in again."""

from __future__ import annotations

import pytest

from audits.models import Audit, Page
from crawler.login import is_login_page
from tests.login_site import LoginSite
from tests.orchestration.login_audit import audit_behind_login

pytestmark = pytest.mark.django_db


def audit_saved_with_next(owner, site: LoginSite, **fields) -> Audit:
    # Copied from the address bar after the site sent there from its dashboard.
    return audit_behind_login(owner, site, login_path="/login/?next=/dashboard", **{"max_pages": 30, **fields})


def test_a_login_url_saved_with_a_next_parameter_renews_an_expired_session_once(owner, fast_settings):
    # Eight pages a session: the site sends an expired one to /login/?next=<the page asked for>.
    with LoginSite(pages=8, session_uses=8) as site:
        audit = audit_saved_with_next(owner, site, max_pages=20)
        assert audit.status == "completed", (audit.error_code, audit.error_detail)
        assert site.logins == 2
        members = set(Page.objects.filter(audit=audit, status_code=200).values_list("url", flat=True))
        assert {site.url(p) for p in site.paths()} <= members
        assert not Page.objects.filter(audit=audit, url__contains="/login/").exists()


def test_a_login_url_saved_with_a_next_parameter_fails_as_login_failed_when_the_session_keeps_expiring(
        owner, fast_settings):
    with LoginSite(pages=12, session_uses=2) as site:
        audit = audit_saved_with_next(owner, site)
        assert (audit.status, audit.error_code) == ("failed", "login_failed")
        assert "again" in audit.error_detail
        assert site.logins == 2  # the start's and the one renewal


def test_a_login_page_named_by_its_query_is_still_told_from_the_other_pages_of_its_script():
    saved = "https://shop.example/index.php?route=account/login&redirect=%2Fcart"
    assert is_login_page("https://shop.example/index.php?route=account/login&redirect=%2Forders", saved)
    assert is_login_page("https://shop.example/index.php?route=account/login", saved)
    assert not is_login_page("https://shop.example/index.php?route=common/home&redirect=%2Fcart", saved)
    # Return parameters by name (Drupal's destination has no slash) and by value (a custom name).
    assert is_login_page("https://x.example/user/login?destination=node/2", "https://x.example/user/login?destination=node/1")
    assert is_login_page("https://x.example/signin?after=/b", "https://x.example/signin?after=https://x.example/a")
