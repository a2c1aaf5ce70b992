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
# A title says "not found" when one of its parts (split at | – — · • and " - ")
# is only that: 404 or "not found", or a sentence that the page cannot be found
# or does not exist, dressed in nothing but words such as error, page, oops and
# punctuation: "Page not found | Shop", "Error 404", "Oops! That page doesn't
# exist", Django's "Page not found at /x". A part where the phrase opens or sits
# in a longer headline is about something else: "404 pages that convert",
# "Not Found Records", "How to fix 404 errors", "Room 404", "command not found in bash".
_TITLE_PARTS = re.compile(r"\s[-–—]\s|[|–—·•]")
_NOT_FOUND = re.compile(
    r"\b404\b|\bnot[\s_-]+found(?:\s+at\s+/.*)?"  # Django's debug page names the path
    r"|\b(?:(?:the|that|this)\s+)?(?:page|file|url|document)"
    r"(?:\s+you(?:['’]re|\s+are|\s+were)?\s+looking\s+for|\s+you\s+requested)?\s+"
    r"(?:(?:can(?:not|\s+not|['’]t)|could(?:\s+not|n['’]t))\s+be\s+found"
    r"|(?:does\s+not|doesn['’]t|no\s+longer)\s+exists?|(?:is|was)\s+not\s+found)\b",
    re.IGNORECASE,
)
_DRESSING = re.compile(r"\b(?:error|http|page|file|url|document|oops|whoops|sorry)\b|\W+", re.IGNORECASE)


def _only_not_found(text: str) -> bool:
    rest, said = _NOT_FOUND.subn(" ", text)
    return bool(said) and not _DRESSING.sub("", rest)


# A colon in a part joins a lead-in to what the title is about: the part counts
# when all of it says "not found" ("Error 404: Page not found") or what follows
# its last colon does ("Acme: Page not found"), not for a lead-in alone ("Not
# Found: a novel", "Error 404: Best practices for custom 404 pages"). The cost,
# a site name after the colon ("Error 404: Acme"), is left to the probe's body text.
def says_not_found(title: str) -> bool:
    return any(
        _only_not_found(part) or _only_not_found(part.rpartition(":")[2])
        for part in _TITLE_PARTS.split(title or "")
    )


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
