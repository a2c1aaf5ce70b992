"""An audit with broken links to three dead targets from seven pages, as finalize would leave it.

Shared by the broken-links screen tests and the workbook and report tests.
"""

from __future__ import annotations

from audits.models import Audit, Issue, Page
from crawler.urls import url_hash
from tests.factories import SITE, make_audit, make_issue, make_link, make_page

GONE = f"{SITE}/gone"            # 404, linked from 4 pages (one of them twice)
DOWN = f"{SITE}/down"            # 500, linked from 2 pages
DEAD = "https://elsewhere.example/dead"  # DNS failure, linked from 2 pages, external
SOURCES = [f"{SITE}/s{n}" for n in range(1, 8)]  # s1 … s7


def make_broken_audit(owner) -> Audit:
    audit = make_audit(owner, status=Audit.Status.COMPLETED, phase=Audit.Phase.DONE, origin=SITE)
    pages = {url: make_page(audit, url, title=f"Source {url[-2:]}") for url in SOURCES}
    make_page(audit, GONE, status_code=404)
    make_page(audit, DOWN, status_code=500)
    make_page(audit, DEAD, kind=Page.Kind.EXTERNAL, status_code=None, fetch_error="dns_failure",
              fetch_error_detail="elsewhere.example does not exist")
    links = [
        (SOURCES[0], GONE, "Gone"), (SOURCES[0], GONE, "Gone again"), (SOURCES[1], GONE, "Gone"),
        (SOURCES[2], GONE, "Gone"), (SOURCES[3], GONE, "Gone"),
        (SOURCES[0], DOWN, "Down"), (SOURCES[4], DOWN, "Down"),
        (SOURCES[5], DEAD, "Partner"), (SOURCES[6], DEAD, "Partner"),
    ]
    for source, target, anchor in links:
        internal = target != DEAD
        make_link(audit, source, target, anchor=anchor, internal=internal)
        make_issue(audit, "broken_link_internal" if internal else "broken_link_external", source,
                   page=pages[source], target_url=target, message=f"Link “{anchor}” is broken",
                   key=url_hash(f"{source}|{target}|{anchor}"))
    # Not a broken link: must not become a target row.
    make_issue(audit, "redirect_internal_link", SOURCES[0], page=pages[SOURCES[0]], target_url=f"{SITE}/old")
    return audit


def add_sources(audit, target: str, count: int, *, code: str = "broken_link_internal") -> None:
    """``count`` more pages linking to ``target``, written in one statement."""
    Issue.objects.bulk_create(
        Issue(audit=audit, url=f"{SITE}/many/{n:05d}", url_hash=url_hash(f"{SITE}/many/{n:05d}"), code=code,
              severity="critical", target_url=target, message="Link is broken",
              key=url_hash(f"many|{target}|{n}"))
        for n in range(count)
    )
