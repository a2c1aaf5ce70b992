"""Deleting an audit or a site takes it off every screen at once and leaves its rows to a worker: a big
audit's rows take longer to go than a browser or a proxy waits for an answer."""

import pytest
from django.urls import reverse

from audits import tasks
from audits.models import Audit, Issue, LinkEdge, Page, Site
from audits.services import SiteBusy, new_audit
from audits.watchdog import queued_task_names, run_watchdog
from tests.factories import SITE, make_finished_audit

pytestmark = pytest.mark.django_db


def test_a_deleted_audit_leaves_every_screen_at_once_and_a_worker_removes_its_rows(
        owner_client, owner, django_capture_on_commit_callbacks):
    doomed, kept = make_finished_audit(owner), make_finished_audit(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post(reverse("audit-delete", args=[doomed.pk]), follow=True)
    assert response.status_code == 200 and "removes its rows in the background" in response.content.decode()
    assert Audit.objects.get(pk=doomed.pk).deleting and Page.objects.filter(audit=doomed).exists()
    assert f"audit-{doomed.pk}-purge" in queued_task_names()
    listing = owner_client.get(reverse("audit-list")).content.decode()
    assert reverse("audit-detail", args=[doomed.pk]) not in listing
    assert reverse("audit-detail", args=[kept.pk]) in listing
    history = owner_client.get(reverse("site-detail", args=[doomed.site_id])).content.decode()
    assert reverse("audit-detail", args=[doomed.pk]) not in history
    for name in ("audit-detail", "audit-progress", "issue-list"):
        assert owner_client.get(reverse(name, args=[doomed.pk])).status_code == 404, name

    tasks.purge_audit(doomed.pk)
    assert not Audit.objects.filter(pk=doomed.pk).exists()
    assert not (Page.objects.filter(audit_id=doomed.pk).exists() or Issue.objects.filter(audit_id=doomed.pk).exists()
                or LinkEdge.objects.filter(audit_id=doomed.pk).exists())
    assert Page.objects.filter(audit=kept).exists()


def test_the_watchdog_enqueues_again_a_deletion_whose_task_was_lost(owner, django_capture_on_commit_callbacks):
    audit = make_finished_audit(owner)
    gone_site = make_finished_audit(owner, start_url="https://other.example/").site
    Audit.objects.filter(pk=audit.pk).update(deleting=True)
    Site.objects.filter(pk=gone_site.pk).update(deleting=True)
    with django_capture_on_commit_callbacks(execute=True):
        run_watchdog()
    names = queued_task_names()
    assert {f"audit-{audit.pk}-purge", f"site-{gone_site.pk}-purge"} <= names
    # Its site's deletion takes the site's audits: no task of their own.
    assert not any(name.startswith(f"audit-{a.pk}-purge") for a in gone_site.audits.all() for name in names)


def test_a_deleted_site_leaves_the_lists_refuses_new_audits_until_gone_and_a_worker_removes_it(
        owner_client, owner, django_capture_on_commit_callbacks):
    site = make_finished_audit(owner).site
    make_finished_audit(owner)
    with django_capture_on_commit_callbacks(execute=True):
        owner_client.post(reverse("site-delete", args=[site.pk]))
    assert f"site-{site.pk}-purge" in queued_task_names()
    assert reverse("site-detail", args=[site.pk]) not in owner_client.get(reverse("site-list")).content.decode()
    assert owner_client.get(reverse("site-detail", args=[site.pk])).status_code == 404
    assert not owner_client.get(reverse("audit-list")).context["page_obj"].object_list
    with pytest.raises(SiteBusy, match="being deleted"):
        new_audit(owner, start_url=f"{SITE}/")

    tasks.purge_site(site.pk)
    assert not Site.objects.filter(pk=site.pk).exists() and not Audit.objects.exists()
    assert new_audit(owner, start_url=f"{SITE}/").site_id != site.pk
