"""large_image (CHECKS, stretch): an image whose answer declares more than the audit's limit (500 KB by
default). Images are checked with HEAD, so the size is the one declared; the body is never downloaded."""

import asyncio

import pytest

from audits.inline import run_audit_inline
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from crawler.window import HEALTH_OK, WindowPolicy, fetch_health
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite

pytestmark = pytest.mark.django_db


@pytest.fixture
def gallery():
    site = ScriptedSite()
    with site:
        site.pages.update({
            "/": Answer('<title>Gallery of the site</title><img src="/big.jpg" alt="big">'
                        '<img src="/small.png" alt="small">'),
            "/big.jpg": Answer(b"\xff\xd8\xff" + b"\0" * 599_997, ctype="image/jpeg"),
            "/small.png": Answer(b"\x89PNG" + b"\0" * 99_996, ctype="image/png"),
        })
        yield site


def large(owner, site, **fields) -> dict[str, str]:
    audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, **fields)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    assert site.requests["/big.jpg"] == 1  # one HEAD: the size comes from its Content-Length
    return dict(audit.issues.filter(code="large_image").values_list("url", "message"))


def test_an_image_over_500_kb_is_large(owner, fast_settings, gallery):
    assert large(owner, gallery) == {gallery.url("/big.jpg"): "Image is 600 KB (more than 500 KB)"}


def test_the_limit_is_the_audits(owner, fast_settings, gallery):
    found = large(owner, gallery, thresholds={"large_image_bytes": 50_000})
    assert found == {gallery.url("/big.jpg"): "Image is 600 KB (more than 50 KB)",
                     gallery.url("/small.png"): "Image is 100 KB (more than 50 KB)"}


def test_a_checked_urls_declared_size_is_stored_but_does_not_slow_the_crawl(gallery):
    # The window paces by what was read: a HEAD of a large file read nothing.
    async def check():
        async with Fetcher(FetchPolicy(), AddressGuard(allow_private=True)) as fetcher:
            return await fetcher.check(gallery.url("/big.jpg"))

    result = asyncio.run(check())
    assert (result.status, result.size, result.declared_size) == (200, 0, 600_000)
    assert fetch_health(result, WindowPolicy(large_bytes=500_000)) == HEALTH_OK
