"""One rule, in crawler.types, for which final answers make a link broken and which leave it unverified.

The library crawl (``FetchResult.broken``) and an audit's finalize (its SQL and
``is_unverified``) both read it, so they cannot disagree about a URL.
"""

import pytest

from crawler.types import FetchError, FetchResult, is_broken, is_unverified


@pytest.mark.parametrize("error", [FetchError.SSRF_BLOCKED, FetchError.WORKER_LOST])
def test_our_own_failures_never_make_a_link_broken(error):
    assert not FetchResult("https://elsewhere.example/", "https://elsewhere.example/", status=None, error=error).broken
    assert not is_broken(None, error.value)  # as finalize reads it from a page row


@pytest.mark.parametrize("status, error", [
    (404, None), (500, None), (None, FetchError.DNS_FAILURE), (None, FetchError.READ_TIMEOUT),
    (200, FetchError.BODY_TOO_LARGE),
])
def test_the_sites_own_failures_and_error_statuses_are_broken(status, error):
    assert FetchResult("https://elsewhere.example/", "https://elsewhere.example/", status=status, error=error).broken
    assert is_broken(status, error.value if error else "")


@pytest.mark.parametrize("status, error, unverified", [
    (403, None, True), (401, "", True), (999, "", True),
    (429, FetchError.RATE_LIMITED, True),  # a 429 given up on after its retries still only says "not now"
    (403, FetchError.INCOMPLETE_BODY, False),  # the answer itself broke off
    (404, None, False), (200, None, False),
])
def test_a_refusal_to_crawlers_is_unverified_not_broken(status, error, unverified):
    assert is_unverified(status, error) is unverified
