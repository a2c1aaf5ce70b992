""""Run now" on a site whose audit is queued or running: refused with a message, as a scheduled run is skipped."""

import pytest
from django.urls import reverse

from audits.models import Audit
from audits.services import SiteBusy, run_site_now
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("status", [Audit.Status.QUEUED, Audit.Status.RUNNING, Audit.Status.FINALIZING])
def test_run_now_while_an_audit_of_the_site_is_active_is_refused_and_the_site_page_says_why(
        owner, owner_client, status):
    active = make_audit(owner, status=status)
    site = active.site

    response = owner_client.post(reverse("site-run", args=[site.pk]), follow=True)

    assert response.redirect_chain == [(site.get_absolute_url(), 302)]
    assert "An audit of this site is already queued or running" in response.content.decode()
    assert list(site.audits.all()) == [active]


def test_run_now_starts_an_audit_once_the_sites_previous_one_has_ended(owner):
    active = make_audit(owner, status=Audit.Status.RUNNING)
    with pytest.raises(SiteBusy):
        run_site_now(active.site)
    active.cancel()

    audit = run_site_now(active.site)

    assert audit.status == Audit.Status.QUEUED and audit.site_id == active.site_id


def test_run_now_on_another_site_of_the_owner_is_not_held_up(owner, owner_client):
    make_audit(owner, status=Audit.Status.RUNNING)
    other = make_audit(owner, start_url="https://other.example/", status=Audit.Status.COMPLETED).site

    response = owner_client.post(reverse("site-run", args=[other.pk]))

    assert response.status_code == 302 and other.audits.count() == 2
