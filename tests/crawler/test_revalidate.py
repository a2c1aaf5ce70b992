"""Whether a conditional answer proves the page is the version stored (RFC 9111 4.3.4)."""

from __future__ import annotations

import pytest

from crawler.revalidate import Validators, unchanged
from crawler.types import FetchResult

URL = "http://127.0.0.1/a"
STORED = Validators(etag='"v1"', last_modified="Mon, 21 Sep 2026 14:15:00 GMT")


def not_modified(**headers: str) -> FetchResult:
    return FetchResult(URL, URL, status=304, headers=headers)


@pytest.mark.parametrize("headers", [
    {},
    {"etag": '"v1"'},
    {"etag": 'W/"v1"'},  # gzip on the way weakens it
    {"last-modified": "Mon, 21 Sep 2026 14:15:00 GMT"},
    {"last-modified": "Monday, 21-Sep-26 14:15:00 GMT"},  # the same instant, RFC 850's spelling
    {"etag": '"v1"', "last-modified": "Mon, 21 Sep 2026 14:13:20 GMT"},  # another backend's copy of one file
], ids=["repeats-nothing", "same-etag", "weakened-etag", "same-date", "same-date-respelt", "etag-decides"])
def test_a_304_that_names_the_stored_version_or_nothing_is_unchanged(headers):
    assert unchanged(not_modified(**headers), STORED)


@pytest.mark.parametrize("headers", [
    {"etag": '"v0"'},
    {"last-modified": "Mon, 21 Sep 2026 14:13:20 GMT"},
    {"last-modified": "yesterday"},
    {"etag": '"v0"', "last-modified": "Mon, 21 Sep 2026 14:15:00 GMT"},
], ids=["other-etag", "older-date", "unreadable-date", "etag-decides"])
def test_a_304_that_names_another_version_is_not_unchanged(headers):
    assert not unchanged(not_modified(**headers), STORED)


def test_a_304_to_a_request_without_validators_is_not_unchanged():
    assert not unchanged(not_modified(), Validators(body_hash="b" * 32))
