"""Link edges are written once per (source, target, tag): a page written again (a retried
chunk, a duplicate delivery) replaces its edges instead of adding to them."""

import pytest

from audits.models import LinkEdge
from crawler.checks import CheckSettings, PageContext
from crawler.page import build_outcome
from crawler.types import FetchResult

from .outcomes import parsed_page as _page

pytestmark = pytest.mark.django_db


@pytest.fixture
def writer(chunk_writer, grid_site):
    writer, items = chunk_writer
    return writer, items[0].url, grid_site


def _edges(writer, source):
    return sorted(LinkEdge.objects.filter(audit=writer.audit, source_url=source)
                  .values_list("target_url", "anchor_text"))


def test_writing_a_page_twice_leaves_one_edge_per_link(writer):
    writer, source, site = writer
    page = _page(source, (site.url("/a"), "A"), (site.url("/b"), "B"))
    writer.write([page])
    writer.write([page])
    assert _edges(writer, source) == [(site.url("/a"), "A"), (site.url("/b"), "B")]


def test_a_page_written_again_keeps_only_the_links_of_its_last_fetch(writer):
    writer, source, site = writer
    writer.write([_page(source, (site.url("/a"), "A"), (site.url("/b"), "B"))])
    writer.write([_page(source, (site.url("/b"), "Bee"), (site.url("/c"), "C"))])
    assert _edges(writer, source) == [(site.url("/b"), "Bee"), (site.url("/c"), "C")]
    # Other pages' edges are untouched.
    other = site.url("/")
    writer.write([_page(other, (site.url("/a"), "A"))])
    writer.write([_page(source, (site.url("/c"), "C"))])
    assert _edges(writer, other) == [(site.url("/a"), "A")]


def test_only_links_to_the_audits_own_origin_are_internal(writer):
    writer, source, site = writer
    origin = site.url("/").rstrip("/")  # http://127.0.0.1:PORT
    lookalike = f"{origin}1/x"  # the same digits and one more: another port
    writer.write([_page(source, (site.url("/a"), "A"), (lookalike, "L"), ("https://elsewhere.example/", "E"),
                        (origin.replace("http://", "https://") + "/a", "S"))])
    internal = dict(LinkEdge.objects.filter(audit=writer.audit, source_url=source)
                    .values_list("target_url", "internal"))
    assert internal == {site.url("/a"): True, lookalike: False, "https://elsewhere.example/": False,
                        origin.replace("http://", "https://") + "/a": False}


def test_two_anchors_to_one_target_on_a_page_are_one_edge_with_the_first_anchors_text(writer):
    writer, source, site = writer
    body = (b'<!doctype html><html lang="en"><head><title>t</title></head><body>'
            b'<a href="/a">First words</a> <p>...</p> <a href="/a#later">Other words</a>'
            b'<a href="/b">B</a></body></html>')
    result = FetchResult(url=source, final_url=source, status=200, content_type="text/html", body=body)
    outcome = build_outcome(result, source, 0, PageContext(CheckSettings(), is_internal=lambda url: True))
    writer.write([outcome])
    assert _edges(writer, source) == [(site.url("/a"), "First words"), (site.url("/b"), "B")]
