"""Each page keeps the ETag and Last-Modified it answered with: what a later delta audit's
conditional requests will send back."""

from __future__ import annotations

import pytest
from pytest_httpserver import HTTPServer

from audits.inline import run_audit_inline
from audits.models import Page
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

HOME = '<!doctype html><html lang="en"><head><title>Home of the validators site</title></head><body>' \
       '<a href="/plain">plain</a><img src="/logo.png" alt="logo"></body></html>'
PLAIN = '<!doctype html><html lang="en"><head><title>A page without validators</title></head><body>x</body></html>'
STAMP = "Wed, 21 Oct 2026 07:28:00 GMT"


@pytest.fixture
def server():
    with HTTPServer(host="127.0.0.1", port=0) as running:
        running.expect_request("/").respond_with_data(HOME, content_type="text/html",
                                                      headers={"ETag": '"v1-home"', "Last-Modified": STAMP})
        running.expect_request("/plain").respond_with_data(PLAIN, content_type="text/html")
        running.expect_request("/logo.png").respond_with_data(b"\x89PNG", content_type="image/png",
                                                              headers={"ETag": 'W/"logo-7"'})
        running.expect_request("/robots.txt").respond_with_data("", status=404)
        yield running


def test_pages_and_resources_store_the_validators_they_answered_with(owner, server, fast_settings):
    audit = make_audit(owner, start_url=server.url_for("/"), allow_private=True, check_external=False)
    run_audit_inline(audit.pk)
    stored = {p.url.removeprefix(server.url_for("/")[:-1]): (p.etag, p.last_modified)
              for p in Page.objects.filter(audit=audit)}
    assert stored["/"] == ('"v1-home"', STAMP)
    assert stored["/plain"] == ("", "")
    assert stored["/logo.png"] == ('W/"logo-7"', "")


def test_the_page_view_shows_the_validators(owner, server, fast_settings, owner_client):
    audit = make_audit(owner, start_url=server.url_for("/"), allow_private=True, check_external=False)
    run_audit_inline(audit.pk)
    home = Page.objects.get(audit=audit, url=server.url_for("/"))
    body = owner_client.get(home.get_absolute_url()).content.decode()
    assert "v1-home" in body and STAMP in body
