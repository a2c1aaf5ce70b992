"""robots.txt read again in a long audit: RFC 9309 section 2.4 says a crawler should not use
a copy more than a day old, and an audit of a big site under a Crawl-delay runs for days.

The copy is read again before a chunk claims its lease (so a slow file costs no lease), and
the rules it brings are applied where URLs are leased: a URL queued under the old rules is
recorded as blocked when a chunk leases it, whichever chunk queued it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from crawler import loop as crawl_loop
from crawler.catalogue import finding
from crawler.fetch import Fetcher
from crawler.login import is_login_redirect
from crawler.robots import Robots, fetch_robots, robots_from_result
from crawler.types import FetchError

from ..issue_rows import insert_issues, issue_for
from ..knobs import knob
from ..models import Audit, ChunkLease, FrontierURL, Page
from .db_retry import with_db_retry
from .session import SessionLost
from .setup import crawl_setup

log = logging.getLogger(__name__)


def stale(audit: Audit) -> bool:
    """Whether the audit's robots.txt rules are older than ROBOTS_MAX_AGE and bind its crawl."""
    if not audit.respect_robots or not audit.origin or audit.robots_fetched_at is None:
        return False
    return timezone.now() - audit.robots_fetched_at >= timedelta(seconds=knob("ROBOTS_MAX_AGE"))


def reread(audit: Audit) -> bool:
    """Whether the rules in force were read during the crawl, after URLs were queued under older ones."""
    if not audit.respect_robots or audit.robots_fetched_at is None or audit.started_at is None:
        return False
    return audit.robots_fetched_at - audit.started_at >= timedelta(seconds=knob("ROBOTS_MAX_AGE"))


def refresh_robots(audit: Audit) -> bool:
    """Read the audit's robots.txt again and keep it if it was reached; whether the rules were replaced.

    A file that could not be fetched leaves the rules read before in force (RFC 9309 section 2.4),
    and the next chunk asks again. So does an answer that landed on a private site's login page:
    an expired session sends robots.txt there, and the form's HTML holds no rules.
    """
    try:
        setup = crawl_setup(audit)
    except SessionLost:
        return False  # the chunk finds this too, and fails the audit as login_failed

    async def read():
        async with Fetcher(setup.policy, setup.guard, concurrency=1, credentials=setup.credentials) as fetcher:
            return await fetch_robots(fetcher, audit.origin)

    result = crawl_loop.run(read())
    robots = robots_from_result(result)
    if robots.status not in ("ok", "missing") or (setup.login is not None
                                                    and is_login_redirect(result, setup.login.url)):
        log.warning("audit %s: robots.txt was not read again (%s); the rules read before stay",
                    audit.pk, robots.detail or f"redirected to {result.final_url}")
        return False
    with_db_retry(lambda: audit.record_robots(robots.status, robots.http_status, robots.body, audit.sitemap_found),
                  what=f"audit {audit.pk} robots.txt")
    return True


def refuse_disallowed(audit: Audit, robots: Robots, user_agent: str, lease: ChunkLease, items: list) -> list:
    """``items`` (leased by ``lease``) minus the pages rules read during the crawl refuse, which are recorded
    as blocked, never fetched, as admission records a refused link. Nothing to do before a re-read."""
    if not reread(audit):
        return items
    refused = [item for item in items if item.kind == Page.Kind.PAGE and not robots.allowed(item.url, user_agent)]
    if not refused:
        return items
    with transaction.atomic():
        FrontierURL.objects.held_by(lease).filter(id__in=[item.id for item in refused]).update(
            state=FrontierURL.State.DONE, skip_reason=FetchError.BLOCKED_BY_ROBOTS.value)
        insert_issues(
            issue_for(audit.pk, None, item.url, finding("blocked_by_robots", "Disallowed by robots.txt, read again "
                                                        "during the crawl, after it was queued"))
            for item in refused if item.linked
        )
    gone = {item.id for item in refused}
    return [item for item in items if item.id not in gone]
