"""Which link and canonical targets of a sub-batch the crawl should fetch, and adding them to the frontier.

The frontier table is the deduplication set: a target already in it is not
queued again, except that a sitemap-only page reached by a link now gets its
click depth, and a resource a link reaches becomes a page to crawl. New pages
pass the trap rules of ``crawler.urls``; the per-template budget is counted in
the database, so every chunk in every process agrees.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from django.db import connection
from django.db.models import Case, Count, Min, Value, When

from crawler.catalogue import finding
from crawler.login import is_login_page
from crawler.page import PAGE_TAGS, REDIRECT_TAG, RESOURCE_TAGS, PageOutcome
from crawler.types import FetchError
from crawler.urls import (
    template_has_room,
    template_key,
    trap_reason,
    url_hash,
)

from ..issue_rows import insert_issues, issue_for
from ..models import Audit, FrontierURL, Page
from ..sql import insert_rows, placeholders
from .setup import CrawlSetup

# Hashes per IN (...) lookup, well under every SQLite build's variable limit.
LOOKUP_BATCH = 500
TRAP = FetchError.TRAP_SUSPECTED.value


class Candidate(NamedTuple):
    """A URL a page links to that the crawl may fetch, before the frontier has seen it."""

    url: str
    depth: int
    found_on: str
    kind: str
    linked: bool = True  # False for a canonical target: a page names it, no link does
    redirect: bool = False  # where a redirect lands: linked as the redirect itself was (``_as_linked``)


def template_digest(url: str) -> str:
    """The frontier's key for ``url``'s path template (``crawler.urls.template_key``)."""
    return hashlib.blake2b(template_key(url).encode(), digest_size=16).hexdigest()


def admit(audit: Audit, setup: CrawlSetup, outcomes: Iterable[PageOutcome], crawlable,
          canonicals: dict[str, tuple[str, str]] | None = None) -> int:
    """Queue the sub-batch's link targets the frontier has not seen; the number of new pages.

    Only links on internal pages are followed, forms never. Most links point at
    URLs the frontier has already (navigation, footers), so targets are looked
    up first and only the rest meet the scope, depth, pattern (``crawlable``)
    and robots.txt rules. ``canonicals``: each stored page's canonical (URL,
    hash) by page URL; a target no link names is queued as a sitemap URL is.
    """
    offers, named = _offers(audit, setup, outcomes, canonicals or {})
    offers = _as_linked(audit.pk, offers)
    known = known_targets(audit.pk, [*offers, *named])
    _shorten(audit, {h: c.depth for h, c in offers.items() if h in known and known[h].linked
                     and c.depth < known[h].depth})
    robots = setup.robots if audit.respect_robots else None
    # A URL its template's budget cut at one depth may have room where a shorter path offers it.
    recut = {h for h, c in offers.items() if h in known and known[h].skip == TRAP and c.kind == Page.Kind.PAGE
             and known[h].kind == Page.Kind.PAGE and c.depth < known[h].depth}
    # A resource row a page links as a page is crawled as one (_upgrade), as a new page would be.
    upgrades = [(h, c) for h, c in offers.items() if h in known and known[h].kind == Page.Kind.RESOURCE
                and c.kind == Page.Kind.PAGE and c.depth <= audit.max_depth and crawlable(c.url)
                and (robots is None or robots.allowed(c.url, setup.user_agent))]
    # Linked already, or present and not a page (a resource, a checked external
    # link): nothing to do. A present, unlinked page is a sitemap-only one.
    offers = {h: c for h, c in offers.items() if h not in known or h in recut
              or (not known[h].linked and known[h].kind == Page.Kind.PAGE and c.kind == Page.Kind.PAGE)}
    # Canonical targets are judged only if fetched (finalize.bad_canonicals), so one the frontier
    # lacks waits unlinked at max_depth like a sitemap URL: a page of the budget, its links not followed.
    offers.update((h, c) for h, c in named.items() if h not in known)
    candidates: dict[str, Candidate] = {}
    blocked: dict[str, Candidate] = {}
    deep: dict[str, Candidate] = {}
    for digest, c in offers.items():
        allowed = robots is None or robots.allowed(c.url, setup.user_agent)
        if c.kind == Page.Kind.PAGE:
            if not crawlable(c.url):
                continue
            if c.depth > audit.max_depth:
                if digest in known:
                    deep[digest] = c  # a sitemap-only page: the link still counts (_linked_sources)
                continue
            if not allowed:
                blocked[digest] = c
                if digest not in known:
                    continue
                # A sitemap URL robots.txt refuses (start): marked linked below, never fetched.
        elif c.kind == Page.Kind.RESOURCE and (not allowed or setup.is_logout(c.url)):
            continue  # a logout URL ends the session even as an <img> or <iframe>
        candidates[digest] = c
    candidates.update(_linked_sources(audit.pk, deep))
    # A sitemap-only URL reached by a link now gets its click depth, replacing
    # its seeded one on a page already crawled, even past max_depth.
    relink = [h for h in candidates if h in known and candidates[h].linked]
    for depth in {candidates[h].depth for h in relink}:
        hashes = [h for h in relink if candidates[h].depth == depth]
        FrontierURL.objects.filter(audit=audit, url_hash__in=hashes).update(linked=True, depth=depth)
        Page.objects.filter(audit=audit, url_hash__in=hashes).update(depth=depth)
    fresh = [(h, c) for h, c in candidates.items() if h not in known or (h in recut and h not in blocked)]
    rows = list(_within_trap_budget(audit, fresh + upgrades))
    upgraded = _upgrade(audit, [row for row in rows if row[1] in known and not row[11] and row[1] not in recut])
    upgraded += _requeue_cut(audit, [row for row in rows if row[1] in recut and not row[11]])
    rows = [row for row in rows if row[1] not in known]
    rows += [
        _frontier_row(audit.pk, h, c.url, Page.Kind.PAGE, 0, c.found_on, "", linked=c.linked,
                      state=FrontierURL.State.DONE, skip_reason=FetchError.BLOCKED_BY_ROBOTS.value)
        for h, c in blocked.items() if h not in known
    ]
    insert_rows(FrontierURL, FRONTIER_COLUMNS, rows)
    # A refused canonical target is no link: bad_canonicals reports it from its row.
    insert_issues(
        issue_for(audit.pk, None, c.url, finding("blocked_by_robots", f"Disallowed by robots.txt; linked from {c.found_on}"))
        for c in blocked.values() if c.linked
    )
    return upgraded + sum(1 for row in rows if row[3] == Page.Kind.PAGE and not row[11])


def _offers(audit: Audit, setup: CrawlSetup, outcomes: Iterable[PageOutcome],
            canonicals: dict[str, tuple[str, str]]) -> tuple[dict[str, Candidate], dict[str, Candidate]]:
    """Every distinct link target of the sub-batch's internal pages the crawl might fetch, first offer first;
    and the internal canonical targets (other than the page itself) no link names."""
    origin = setup.scope.origin if setup.scope else None
    if origin is None:
        return {}, {}
    # Outlinks are normalised absolute URLs, so a link is internal when it
    # starts with the origin and its path's slash.
    inside = f"{origin}/"
    offers: dict[str, Candidate] = {}
    named: dict[str, Candidate] = {}
    for o in outcomes:
        if (o.facts is None and not o.outlinks) or not (o.result.final_url or o.url).startswith(inside):
            continue
        canonical = canonicals.get(o.url)
        if canonical and _names_another(o, canonical[0], inside):
            named.setdefault(canonical[1], Candidate(canonical[0], audit.max_depth, o.url, Page.Kind.PAGE, False))
        for link in o.outlinks:
            url, tag = link.url, link.tag
            if tag == REDIRECT_TAG and setup.login is not None and is_login_page(url, setup.login.url):
                continue  # a page the account may not see sends it to log in: not a page of the site
            internal = url.startswith(inside)
            if internal and tag in PAGE_TAGS:
                kind = Page.Kind.PAGE
            elif internal and tag in RESOURCE_TAGS:
                kind = Page.Kind.RESOURCE
            elif not internal and audit.check_external and (tag in PAGE_TAGS or tag in RESOURCE_TAGS):
                kind = Page.Kind.EXTERNAL
            else:
                continue  # forms, and external links when they are not checked
            # Where a redirect lands is as many clicks away as the redirect.
            digest, offer = url_hash(url), Candidate(url, o.depth + (tag != REDIRECT_TAG), o.url, kind,
                                                     redirect=tag == REDIRECT_TAG)
            if offers.setdefault(digest, offer).kind != kind and kind == Page.Kind.PAGE:
                offers[digest] = offer  # a link as a page outranks an earlier one as a resource
    return offers, {h: c for h, c in named.items() if h not in offers}


def _as_linked(audit_id: int, offers: dict[str, Candidate]) -> dict[str, Candidate]:
    """``offers``, each redirect's landing linked only if a link reached the redirect.

    A sitemap-only URL that redirects (queued unlinked, at max_depth) reaches its
    landing by no link either: that page too is sitemap-only, neither deep nor
    spared from being an orphan. One lookup of the redirects, only when some came.
    """
    sources = {url_hash(c.found_on) for c in offers.values() if c.redirect}
    if not sources:
        return offers
    linked = known_targets(audit_id, list(sources))
    return {h: c if not c.redirect or (s := linked.get(url_hash(c.found_on))) is None or s.linked
            else c._replace(linked=False) for h, c in offers.items()}


def _names_another(o: PageOutcome, canonical: str, inside: str) -> bool:
    """Whether a page's canonical is another internal URL than the page.

    Only a parsed page has a canonical: a redirect has none of its own (``crawler.page``).
    """
    return canonical != o.url and canonical.startswith(inside)


def _linked_sources(audit_id: int, deep: dict[str, Candidate]) -> dict[str, Candidate]:
    """The past-depth links to sitemap-only pages whose source a link reached: those mark the target linked.

    A sitemap-only source sits at its seeded max_depth, not a click depth, so a
    page only it links to is no more reached by links than it is (as in
    ``depths``). One lookup of the sources, only when such links came.
    """
    if not deep:
        return {}
    sources = known_targets(audit_id, list({url_hash(c.found_on) for c in deep.values()}))
    return {h: c for h, c in deep.items() if (s := sources.get(url_hash(c.found_on))) is not None and s.linked}


class Known(NamedTuple):
    """A target the frontier holds: whether a link reached it, at what depth, as what kind, and why it was skipped."""

    linked: bool
    depth: int
    kind: str
    skip: str = ""


def _shorten(audit: Audit, depths: dict[str, int]) -> None:
    """Targets reached by a shorter path than the one that queued them get the shorter depth.

    Chunks running side by side write pages out of click order. A page
    already crawled keeps its links' depths; finalize (``depths.settle``)
    carries the shorter path on to them.
    """
    for depth in set(depths.values()):
        hashes = [h for h, d in depths.items() if d == depth]
        FrontierURL.objects.filter(audit=audit, url_hash__in=hashes, depth__gt=depth).update(depth=depth)
        Page.objects.filter(audit=audit, url_hash__in=hashes, depth__gt=depth).update(depth=depth)


def known_targets(audit_id: int, hashes: list[str]) -> dict[str, Known]:
    """Which of ``hashes`` the audit's frontier holds, each with whether a link reached it and its depth.

    A plain statement through the cursor: the ORM compiled each of the thousands
    of values a sub-batch asks about.
    """
    table = connection.ops.quote_name(FrontierURL._meta.db_table)
    found: dict[str, Known] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(hashes), LOOKUP_BATCH):
            part = hashes[start:start + LOOKUP_BATCH]
            cursor.execute(f"SELECT url_hash, linked, depth, kind, skip_reason FROM {table} WHERE audit_id = %s "
                           f"AND url_hash IN ({placeholders(len(part))})", [audit_id, *part])
            found.update((digest, Known(bool(linked), depth, kind, skip))
                         for digest, linked, depth, kind, skip in cursor.fetchall())
    return found


FRONTIER_COLUMNS = ["audit_id", "url_hash", "url", "kind", "depth", "found_on", "template_key", "in_sitemap",
                    "linked", "state", "chunk", "skip_reason", "tries", "not_before", "reschedules"]


def _frontier_row(audit_id: int, digest: str, url: str, kind: str, depth: int, found_on: str, key: str, *,
                  linked: bool, state: str = FrontierURL.State.PENDING, skip_reason: str = "") -> tuple:
    """A new frontier row in FRONTIER_COLUMNS order."""
    return (audit_id, digest, url, kind, depth, found_on, key, False, linked, state, None, skip_reason, 0, None, 0)


def _upgrade(audit: Audit, rows: list[tuple]) -> int:
    """Resource rows a link reached, made pages at its depth (``rows``: their new frontier rows); how many.

    A checked one goes back to pending, its Page row kept until the page's fetch
    overwrites it. One a chunk holds keeps its lease: the writer hands it back
    rather than marking it done. A URL recorded as lost (skip_reason) stays lost.
    """
    if not rows:
        return 0
    hashes = [row[1] for row in rows]
    resources = FrontierURL.objects.filter(audit=audit, url_hash__in=hashes, kind=Page.Kind.RESOURCE, skip_reason="")
    resources.filter(state=FrontierURL.State.DONE).release(forget_tries=True)
    upgraded = 0
    for depth, digests, keys in _per_depth(rows):
        upgraded += resources.filter(url_hash__in=digests).update(
            kind=Page.Kind.PAGE, linked=True, depth=depth, reschedules=0, template_key=keys)
        Page.objects.filter(audit=audit, url_hash__in=digests).update(depth=depth)
    return upgraded


def _per_depth(rows: list[tuple]) -> Iterator[tuple[int, list[str], Case]]:
    """New frontier ``rows`` for known URLs, by depth: each depth's hashes, and their template keys as an update
    expression (one UPDATE a depth, whatever the number of templates)."""
    for depth in {row[4] for row in rows}:
        group = [row for row in rows if row[4] == depth]
        yield depth, [row[1] for row in group], Case(*(When(url_hash=row[1], then=Value(row[6])) for row in group))


def _within_trap_budget(audit: Audit, fresh: list[tuple[str, Candidate]]) -> Iterator[tuple]:
    """New frontier rows for ``fresh``. A trap-shaped URL, or one whose template is out of room, comes as a
    row done and never fetched (skip_reason trap_suspected), which finalize's notice counts. A template's
    room depends on the depth a URL is offered at, so a cut row is judged again if a shorter path offers it
    (``_requeue_cut``); it has no template key, so it never counts against its template."""
    keyed = []
    for digest, c in fresh:
        key = ""
        if c.kind == Page.Kind.PAGE:
            if trap_reason(c.url):
                yield _trap_row(audit.pk, digest, c)
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
                yield _trap_row(audit.pk, digest, c)
                continue
            stats[key] = [seen + 1, min(shallowest, c.depth)]
        yield _frontier_row(audit.pk, digest, c.url, c.kind, c.depth, c.found_on, key,
                            linked=c.linked and c.kind == Page.Kind.PAGE)


def _trap_row(audit_id: int, digest: str, c: Candidate) -> tuple:
    return _frontier_row(audit_id, digest, c.url, c.kind, c.depth, c.found_on, "", linked=c.linked,
                         state=FrontierURL.State.DONE, skip_reason=TRAP)


def _requeue_cut(audit: Audit, rows: list[tuple]) -> int:
    """URLs cut by their template's budget that a shorter path now admits (``rows``: their new frontier
    rows), queued to be crawled at that depth; how many."""
    requeued = 0
    for depth, digests, keys in _per_depth(rows):
        cut = FrontierURL.objects.filter(audit=audit, url_hash__in=digests, skip_reason=TRAP,
                                         state=FrontierURL.State.DONE)
        # Whether a link reached it was set above (relink), as for any known target.
        requeued += cut.update(state=FrontierURL.State.PENDING, skip_reason="", depth=depth, template_key=keys)
    return requeued


def _in_batches(query, keys: list[str]) -> Iterator[tuple]:
    for start in range(0, len(keys), LOOKUP_BATCH):
        yield from query(keys[start:start + LOOKUP_BATCH])
