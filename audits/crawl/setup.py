"""What an audit's stored settings mean to the crawl library, the same in every process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from crawler.checks import CheckSettings
from crawler.credentials import Credentials, LoginForm
from crawler.fetch import FetchPolicy
from crawler.net import AddressGuard
from crawler.robots import Robots, disallowed_on
from crawler.urls import InvalidURL, Scope, compile_patterns, normalize, origin_of
from crawler.window import WindowPolicy

from ..dispatch import RETRY_AFTER_RESCHEDULE_CAP
from ..knobs import knob
from ..models import Audit
from ..services import private_targets_allowed
from .session import credentials_for, login_form, site_access

# Retry-After on a 429 or 503 (RELIABILITY #24): a wait up to RETRY_AFTER_IN_TASK
# is slept inside the fetch, so only that URL's window slot waits; a longer one,
# up to RETRY_AFTER_RESCHEDULE_CAP, puts the URL back in the frontier for later.
RETRY_AFTER_IN_TASK = 3.0
# A URL goes back to the frontier at most this many times, then is stored rate_limited.
MAX_RESCHEDULES = 3


def may_reach_private(audit: Audit) -> bool:
    """Whether the crawl's AddressGuard admits private and loopback addresses: the one rule.

    The audit's stored flag AND the deployment's SITEWARD_ALLOW_PRIVATE, read at
    every chunk, so revoking the setting stops old audits (resumed, re-run, or
    mid-crawl) from reaching internal addresses. Except the ``audit`` command's
    audits (trigger=command): its --allow-private is the server operator's own
    choice and keeps its flag. Resuming one from the screens or admin is still
    refused by services.private_targets_allowed, and a re-run is a manual audit.
    """
    if audit.trigger == Audit.Trigger.COMMAND:
        return audit.allow_private
    return audit.allow_private and private_targets_allowed(audit)


@dataclass(frozen=True)
class CrawlSetup:
    guard: AddressGuard
    policy: FetchPolicy
    scope: Scope | None
    robots: Robots
    window: WindowPolicy
    checks: CheckSettings
    user_agent: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # A private site's headers for its own origin (with the session's cookies),
    # and its login form (to renew the session when it expires).
    credentials: Credentials | None = None
    login: LoginForm | None = None
    # A rendered audit's mode (none, all, auto: crawler.render_rules), and
    # whether robots.txt binds the browser's requests too.
    render: str = "none"
    respect_robots: bool = True
    # A private site's logout pattern, compiled: never requested, as a page, a
    # resource (an <img> or <iframe> of a logout URL) or a rendered page's request.
    logout: tuple = ()
    # External links go unchecked: the crawl contacts no other site, by a redirect neither.
    stay_on_origin: bool = False
    # The login the credentials' session cookies came of (audits.crawl.session.stored_session).
    session_login: int = 0

    def is_logout(self, url: str) -> bool:
        """Whether ``url`` matches the logout pattern as written or normalised: a redirect's Location or a
        browser's request may spell ``/log%6Fut`` where a link, normalised first, reads ``/logout``."""
        try:
            spellings = {url, normalize(url)}
        except InvalidURL:
            spellings = {url}
        return any(pattern.search(spelling) for pattern in self.logout for spelling in spellings)

    def robots_refuse(self, url: str) -> bool:
        """Whether ``url`` is one of the audited origin's that robots.txt disallows (when the audit respects it)."""
        return (self.respect_robots and self.scope is not None
                and disallowed_on(self.robots, (self.scope.origin,), self.user_agent, url))

    def off_site(self, url: str) -> bool:
        """Whether ``url`` is off the audited origin while other sites are not to be contacted."""
        return self.stay_on_origin and self.scope is not None and not internal_test(self.scope)(url)

    @property
    def avoid(self) -> Callable[[str], bool]:
        """What a fetch's redirects may not lead to (``Fetcher``'s ``avoid``): the logout, if there is one;
        what robots.txt disallows on the audited origin, as admission refuses a link there; and, when
        external links go unchecked, any other site (the redirect itself is then the stored answer).

        Only the site's own fetchers take it: an external link's check is no page of the crawl. Before the
        start page has settled the origin (no scope yet), a redirect to another host is followed.
        """
        refusals = [self.robots_refuse]
        if self.logout:
            refusals.append(self.is_logout)
        if self.stay_on_origin:
            refusals.append(self.off_site)
        if len(refusals) == 1:
            return self.robots_refuse
        return lambda url: any(refuse(url) for refuse in refusals)


def crawl_patterns(audit: Audit, access=None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The audit's include and exclude patterns; a private site's crawl never follows its logout links."""
    exclude = list(audit.patterns("exclude"))
    if access is not None and access.logout_pattern.strip():
        exclude.append(access.logout_pattern.strip())
    return tuple(audit.patterns("include")), tuple(exclude)


def crawl_setup(audit: Audit) -> CrawlSetup:
    user_agent = audit.user_agent or knob("USER_AGENT")
    allow_private = may_reach_private(audit)
    policy = FetchPolicy(user_agent=user_agent, deadline=knob("FETCH_DEADLINE"),
                         retry_after_cap=RETRY_AFTER_IN_TASK, reschedule_cap=RETRY_AFTER_RESCHEDULE_CAP)
    robots = Robots.from_stored(audit.robots_status or "ignored", audit.robots_http_status, audit.robots_body)
    delay = robots.crawl_delay(user_agent) if audit.respect_robots else None
    cap = max(1, audit.concurrency)
    if audit.render == "all":
        # Every page waits for one of the browser's few render slots: a window wider than twice
        # those only queues pages past the chunk's soft deadline (and the task's time limit).
        cap = min(cap, 2 * knob("RENDER_PAGES"))
    # A chunk starts where the previous one left the window (Audit.current_window),
    # so what the site has shown about its load carries over between chunks.
    # Never below 2: slow answers halve the window and never grow it, so a chunk
    # of large files would otherwise leave every later chunk at one URL at a time.
    start = min(max(audit.current_window or 4, 2), cap)
    window = WindowPolicy(
        floor=1, start=start, cap=cap, per_host=cap, rate=audit.rate, crawl_delay=delay or 0.0,
        spaced_from_start=True,
    )
    access = site_access(audit)
    include, exclude = crawl_patterns(audit, access)
    scope = Scope(audit.origin, include, exclude) if audit.origin else None
    credentials, session_login = credentials_for(audit, access)
    return CrawlSetup(AddressGuard(allow_private=allow_private), policy, scope, robots, window,
                      audit.check_settings(), user_agent, include, exclude,
                      credentials, login_form(audit, access), audit.render, audit.respect_robots,
                      compile_patterns([access.logout_pattern]) if access is not None else (),
                      stay_on_origin=not audit.check_external, session_login=session_login)

def internal_test(scope: Scope | None) -> Callable[[str], bool]:
    """Whether a URL is on the crawl's origin, as the page checks ask."""
    origin = scope.origin if scope else ""

    def is_internal(url: str) -> bool:
        try:
            return origin_of(url) == origin
        except InvalidURL:
            return False

    return is_internal
