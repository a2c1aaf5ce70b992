"""Responsive images and posters are resources: every ``srcset`` candidate of an ``<img>`` or a
``<picture><source>``, and a ``<video>``'s poster, is checked as browsers may fetch any of them."""

from __future__ import annotations

import pytest

from audits.inline import run_audit_inline
from audits.models import Audit, Issue, LinkEdge
from crawler.html_rules import MAX_SRCSET, srcset_urls
from tests.crawler.readers import READERS
from tests.factories import make_audit
from tests.scripted_site import Answer, ScriptedSite

HOST = "https://example.com"


def page(body: str) -> bytes:
    return f"<html><head><title>t</title></head><body><p>text</p>{body}</body></html>".encode()


def resources(reader: str, body: str) -> list[tuple[str, str]]:
    facts = READERS[reader](page(body))
    return [(link.url.removeprefix(HOST), link.tag) for link in facts.links if link.tag != "a"]


@pytest.mark.parametrize(
    ("value", "urls"),
    [
        ("/a.jpg 1x, /a@2x.jpg 2x", ["/a.jpg", "/a@2x.jpg"]),
        ("/s.jpg 480w,/m.jpg 960w ,  /l.jpg 1920w", ["/s.jpg", "/m.jpg", "/l.jpg"]),
        ("/only.jpg", ["/only.jpg"]),
        (" ,/a.jpg, /b.jpg 2x", ["/a.jpg", "/b.jpg"]),  # a URL's trailing commas end its candidate
        ("/img,w_400/a.jpg 400w, /img,w_800/b.jpg 800w", ["/img,w_400/a.jpg", "/img,w_800/b.jpg"]),  # commas inside a URL
        ("/a.jpg (junk, more) 2x, /b.jpg 3x", ["/a.jpg", "/b.jpg"]),  # a comma inside parentheses ends nothing
        ("/a.jpg 2x (never closed, /b.jpg 3x", ["/a.jpg"]),
        ("", []),
        (" , , ", []),
    ],
)
def test_srcset_candidates_are_read_as_html_parses_them(value, urls):
    assert srcset_urls(value) == urls


def test_a_srcset_gives_at_most_its_cap_of_candidates():
    value = ", ".join(f"/i{n}.jpg {n + 1}x" for n in range(MAX_SRCSET * 100))
    assert srcset_urls(value) == [f"/i{n}.jpg" for n in range(MAX_SRCSET)]


@pytest.mark.parametrize("reader", READERS)
def test_every_srcset_candidate_of_an_image_is_a_resource_once(reader):
    assert resources(reader, '<img src="/a.jpg" srcset="/a.jpg 1x, /a@2x.jpg 2x" alt="A">') == [
        ("/a.jpg", "img"), ("/a@2x.jpg", "img"),
    ]


@pytest.mark.parametrize("reader", READERS)
def test_picture_sources_and_a_video_poster_are_resources(reader):
    body = ('<picture><source srcset="/wide.webp 2x, /narrow.webp" type="image/webp"><img src="/fallback.jpg" alt="P">'
            '</picture><video src="/clip.mp4" poster="/still.jpg"></video>')
    assert resources(reader, body) == [
        ("/wide.webp", "source"), ("/narrow.webp", "source"), ("/fallback.jpg", "img"),
        ("/clip.mp4", "video"), ("/still.jpg", "video"),
    ]


@pytest.mark.parametrize("reader", READERS)
def test_a_srcset_inside_noscript_is_still_a_resource(reader):
    # The image is no image of the page's for the alt check, but a browser without scripts fetches it.
    assert resources(reader, '<noscript><img srcset="/n.jpg 2x"></noscript>') == [("/n.jpg", "img")]


@pytest.mark.django_db
def test_a_broken_srcset_candidate_and_poster_are_reported_as_broken_resources(owner, fast_settings):
    with ScriptedSite() as site:
        site.pages.update({
            "/": Answer(page('<img src="/ok.jpg" srcset="/ok.jpg 1x, /gone@2x.jpg 2x" alt="Photo">'
                             '<picture><source srcset="/gone.webp"><img src="/ok.jpg" alt="Photo"></picture>'
                             '<video src="/ok.mp4" poster="/gone-still.jpg"></video>')),
            "/ok.jpg": Answer(b"\xff\xd8", ctype="image/jpeg"),
            "/ok.mp4": Answer(b"\x00", ctype="video/mp4"),
        })
        audit = make_audit(owner, start_url=site.url("/"), allow_private=True, check_external=False, max_pages=10)
        run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert {(path, site.requests[path] > 0) for path in ("/gone@2x.jpg", "/gone.webp", "/gone-still.jpg")} == {
        ("/gone@2x.jpg", True), ("/gone.webp", True), ("/gone-still.jpg", True)}
    broken = set(Issue.objects.filter(audit=audit, code="broken_resource", url=site.url("/"))
                 .values_list("target_url", flat=True))
    assert broken == {site.url("/gone@2x.jpg"), site.url("/gone.webp"), site.url("/gone-still.jpg")}
    edges = set(LinkEdge.objects.filter(audit=audit, source_url=site.url("/")).values_list("tag", "target_url"))
    assert ("img", site.url("/gone@2x.jpg")) in edges and ("source", site.url("/gone.webp")) in edges
