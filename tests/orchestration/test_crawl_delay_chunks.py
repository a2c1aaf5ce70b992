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
    times = [moment for moment, _ in asked]
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    # A request whose arrival a loaded machine holds up by 0.1 s leaves the gap before it
    # that much longer and the one after it that much shorter, while each two gaps still
    # span two delays; a delay lost at a chunk boundary leaves a gap of a few milliseconds.
    assert min(gaps) >= DELAY * 0.5, gaps
    assert min(two - one for one, two in zip(times, times[2:], strict=False)) >= 2 * DELAY * 0.9, gaps


@pytest.mark.parametrize(("delay", "respect", "recorded"), [
    ("86400", True, "robots.txt asks for a Crawl-delay of 86,400 s; this audit waited 30 s between requests instead."),
    ("30", True, None),
    ("86400", False, None),  # robots.txt ignored: its delay is not what the audit waited
])
def test_a_crawl_delay_past_the_cap_is_recorded_as_a_notice(owner, fast_settings, httpserver, delay, respect,
                                                             recorded):
    # One page, fetched by the start step: the audit ends at once whatever the delay.
    httpserver.expect_request("/robots.txt").respond_with_data(f"User-agent: *\nCrawl-delay: {delay}\n",
                                                               content_type="text/plain")
    httpserver.expect_request("/").respond_with_data("<title>Home</title><p>Only page.</p>", content_type="text/html")
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, check_external=False,
                       respect_robots=respect)
    started = time.monotonic()
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    assert time.monotonic() - started < 15
    notes = list(audit.issues.filter(code="crawl_delay_capped").values_list("url", "severity", "message"))
    assert notes == ([(httpserver.url_for("/robots.txt"), "notice", recorded)] if recorded else [])
