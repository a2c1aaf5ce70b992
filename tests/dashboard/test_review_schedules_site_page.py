"""The site page's schedule form and alert log: refused input kept, the saved schedule shown, failures visible."""

import re

import pytest
from django.urls import reverse
from django_q.models import Schedule

from audits.models import Audit, Notification, Site
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def schedule_data(**fields) -> dict:
    data = {"cadence": "daily", "minute": 30, "hour": 2, "weekday": 1, "cron": "", "time_zone": "UTC",
            "notify_severity": "critical", "notify_on_failure": "on", "notify_email": "on", "webhook_url": ""}
    return data | fields


def schedule_state(response) -> str:
    match = re.search(r'<p id="schedule-state">(.*?)</p>', response.content.decode(), re.S)
    return match.group(1)


@pytest.mark.parametrize("cron", ["R 3 * * *", "0 R * * *", "0 R(1-5) * * *", "0 3 * * R"])
def test_a_cron_expression_with_random_values_is_refused_with_a_message(owner_client, owner, cron):
    site = make_audit(owner).site
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data(cadence="cron", cron=cron))
    assert response.status_code == 400
    assert "Random (R) and hashed (H) values are not supported" in " ".join(response.context["form"].errors["cron"])
    assert not Schedule.objects.filter(name=f"site-{site.pk}").exists()


def test_a_refused_schedule_keeps_the_input_and_the_page_shows_the_schedule_as_saved(owner_client, owner):
    site = make_audit(owner).site
    # intranet.example.com resolves to 10.1.2.3 in the test DNS stub: a refused webhook.
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data(
        hour=5, time_zone="Asia/Tokyo", webhook_url="http://intranet.example.com/hook"))
    assert response.status_code == 400
    page = response.content.decode()
    assert "intranet.example.com points at a private address" in page
    assert 'value="http://intranet.example.com/hook"' in page and 'value="5"' in page
    # Nothing was saved, so the page must not say the site runs daily with a next run.
    assert schedule_state(response).startswith("Not scheduled")
    assert 'id="next-run"' not in page
    site.refresh_from_db()
    assert site.cadence == Site.Cadence.NONE and site.time_zone == "UTC"


def test_the_site_page_shows_an_alert_that_could_not_be_delivered_and_why(owner_client, owner):
    audit = make_audit(owner, trigger=Audit.Trigger.SCHEDULE, status=Audit.Status.FAILED)
    Notification.objects.create(audit=audit, channel=Notification.Channel.EMAIL, state=Notification.State.SENT,
                                reason="audit failed: site_unavailable", detail="owner@example.com")
    Notification.objects.create(audit=audit, channel=Notification.Channel.WEBHOOK, state=Notification.State.FAILED,
                                reason="audit failed: site_unavailable", detail="HTTP 503: try later")
    page = owner_client.get(audit.site.get_absolute_url()).content.decode()
    log = re.search(r'<ul class="plain" id="alert-log".*?</ul>', page, re.S).group(0)
    assert "Webhook" in log and "<strong>not delivered</strong>" in log and "HTTP 503: try later" in log
    assert "E-mail" in log and "owner@example.com" in log
    assert f'href="{audit.get_absolute_url()}"' in log


def test_a_refused_webhook_address_is_explained_as_where_alerts_go_not_as_an_audit(owner_client, owner):
    site = make_audit(owner).site
    response = owner_client.post(reverse("site-schedule", args=[site.pk]),
                                 schedule_data(webhook_url="http://intranet.example.com/hook"))
    assert response.status_code == 400
    message = " ".join(response.context["form"].errors["webhook_url"])
    assert message.startswith("intranet.example.com points at a private address.")
    assert "10.1.2.3" not in message  # the address a private name resolves to is not told
    assert "does not post alerts to private" in message and "to audit such sites" not in message


def test_hourly_runs_are_refused_when_the_deployment_allows_runs_only_every_few_hours(owner_client, owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "MIN_SCHEDULE_MINUTES": 240}
    site = make_audit(owner).site
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data(cadence="hourly"))
    assert response.status_code == 400
    assert "at most once every 240 minutes" in " ".join(response.context["form"].errors["cadence"])
    assert not Schedule.objects.filter(name=f"site-{site.pk}").exists()
    # Daily stays allowed, and at the default limit hourly does too.
    assert owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data()).status_code == 302
    settings.SITEWARD = {**settings.SITEWARD, "MIN_SCHEDULE_MINUTES": 60}
    assert owner_client.post(reverse("site-schedule", args=[site.pk]),
                             schedule_data(cadence="hourly")).status_code == 302


