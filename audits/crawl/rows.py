"""A fetched URL's result as the row the page table stores."""

from __future__ import annotations

from crawler.page import PageOutcome
from crawler.parse import canonical_from_link_header, robots_directives
from crawler.urls import InvalidURL, normalize, url_hash

from ..models import Page

# What a re-fetched URL (a retried chunk) overwrites; depth, in_sitemap and
# inlinks are set by the frontier and finalize, not by the fetch.
PAGE_UPDATE_FIELDS = [
    "final_url", "status_code", "redirect_chain", "redirect_count", "content_type", "size_bytes", "ttfb_ms",
    "total_ms", "title", "description", "canonical", "canonical_hash", "h1_count", "word_count", "robots",
    "indexable", "content_hash", "outlinks", "fetch_error", "fetch_error_detail", "crawled_at",
]


def clean(text: str | None, limit: int) -> str:
    """Crawled text on its way into the database: no NULs (PostgreSQL refuses them), capped."""
    if not text:
        return ""
    return text.replace("\x00", "")[:limit]


def page_from(audit_id: int, outcome: PageOutcome, kind: str) -> Page:
    """The unsaved Page row for one result."""
    result = outcome.result
    facts = outcome.facts
    robots: set[str] = set()
    canonical = title = description = content_hash = ""
    h1 = words = 0
    if facts is not None:
        robots = set(facts.robots) | set(robots_directives(result.headers.get("x-robots-tag")))
        raw = [c.url for c in facts.canonicals] or list(canonical_from_link_header(result.headers.get("link")))
        if raw:
            try:
                canonical = normalize(raw[0], base=result.final_url or outcome.url)
            except InvalidURL:
                canonical = ""
        title = facts.title or ""
        description = facts.descriptions[0] if facts.descriptions else ""
        h1, words, content_hash = facts.h1_count, facts.word_count, facts.content_hash[:32]
    return Page(
        audit_id=audit_id, url_hash=url_hash(outcome.url), url=outcome.url, kind=kind, depth=outcome.depth,
        final_url=clean(result.final_url, 8000), status_code=result.status,
        redirect_chain=[[clean(h.url, 2000), h.status, clean(h.location, 2000)] for h in result.redirects],
        redirect_count=len(result.redirects), content_type=clean(result.content_type, 100),
        size_bytes=min(result.size, 2**31 - 1), ttfb_ms=int(result.ttfb * 1000),
        total_ms=int(result.elapsed * 1000), title=clean(title, 1000), description=clean(description, 2000),
        canonical=clean(canonical, 8000), canonical_hash=url_hash(canonical) if canonical else "",
        h1_count=min(h1, 32767), word_count=words, robots=clean(",".join(sorted(robots)), 200),
        indexable=facts is not None and result.status == 200 and not robots & {"noindex", "none"},
        content_hash=content_hash, outlinks=len(outcome.outlinks),
        fetch_error=result.error.value if result.error else "",
        fetch_error_detail=clean(result.error_detail, 500),
    )
