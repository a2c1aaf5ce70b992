"""One active audit a site: every way a person starts one waits for the site's running audit, as run now does."""


import threading

import pytest
from django.db import connection
from django.urls import reverse

from audits.models import Audit
from audits.services import SiteBusy, resume_audit
from tests.dashboard.posting import post_at_once
from tests.factories import SITE, make_audit, make_finished_audit

pytestmark = pytest.mark.django_db

BUSY = "An audit of this site is already queued or running"
FORM = {
    "start_url": f"{SITE}/", "max_pages": "500", "max_depth": "10", "concurrency": "8", "rate": "",
    "include_patterns": "", "exclude_patterns": "", "respect_robots": "on", "check_external": "on",
    "user_agent": "",
}


def test_the_new_audit_form_for_a_site_with_an_active_audit_answers_409_and_names_it(owner_client, owner):
    active = make_audit(owner, status=Audit.Status.RUNNING)

    response = owner_client.post(reverse("audit-new"), FORM)

    assert response.status_code == 409
    assert BUSY in response.content.decode() and f"(audit {active.pk})" in response.content.decode()
    assert list(Audit.objects.all()) == [active]
    # Another site of the same person is not held up.
    assert owner_client.post(reverse("audit-new"), {**FORM, "start_url": "https://other.example/"}).status_code == 302


def test_re_run_re_check_and_re_crawl_wait_for_the_sites_active_audit(owner_client, owner):
    done = make_finished_audit(owner)
    active = make_audit(owner, status=Audit.Status.QUEUED)

    for name in ("audit-rerun", "audit-validate", "audit-delta"):
        response = owner_client.post(reverse(name, args=[done.pk]), follow=True)
        assert response.redirect_chain == [(done.get_absolute_url(), 302)], name
        assert BUSY in response.content.decode(), name
    assert set(Audit.objects.all()) == {done, active}

    active.cancel()
    owner_client.post(reverse("audit-rerun", args=[done.pk]))
    assert Audit.objects.filter(status=Audit.Status.QUEUED).count() == 1


def test_resuming_a_failed_audit_waits_for_another_active_audit_of_its_site(owner_client, owner):
    failed = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled")
    active = make_audit(owner, status=Audit.Status.RUNNING)

    response = owner_client.post(reverse("audit-resume", args=[failed.pk]), follow=True)

    assert BUSY in response.content.decode()
    failed.refresh_from_db()
    assert failed.status == Audit.Status.FAILED
    active.cancel()
    owner_client.post(reverse("audit-resume", args=[failed.pk]))
    failed.refresh_from_db()
    assert failed.status == Audit.Status.QUEUED


def test_the_admin_re_runs_two_audits_of_one_site_as_one_and_says_why_not_the_other(superuser_client, owner):
    first, second = make_finished_audit(owner), make_finished_audit(owner)
    url = reverse("admin:audits_audit_changelist")

    response = superuser_client.post(url, {"action": "rerun_audits", "_selected_action": [first.pk, second.pk]},
                                     follow=True)

    body = response.content.decode()
    assert "Started 1 new audit(s)." in body and BUSY in body
    assert Audit.objects.filter(status=Audit.Status.QUEUED).count() == 1


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_submissions_of_one_site_start_one_audit(owner, allow_private):
    forms = [{**FORM, "start_url": "http://127.0.0.1:9/"}] * 20
    assert post_at_once(owner, forms, reverse("audit-new")) == [302] + [409] * 19
    assert Audit.objects.filter(owner=owner).count() == 1


@pytest.mark.django_db(transaction=True)
def test_resume_pressed_several_times_at_once_resumes_once_and_refuses_none_as_busy(owner):
    failed = make_finished_audit(owner, status=Audit.Status.FAILED, error_code="stalled")
    barrier, answers = threading.Barrier(5), []

    def press():
        try:
            barrier.wait(timeout=10)
            answers.append(resume_audit(Audit.objects.get(pk=failed.pk)))
        except SiteBusy as exc:  # the other presses' own audit, taken for another one
            answers.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=press) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(answers, key=str) == [False] * 4 + [True]
