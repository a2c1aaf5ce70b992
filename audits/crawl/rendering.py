"""A rendered audit's browser, per chunk: which pages it renders, and the rules its requests obey.

The browser's requests go through a fetcher of their own: the audit's
credentials (its origin only, as every fetch), robots.txt for the site's own
URLs, and an address guard that admits private addresses only for the audited
origin itself. A page's script is content the site's visitors (or anyone who
can edit it) control: it may not make the crawler reach into the network it
runs in, even on an audit that allows a private target.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from crawler.checks import PageContext
from crawler.fetch import Fetcher
from crawler.net import AddressGuard, LookupLane
from crawler.page import PageOutcome
from crawler.render import Renderer
from crawler.render_rules import needs_render
from crawler.rendered_page import rendered_outcome
from crawler.urls import origin_of

from ..knobs import knob
from .setup import CrawlSetup

# Requests the browser's fetcher has in flight for one chunk (all its pages together).
BROWSER_FETCHES = 8


@contextlib.asynccontextmanager
async def browser(setup: CrawlSetup) -> AsyncIterator[Renderer | None]:
    """A Renderer for a rendered audit's chunk (a fresh context, closed with the chunk); None otherwise."""
    if setup.render == "none" or setup.scope is None:
        yield None
        return
    # Its lookups in a lane of their own, as external checks': third-party hosts' slow nameservers
    # must not hold the lookup threads the audited site's own fetches wait for.
    guard = browser_guard(setup.guard.in_lane(LookupLane()), setup.scope.origin)
    # The page's own requests go to third parties too (scripts, embeds): their redirects elsewhere are
    # followed, as the browser would, whether or not the audit checks external links.
    avoid = dataclasses.replace(setup, stay_on_origin=False).avoid
    # A browser does not try a subresource again, nor wait for one longer than the page may take:
    # a host that never answers must not hold the fetcher's slots through the next pages' renders.
    render_deadline = knob("RENDER_DEADLINE")
    policy = dataclasses.replace(setup.policy, max_retries=0, retry_after_cap=0.0,
                                 deadline=min(setup.policy.deadline, render_deadline),
                                 total_budget=min(setup.policy.total_budget, render_deadline))
    async with (Fetcher(policy, guard, concurrency=BROWSER_FETCHES, credentials=setup.credentials,
                        avoid=avoid) as fetcher,
                Renderer(fetcher, executable=knob("CHROMIUM"), deadline=render_deadline,
                         slots=knob("RENDER_PAGES"), may_request=_robots_rule(setup),
                         user_agent=setup.user_agent) as renderer):
        yield renderer


def browser_guard(guard: AddressGuard, origin: str) -> AddressGuard:
    """The crawl's guard, narrowed for a page's own requests: no private address but the origin's.

    Allowed by the origin's host name, whatever it resolves to at each request
    (a load balancer's several addresses); another name for the same address is refused.
    """
    if not guard.allow_private:
        return guard
    parts = urlsplit(origin)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return guard.private_only_for(parts.hostname or "", port)


def _robots_rule(setup: CrawlSetup):
    origin = setup.scope.origin if setup.scope else ""

    def may_request(url: str) -> str | None:
        try:
            own = origin_of(url) == origin
        except Exception:
            return "not a valid URL"
        if own and setup.respect_robots and not setup.robots.allowed(url, setup.user_agent):
            return "disallowed by robots.txt"
        if own and setup.is_logout(url):
            return "a logout URL, never requested while logged in"
        return None

    return may_request


async def render_if_needed(renderer: Renderer | None, outcome: PageOutcome, setup: CrawlSetup,
                           ctx: PageContext) -> PageOutcome:
    """``outcome`` rendered when the audit's mode says this page is rendered; else as it is."""
    result = outcome.result
    if renderer is None or outcome.unchanged or not (result.ok and result.is_html) or result.body is None:
        return outcome
    origin = setup.scope.origin if setup.scope else ""
    if not needs_render(setup.render, result.body, outcome.facts, origin):
        return outcome
    # The charset the page was read in (header, BOM, meta or detection): named in the header, it is the one
    # Chromium uses, so a page declaring iso-8859-1 only in its <meta> is not read as UTF-8.
    charset = result.charset or (outcome.facts.charset if outcome.facts is not None else None) or "utf-8"
    content_type = f"{result.content_type}; charset={charset}"
    rendered = await renderer.render(result.final_url or outcome.url, result.body, content_type)
    return rendered_outcome(outcome, rendered, ctx, origin)
