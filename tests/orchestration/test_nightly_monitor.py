"""The whole monitor, in-process: a site on a nightly schedule, two fires, and the morning e-mail."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail

from audits import notify, schedules
from audits.inline import run_audit_inline
from audits.models import Audit, Site
from tests.editable_site import EditableSite

pytestmark = pytest.mark.django_db


def page(path: str, links: list[str]) -> str:
    slug = path.strip("/") or "home"
    text = " ".join(f"{slug}{n}" for n in range(240))
    anchors = "".join(f'<li><a href="{href}">go to {href}</a></li>' for href in links)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>The {slug} page of a monitored '
            f"site</title></head><body><h1>{slug}</h1><p>{text}</p><ul>{anchors}</ul></body></html>")


def night(site: Site, day: int, ended: str = Audit.Status.COMPLETED) -> Audit:
    """The schedule's fire for 02:00 on the ``day``th night, and the audit it starts, run to the end (``ended``)."""
    due = site.next_run_after(datetime(2026, 12, day, 0, 0, tzinfo=UTC) - timedelta(days=1))
    assert schedules.run_due(site.pk, due.isoformat()).startswith("started audit")
    audit = Audit.objects.filter(site=site).order_by("-pk").first()
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == ended, (audit.error_code, audit.error_detail)
    return audit


def test_a_nightly_site_mails_its_owner_exactly_what_broke_and_what_got_fixed(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True,
                         "BASE_URL": "https://siteward.example"}
    owner.email = "owner@example.com"
    owner.save()
    with EditableSite() as web:
        web.set(**{"/": page("/", ["/a", "/b", "/old-gone"]), "/a": page("/a", ["/"]), "/b": page("/b", ["/"])})
        site = Site.objects.create(owner=owner, start_url=web.url("/"), allow_private=True, check_external=False,
                                   cadence=Site.Cadence.DAILY, hour=2, minute=0, time_zone="Europe/Berlin",
                                   notify_severity="critical")
        schedules.sync(site)

        first = night(site, 5)
        assert notify.notify(first.pk) == f"audit {first.pk}: nothing due"  # no earlier audit: nothing is new
        assert mail.outbox == []

        # During the day someone fixes the old broken link and breaks a new one.
        web.set(**{"/": page("/", ["/a", "/b"]), "/b": page("/b", ["/", "/new-gone"])})
        second = night(site, 6)

    assert second.baseline_id == first.pk
    new = set(second.issues.filter(change="new").values_list("code", "url", "target_url"))
    assert new == {("broken_link_internal", web.url("/b"), web.url("/new-gone")),
                   ("http_4xx", web.url("/new-gone"), "")}
    fixed = set(second.gone_issues.filter(change="fixed").values_list("code", "url", "target_url"))
    assert ("broken_link_internal", web.url("/"), web.url("/old-gone")) in fixed

    notify.notify(second.pk)
    notify.notify(second.pk)  # finalize twice, or the watchdog after the task: still one e-mail
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["owner@example.com"]
    assert "new critical" in message.subject and web.url("/") in message.subject
    assert f"https://siteward.example/audits/{second.pk}/#changes" in message.body
    assert web.url("/new-gone") in message.body


def test_a_nightly_site_that_goes_down_mails_once_when_it_fails_and_once_when_it_is_back(owner, settings):
    settings.SITEWARD = {**settings.SITEWARD, "ALLOW_PRIVATE_TARGETS": True,
                         "BASE_URL": "https://siteward.example"}
    owner.email = "owner@example.com"
    owner.save()
    pages = {"/": page("/", ["/a"]), "/a": page("/a", ["/"])}
    told = []
    with EditableSite() as web:
        web.set(**pages)
        site = Site.objects.create(owner=owner, start_url=web.url("/"), allow_private=True, check_external=False,
                                   cadence=Site.Cadence.DAILY, hour=2, minute=0, time_zone="Europe/Berlin")
        schedules.sync(site)
        night(site, 5)
        web.set(**{"/": (503, "<html><body>Down for maintenance</body></html>")})
        for day in (6, 7):
            # The watchdog's sweep sends a failed run's alert within a minute, long before the next night.
            told.append(notify.notify(night(site, day, ended=Audit.Status.FAILED).pk).split(": ")[1])
        web.set(**pages)
        back = night(site, 8)
        told.append(notify.notify(back.pk).split(": ")[1])

    assert told == ["email sent", "email held back", "email sent"]
    assert [message.subject for message in mail.outbox] == [f"[Siteward] Audit of {web.url('/')} failed",
                                                            f"[Siteward] Audit of {web.url('/')} recovered"]
    assert "The start page never answered successfully (site_unavailable)" in mail.outbox[0].body
    assert "Its scheduled audits had failed since" in mail.outbox[1].body
