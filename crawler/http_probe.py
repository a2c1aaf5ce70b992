"""Does the http:// form of an https site still serve pages? (check ``http_not_redirected``)

Run once at audit start, on the start page the crawl anchored on, with the
crawl's own Fetcher, so the same SSRF guard, user agent and limits apply. The
probe follows redirects like any fetch and judges where it ends:

- ends on an ``https://`` URL: the http form redirects, as it should;
- ends with a 2xx on an ``http://`` URL (at once, or after redirects that never
  reach https): the site serves pages over plain http, which is the finding;
- any other 4xx, or the connection refused: no page is served over http, which is
  fine (a site need not listen on port 80 at all);
- no answer (unresolvable, unreachable, timed out, cut short by the caller's
  time), a 5xx, or a status that refuses crawlers rather than says whether a
  page is there (401, 403, 429, 999: ``UNVERIFIED_STATUSES``, as link checks
  read them): no finding, but no verdict either. A bot wall may answer our HEAD
  403 while browsers still get the page over http, so an earlier audit's issue
  stays unknown, not fixed (``HttpProbe.unsure``).

Following the redirects rather than looking at the first answer alone means a
chain such as ``http://a`` -> ``http://www.a`` -> ``https://www.a`` is not
reported, while ``http://a`` -> ``http://www.a`` (200) is.

It uses ``Fetcher.check``: HEAD, and GET (body not read) only when HEAD is
refused, since the answer's status and location are all it needs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from crawler.catalogue import finding
from crawler.transport_errors import CONNECTION_REFUSED
from crawler.types import UNVERIFIED_STATUSES, FetchError, Finding

if TYPE_CHECKING:
    from crawler.fetch import Fetcher

# The probe's whole budget, retries included. A host that drops port 80 would
# otherwise hold the audit's start for every connect timeout and retry.
PROBE_SECONDS = 10.0


def http_form(url: str) -> str | None:
    """The ``http://`` twin of an ``https://`` URL on the default port, else None.

    An https URL on another port has no known http counterpart (``:8443`` pairs
    with no particular http port), so it is not probed; nor is an http URL.
    Credentials in the URL are left out: they must never travel over plain http.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "https" or not parts.hostname or port not in (None, 443):
        return None
    netloc = parts.netloc.rpartition("@")[2]
    if port == 443:
        netloc = netloc[: netloc.rindex(":")]
    return urlunsplit(("http", netloc, parts.path or "/", parts.query, ""))


@dataclass(frozen=True, slots=True)
class HttpProbe:
    """What the probe learnt: the finding, if any; and when it could not tell, why (``unsure``)."""

    finding: Finding | None = None
    unsure: str = ""


async def probe_http_form(fetcher: Fetcher, url: str, *, budget: float = PROBE_SECONDS) -> HttpProbe:
    """An ``http_not_redirected`` finding for ``url`` (an https page), or none, and whether that is a verdict.

    Makes no request at all when ``url`` has no http form (see ``http_form``): no verdict then.
    """
    plain = http_form(url)
    if plain is None:
        return HttpProbe(unsure=f"the start page {url} is no https:// page on the default port, "
                                "so it has no http:// form to probe")
    try:
        async with asyncio.timeout(budget):
            result = await fetcher.check(plain)
    except TimeoutError:
        return HttpProbe(unsure=f"{plain} gave no answer in time ({budget:.1f} s)")
    final = result.final_url or plain
    if any(urlsplit(hop.location).scheme == "https" for hop in result.redirects) or urlsplit(final).scheme == "https":
        return HttpProbe()  # it redirects to https, whatever the https page then answered
    if result.error is FetchError.CONNECT_FAILED and result.error_detail == CONNECTION_REFUSED:
        return HttpProbe()  # the host answered: nothing listens for http there
    if result.status is None:
        detail = result.error_detail or (result.error.label if result.error is not None else "no answer")
        return HttpProbe(unsure=f"{plain}: {detail}")
    if result.status in UNVERIFIED_STATUSES:  # 999 among them: LinkedIn's wall, no server error
        return HttpProbe(unsure=f"{plain} answered {result.status}, which refuses crawlers rather than says "
                                "whether a page is served")
    if result.status >= 500:
        return HttpProbe(unsure=f"{plain} answered {result.status}")
    if result.error is not None or not 200 <= result.status < 300:
        return HttpProbe()  # a 4xx, or a redirect that went nowhere: no page served over http
    if result.redirects:
        message = (f"{plain} redirects to {final}, which answers {result.status} over plain http "
                   "instead of redirecting to https://")
    else:
        message = f"{plain} answers {result.status} over plain http instead of redirecting to https://"
    return HttpProbe(finding("http_not_redirected", message, plain))
