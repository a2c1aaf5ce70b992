"""The benchmark corpus: pages that stay byte-identical, and the assets they reference served as a site would."""

import hashlib
import re
import urllib.error
import urllib.request

from benchmarks.corpus import MISSING_ASSET_PERCENT, build_corpus
from benchmarks.static_server import python_server

# The pages of build_corpus(60, seed=7) before assets were added (be0de2d): the
# Scrapy yardstick and the library benchmark crawl exactly these bytes.
PAGES_SHA256 = "64fe2085c23e2cc3b70deb772e7680f5577443012a522f93c6c8871b80e59a05"
# What an audit checks: <img src>, <script src>, <link rel=stylesheet href>, and every srcset candidate.
CHECKED = re.compile(rb'<(?:img|script)\b[^>]*?\bsrc="(/[^"?]*)|<link rel="stylesheet" href="(/[^"?]*)'
                     rb'|[" ](/img/[^" ?,]+) \d+w')


def test_the_pages_are_byte_identical_to_the_corpus_before_assets():
    corpus = build_corpus(60, seed=7)
    digest = hashlib.sha256(b"".join(path.encode() + b"\0" + corpus.pages[path] for path in sorted(corpus.pages)))
    assert digest.hexdigest() == PAGES_SHA256


def test_every_checked_reference_is_an_asset_and_a_few_images_are_missing():
    corpus = build_corpus(300, seed=7)
    referenced = {(m[0] or m[1] or m[2]).decode() for body in corpus.pages.values() for m in CHECKED.findall(body)}
    assert referenced <= corpus.assets.keys() | corpus.missing_assets
    assert not corpus.assets.keys() & corpus.missing_assets
    assert all(path.startswith("/img/") and path[5].isdigit() for path in corpus.missing_assets)
    images = [path for path in referenced if path.startswith("/img/") and path[5].isdigit()]
    share = 100 * len(corpus.missing_assets) / len(images)
    assert MISSING_ASSET_PERCENT / 2 < share < MISSING_ASSET_PERCENT * 2
    assert {"/static/site.css", "/static/app.js", "/img/avatar.png"} <= corpus.assets.keys()


def _head(url: str) -> tuple[int, str | None]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as response:
            return response.status, response.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        return exc.code, None


def test_the_python_server_serves_assets_by_path_ignoring_the_query_as_nginx_does():
    corpus = build_corpus(20, seed=7)
    missing = sorted(corpus.missing_assets)
    assert missing
    with python_server(corpus) as (base, _):
        assert _head(base + "/static/site.css?v=20260101") == (200, "text/css")
        assert _head(base + "/img/avatar.png") == (200, "image/png")
        served = next(path for path in corpus.assets if path.endswith(".avif"))
        assert _head(base + served) == (200, "image/avif")
        assert _head(base + "/p/3.html")[0] == 200
        for path in missing[:2]:
            assert _head(base + path)[0] == 404
