"""The start of an https audit probes its http:// form and records http_not_redirected
on the start page's row; the probe itself is tested in tests/crawler/test_http_probe.py.

The audit is of https://shop.test/ served by loopback servers: the Fetcher that
``_start_async`` builds gets the test's port-mapping network backend and trusts the
test CA, and the guard resolves shop.test to 127.0.0.1. Everything else is the
production start path.
"""

from __future__ import annotations

import dataclasses
import ssl
from functools import partial

import pytest

from audits.crawl import start as crawl_start
from audits.crawl.start import run_start
from audits.models import Audit, Issue
from crawler.fetch import Fetcher
from crawler.net import AddressGuard
from tests.crawler.hostile_server import OK_HTML, HostileServer, StubResolver, redirect_to, static
from tests.crawler.test_http_probe import HOST, START, PortMap, ca, https_site  # noqa: F401 (fixtures)
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


@pytest.fixture
def http_site():
    with HostileServer() as server:
        yield server


@pytest.fixture
def start_https_audit(owner, fast_settings, monkeypatch, ca, https_site, http_site):  # noqa: F811
    client = ssl.create_default_context()
    ca.configure_trust(client)
    backend = PortMap({443: https_site.port, 80: http_site.port})
    monkeypatch.setattr(crawl_start, "Fetcher", partial(Fetcher, verify=client, network_backend=backend))
    guard = AddressGuard(resolver=StubResolver({HOST: [["127.0.0.1"]]}),
                         allowed_targets=[("127.0.0.1", 443), ("127.0.0.1", 80)])
    real_setup = crawl_start.crawl_setup
    monkeypatch.setattr(crawl_start, "crawl_setup", lambda audit: dataclasses.replace(real_setup(audit), guard=guard))

    def run() -> Audit:
        audit = make_audit(owner, start_url=START, max_pages=5, respect_robots=False)
        run_start(audit.pk)
        audit.refresh_from_db()
        assert not audit.error_code, (audit.status, audit.error_code, audit.error_detail)
        return audit

    return run


def test_an_https_site_whose_http_form_serves_200_gets_the_issue_on_its_start_page(
    start_https_audit, http_site,
):
    http_site.route("/", static(OK_HTML))
    audit = start_https_audit()
    issue = Issue.objects.get(audit=audit, code="http_not_redirected")
    assert issue.url == START and issue.page is not None and issue.page.url == START
    assert issue.target_url == f"http://{HOST}/"


def test_an_https_site_whose_http_form_redirects_gets_no_issue(start_https_audit, http_site):
    http_site.route("/", redirect_to(START, 301))
    audit = start_https_audit()
    assert audit.pages.filter(url=START, status_code=200).exists()
    assert not Issue.objects.filter(audit=audit, code="http_not_redirected").exists()
    assert http_site.requests["/"] == 1
