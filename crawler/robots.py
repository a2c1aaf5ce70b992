"""robots.txt under RFC 9309, with the status rules Protego leaves to us.

Protego parses rules; it does not know what an HTTP status means. RFC 9309
section 2.3.1 does, and this module applies it:

* 2xx: parse the first 512,000 bytes, cut back to the last complete line,
  decoded as UTF-8 (BOM dropped, invalid bytes replaced). An HTML page served
  with 200 is parsed leniently too: it normally holds no rules, so all is allowed.
* 4xx, including 401 and 403 ("unavailable" in the RFC, ``missing`` here):
  every URL is allowed. The RFC allows this for every 4xx and we follow it;
  the audit reports ``robots_txt_missing``. 429 is the exception: it is the
  server asking us to slow down, so it counts as a server error (as Google does).
* 5xx, 429, timeouts and network errors ("unreachable" in the RFC,
  ``unavailable`` here): nothing is allowed. The error page is never handed to
  Protego, which would read an HTML 503 page as allow-all.
* Redirects: the Fetcher follows them; a file reached through more than five
  of them, or not reached because the chain loops, is too long or leaves http(s),
  is treated as RFC "unavailable", i.e. ``missing`` (allow all), which is what
  RFC 9309 section 2.3.1.2 permits and what Google documents doing.

Once read, the file binds redirects too: ``disallowed_on`` is what a Fetcher's
``avoid`` asks at every hop, so a redirect into a disallowed path is not
followed, and ``refused_landing`` says where such a redirect pointed.

``Robots`` is a frozen value rebuilt from three database columns by
``Robots.from_stored`` in another process, with the same decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from protego import Protego

from .fetch import REDIRECT_STATUSES, Fetcher
from .types import FetchError, FetchResult
from .urls import InvalidURL, normalize, origin_of

__all__ = [
    "MAX_REDIRECTS",
    "MAX_ROBOTS_BYTES",
    "Robots",
    "disallowed_on",
    "fetch_robots",
    "load_robots",
    "refused_landing",
    "robots_from_result",
]

# RFC 9309 section 2.5: parse at least 500 KiB; 512,000 bytes is Google's figure.
MAX_ROBOTS_BYTES = 512_000
# RFC 9309 section 2.3.1.2: follow at least five consecutive redirects.
MAX_REDIRECTS = 5
CRAWL_DELAY_CAP = 30.0

STATUSES = ("ok", "missing", "unavailable", "ignored")

# Fetch outcomes that mean "the redirects never led to a file", as opposed to
# "the server could not be reached".
_REDIRECT_FAILURES = frozenset(
    {
        FetchError.TOO_MANY_REDIRECTS,
        FetchError.REDIRECT_LOOP,
        FetchError.REDIRECT_BLOCKED_SCHEME,
        FetchError.INVALID_URL,
    }
)
# The body was cut at the cap; its first 512,000 bytes are still the rules.
_TRUNCATED = frozenset({FetchError.BODY_TOO_LARGE, FetchError.DECOMPRESSION_LIMIT})


@dataclass(frozen=True)
class Robots:
    """One origin's robots.txt decision.

    ``status`` is ``ok`` (rules in ``body``), ``missing`` (4xx: allow all),
    ``unavailable`` (5xx or unreachable: allow nothing) or ``ignored`` (the
    audit owner switched robots.txt off: allow all; ``body`` still lists
    sitemaps). ``body`` is the decoded text actually parsed, already cut to the
    size cap, so storing it and calling ``from_stored`` gives the same answers.
    """

    status: str
    http_status: int | None
    body: str = ""
    detail: str = ""
    # What the file itself is (ok, missing or unavailable) when ``status`` is
    # ``ignored``: the site's problems with it are still reported.
    found: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown robots status {self.status!r}")

    @classmethod
    def from_stored(cls, status: str, http_status: int | None, body: str | None) -> Robots:
        """Rebuild from the stored columns, with no network."""
        return cls(status, http_status, body or "", _describe(status, http_status))

    @cached_property
    def _parser(self) -> Any:
        # Only an "ok" or "ignored" body is ever parsed; an error page is not rules.
        if self.status in ("ok", "ignored") and self.body:
            return Protego.parse(self.body)
        return None

    def allowed(self, url: str, user_agent: str) -> bool:
        if self.status == "unavailable":
            return False
        if self.status != "ok" or self._parser is None:
            return True
        return bool(self._parser.can_fetch(url, user_agent))

    def crawl_delay(self, user_agent: str, cap: float = CRAWL_DELAY_CAP) -> float | None:
        """Crawl-delay for ``user_agent`` in seconds, at most ``cap`` (a site
        asking for 86400 s would otherwise stop the audit for a day)."""
        if self.status != "ok" or self._parser is None:
            return None
        delay = self._parser.crawl_delay(user_agent)
        return None if delay is None else min(float(delay), cap)

    @property
    def sitemaps(self) -> tuple[str, ...]:
        """``Sitemap:`` lines in file order, duplicates dropped."""
        if self._parser is None:
            return ()
        return tuple(dict.fromkeys(self._parser.sitemaps))


def robots_from_result(result: FetchResult) -> Robots:
    """Turn the fetch of ``/robots.txt`` into a decision (pure; see module doc)."""
    status = result.status
    hops = len(result.redirects)
    if result.error in _REDIRECT_FAILURES or (result.error is None and hops > MAX_REDIRECTS):
        why = result.error_detail or (result.error.label if result.error else f"{hops} redirects")
        return Robots(
            "missing",
            status,
            "",
            f"robots.txt was not reached within {MAX_REDIRECTS} redirects ({why}); "
            "treated as absent, so every URL is allowed (RFC 9309 section 2.3.1.2)",
        )
    if status is not None and 400 <= status < 500 and status != 429:
        # The answer said "no file": a body that then broke off or dripped past the deadline
        # is an error page's, and none of its bytes could have been rules (RFC 9309 2.3.1.3).
        return Robots("missing", status, "", _describe("missing", status))
    truncated = result.error in _TRUNCATED and bool(result.body)
    if result.error is not None and not truncated:
        why = result.error_detail or result.error.label
        return Robots(
            "unavailable",
            status,
            "",
            f"robots.txt could not be fetched ({why}); nothing is crawled (RFC 9309 section 2.3.1.4)",
        )
    if status is None or status == 429 or status >= 500 or status < 200:
        return Robots(
            "unavailable",
            status,
            "",
            f"robots.txt answered {status}; nothing is crawled (RFC 9309 section 2.3.1.4)",
        )
    if status >= 300:
        return Robots("missing", status, "", _describe("missing", status))
    if result.body is None:
        # Answered, but in a form we cannot read (a compression we never asked for): its rules are unknown.
        why = result.error_detail or "its body could not be read"
        return Robots("unavailable", status, "",
                      f"robots.txt could not be read ({why}); nothing is crawled (RFC 9309 section 2.3.1.4)")
    raw = result.body
    text = decode_robots(raw, truncated=truncated)
    detail = f"robots.txt read ({len(raw)} bytes)"
    if truncated or len(raw) > MAX_ROBOTS_BYTES:
        detail = f"robots.txt is larger than {MAX_ROBOTS_BYTES} bytes; only its first {MAX_ROBOTS_BYTES} bytes were read"
    if result.is_html:
        detail += "; it is served as HTML, so it probably holds no rules"
    return Robots("ok", status, text, detail)


def decode_robots(raw: bytes, *, truncated: bool = False) -> str:
    """The text Protego gets: the first 512,000 bytes up to the last full line,
    as UTF-8 with the BOM dropped and bad bytes replaced. NUL becomes U+FFFD
    because the text is stored, and PostgreSQL refuses NUL in text columns."""
    data = raw[:MAX_ROBOTS_BYTES]
    if truncated or len(raw) > MAX_ROBOTS_BYTES:
        # A line cut in the middle could turn "Disallow: /private" into
        # "Disallow: /", so the partial last line is dropped.
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        data = data[: end + 1]
    return data.decode("utf-8-sig", errors="replace").replace("\x00", "\ufffd")


async def fetch_robots(fetcher: Fetcher, origin: str) -> FetchResult:
    """One GET of ``origin``'s robots.txt within RFC 9309's caps: 512,000 bytes and five redirects."""
    return await fetcher.fetch(origin_of(origin) + "/robots.txt", keep_body=True, max_bytes=MAX_ROBOTS_BYTES,
                               max_redirects=MAX_REDIRECTS)


async def load_robots(fetcher: Fetcher, origin: str, *, ignore: bool = False) -> Robots:
    """Fetch ``origin``'s robots.txt once and decide.

    With ``ignore`` the file is still fetched (its Sitemap lines are useful) but
    the result allows everything; ``detail`` says what the file would have said.
    """
    robots = robots_from_result(await fetch_robots(fetcher, origin))
    if ignore:
        return Robots(
            "ignored",
            robots.http_status,
            robots.body,
            f"robots.txt is ignored for this audit ({robots.detail})",
            found=robots.status,
        )
    return robots


def disallowed_on(robots: Robots, origins: Collection[str], user_agent: str, url: str) -> bool:
    """Whether ``url`` is on one of ``origins`` (the ones ``robots`` was read for) and the file disallows it.

    Bound with ``functools.partial`` it is a Fetcher's ``avoid``: a redirect hop
    into a disallowed path is not followed, as a link there is not. Another
    origin's URL is never refused here: this file is not its robots.txt.
    The URL is judged normalised, as admission judges a link (session ids
    stripped), so a hop is refused exactly when its landing would be.
    """
    try:
        url = normalize(url)
        return origin_of(url) in origins and not robots.allowed(url, user_agent)
    except InvalidURL:
        return False


def refused_landing(result: FetchResult, refuses: Callable[[str], bool]) -> str | None:
    """Where a redirect the Fetcher did not follow because ``refuses`` said no points, normalised; else None.

    The Fetcher then answers with the redirect itself, its final URL the one it
    refused. Only a refused URL comes back as a redirect's final URL that
    ``refuses`` names: a URL the Fetcher requested passed ``refuses`` first.
    """
    if result.error is not None or result.status not in REDIRECT_STATUSES or not result.redirects:
        return None
    try:
        where = normalize(result.final_url)
    except InvalidURL:
        return None
    return where if refuses(where) else None


def _describe(status: str, http_status: int | None) -> str:
    answered = f"answered {http_status}" if http_status is not None else "could not be fetched"
    if status == "ok":
        return "robots.txt read"
    if status == "missing":
        return f"robots.txt {answered}; every URL is allowed (RFC 9309 section 2.3.1.3)"
    if status == "unavailable":
        return f"robots.txt {answered}; nothing is crawled (RFC 9309 section 2.3.1.4)"
    return "robots.txt is ignored for this audit"
