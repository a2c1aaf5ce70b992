"""The per-page pipeline: fetch one URL, parse it if it is HTML, run the page
checks, and normalise its outgoing links.

It never raises for anything a site does: fetch failures come back inside the
result, bad links are dropped and counted, and a parser or check that breaks
on a hostile page is logged and recorded on the outcome instead of ending the
crawl.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from itertools import chain
from typing import TYPE_CHECKING

from crawler.anchors import (
    FRAGMENT_TAGS,
    MAX_FRAGMENTS_PER_PAGE,
    MAX_FRAGMENTS_PER_TARGET,
    judged_fragment,
)
from crawler.checks import PageContext, binary_html, large_unread_html, run_page_checks
from crawler.css import CSS_TYPE, MAX_CSS_LINKS, css_links, decode_css
from crawler.parse import parse_html
from crawler.revalidate import Validators, body_hash, same_version, unchanged
from crawler.types import FetchError, FetchResult, Finding, Link, PageFacts
from crawler.urls import InvalidURL, normalize

if TYPE_CHECKING:
    from crawler.fetch import Fetcher

logger = logging.getLogger(__name__)

# A body cut at one of the fetch's read caps; the fetch keeps no prefix of a page's.
CUT_AT_CAP = frozenset({FetchError.BODY_TOO_LARGE, FetchError.DECOMPRESSION_LIMIT})


@dataclass(frozen=True, slots=True)
class PageOutcome:
    """Everything learnt about one crawled URL.

    ``outlinks`` are normalised absolute URLs without fragments, one per
    (URL, tag), in document order, followed by the page's hreflang alternates
    as links with tag ``hreflang`` and the language code as their text (so
    they are stored as link edges and finalize can check the targets and their
    return links); ``invalid_links`` counts the ones dropped
    because they were not crawlable web addresses (mailto:, javascript:,
    malformed hosts...). ``problem`` is set only when our own parser or a check
    failed on this page, so the page still counts and the crawl goes on.
    """

    url: str
    depth: int
    result: FetchResult
    facts: PageFacts | None
    findings: tuple[Finding, ...]
    outlinks: tuple[Link, ...]
    invalid_links: int = 0
    problem: str = ""
    source: str = "link"  # how the URL entered the crawl: start, link or sitemap
    # The server said the page is what a previous crawl saw (crawler.revalidate):
    # not parsed, so facts, findings and outlinks are for the caller to carry over.
    unchanged: bool = False
    # Rendered in a browser (crawler.rendered_page): facts, findings and outlinks
    # are the browser's, ``raw_facts`` the HTML's.
    rendered: bool = False
    raw_facts: PageFacts | None = None
    # A parsed page's body as fetched (crawler.revalidate.body_hash), for the next delta to compare:
    # hashed where the body is, so the body need not reach the writer.
    body_hash: str = ""


def without_body(outcome: PageOutcome) -> PageOutcome:
    """``outcome`` without its body, once everything that reads the body has: a batch waiting
    for the writer then holds facts, not up to max_body_bytes a page."""
    if outcome.result.body is None:
        return outcome
    return replace(outcome, result=replace(outcome.result, body=None))


def normalize_link(url: str, base: str) -> str:
    """A link's URL as the crawl keys it: an absolute one as it stands (a host-less ``https:///x`` is
    invalid, not a path of the page's site), a relative one against the page's base URL."""
    if url.startswith(("http://", "https://")):
        return normalize(url)
    return normalize(url, base)


HREFLANG_TAG = "hreflang"
# The one outlink of a URL that redirects to a page that answered: where it lands.
REDIRECT_TAG = "redirect"
# Tags whose same-site targets are pages to crawl, for the library crawl and the
# chunked audit alike: links, hreflang alternates (a page names its language
# versions in <head>; one nothing else links to is still part of the site), and
# where a redirect lands.
PAGE_TAGS = frozenset({"a", "area", HREFLANG_TAG, REDIRECT_TAG})
# Tags whose targets a crawl checks as resources of the page. "css" and
# "css-import": url() and @import targets read from a same-site stylesheet.
RESOURCE_TAGS = frozenset({"img", "script", "link", "iframe", "source", "video", "audio", "embed", "object", "css",
                           "css-import"})


def outlinks_of(facts: PageFacts, page_url: str) -> tuple[tuple[Link, ...], int]:
    """Normalised, deduplicated links of a page and how many were invalid.

    The hreflang alternates come last, one per URL: a URL listed for two
    languages (``en`` and ``x-default`` often share one) keeps the first code.
    A link's ``fragments`` are those its page's links to that URL name (``crawler.anchors``).
    """
    base = facts.base_url or page_url
    seen: dict[tuple[str, str], int] = {}  # each kept link's place in ``links``
    links: list[Link] = []
    invalid = 0
    fragments: dict[tuple[str, str], list[str]] = {}
    kept = 0
    alternates = (Link(url, HREFLANG_TAG, lang.strip(), ("alternate",)) for lang, url in facts.hreflang)
    for link in chain(facts.links, alternates):
        try:
            url = normalize_link(link.url, base)
        except InvalidURL:
            invalid += 1
            continue
        key = (url, link.tag)
        if "#" in link.url and kept < MAX_FRAGMENTS_PER_PAGE and link.tag in FRAGMENT_TAGS \
                and (fragment := judged_fragment(link.url)) is not None:
            named = fragments.setdefault(key, [])
            if fragment not in named and len(named) < MAX_FRAGMENTS_PER_TARGET:
                named.append(fragment)
                kept += 1
        if key in seen:
            continue
        seen[key] = len(links)
        links.append(
            link if url == link.url else Link(url, link.tag, link.text, link.rel, link.nofollow)
        )
    for key, named in fragments.items():
        if named:
            link = links[seen[key]]
            links[seen[key]] = Link(link.url, link.tag, link.text, link.rel, link.nofollow, tuple(named))
    return tuple(links), invalid


def guarded_checks(run, result: FetchResult, facts: PageFacts | None,
                   ctx: PageContext) -> tuple[tuple[Finding, ...], str]:
    """``run(result, facts, ctx)``'s findings and "", or none and the problem: a
    check that breaks on an odd page is logged and kept, and the crawl goes on."""
    try:
        return tuple(run(result, facts, ctx)), ""
    except Exception as exc:
        logger.exception("page checks on %s failed", result.final_url)
        return (), f"page checks failed: {type(exc).__name__}: {exc}"[:300]


def build_outcome(
    result: FetchResult, url: str, depth: int, ctx: PageContext, *, source: str = "link", landing: bool = False
) -> PageOutcome:
    """The outcome of an already fetched URL: parse (HTML bodies only), checks, links.

    A URL that redirected to a page that answered is a redirect
    (``_redirect_outcome``), unless ``landing`` says it stands for the page it
    landed on (a library crawl's start) or it landed on itself, normalised.
    """
    if result.redirects and not landing and 200 <= (result.status or 0) < 300 \
            and (result.error is None or result.error in CUT_AT_CAP):
        try:
            where = normalize(result.final_url) if result.final_url else None
        except InvalidURL:
            where = None
        if where != url:
            return _redirect_outcome(replace(result, error=None), url, where, depth, ctx, source)
    if result.error in CUT_AT_CAP and result.is_html and 200 <= (result.status or 0) < 300:
        # The page answered and is too large to read: not a failure, so no link to it
        # reads as broken. Its 2xx is stored without an error, as large_html.
        result = replace(result, error=None)
        findings, failed = guarded_checks(run_page_checks, result, None, ctx)
        too_large = large_unread_html(result, ctx)
        return PageOutcome(url, depth, result, None, (*findings, too_large), (), 0, failed, source)
    facts: PageFacts | None = None
    problem = ""
    if result.ok and result.is_html and result.body is not None:
        try:
            facts = parse_html(result.body, result.final_url, http_charset=result.charset)
        except Exception as exc:  # a parser bug must not end the crawl; it is logged and kept
            logger.exception("parsing %s failed", result.final_url)
            problem = f"parser failed: {type(exc).__name__}: {exc}"[:300]
    findings, failed = guarded_checks(run_page_checks, result, facts, ctx)
    if result.binary and result.ok:
        findings = (*findings, binary_html(result))
    problem = problem or failed
    outlinks: tuple[Link, ...] = ()
    invalid = 0
    if facts is not None:
        outlinks, invalid = outlinks_of(facts, result.final_url)
    return PageOutcome(url, depth, result, facts, findings, outlinks, invalid, problem, source,
                       body_hash=body_hash(result.body) if facts is not None else "")


def _redirect_outcome(result: FetchResult, url: str, where: str | None, depth: int, ctx: PageContext,
                      source: str) -> PageOutcome:
    """A URL that redirects to a page that answered: a redirect, judged on its answer alone.

    The landing page's content is that page's, crawled and reported under its
    own URL (the ``redirect`` outlink, to ``where``), so its issues are not reported twice.
    """
    if result.redirects and result.redirects[0].ttfb is not None:
        # Its own answer's speed: the landing page's is judged on that page's row.
        result = replace(result, ttfb=result.redirects[0].ttfb)
    findings, failed = guarded_checks(run_page_checks, result, None, ctx)
    landing = (Link(where, REDIRECT_TAG),) if where else ()
    return PageOutcome(url, depth, replace(result, body=None), None, findings, landing, 0, failed, source)


async def process_page(
    fetcher: Fetcher, url: str, depth: int, ctx: PageContext, *, source: str = "link",
    previous: Validators | None = None,
) -> PageOutcome:
    """Fetch ``url`` and build its outcome; never raises for site faults.

    With ``previous`` the request is conditional, and an unchanged page comes
    back unparsed, marked ``unchanged``, without its body.
    """
    if previous is None:
        return build_outcome(await fetcher.fetch(url), url, depth, ctx, source=source)
    result = await fetcher.fetch(url, headers=previous.headers())
    if unchanged(result, previous):
        return PageOutcome(url, depth, replace(result, body=None), None, (), (), source=source, unchanged=True)
    if result.status == 304 and not result.redirects and not same_version(result.headers, previous):
        # Not modified, but another version than the stored one: the page is read again, unconditionally.
        result = await fetcher.fetch(url)
    return build_outcome(result, url, depth, ctx, source=source)


# A stylesheet is tokenised in Python (~0.6 s a MiB, on the event loop), so
# its body is cut at 1 MiB; the links of that prefix are still read.
MAX_CSS_BYTES = 1024 * 1024


async def check_resource(
    fetcher: Fetcher, url: str, depth: int, ctx: PageContext, *, read_css: bool = False
) -> PageOutcome:
    """Check a resource with HEAD; with ``read_css``, a stylesheet's links too.

    A stylesheet (text/css answer to the check) is then fetched again with GET
    for its ``url()`` and ``@import`` targets, which become its outlinks (tags
    ``css`` and ``css-import``). The stored result stays the check's: the GET
    only feeds links, so its cap cut is not reported against the stylesheet.
    Only the caller knows the URL is internal and shallow enough to read.
    """
    result = await fetcher.check(url)
    findings = tuple(run_page_checks(result, None, ctx))
    if not (read_css and result.ok and result.content_type == CSS_TYPE):
        return PageOutcome(url, depth, result, None, findings, ())
    styled = await fetcher.fetch(url, keep_body=True, max_bytes=MAX_CSS_BYTES)
    if styled.body is None or styled.content_type != CSS_TYPE or not 200 <= (styled.status or 0) < 300:
        return PageOutcome(url, depth, result, None, findings, ())
    base = styled.final_url or url
    try:
        links = css_links(decode_css(styled.body, styled.charset), base, MAX_CSS_LINKS)
    except Exception as exc:  # a tokenizer bug must not end the crawl, as for HTML
        logger.exception("reading stylesheet %s failed", base)
        return PageOutcome(url, depth, result, None, findings, (), 0,
                           f"stylesheet parse failed: {type(exc).__name__}: {exc}"[:300])
    # Facts carry the links: the writer stores edges and admits targets of parsed URLs only.
    facts = PageFacts(links=tuple(links), base_url=base)
    outlinks, invalid = outlinks_of(facts, base)
    return PageOutcome(url, depth, result, facts, findings, outlinks, invalid)
