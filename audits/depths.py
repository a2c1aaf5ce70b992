"""Click depths made true after chunks of one audit ran side by side.

A chunk writes its pages as they come, so beside others it can queue a page
through a longer path before the shorter one is written. Admission lowers a
queued page's depth when the shorter path arrives; what was crawled meanwhile
is settled here, before the checks that read depths, by relaxing every link
edge until nothing changes (a shortest-path pass in SQL, over edges in the
tables already).
"""

from __future__ import annotations

from django.db import connection

from crawler.page import PAGE_TAGS, RESOURCE_TAGS

from .models import Audit
from .sql import placeholders

_FOLLOWED = sorted(PAGE_TAGS | RESOURCE_TAGS)

# Pages reachable one click closer than recorded: a linked page's depth plus
# one, at most (a sitemap-only page's seeded depth is not a click depth); where a
# redirect lands, its depth.
SHORTER_SQL = f"""
    SELECT t.id, MIN(s.depth + CASE WHEN e.tag = 'redirect' THEN 0 ELSE 1 END) FROM audits_linkedge e
    JOIN audits_page s ON s.audit_id = e.audit_id AND s.url_hash = e.source_hash
    JOIN audits_frontierurl f ON f.audit_id = s.audit_id AND f.url_hash = s.url_hash AND f.linked
    JOIN audits_page t ON t.audit_id = e.audit_id AND t.url_hash = e.target_hash
    WHERE e.audit_id = %s AND e.internal AND e.tag IN ({placeholders(len(_FOLLOWED))})
    GROUP BY t.id, t.depth HAVING MIN(s.depth + CASE WHEN e.tag = 'redirect' THEN 0 ELSE 1 END) < t.depth
"""


def settle(audit: Audit) -> int:
    """Lower every page's depth to its shortest link distance from the start; the passes taken.

    Each pass lowers what one more click settles, so a pass per level of the
    crawl is the most it can take (the loop's cap).
    """
    if not audit.out_of_order:
        return 0
    with connection.cursor() as cursor:
        for passes in range(1, audit.max_depth + 3):
            cursor.execute(SHORTER_SQL, [audit.pk, *_FOLLOWED])
            shorter = [(depth, pk) for pk, depth in cursor.fetchall()]
            if not shorter:
                return passes
            cursor.executemany("UPDATE audits_page SET depth = %s WHERE id = %s", shorter)
    return passes
