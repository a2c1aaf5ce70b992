"""The small immutable values the crawl library passes between its parts.

They live in one module so ``fetch``, ``parse``, ``checks``, ``window`` and the
Django side agree on one shape without importing each other.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class FetchError(enum.StrEnum):
    """Closed vocabulary of URL-level fetch outcomes (stored on Page.fetch_error).

    A URL-level outcome never fails an audit by itself.
    """

    DNS_FAILURE = "dns_failure"
    CONNECT_FAILED = "connect_failed"
    CONNECT_TIMEOUT = "connect_timeout"
    READ_TIMEOUT = "read_timeout"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    TLS_ERROR = "tls_error"
    PROTOCOL_ERROR = "protocol_error"
    INCOMPLETE_BODY = "incomplete_body"
    BODY_TOO_LARGE = "body_too_large"
    DECOMPRESSION_LIMIT = "decompression_limit"
    REDIRECT_LOOP = "redirect_loop"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    REDIRECT_BLOCKED_SCHEME = "redirect_blocked_scheme"
    SSRF_BLOCKED = "ssrf_blocked"
    INVALID_URL = "invalid_url"
    RATE_LIMITED = "rate_limited"
    BLOCKED_BY_ROBOTS = "blocked_by_robots"
    TRAP_SUSPECTED = "trap_suspected"
    WORKER_LOST = "worker_lost"
    UNKNOWN = "unknown"

    @property
    def label(self) -> str:
        return _FETCH_ERROR_LABELS[self]


_FETCH_ERROR_LABELS = {
    FetchError.DNS_FAILURE: "Host name could not be resolved",
    FetchError.CONNECT_FAILED: "Connection refused or reset",
    FetchError.CONNECT_TIMEOUT: "Connection timed out",
    FetchError.READ_TIMEOUT: "Server stopped answering",
    FetchError.DEADLINE_EXCEEDED: "Response took longer than the per-request deadline",
    FetchError.TLS_ERROR: "TLS certificate or handshake failed",
    FetchError.PROTOCOL_ERROR: "Malformed HTTP response",
    FetchError.INCOMPLETE_BODY: "Connection closed before the body was complete",
    FetchError.BODY_TOO_LARGE: "Body larger than the size cap",
    FetchError.DECOMPRESSION_LIMIT: "Body expands past the decompressed-size cap",
    FetchError.REDIRECT_LOOP: "Redirect loop",
    FetchError.TOO_MANY_REDIRECTS: "More than the allowed number of redirects",
    FetchError.REDIRECT_BLOCKED_SCHEME: "Redirect to a non-http(s) scheme",
    FetchError.SSRF_BLOCKED: "Address refused (private, loopback or reserved)",
    FetchError.INVALID_URL: "Malformed URL",
    FetchError.RATE_LIMITED: "Rate limited by the server past the retry cap",
    FetchError.BLOCKED_BY_ROBOTS: "Disallowed by robots.txt",
    FetchError.TRAP_SUSPECTED: "Looks like a crawler trap",
    FetchError.WORKER_LOST: "The worker crawling it died repeatedly",
    FetchError.UNKNOWN: "Unexpected error",
}

# Our own failures (the worker died, the address guard refused) say nothing
# about the site: they never make a link broken.
NOT_SITE_FAULTS = frozenset({FetchError.WORKER_LOST, FetchError.SSRF_BLOCKED})
# Statuses that say "you may not look", not "this is gone": an external link
# answering one is reported as unverified rather than broken (CHECKS.md #5).
UNVERIFIED_STATUSES = frozenset({401, 403, 429, 999})


def is_broken(status: int | None, error: str | None) -> bool:
    """A final answer that a link to it is reported for: 4xx, 5xx, or a failure of the site's."""
    return (bool(error) and error not in NOT_SITE_FAULTS) or (status is not None and status >= 400)


def is_unverified(status: int | None, error: str | None) -> bool:
    """An answer that says the other site refuses crawlers, not that the page is gone (CHECKS.md #5).

    A 429 the fetcher gave up retrying still answered 429: it is stored as rate limited, and still unverified.
    """
    return status in UNVERIFIED_STATUSES and error in (None, "", FetchError.RATE_LIMITED)


