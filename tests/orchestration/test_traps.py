"""Crawler traps are cut by path template and depth; a shop's many same-template pages are not."""

import re

import pytest
from werkzeug import Response

from audits.inline import run_audit_inline
from audits.models import Audit
from crawler.urls import TRAP_DEPTH_SPREAD, TRAP_VARIANTS
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def html(links):
    anchors = "".join(f'<a href="{href}">{href}</a>' for href in links)
    return Response(f"<html><head><title>A page of the trap test site</title></head><body>{anchors}</body></html>",
                    content_type="text/html")


@pytest.fixture
def site(httpserver):
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    httpserver.expect_request("/sitemap.xml").respond_with_data("", status=404)
    return httpserver


def audit_of(owner, url, **fields) -> Audit:
    audit = make_audit(owner, start_url=url, allow_private=True, check_external=False, **fields)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    return audit


def test_an_endless_calendar_is_cut_once_its_variants_keep_getting_deeper(owner, site, fast_settings):
    site.expect_request("/").respond_with_handler(lambda request: html(["/cal/1"]))
    site.expect_request(re.compile(r"/cal/\d+")).respond_with_handler(
        lambda request: html([f"/cal/{int(request.path.rsplit('/', 1)[1]) + 1}", "/"]))
    audit = audit_of(owner, site.url_for("/"), max_pages=1000, max_depth=500)
    assert audit.status == "completed"
    calendar = audit.pages.filter(url__contains="/cal/").count()
    assert TRAP_VARIANTS <= calendar <= TRAP_VARIANTS + TRAP_DEPTH_SPREAD + 1
    # The month it stopped at is recorded, never fetched, and the audit says so.
    cut = site.url_for(f"/cal/{calendar + 1}")
    assert not audit.pages.filter(url=cut).exists()
    (notice,) = audit.issues.filter(code="crawl_traps_skipped")
    assert notice.message.startswith("1 linked URL not crawled") and cut in notice.message


def test_a_trap_shaped_url_is_recorded_and_reported_not_fetched(owner, site, fast_settings):
    looping = "/a/b/a/b/a/b/a/b/a/b"
    site.expect_request("/").respond_with_handler(lambda request: html([looping, "/ok"]))
    site.expect_request("/ok").respond_with_handler(lambda request: html(["/"]))
    audit = audit_of(owner, site.url_for("/"), max_pages=100)
    assert audit.status == "completed"
    assert not [r for r, _ in site.log if r.path == looping]
    (notice,) = audit.issues.filter(code="crawl_traps_skipped")
    assert notice.severity == "notice" and notice.message.startswith("1 linked URL not crawled")
    assert site.url_for(looping) in notice.message


def test_a_site_without_traps_gets_no_trap_notice(owner, site, fast_settings):
    site.expect_request("/").respond_with_handler(lambda request: html(["/ok"]))
    site.expect_request("/ok").respond_with_handler(lambda request: html(["/"]))
    audit = audit_of(owner, site.url_for("/"), max_pages=100)
    assert audit.status == "completed" and not audit.issues.filter(code="crawl_traps_skipped").exists()


def test_hundreds_of_product_pages_sharing_one_template_are_all_crawled(owner, site, fast_settings):
    products = [f"/product/{n}" for n in range(1, 301)]
    site.expect_request("/").respond_with_handler(lambda request: html(products))
    site.expect_request(re.compile(r"/product/\d+")).respond_with_handler(lambda request: html(["/"]))
    audit = audit_of(owner, site.url_for("/"), max_pages=1000)
    assert audit.status == "completed"
    assert audit.pages.filter(url__contains="/product/").count() == 300
