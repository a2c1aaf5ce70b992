"""A rendered audit's steps go to the render queue, and its page says when it waits for a render worker."""

import pytest
from django.urls import reverse
from django_q.models import OrmQ

from audits.models import Audit, Page
from audits.services import create_audit
from tests.dashboard.test_new_audit import GOOD
from tests.factories import make_audit, make_finished_audit

pytestmark = pytest.mark.django_db


def queued(name: str) -> str:
    return next(row.key for row in OrmQ.objects.all() if row.name() == name)


def test_a_rendered_audit_starts_on_the_render_queue_and_a_plain_one_on_the_crawl_queue(
        owner, django_capture_on_commit_callbacks, settings):
    with django_capture_on_commit_callbacks(execute=True):
        rendered = create_audit(owner, start_url="https://a.example/", render="auto")
        plain = create_audit(owner, start_url="https://b.example/")
    assert queued(f"audit-{rendered.pk}-start") == settings.RENDER_QUEUE
    assert queued(f"audit-{plain.pk}-start") == settings.Q_CLUSTER["name"]


def test_the_new_audit_form_saves_the_render_mode_on_the_audit_and_its_site(owner_client):
    assert owner_client.post(reverse("audit-new"), {**GOOD, "render": "all"}).status_code == 302
    audit = Audit.objects.get()
    assert audit.render == "all" and audit.site.render == "all"


def test_a_queued_rendered_audit_says_it_waits_for_a_render_worker(owner_client, owner):
    audit = make_audit(owner, render="all")
    body = owner_client.get(audit.get_absolute_url()).content.decode()
    assert 'id="render-waiting"' in body and "Q_CLUSTER_NAME=render" in body
    plain = make_audit(owner, start_url="https://c.example/")
    assert 'id="render-waiting"' not in owner_client.get(plain.get_absolute_url()).content.decode()


def test_a_rendered_page_shows_what_its_html_said_before_javascript(owner_client, owner):
    audit = make_finished_audit(owner)
    page = Page.objects.filter(audit=audit, kind=Page.Kind.PAGE).first()
    Page.objects.filter(pk=page.pk).update(rendered=True, raw_facts={
        "title": "Loading", "canonical": "", "robots": [], "word_count": 3, "links": 0})
    body = owner_client.get(page.get_absolute_url()).content.decode()
    assert 'id="page-rendered"' in body and "title “Loading”" in body and "3 words, 0 links" in body