@pytest.mark.parametrize("port", ["0", "65536", "99999"])
def test_a_webhook_port_out_of_range_is_refused_with_a_message_not_a_server_error(owner_client, owner, port):
    site = make_audit(owner).site
    url = f"http://www.example.com:{port}/hook"
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data(webhook_url=url))
    assert response.status_code == 400
    assert response.context["form"].errors["webhook_url"] == ["The port must be a number from 1 to 65535."]
    assert f'value="{url}"' in response.content.decode()
    site.refresh_from_db()
    assert site.webhook_url == ""


def test_a_refused_schedule_pages_the_history_on_the_site_url(owner_client, owner):
    site = make_audit(owner, status=Audit.Status.COMPLETED).site
    for _ in range(20):  # 21 audits: the history's 20 a page leaves one for page 2
        make_audit(owner, status=Audit.Status.COMPLETED)
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data(cadence="cron", cron="nope"))
    assert response.status_code == 400
    body = response.content.decode()
    # The schedule URL answers POST only: a pager link to it would be a 405.
    assert f'href="{site.get_absolute_url()}?page=2"' in body
    assert "/schedule/?page=" not in body


def test_a_webhook_address_holding_a_user_and_password_is_refused_not_stored_in_the_clear(owner_client, owner):
    site = make_audit(owner).site
    url = "http://alerts:hunter2@www.example.com/hook"
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data(webhook_url=url))
    assert response.status_code == 400
    assert "may not hold a user name or password" in " ".join(response.context["form"].errors["webhook_url"])
    site.refresh_from_db()
    assert site.webhook_url == ""


def test_a_site_with_a_webhook_shows_the_key_its_posts_are_signed_with_and_each_site_has_its_own(owner_client, owner):
    site, other = make_audit(owner).site, make_audit(owner, start_url="https://other.example.com/").site
    assert 'id="webhook-secret"' not in owner_client.get(site.get_absolute_url()).content.decode()
    Site.objects.filter(pk=site.pk).update(webhook_url="https://hooks.example.com/siteward")
    page = owner_client.get(site.get_absolute_url()).content.decode()
    assert "X-Siteward-Signature-256" in page and site.webhook_secret() in page
    assert len(site.webhook_secret()) == 40 and site.webhook_secret() != other.webhook_secret()


def test_a_new_webhook_address_or_a_press_of_new_key_gives_the_site_a_new_signing_key(owner_client, owner,
                                                                                     client, django_user_model):
    """A leaked key, or an old receiver, must not be able to sign alerts the new receiver trusts."""
    site = make_audit(owner).site
    owner_client.post(reverse("site-schedule", args=[site.pk]),
                      schedule_data(webhook_url="https://www.example.com/old-hook"))
    site.refresh_from_db()
    first = site.webhook_secret()
    owner_client.post(reverse("site-schedule", args=[site.pk]),
                      schedule_data(webhook_url="https://www.example.com/new-hook"))
    site.refresh_from_db()
    second = site.webhook_secret()
    assert second != first and len(second) == 40
    # Saving the schedule again with the same receiver keeps its key.
    owner_client.post(reverse("site-schedule", args=[site.pk]),
                      schedule_data(webhook_url="https://www.example.com/new-hook", notify_on_failure=""))
    site.refresh_from_db()
    assert site.webhook_secret() == second
    page = owner_client.post(reverse("site-webhook-key", args=[site.pk]), follow=True).content.decode()
    site.refresh_from_db()
    assert site.webhook_secret() not in (first, second) and site.webhook_secret() in page
    # Nobody else can turn another person's key.
    client.force_login(django_user_model.objects.create_user("mallory", password="x"))
    assert client.post(reverse("site-webhook-key", args=[site.pk])).status_code == 404


def test_a_refused_webhook_address_is_shown_back_without_its_password(owner_client, owner):
    site = make_audit(owner).site
    response = owner_client.post(reverse("site-schedule", args=[site.pk]),
                                 schedule_data(webhook_url="http://alerts:hunter2@www.example.com/hook"))
    body = response.content.decode()
    errors = " ".join(response.context["form"].errors["webhook_url"])
    assert response.status_code == 400 and "may not hold a user name or password" in errors
    assert "hunter2" not in body and 'value="http://www.example.com/hook"' in body
