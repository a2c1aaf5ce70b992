"""robots.txt read again in a long audit: RFC 9309 section 2.4 says a crawler should not use
a copy more than a day old. An audit of a big site under a Crawl-delay runs for days."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from crawler import loop as crawl_loop
from crawler.catalogue import finding
from crawler.fetch import Fetcher
from crawler.robots import Robots, load_robots
from crawler.types import FetchError

from ..issue_rows import insert_issues, issue_for
from ..knobs import knob
from ..models import Audit, FrontierURL, Page
from .admission import LOOKUP_BATCH
from .db_retry import with_db_retry
from .setup import CrawlSetup

log = logging.getLogger(__name__)


def stale(audit: Audit) -> bool:
    """Whether the audit's robots.txt rules are older than ROBOTS_MAX_AGE and bind its crawl."""
    if not audit.respect_robots or not audit.origin or audit.robots_fetched_at is None:
        return False
    return timezone.now() - audit.robots_fetched_at >= timedelta(seconds=knob("ROBOTS_MAX_AGE"))


def refresh_robots(audit: Audit, setup: CrawlSetup) -> bool:
    """Read the audit's robots.txt again and keep it if it was reached; whether the rules were replaced.

    Queued pages the new rules refuse are recorded as blocked, as admission records them. A file that
    could not be fetched leaves the rules read before in force (RFC 9309 section 2.4), and the next
    chunk asks again.
    """
    async def read():
        async with Fetcher(setup.policy, setup.guard, concurrency=1, credentials=setup.credentials) as fetcher:
            return await load_robots(fetcher, audit.origin)

    robots = crawl_loop.run(read())
    if robots.status not in ("ok", "missing"):
        log.warning("audit %s: robots.txt could not be read again (%s); the rules read before stay",
                    audit.pk, robots.detail)
        return False
    def keep() -> None:
        with transaction.atomic():
            audit.record_robots(robots.status, robots.http_status, robots.body, audit.sitemap_found)
            _block_queued(audit, robots, setup.user_agent)

    with_db_retry(keep, what=f"audit {audit.pk} robots.txt")
    return True


def _block_queued(audit: Audit, robots: Robots, user_agent: str) -> None:
    """Queued pages ``robots`` refuses: done, never fetched, and reported as admission reports a refused link."""
    queued = FrontierURL.objects.filter(audit=audit, kind=Page.Kind.PAGE, state=FrontierURL.State.PENDING)
    refused = [(pk, url, found_on, linked) for pk, url, found_on, linked
               in queued.values_list("id", "url", "found_on", "linked").iterator(chunk_size=2000)
               if not robots.allowed(url, user_agent)]
    for start in range(0, len(refused), LOOKUP_BATCH):
        FrontierURL.objects.filter(id__in=[row[0] for row in refused[start:start + LOOKUP_BATCH]]).update(
            state=FrontierURL.State.DONE, skip_reason=FetchError.BLOCKED_BY_ROBOTS.value)
    insert_issues(
        issue_for(audit.pk, None, url, finding(
            "blocked_by_robots", f"Disallowed by robots.txt, read again during the crawl; linked from {found_on}"))
        for _, url, found_on, linked in refused if linked
    )
