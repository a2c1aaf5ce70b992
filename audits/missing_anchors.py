"""``anchor_missing``: links whose #fragment names no anchor on the page they point at.

A cross-page check, run by finalize: the link's fragments are on its edge
(``LinkEdge.fragments``), the target's anchors on its page row
(``Page.anchors``). A target is judged when it answered 200 itself and was
parsed with all its anchors kept (``crawler.anchors``), or when it redirects
and the page it lands on is (browsers carry the fragment across a redirect
whose Location names none). A file that is not HTML, a page past the anchor
caps, or a target that failed never gives the issue.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import connection

from crawler.anchors import indicated, loaded
from crawler.catalogue import finding

from .issue_rows import issue_for
from .models import Issue
from .sql import placeholders, stream_rows

# Edges that name fragments, by target so each target's anchors are read once.
# A scan of the audit's edges (no index by target: LinkEdge.Meta) and a sort of
# the ones that carry fragments.
FRAGMENT_EDGES_SQL = """
    SELECT e.target_hash, e.source_url, s.id, e.target_url, e.fragments
    FROM audits_linkedge e
    LEFT JOIN audits_page s ON s.audit_id = e.audit_id AND s.url_hash = e.source_hash
    WHERE e.audit_id = %s AND e.fragments <> '' AND e.tag IN ('a', 'area')
    ORDER BY e.target_hash
"""
# Targets whose anchors one read fetches (each at most ANCHOR_CHARS_MAX characters), and edges held
# while they are gathered: past either, what is held is judged, in the middle of a target if need be.
TARGETS_PER_READ = 50
EDGES_HELD = 2000
# Each target's anchors as judged, from ``audits_page t``: its own when it answered 200 itself and kept
# them all, else those of the page its redirect lands on (a redirect whose Location names no fragment: the
# browser carries the link's), else NULL. The diff's verdicts (audits.diff) judge by the same rule.
_JUDGED = """{a}.kind = 'page' AND {a}.status_code = 200 AND {a}.redirect_count = 0 AND {a}.fetch_error = ''
             AND {a}.anchors IS NOT NULL"""
TARGET_ANCHORS_FROM = f"""audits_page t
    LEFT JOIN audits_linkedge r ON r.audit_id = t.audit_id AND r.source_hash = t.url_hash AND r.tag = 'redirect'
          AND t.redirect_count > 0 AND t.fetch_error = '' AND t.status_code < 300 AND t.final_url NOT LIKE '%%#%%'
    LEFT JOIN audits_page l ON l.audit_id = r.audit_id AND l.url_hash = r.target_hash AND {_JUDGED.format(a="l")}"""
TARGET_ANCHORS = f"CASE WHEN {_JUDGED.format(a='t')} THEN t.anchors ELSE l.anchors END"
ANCHORS_SQL = f"""SELECT t.url_hash, {TARGET_ANCHORS} FROM {TARGET_ANCHORS_FROM}
    WHERE t.audit_id = %s AND t.url_hash IN ({{targets}})"""


def missing_anchors(audit_id: int) -> Iterator[Issue]:
    """One issue per (page, target, fragment) whose fragment the target page does not carry."""
    held: list[tuple] = []
    targets: set[str] = set()
    for row in stream_rows(FRAGMENT_EDGES_SQL, [audit_id]):
        if len(held) >= EDGES_HELD or (row[0] not in targets and len(targets) >= TARGETS_PER_READ):
            yield from _judged(audit_id, held, targets)
            held, targets = [], set()
        held.append(row)
        targets.add(row[0])
    if held:
        yield from _judged(audit_id, held, targets)


def anchors_of(audit_id: int, hashes: list[str]) -> dict[str, frozenset[str]]:
    """The anchors of the targets among ``hashes`` that are judged (TARGET_ANCHORS), by target hash."""
    with connection.cursor() as cursor:
        cursor.execute(ANCHORS_SQL.format(targets=placeholders(len(hashes))), [audit_id, *hashes])
        return {digest: frozenset(loaded(text)) for digest, text in cursor.fetchall() if text is not None}


def _judged(audit_id: int, edges: list[tuple], targets: set[str]) -> Iterator[Issue]:
    anchors = anchors_of(audit_id, sorted(targets))
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
