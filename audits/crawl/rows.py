"""A fetched URL's result as the row the page table stores."""

from __future__ import annotations

import json

from django.utils import timezone

from crawler.anchors import stored
from crawler.directives import canonical_from_link_header, header_robots_directives
from crawler.page import PageOutcome
from crawler.revalidate import KEPT_HEADERS
from crawler.types import PageFacts
from crawler.urls import InvalidURL, normalize, url_hash

from ..sql import db_datetime
from .reuse import Carried

# What a re-fetched URL (a retried chunk) overwrites; depth, in_sitemap and
# inlinks are set by the frontier and finalize, not by the fetch.
PAGE_UPDATE_FIELDS = [
    "final_url", "status_code", "redirect_chain", "redirect_count", "content_type", "size_bytes", "ttfb_ms",
    "total_ms", "title", "description", "description_hash", "canonical", "canonical_hash", "h1_count", "word_count",
    "robots", "indexable", "content_hash", "outlinks", "fetch_error", "fetch_error_detail", "crawled_at",
    "etag", "last_modified", "body_hash", "unchanged_since", "rendered", "raw_facts", "head_facts", "anchors",
]
PAGE_COLUMNS = ["audit_id", "url_hash", "url", "kind", "depth", "in_sitemap", "inlinks", *PAGE_UPDATE_FIELDS]


def clean(text: str | None, limit: int) -> str:
    """Crawled text on its way into the database: no NULs (PostgreSQL refuses them), capped."""
    if not text:
        return ""
    return text.replace("\x00", "")[:limit]


def page_values(audit_id: int, outcome: PageOutcome, kind: str, carried: Carried | None = None) -> tuple:
    """One result as the page table's row: a tuple in PAGE_COLUMNS order.

    ``carried``: what a delta crawl's unchanged page keeps from the audit it reuses.
    """
    result = outcome.result
    facts = outcome.facts
    robots: set[str] = set()
    canonical = title = description = content_hash = ""
    h1 = words = 0
    # An HTML page left unparsed (too large to read) is judged by its headers alone, not taken for noindex;
    # a redirect is no page a search engine would index.
    judged = facts is not None or (kind == "page" and result.is_html and result.error is None
                                   and not result.redirects)
    # A redirect's one edge (where it lands) is no link on a page.
    outlinks = carried.outlinks if carried else len(outcome.outlinks) if facts is not None else 0
    if judged:
        robots = set(header_robots_directives(result.headers.get("x-robots-tag")))
    linked = canonical_from_link_header(result.headers.get("link")) if facts is not None else ()
    if facts is not None:
        robots |= facts.robots
        tags = [c.url for c in facts.canonicals]
        raw = tags or list(linked)
        if raw:
            # As the page checks resolve it: a tag against the document's base URL (<base href>),
            # the Link header against the page's own.
            base = (facts.base_url if tags else "") or result.final_url or outcome.url
            try:
                canonical = normalize(raw[0], base=base)
            except InvalidURL:
                canonical = ""
        title = facts.title or ""
        description = facts.descriptions[0] if facts.descriptions else ""
        h1, words, content_hash = facts.h1_count, facts.word_count, facts.content_hash[:32]
    chain = [[clean(h.url, 2000), h.status, clean(h.location, 2000)] for h in result.redirects]
    return (
        audit_id, url_hash(outcome.url), outcome.url, kind, outcome.depth,
        False, 0,  # in_sitemap and inlinks: set by finalize, from the frontier and the edges
        clean(result.final_url, 8000), result.status, json.dumps(chain), len(chain),
        clean(result.content_type, 100), min(result.size or result.declared_size, 2**31 - 1), int(result.ttfb * 1000),
        int(result.elapsed * 1000), clean(title, 1000), *_described(description), clean(canonical, 8000),
        url_hash(canonical) if canonical else "", min(h1, 32767), words, clean(",".join(sorted(robots)), 200),
        judged and result.status == 200 and not robots & {"noindex", "none"},
        content_hash, outlinks, result.error.value if result.error else "",
        clean(result.error_detail, 500), db_datetime(timezone.now()),
        clean(result.headers.get("etag"), 200), clean(result.headers.get("last-modified"), 100),
        carried.body_hash if carried else outcome.body_hash,
        carried.since if carried else None,
        *_rendering(outcome, carried),
        json.dumps(head_facts(facts, result.final_url or outcome.url, link_canonical=bool(linked),
                              charset=result.charset or "",
                              kept=[name for name in KEPT_HEADERS if name in result.headers]))
        # A page whose checks broke keeps none: a validation or delta must not take it for checked.
        if facts is not None and not outcome.problem else None,
        stored(facts.anchors) if facts is not None and not outcome.problem else None,
    )


def _described(description: str) -> tuple[str, str]:
    """The stored description and its key (the 32-hex key URLs get): duplicates are grouped and matched by the key,
    which an index holds, since a description may be too long for one."""
    stored = clean(description, 2000)
    return stored, url_hash(stored) if stored else ""


def head_facts(facts: PageFacts, page_url: str, *, link_canonical: bool = False, charset: str = "",
               kept: list[str] | None = None) -> dict:
    """The page's meta robots directives and canonical tags, kept apart from its headers' (``Page.head_facts``).

    Only what is there: most pages store one canonical. The base URL only when
    it is not the page's own, to resolve a relative canonical as the parse did.
    ``link_canonical``: a Link header named a canonical too, which a 304 need
    not repeat (a delta then asks for the page in full, ``reuse.validators``).
    ``charset``: the Content-Type header's, which a delta compares; ``kept``:
    which of ``KEPT_HEADERS`` the answer had, which a 304 need not repeat (``crawler.revalidate``).
    """
    found: dict = {"link_canonical": True} if link_canonical else {}
    if charset:
        found["charset"] = clean(charset, 40)
    if kept:
        found["kept"] = kept
    if facts.robots:
        found["robots"] = sorted(facts.robots)
    if facts.canonicals:
        found["canonicals"] = [[clean(c.url, 8000), c.in_head] for c in facts.canonicals]
        if facts.base_url and facts.base_url != page_url:
            found["base"] = clean(facts.base_url, 8000)
    return found


def _rendering(outcome: PageOutcome, carried: Carried | None) -> tuple[bool, str | None]:
    """The row's rendered flag and raw facts: the browser's page keeps its HTML's, a reused one its source's."""
    if carried is not None:
        return carried.rendered, json.dumps(carried.raw_facts) if carried.raw_facts is not None else None
    return outcome.rendered, json.dumps(raw_facts(outcome.raw_facts)) if outcome.rendered else None


def raw_facts(facts: PageFacts | None) -> dict | None:
    """What a rendered page's HTML said, before JavaScript: the page view shows it beside the browser's."""
    if facts is None:
        return None
    return {"title": clean(facts.title, 1000), "canonical": clean(facts.canonicals[0].url, 2000) if facts.canonicals
            else "", "robots": sorted(facts.robots), "word_count": facts.word_count,
            "links": sum(1 for link in facts.links if link.tag in ("a", "area"))}
