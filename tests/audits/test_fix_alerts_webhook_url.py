"""A webhook on a single-label host (a Docker service such as ``alertmanager``): kept where private targets are allowed.

No test asks a real DNS server: the form's and the webhook guard's resolvers are
stubs that answer ``alertmanager`` with an address; the alert itself is posted to
a pytest-httpserver on 127.0.0.1.
"""

from __future__ import annotations

import json
import socket

import pytest
from django.urls import reverse

import audits.forms
import audits.notify
from audits.models import Audit, Site
from audits.notify import notify
from crawler.net import AddressGuard
from tests.audits.test_notify import CRITICAL_NEW, ended, rows
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

HOOK = "http://alertmanager:9093/hook"


class Resolver:
    """``alertmanager`` at ``address``; every other name does not exist. Records what it was asked."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host != "alertmanager":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [self.address]



@pytest.fixture
def private_allowed(settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True, "WEBHOOK_TIMEOUT": 2.0,
                         "BASE_URL": "https://siteward.test"}
    return settings


def schedule_data(**fields) -> dict:
    return {"cadence": "daily", "minute": 30, "hour": 2, "weekday": 1, "cron": "", "time_zone": "UTC",
            "notify_severity": "critical", "notify_on_failure": "on", "notify_email": "on"} | fields


def test_a_single_label_webhook_host_is_saved_where_private_targets_are_allowed(
        private_allowed, owner, owner_client, monkeypatch):
    monkeypatch.setattr(audits.forms, "resolver", Resolver("172.18.0.5"))
    site = make_audit(owner).site

    response = owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data(webhook_url=HOOK))

    assert response.status_code == 302
    site.refresh_from_db()
    assert site.webhook_url == HOOK
    site.clean_fields()  # the model's own check agrees: the admin and full_clean keep it too


def test_a_single_label_webhook_host_is_refused_unresolved_where_private_targets_are_not(
        settings, owner, owner_client, monkeypatch):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": False}
    resolver = Resolver("172.18.0.5")
    monkeypatch.setattr(audits.forms, "resolver", resolver)
    site = make_audit(owner).site

    response = owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data(webhook_url=HOOK))

    assert response.status_code == 400
    [message] = response.context["form"].errors["webhook_url"]
    assert message.startswith("alertmanager is a host name without a domain, which only a private network resolves.")
    assert "does not post alerts to private" in message and "Enter a valid URL" not in message
    assert resolver.asked == []  # a bare name goes through the server's search domains: not even looked up
    site.refresh_from_db()
    assert site.webhook_url == ""


@pytest.mark.parametrize("url", ["http://alert manager/hook", "http://-alertmanager/hook", "http://alert_manager/x"])
def test_a_malformed_single_label_webhook_host_is_still_not_a_url(private_allowed, owner, owner_client, url):
    site = make_audit(owner).site
    response = owner_client.post(reverse("site-schedule", args=[site.pk]), schedule_data(webhook_url=url))
    assert response.status_code == 400
    assert response.context["form"].errors["webhook_url"] == ["Enter a valid URL."]


def test_an_alert_is_posted_to_a_single_label_webhook_host(private_allowed, owner, httpserver_ipv4, monkeypatch):
    httpserver_ipv4.expect_request("/hook", method="POST").respond_with_data("", status=204)
    # The service name resolves to the loopback server, as Docker's DNS would answer it with the container.
    monkeypatch.setattr(audits.notify, "AddressGuard",
                        lambda allow_private: AddressGuard(allow_private=allow_private, resolver=Resolver("127.0.0.1")))
    audit = ended(owner, new=CRITICAL_NEW, webhook=f"http://alertmanager:{httpserver_ipv4.port}/hook")
    assert Site.objects.get(pk=audit.site_id).webhook_url.startswith("http://alertmanager:")

    notify(audit.pk)

    assert rows(audit)["webhook"] == ("sent", "HTTP 204")
    [(request, _)] = httpserver_ipv4.log
    assert request.headers["Host"] == f"alertmanager:{httpserver_ipv4.port}"
    assert json.loads(request.get_data())["status"] == Audit.Status.COMPLETED
