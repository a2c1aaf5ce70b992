"""``anchor_missing``: links whose #fragment names no anchor on the page they point at.

A cross-page check, run by finalize: the link's fragments are on its edge
(``LinkEdge.fragments``), the target's anchors on its page row
(``Page.anchors``). Only a target that answered 200 itself and was parsed with
all its anchors kept is judged; a redirect, a file that is not HTML, or a page
past the anchor cap (``crawler.anchors``) never gives the issue.
"""

from __future__ import annotations

from collections.abc import Iterator

from crawler.anchors import indicated, loaded
from crawler.catalogue import finding

from .issue_rows import issue_for
from .models import Issue, Page
from .sql import stream_rows

# Edges that name fragments, by target so each target's anchors are read once.
# A scan of the audit's edges (no index by target: LinkEdge.Meta) and a sort of
# the few that carry fragments.
FRAGMENT_EDGES_SQL = """
    SELECT e.target_hash, e.source_url, s.id, e.target_url, e.fragments
    FROM audits_linkedge e
    LEFT JOIN audits_page s ON s.audit_id = e.audit_id AND s.url_hash = e.source_hash
    WHERE e.audit_id = %s AND e.fragments <> '' AND e.tag IN ('a', 'area')
    ORDER BY e.target_hash
"""
# Targets whose anchors one read fetches (each at most ANCHOR_CHARS_MAX characters), and edges held
# while they are gathered.
TARGETS_PER_READ = 50
EDGES_HELD = 2000


def missing_anchors(audit_id: int) -> Iterator[Issue]:
    """One issue per (page, target, fragment) whose fragment the target page does not carry."""
    held: list[tuple] = []
    targets: set[str] = set()
    for row in stream_rows(FRAGMENT_EDGES_SQL, [audit_id]):
        if row[0] not in targets and (len(targets) >= TARGETS_PER_READ or len(held) >= EDGES_HELD):
            yield from _judged(audit_id, held, targets)
            held, targets = [], set()
        held.append(row)
        targets.add(row[0])
    if held:
        yield from _judged(audit_id, held, targets)


def _judged(audit_id: int, edges: list[tuple], targets: set[str]) -> Iterator[Issue]:
    hashes = sorted(targets)
    anchors = {digest: frozenset(loaded(text)) for digest, text in Page.objects.filter(
        audit_id=audit_id, url_hash__in=hashes, kind=Page.Kind.PAGE, status_code=200, redirect_count=0,
        fetch_error="", anchors__isnull=False).values_list("url_hash", "anchors")}
    for digest, source, source_id, target, fragments in edges:
        found = anchors.get(digest)
        if found is None:
            continue
        for fragment in fragments.split("\n"):
            if fragment and not indicated(fragment, found):
                # No anchor text: the edge keeps the first link's to the target, whatever fragment it named.
                where = "this page" if target == source else target
                f = finding("anchor_missing", f"A link to #{fragment}, which no id or <a name> on {where} carries",
                            f"{target}#{fragment}")
                yield issue_for(audit_id, source_id, source, f)

