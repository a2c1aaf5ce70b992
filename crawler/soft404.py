"""Soft 404s: pages that say "not found" but answer 200 (check ``soft_404``).

Two signs, as established auditors use them. The start step asks the origin
for a URL that cannot exist: a site that answers it with a 200 page has shown
its "not found" page, and a crawled page with the same body text is one. And
a page whose title says it was not found is one, whatever the probe saw (a
"not found" page that repeats the URL asked for has a text of its own each time).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .fetch import Fetcher
    from .types import FetchResult

# The probe's whole budget, retries included: one page, at the audit's start.
PROBE_SECONDS = 10.0
# A title says "not found" when one of its parts (split at | – — : · and " - ")
# opens with 404 or "not found", or says the page does not exist: "Page not
# found | Shop", "Error 404", "Oops! That page doesn't exist". A title that only
# mentions them ("How to fix 404 errors", "Room 404", "command not found in bash") does not.
_TITLE_PARTS = re.compile(r"\s[-–—]\s|[|–—:·•]")
_NOT_FOUND_PART = re.compile(
    r"(?:error\s*)?404\b|(?:(?:page|file|url|document)\s+)?not\s+found\b"
    r"|.*\b(?:page|file|url) (?:does not|doesn['’]t|no longer) exists?\b",
    re.IGNORECASE,
)


def says_not_found(title: str) -> bool:
    return any(_NOT_FOUND_PART.match(part.strip(" \t!.")) for part in _TITLE_PARTS.split(title or ""))


def probe_url(origin: str) -> str:
    """A URL on ``origin`` no site has: a random path, fresh for each audit."""
    return f"{origin}/siteward-{secrets.token_hex(8)}-does-not-exist"


async def fetch_not_found(fetcher: Fetcher, url: str, *, budget: float = PROBE_SECONDS) -> FetchResult | None:
    """The answer to ``url`` (one that cannot exist) when it is a direct 200 HTML page, else None.

    Only a direct 200 HTML answer counts: a redirect (often to the home page)
    would make that landing page look like the "not found" page. Its text is
    hashed as a crawled page's is: parsed, or rendered in a rendered audit.
    """
    try:
        async with asyncio.timeout(budget):
            result = await fetcher.fetch(url)
    except TimeoutError:
        return None
    if result.status != 200 or result.redirects or not result.ok or not result.is_html or not result.body:
        return None
    return result
