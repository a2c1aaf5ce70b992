"""robots.txt's Crawl-delay holds across chunks: an audit's chunks follow one
another, and the first request of each waits the delay after the last of the
one before (RELIABILITY row 32)."""

import time

import pytest
from werkzeug.wrappers import Response

from audits.inline import run_audit_inline
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

DELAY = 0.3
PAGES = [f"/p{n}" for n in range(1, 9)]


def test_the_crawl_delay_spaces_requests_across_chunk_boundaries(owner, fast_settings, httpserver):
    # Chunks that end after about three requests each.
    fast_settings.SITEWARD = {**fast_settings.SITEWARD, "CHUNK_SIZE": 2, "CHUNK_SOFT_DEADLINE": 1.0}
    asked: list[tuple[float, str]] = []

    def page(request):
        asked.append((time.monotonic(), request.path))
        links = "".join(f"<a href='{path}'>{path}</a>" for path in PAGES) if request.path == "/" else ""
        return Response(f"<title>{request.path}</title>{links}", content_type="text/html")

    httpserver.expect_request("/robots.txt").respond_with_data(f"User-agent: *\nCrawl-delay: {DELAY}\n",
                                                               content_type="text/plain")
    for path in ["/", *PAGES]:
        httpserver.expect_request(path).respond_with_handler(page)
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, check_external=False)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    assert sorted(path for _, path in asked) == sorted(["/", *PAGES])
    assert audit.chunks.count() >= 3
    gaps = [later - earlier for (earlier, _), (later, _) in zip(asked, asked[1:], strict=False)]
    assert min(gaps) >= DELAY - 0.02, gaps