class Severity(enum.StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    NOTICE = "notice"


@dataclass(frozen=True, slots=True)
class Hop:
    """One redirect hop: ``url`` answered ``status`` and pointed at ``location``, its head after ``ttfb`` s."""

    url: str
    status: int
    location: str
    ttfb: float | None = field(default=None, compare=False)  # a timing, not what the hop was


@dataclass(frozen=True, slots=True)
class FetchResult:
    """Everything a fetch learnt about one URL. ``error`` set means it failed.

    ``body`` holds the decoded (decompressed) bytes only for HTML responses that
    were read completely within the caps; it is ``None`` otherwise.
    """

    url: str
    final_url: str
    status: int | None = None
    redirects: tuple[Hop, ...] = ()
    content_type: str = ""  # mime type only, lower-cased, e.g. "text/html"
    charset: str | None = None  # from the Content-Type header, if any
    # Lower-cased names; a repeated header's values joined with ", ", X-Robots-Tag's with "\n".
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    size: int = 0  # bytes received on the wire (before decompression)
    # A checked URL's Content-Length (its body is never read): the size stored for it, not what the window paces by.
    declared_size: int = 0
    ttfb: float = 0.0  # seconds until response headers of the final hop
    elapsed: float = 0.0  # seconds for the whole fetch, retries included
    error: FetchError | None = None
    error_detail: str = ""
    attempts: int = 1
    method: str = "GET"
    # Set only on a RATE_LIMITED result the caller may retry: the seconds the
    # server asked for (Retry-After), to come back to the URL after instead of
    # giving it up. None on a rate-limited result means it was given up.
    retry_after: float | None = None
    # Each Set-Cookie header of the last response, as sent (a login reads them).
    set_cookies: tuple[str, ...] = ()
    # Those of the redirects before it, each with the URL that answered: only from the origin the
    # fetcher's credentials are for, the one origin whose cookies a crawl keeps.
    redirect_cookies: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Served as HTML, but its first bytes were binary data: not read, not parsed.
    binary: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    @property
    def is_html(self) -> bool:
        return self.content_type in ("text/html", "application/xhtml+xml")

    @property
    def broken(self) -> bool:
        """A final result that a link to it should be reported for."""
        return is_broken(self.status, self.error)


@dataclass(frozen=True, slots=True)
class Link:
    """An outgoing reference found on a page (already resolved to absolute).

    ``tag`` says what kind of reference it is: ``a``/``area`` are navigational
    links; ``img``, ``script``, ``link`` (stylesheet), ``iframe``, ``source``,
    ``video``, ``audio``, ``embed``, ``object`` are resources; ``form`` is a
    form action; ``hreflang`` is a language alternate from ``<link
    rel=alternate hreflang>`` (its ``text`` is the language code).
    """

    url: str
    tag: str = "a"
    text: str = ""
    rel: tuple[str, ...] = ()
    nofollow: bool = False
    # The fragments links to this URL name (``crawler.anchors``): set on outlinks, which carry no fragment.
    fragments: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Image:
    url: str
    alt: str | None  # None: no alt attribute at all; "" is a decorative image


@dataclass(frozen=True, slots=True)
class Canonical:
    url: str  # as written in the document (may be relative)
    in_head: bool = True


@dataclass(frozen=True, slots=True)
class PageFacts:
    """What one HTML page says about itself; no DOM survives the parse."""

    title: str | None = None  # first <title>, whitespace-collapsed
    title_count: int = 0
    descriptions: tuple[str, ...] = ()  # every meta description's content
    robots: frozenset[str] = frozenset()  # meta robots/googlebot directives, lower-cased
    canonicals: tuple[Canonical, ...] = ()
    h1_count: int = 0  # non-empty <h1> elements
    headings: tuple[int, ...] = ()  # heading levels in document order
    links: tuple[Link, ...] = ()
    links_dropped: int = 0  # outlinks past the per-page cap
    images: tuple[Image, ...] = ()
    hreflang: tuple[tuple[str, str], ...] = ()  # (language code, absolute URL)
    charset: str = "utf-8"  # the encoding the body was decoded with
    lang: str | None = None  # <html lang>
    word_count: int = 0
    content_hash: str = ""  # hash of the whitespace-normalised body text
    meta_refresh: str | None = None  # content of <meta http-equiv=refresh>
    head_tags_in_body: bool = False  # <title> or <meta name=description|robots> in <body>
    viewport: bool = False
    base_url: str = ""  # the URL links were resolved against (<base href> aware)
    structured_data: tuple[str, ...] = ()  # each invalid JSON-LD block's problem (crawler.structured_data)
    anchors: tuple[str, ...] | None = None  # ids and <a name>s, sorted; None: not read, or past the cap (crawler.anchors)


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found by a check. ``target_url`` is set for link findings."""

    code: str
    severity: Severity
    message: str
    target_url: str | None = None
    # Tells apart two findings of one code on one page with no target (the
    # message is not used: it carries numbers that change from run to run).
    variant: str = ""
