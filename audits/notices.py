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
from crawler.html_rules import clip
from crawler.types import FetchError

from .issue_rows import issue_for
from .models import Audit, FrontierURL, Issue, LinkEdge, Page

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
    """The audit's external checks (one aggregate over its pages); a worker lost on one did not try it.

    A validation checks only the external links that were broken, many of them on dead
    domains: its sample is the ones whose server answered in the audit it re-checks.
    """
    pages = Page.objects.filter(audit_id=audit_id, kind=Page.Kind.EXTERNAL).exclude(
        fetch_error=FetchError.WORKER_LOST.value)
    mode, source_id = Audit.objects.filter(pk=audit_id).values_list("mode", "source_id").get()
    if mode == Audit.Mode.VALIDATE:
        pages = pages.filter(url_hash__in=Page.objects.filter(
            audit_id=source_id, kind=Page.Kind.EXTERNAL, fetch_error="").values("url_hash"))
    counts = pages.aggregate(
        attempted=Count("id"), unreachable=Count("id", filter=Q(fetch_error__in=UNREACHABLE)))
    return ExternalReach(counts["attempted"], counts["unreachable"])


def site_notice(audit_id: int, code: str, message: str) -> Issue:
    """A notice about the audit as a whole, filed on its start URL with no page."""
    url = Audit.objects.filter(pk=audit_id).values_list("start_url", flat=True).get()
    return issue_for(audit_id, None, url, finding(code, message))


def external_links_unchecked(audit_id: int) -> Iterator[Issue]:
    """The one site-level notice, when the audit's external checks say the crawler was offline."""
    reach = external_reach(audit_id)
    if not reach.offline:
        return
    yield site_notice(
        audit_id, "external_links_unchecked",
        f"The crawler could not reach the internet; external links unchecked ({reach.unreachable:,} of "
        f"{reach.attempted:,} external checks failed at DNS or connect).")


# A crawl that stored more pages than this found its way around the site: links
# to another version of it are then a few stray ones, not where the site is.
SIBLING_MAX_PAGES = 10
# Fewer links than this prove nothing either way.
SIBLING_MIN_LINKS = 3


def sibling_origins(origin: str) -> list[str]:
    """The same site under another scheme or host name: with or without ``www.``, http or https."""
    scheme, sep, host = origin.partition("://")
    if not sep:
        return []
    bare = host.removeprefix("www.")
    return [f"{s}://{h}" for s in ("https", "http") for h in (bare, f"www.{bare}") if f"{s}://{h}" != origin]


def links_to_sibling_origin(audit_id: int) -> Iterator[Issue]:
    """One notice when a crawl of a few pages found most of their links going to another version of the site.

    The audit is scoped to one origin, so a site that serves ``example.com`` but
    links every page as ``www.example.com`` is a one-page audit with a list of
    external links; this says why, and what to audit instead.
    """
    start_url, origin, pages = Audit.objects.filter(pk=audit_id).values_list(
        "start_url", "origin", "pages_crawled").get()
    siblings = sibling_origins(origin or "")
    if not siblings or pages > SIBLING_MAX_PAGES:
        return
    links = LinkEdge.objects.filter(audit_id=audit_id, tag__in=("a", "area"))
    counts = links.aggregate(own=Count("id", filter=Q(internal=True)), **{
        f"s{n}": Count("id", filter=Q(internal=False, target_url__startswith=f"{sibling}/"))
        for n, sibling in enumerate(siblings)})
    n, sibling = max((counts[f"s{n}"], sibling) for n, sibling in enumerate(siblings))
    if n < SIBLING_MIN_LINKS or n <= counts["own"]:
        return
    yield issue_for(audit_id, None, start_url, finding(
        "links_to_sibling_origin",
        f"{n:,} links on the crawled pages point at {sibling}, against {counts['own']:,} to {origin}: this audit "
        f"treats {sibling} as another site and did not crawl it. To audit those pages, start from {sibling}/."))


# The trap notice names this many of the URLs it counts, each cut to this length.
TRAP_EXAMPLES = 3
TRAP_EXAMPLE_LENGTH = 200


def crawl_traps_skipped(audit_id: int) -> Iterator[Issue]:
    """One notice when linked URLs were left uncrawled as likely crawler traps (admission records them).

    Without it a relative link that keeps adding itself (/a/b/a/b/...), or a
    calendar's endless "next month", ends as a completed audit that never says
    it left those URLs out.
    """
    skipped = FrontierURL.objects.filter(audit_id=audit_id, skip_reason=FetchError.TRAP_SUSPECTED.value)
    count = skipped.count()
    if not count:
        return
    examples = [clip(url, TRAP_EXAMPLE_LENGTH) for url in
                skipped.order_by("depth", "id").values_list("url", flat=True)[:TRAP_EXAMPLES]]
    yield site_notice(
        audit_id, "crawl_traps_skipped",
        f"{count:,} linked URL{'s' if count != 1 else ''} not crawled: they look like a crawler trap (paths that "
        f"repeat, or run very long or deep, or very many parameters, or a URL pattern that kept giving new pages "
        f"ever deeper, as an endless calendar does). For example: {', '.join(examples)}")
