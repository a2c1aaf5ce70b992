"""Site-level notices that finalize records once, in place of many per-link issues.

When nearly every external check failed before reaching a server (DNS or
connect), the crawler's machine could not reach the internet: thousands of
"broken external link" warnings would blame the site for that. Finalize then
records one ``external_links_unchecked`` notice on the audit instead, and
``link_targets`` leaves out the external links that failed that way (the ones
that got an answer, a 404 say, are still reported).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.db.models import Count, Q

from crawler.catalogue import finding
from crawler.types import FetchError

from .issue_rows import issue_for
from .models import Audit, Issue, Page

# Failures that mean a check never reached a server. A TLS error or a timeout
# after connecting came from a server, so it still says something about the link.
UNREACHABLE = frozenset({FetchError.DNS_FAILURE.value, FetchError.CONNECT_FAILED.value,
                         FetchError.CONNECT_TIMEOUT.value})
# A handful of dead domains is a real finding; this many checks, nearly all
# failing before any server answered, is the crawler being offline.
MIN_CHECKS = 20
MIN_UNREACHABLE_PERCENT = 90


def looks_offline(attempted: int, unreachable: int) -> bool:
    """Whether ``unreachable`` of ``attempted`` external checks failing at DNS or connect means no internet:
    at least MIN_UNREACHABLE_PERCENT of at least MIN_CHECKS (whole numbers: no rounding at the edge)."""
    return attempted >= MIN_CHECKS and unreachable * 100 >= attempted * MIN_UNREACHABLE_PERCENT


@dataclass(frozen=True)
class ExternalReach:
    """What an audit's external checks say about the crawler's way out."""

    attempted: int
    unreachable: int

    @property
    def offline(self) -> bool:
        return looks_offline(self.attempted, self.unreachable)


def external_reach(audit_id: int) -> ExternalReach:
    """The audit's external checks (one aggregate over its pages); a worker lost on one did not try it."""
    counts = Page.objects.filter(audit_id=audit_id, kind=Page.Kind.EXTERNAL).exclude(
        fetch_error=FetchError.WORKER_LOST.value).aggregate(
        attempted=Count("id"), unreachable=Count("id", filter=Q(fetch_error__in=UNREACHABLE)))
    return ExternalReach(counts["attempted"], counts["unreachable"])


def external_links_unchecked(audit_id: int) -> Iterator[Issue]:
    """The one site-level notice, when the audit's external checks say the crawler was offline."""
    reach = external_reach(audit_id)
    if not reach.offline:
        return
    url = Audit.objects.filter(pk=audit_id).values_list("start_url", flat=True).get()
    yield issue_for(audit_id, None, url, finding(
        "external_links_unchecked",
        f"The crawler could not reach the internet; external links unchecked ({reach.unreachable:,} of "
        f"{reach.attempted:,} external checks failed at DNS or connect)."))
