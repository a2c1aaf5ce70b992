"""Which link targets of a sub-batch the crawl should fetch, and adding them to the frontier.

The frontier table is the deduplication set: a target already in it is not
queued again, except that a sitemap-only page reached by a link now gets its
click depth. New pages pass the trap rules of ``crawler.urls``; the per-template
budget is counted in the database, so every chunk in every process agrees.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from django.db.models import Count, Min

from crawler.catalogue import finding
from crawler.page import PAGE_TAGS, PageOutcome
from crawler.types import FetchError
from crawler.urls import template_has_room, template_key, trap_reason, url_hash

from ..issue_rows import insert_issues, issue_for
from ..models import Audit, FrontierURL, Page
from .setup import CrawlSetup

RESOURCE_TAGS = frozenset({"img", "script", "link", "iframe", "source", "video", "audio", "embed", "object"})
# Hashes per IN (...) lookup, well under every SQLite build's variable limit.
LOOKUP_BATCH = 500


class Candidate(NamedTuple):
    """A URL a page links to that the crawl may fetch, before the frontier has seen it."""

    url: str
    depth: int
    found_on: str
    kind: str


def template_digest(url: str) -> str:
    """The frontier's key for ``url``'s path template (``crawler.urls.template_key``)."""
    return hashlib.blake2b(template_key(url).encode(), digest_size=16).hexdigest()


def candidates_of(outcomes: Iterable[PageOutcome], audit: Audit, setup: CrawlSetup, crawlable,
                  ) -> tuple[dict[str, Candidate], dict[str, tuple[str, str]]]:
    """The sub-batch's fetchable link targets by hash, and the internal pages robots.txt blocks.

    Only links on internal pages are followed; forms never. ``crawlable(url)``
    applies the audit's include and exclude patterns.
    """
    origin = setup.scope.origin if setup.scope else None
    candidates: dict[str, Candidate] = {}
    blocked: dict[str, tuple[str, str]] = {}
    robots = setup.robots if audit.respect_robots else None
    # Outlinks are normalised absolute URLs, so a link is internal when it
    # starts with the origin and its path's slash.
    inside = f"{origin}/"
    for o in outcomes:
        if o.facts is None or origin is None or not (o.result.final_url or o.url).startswith(inside):
            continue
        for link in o.outlinks:
            url, tag = link.url, link.tag
            digest = url_hash(url)
            if digest in candidates or tag == "form":
                continue
            internal = url.startswith(inside)
            allowed = robots is None or robots.allowed(url, setup.user_agent)
            if internal and tag in PAGE_TAGS:
                if not crawlable(url) or o.depth + 1 > audit.max_depth:
                    continue
                if not allowed:
                    blocked.setdefault(digest, (url, o.url))
                    continue
                candidates[digest] = Candidate(url, o.depth + 1, o.url, Page.Kind.PAGE)
            elif internal and tag in RESOURCE_TAGS:
                if allowed:
                    candidates[digest] = Candidate(url, o.depth + 1, o.url, Page.Kind.RESOURCE)
            elif not internal and audit.check_external and (tag in PAGE_TAGS or tag in RESOURCE_TAGS):
                candidates[digest] = Candidate(url, o.depth + 1, o.url, Page.Kind.EXTERNAL)
    return candidates, blocked


def admit(audit: Audit, candidates: dict[str, Candidate], blocked: dict[str, tuple[str, str]]) -> int:
    """Queue the candidates the frontier has not seen; the number of new pages."""
    existing = dict(_in_batches(
        lambda part: FrontierURL.objects.filter(audit=audit, url_hash__in=part).values_list("url_hash", "linked"),
        [*candidates, *blocked],
    ))
    # A sitemap-only URL reached by a link now gets its click depth.
    relink = [h for h, linked in existing.items()
              if not linked and h in candidates and candidates[h].kind == Page.Kind.PAGE]
    for depth in {candidates[h].depth for h in relink}:
        hashes = [h for h in relink if candidates[h].depth == depth]
        FrontierURL.objects.filter(audit=audit, url_hash__in=hashes).update(linked=True, depth=depth)
        Page.objects.filter(audit=audit, url_hash__in=hashes, depth__gt=depth).update(depth=depth)
    fresh = [(digest, c) for digest, c in candidates.items() if digest not in existing]
    rows = list(_within_trap_budget(audit, fresh))
    for url_digest, (url, found_on) in blocked.items():
        if url_digest not in existing:
            rows.append(FrontierURL(audit=audit, url=url, url_hash=url_digest, found_on=found_on, linked=True,
                                    state=FrontierURL.State.DONE, skip_reason=FetchError.BLOCKED_BY_ROBOTS.value))
    FrontierURL.objects.bulk_create(rows, ignore_conflicts=True)
    insert_issues(
        issue_for(audit.pk, None, row.url,
                  finding("blocked_by_robots", f"Disallowed by robots.txt; linked from {row.found_on}"))
        for row in rows if row.skip_reason
    )
    return sum(1 for row in rows if row.kind == Page.Kind.PAGE and not row.skip_reason)


def _within_trap_budget(audit: Audit, fresh: list[tuple[str, Candidate]]) -> Iterator[FrontierURL]:
    """New frontier rows for ``fresh``, minus trap-like URLs and templates out of room."""
    keyed = []
    for digest, c in fresh:
        key = ""
        if c.kind == Page.Kind.PAGE:
            if trap_reason(c.url):
                continue
            key = template_digest(c.url)
        keyed.append((digest, c, key))
    stats = {
        key: [n, shallowest]
        for key, n, shallowest in _in_batches(
            lambda part: FrontierURL.objects.filter(audit=audit, kind=Page.Kind.PAGE, template_key__in=part)
            .values("template_key").annotate(n=Count("id"), shallowest=Min("depth"))
            .values_list("template_key", "n", "shallowest"),
            list({key for _, _, key in keyed if key}),
        )
    }
    for digest, c, key in keyed:
        if key:
            seen, shallowest = stats.setdefault(key, [0, c.depth])
            if not template_has_room(seen, shallowest, c.depth):
                continue
            stats[key] = [seen + 1, min(shallowest, c.depth)]
        yield FrontierURL(audit=audit, url_hash=digest, url=c.url, kind=c.kind, depth=c.depth, found_on=c.found_on,
                          template_key=key, linked=c.kind == Page.Kind.PAGE)


def _in_batches(query, keys: list[str]) -> Iterator[tuple]:
    for start in range(0, len(keys), LOOKUP_BATCH):
        yield from query(keys[start:start + LOOKUP_BATCH])
