"""The cookies each answer of a fetch sets, redirects included, as a private site's crawl keeps them.

A browser stores a redirect's Set-Cookie before it follows the redirect, so a
sliding session's ticket renewed on ``/app -> /app/`` goes on the next hop and
stays; only the origin the credentials belong to gives cookies to the crawl.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from .credentials import Credentials
from .request_url import origin
from .types import FetchResult


def through_redirect(kept: list[tuple[str, tuple[str, ...]]], session: Credentials | None, url: httpx.URL,
                     set_cookies: tuple[str, ...]) -> Credentials | None:
    """``session`` for a fetch's next hops, with the cookies the redirect from ``url`` set, which join
    ``kept`` (``FetchResult.redirect_cookies``); unchanged when ``url`` is off the session's origin."""
    if session is None or not set_cookies or origin(url) != session.origin:
        return session
    kept.append((str(url), set_cookies))
    return session.renewed_by(url, set_cookies)  # which reads them as the browser would over url's scheme


def answers(result: FetchResult) -> Iterator[tuple[httpx.URL, tuple[str, ...]]]:
    """Each answer of ``result`` that set cookies, in the order they came: its URL and its Set-Cookie
    lines, for ``Credentials.renewed_by``, which takes those a browser would over that URL's scheme."""
    for url, lines in (*result.redirect_cookies, (result.final_url, result.set_cookies)):
        if not lines or not url:
            continue
        try:
            answered = httpx.URL(url)
        except httpx.InvalidURL:
            continue
        yield answered, lines
