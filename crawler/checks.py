"""Per-page checks: one fetch result and its PageFacts in, findings out.

Each check is a small function registered with ``@page_check``; adding a check
means writing one function (and its test) here, with a code from the
catalogue. Status and fetch checks see every result; on-page checks run only
for HTML pages that answered 2xx and were parsed. Cross-page checks
(duplicates, broken links, canonical targets, orphans) are not here: they need
the whole crawl and run at finalize time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from .catalogue import CATALOGUE, finding
from .directives import canonical_from_link_header, header_robots_directives
from .html_rules import Resolver, resolve_url
from .lang_codes import lang_code_problem
from .structured_data import described
from .types import FetchError, FetchResult, Finding, PageFacts, Severity
from .urls import InvalidURL, normalize


@dataclass(frozen=True)
class CheckSettings:
    title_min: int = 20
    title_max: int = 60
    description_min: int = 80
    description_max: int = 160
    slow_ms: int = 800
    large_html_bytes: int = 2_000_000
    thin_words: int = 200
    max_redirect_hops: int = 10
    deep_depth: int = 4  # deep_page, judged by finalize on the settled click depths
    large_image_bytes: int = 500_000  # large_image, judged by finalize on the checked images' declared sizes


@dataclass(frozen=True)
class PageContext:
    settings: CheckSettings
    is_internal: Callable[[str], bool]
    in_sitemap: bool = False


Check = Callable[[FetchResult, "PageFacts | None", PageContext], Iterable[Finding]]
# (check, runs only on parsed 2xx HTML pages), in registration order.
CHECKS: list[tuple[Check, bool]] = []
# The same, for the checks that read more than the body: the answer's status,
# timing or headers, or the crawl's context (in_sitemap).
RESPONSE_CHECKS: list[tuple[Check, bool]] = []
# Their codes: each check is named for the code it reports.
RESPONSE_CODES: set[str] = set()


def page_check(func: Check | None = None, *, any_result: bool = False, reads_response: bool = False):
    """Register a check, named for its code. ``any_result=True``: it also sees errors, non-HTML and non-2xx.

    ``reads_response=True`` (implied by ``any_result``): it reads the answer or
    the context beyond the body, so a delta crawl judges it again on a page it
    reuses (``run_response_checks``) instead of carrying its findings.
    """

    def register(check: Check) -> Check:
        CHECKS.append((check, not any_result))
        if any_result or reads_response:
            if check.__name__ not in CATALOGUE:
                raise ValueError(f"check {check.__name__} is not named for a catalogue code")
            RESPONSE_CHECKS.append((check, not any_result))
            RESPONSE_CODES.add(check.__name__)
        return check

    return register(func) if func is not None else register


def _run(checks: list[tuple[Check, bool]], result: FetchResult, facts: PageFacts | None,
         ctx: PageContext) -> list[Finding]:
    on_page = facts is not None and result.ok and result.is_html
    findings: list[Finding] = []
    for check, html_only in checks:
        if on_page or not html_only:
            findings.extend(check(result, facts, ctx))
    return findings


def run_page_checks(result: FetchResult, facts: PageFacts | None, ctx: PageContext) -> list[Finding]:
    return _run(CHECKS, result, facts, ctx)


def run_response_checks(result: FetchResult, facts: PageFacts | None, ctx: PageContext) -> list[Finding]:
    """The checks that read the answer or the context, for a page whose body is a previous crawl's.

    Only their findings about the page itself: one about a link on it (a
    nofollow link) is the body's, which the caller carries.
    """
    return [f for f in _run(RESPONSE_CHECKS, result, facts, ctx) if not f.target_url]


# ---------------------------------------------------------------- helpers

_LOOP_ERRORS = frozenset({FetchError.REDIRECT_LOOP, FetchError.TOO_MANY_REDIRECTS})
# Outcomes reported under their own codes (or not at all), not as fetch failures.
_NOT_FETCH_FAILURES = _LOOP_ERRORS | {FetchError.BLOCKED_BY_ROBOTS, FetchError.TRAP_SUSPECTED}
_TRACKING_PARAMS = frozenset(
    {"gclid", "fbclid", "msclkid", "dclid", "yclid", "igshid", "mc_cid", "mc_eid", "_ga", "_gl"}
)


def _short(url: str, limit: int = 120) -> str:
    return url if len(url) <= limit else url[: limit - 1] + "…"


def _is_https(result: FetchResult) -> bool:
    return result.final_url.lower().startswith("https://")


def _header_directives(result: FetchResult) -> frozenset[str]:
    return header_robots_directives(result.headers.get("x-robots-tag"))


def _blocks(directives: frozenset[str], directive: str) -> bool:
    return directive in directives or "none" in directives


def _is_noindex(result: FetchResult, facts: PageFacts) -> bool:
    return _blocks(facts.robots, "noindex") or _blocks(_header_directives(result), "noindex")


def _sources(meta: bool, header: bool) -> str:
    return " and ".join(
        name for name, present in (("meta robots", meta), ("X-Robots-Tag header", header)) if present
    )


def _normal(url: str) -> str:
    """``url`` as the crawl stores it (fragment, default port, escapes, IDN host), or as written if invalid."""
    try:
        return normalize(url)
    except InvalidURL:
        return url


def _internal_http_target(url: str, ctx: PageContext) -> bool:
    """An http:// URL on the audited site (whose scope may only know its https origin)."""
    return ctx.is_internal(url) or ctx.is_internal("https://" + url[len("http://"):])


def _unique(urls: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(urls))


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


# ---------------------------------------------------------------- status and fetch


@page_check(any_result=True)
def http_4xx(result, facts, ctx):
    if result.error is None and result.status is not None and 400 <= result.status < 500:
        yield finding("http_4xx", f"Returned HTTP {result.status}")


@page_check(any_result=True)
def http_5xx(result, facts, ctx):
    if result.error is None and result.status is not None and result.status >= 500:
        attempts = f" after {result.attempts} attempts" if result.attempts > 1 else ""
        yield finding("http_5xx", f"Returned HTTP {result.status}{attempts}")


@page_check(any_result=True)
def fetch_failed(result, facts, ctx):
    if result.error is not None and result.error not in _NOT_FETCH_FAILURES:
        detail = f": {result.error_detail}" if result.error_detail else ""
        yield finding("fetch_failed", f"{result.error.label}{detail}")


@page_check(any_result=True)
def redirect_loop(result, facts, ctx):
    hops = len(result.redirects)
    if result.error in _LOOP_ERRORS or hops > ctx.settings.max_redirect_hops:
        label = (result.error or FetchError.TOO_MANY_REDIRECTS).label
        yield finding("redirect_loop", f"{label} after {hops} hops")


@page_check(any_result=True)
def redirect_chain(result, facts, ctx):
    hops = len(result.redirects)
    if hops >= 2 and result.error not in _LOOP_ERRORS and hops <= ctx.settings.max_redirect_hops:
        yield finding(
            "redirect_chain",
            f"Redirects {hops} times before reaching {_short(result.final_url)}; "
            "redirect straight to the final URL",
        )


@page_check(any_result=True)
def redirect_temporary(result, facts, ctx):
    for hop in result.redirects:
        if hop.status in (302, 303, 307) and ctx.is_internal(hop.url):
            yield finding(
                "redirect_temporary",
                f"{_short(hop.url)} answers {hop.status} (temporary) to {_short(hop.location)}",
            )
            return


@page_check(any_result=True)
def slow_response(result, facts, ctx):
    if result.status is None:
        return
    if result.ttfb * 1000 > ctx.settings.slow_ms:  # over the limit by any amount, not once rounded
        yield finding(
            "slow_response",
            f"Server took {math.ceil(result.ttfb * 1000):,} ms to start answering (limit {ctx.settings.slow_ms:,} ms); "
            f"{result.elapsed:.1f} s and {result.size:,} bytes in all",
        )


# ---------------------------------------------------------------- redirects and https


@page_check
def meta_refresh(result, facts, ctx):
    if facts.meta_refresh is not None:
        yield finding("meta_refresh", f'Page uses a meta refresh: "{_short(facts.meta_refresh, 160)}"')


_ACTIVE = {"script": "a script", "link": "a stylesheet", "iframe": "a frame",
           "object": "an object", "embed": "an embedded object"}
_PASSIVE = {"img": "an image", "audio": "audio", "video": "a video", "source": "media"}


def _mixed(facts: PageFacts, kinds: dict[str, str]) -> Iterator[tuple[str, str]]:
    seen: set[str] = set()
    for link in facts.links:
        if link.tag in kinds and link.url.startswith("http://") and link.url not in seen:
            seen.add(link.url)
            yield link.url, kinds[link.tag]


@page_check
def mixed_content_active(result, facts, ctx):
    if _is_https(result):
        for url, kind in _mixed(facts, _ACTIVE):
            yield finding("mixed_content_active", f"Loads {kind} over http: {_short(url)}", url)


@page_check
def mixed_content_passive(result, facts, ctx):
    if _is_https(result):
        for url, kind in _mixed(facts, _PASSIVE):
            yield finding("mixed_content_passive", f"Loads {kind} over http: {_short(url)}", url)


@page_check
def insecure_link_or_form(result, facts, ctx):
    if not _is_https(result):
        return
    links = [link.url for link in facts.links if link.tag in ("a", "area") and link.url.startswith("http://")]
    for url in _unique(u for u in links if _internal_http_target(u, ctx)):
        yield finding("insecure_link_or_form", f"Links to the http:// version of {_short(url)}", url)
    forms = [link.url for link in facts.links if link.tag == "form" and link.url.startswith("http://")]
    for url in _unique(forms):
        yield finding(
            "insecure_link_or_form", f"A form posts over http to {_short(url)}", url,
            severity=Severity.WARNING,
        )


# ---------------------------------------------------------------- indexability


@page_check(reads_response=True)
def noindex(result, facts, ctx):
    meta = _blocks(facts.robots, "noindex")
    header = _blocks(_header_directives(result), "noindex")
    if not (meta or header):
        return
    message = f"Page is noindex ({_sources(meta, header)})"
    if ctx.in_sitemap:
        yield finding("noindex", message + " but listed in the sitemap", severity=Severity.CRITICAL)
    else:
        yield finding("noindex", message)


@page_check(reads_response=True)
def nofollow(result, facts, ctx):
    meta = _blocks(facts.robots, "nofollow")
    header = _blocks(_header_directives(result), "nofollow")
    if meta or header:
        yield finding(
            "nofollow", f"Page-level nofollow ({_sources(meta, header)}): none of its links pass on"
        )
    targets = [link.url for link in facts.links if link.tag in ("a", "area") and link.nofollow]
    for url in _unique(u for u in targets if ctx.is_internal(u)):
        yield finding("nofollow", f"Internal link to {_short(url)} is rel=nofollow", url)


# ---------------------------------------------------------------- canonical


def _canonicals(result: FetchResult, facts: PageFacts) -> list[tuple[str, str, str]]:
    """(as written, resolved or "", where) for every canonical, tags then the header."""
    found = []
    tag_base = Resolver(facts.base_url or result.final_url)
    for canonical in facts.canonicals:
        found.append((canonical.url, tag_base(canonical.url) or "", "tag"))
    header_base = Resolver(result.final_url)
    for raw in canonical_from_link_header(result.headers.get("link")):
        found.append((raw, header_base(raw) or "", "Link header"))
    return found


@page_check(reads_response=True)
def canonical_missing(result, facts, ctx):
    if not _is_noindex(result, facts) and not _canonicals(result, facts):
        yield finding("canonical_missing", "No canonical URL, in a tag or in the Link header")


@page_check(reads_response=True)
def canonical_conflict(result, facts, ctx):
    # Compared normalised: a header spells "/café" as "/caf%C3%A9", the same URL.
    canonicals = [(raw, _normal(resolved) if resolved else "", where)
                  for raw, resolved, where in _canonicals(result, facts)]
    reasons = []
    distinct = _unique(resolved for _, resolved, _ in canonicals if resolved)
    in_tags = _unique(resolved for _, resolved, where in canonicals if resolved and where == "tag")
    in_header = [resolved for _, resolved, where in canonicals if resolved and where != "tag"]
    if in_tags and in_header and set(in_tags) != set(in_header):
        reasons.append(
            f"the canonical tag ({_short(in_tags[0], 80)}) and the Link header "
            f"({_short(in_header[0], 80)}) disagree"
        )
    elif len(distinct) > 1:
        listed = ", ".join(_short(u, 80) for u in distinct[:3]) + ("…" if len(distinct) > 3 else "")
        reasons.append(f"{len(distinct)} different canonicals: {listed}")
    head = [resolved for (_, resolved, _), tag in zip(canonicals, facts.canonicals, strict=False) if tag.in_head]
    if len(distinct) == 1 and len(head) > 1 and set(head) == {distinct[0]}:  # every tag in <head>, one URL
        reasons.append(f"{len(head)} canonical tags in <head> for the same URL ({_short(head[0], 80)}); keep one")
    if any(not c.in_head for c in facts.canonicals):
        reasons.append("a canonical tag sits outside <head>, where search engines ignore it")
    if reasons:
        message = "; ".join(reasons)
        yield finding("canonical_conflict", message[0].upper() + message[1:])


def _canonical_problem(raw: str, resolved: str, page: str) -> str | None:
    if not raw:
        return "is empty"
    if any(c.isspace() for c in raw):
        return "contains whitespace"
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return "is malformed"
    if not resolved:
        return "is not an http(s) URL"
    if not parts.scheme or not parts.netloc:
        return "is relative"
    try:
        # Compared as the crawl stores URLs: an IDN host in Unicode or a
        # trailing dot is the page's own host, not another one.
        target, here = urlsplit(normalize(resolved)), urlsplit(_normal(page))
    except InvalidURL:
        return "is malformed"
    if target.scheme != here.scheme.lower():
        return f"uses {target.scheme}:// on a {here.scheme.lower()}:// page"
    if (target.hostname or "") != (here.hostname or ""):
        return f"points to another host ({urlsplit(resolved).hostname})"
    return None


@page_check(reads_response=True)
def canonical_relative_or_invalid(result, facts, ctx):
    for raw, resolved, where in _canonicals(result, facts):
        problem = _canonical_problem(raw, resolved, result.final_url)
        if problem:
            yield finding(
                "canonical_relative_or_invalid", f'Canonical {where} "{_short(raw, 100)}" {problem}'
            )
            return


# ---------------------------------------------------------------- metadata and content


@page_check
def title_missing(result, facts, ctx):
    if facts.title is None:
        yield finding("title_missing", "Page has no <title>")
    elif not facts.title:
        yield finding("title_missing", "The <title> is empty")


@page_check
def title_length(result, facts, ctx):
    length, s = len(facts.title or ""), ctx.settings
    if length and length > s.title_max:
        yield finding("title_length", f"Title is {length} characters; keep it under {s.title_max}")
    elif length and length < s.title_min:
        yield finding("title_length", f"Title is {length} characters; aim for at least {s.title_min}")


@page_check
def meta_description_missing(result, facts, ctx):
    if not facts.descriptions:
        yield finding("meta_description_missing", "Page has no meta description")
    elif not facts.descriptions[0]:
        yield finding("meta_description_missing", "The meta description is empty")


@page_check
def meta_description_length(result, facts, ctx):
    length = len(facts.descriptions[0]) if facts.descriptions else 0
    s = ctx.settings
    if length and length > s.description_max:
        yield finding("meta_description_length",
                      f"Meta description is {length} characters; keep it under {s.description_max}")
    elif length and length < s.description_min:
        yield finding("meta_description_length",
                      f"Meta description is {length} characters; aim for at least {s.description_min}")


@page_check
def head_tags_multiple(result, facts, ctx):
    reasons = []
    if facts.title_count > 1:
        reasons.append(f"{facts.title_count} <title> tags")
    if len(facts.descriptions) > 1:
        reasons.append(f"{len(facts.descriptions)} meta descriptions")
    if facts.head_tags_in_body:
        reasons.append("title or meta tags inside <body>")
    if reasons:
        yield finding("head_tags_multiple", "Page has " + ", ".join(reasons))


@page_check
def h1_missing(result, facts, ctx):
    if facts.h1_count == 0:
        yield finding("h1_missing", "Page has no non-empty <h1>")


@page_check
def h1_multiple(result, facts, ctx):
    headings = max(facts.headings.count(1), facts.h1_count)  # every <h1>, an empty one too (CHECKS.md)
    if headings > 1:
        empty = headings - facts.h1_count
        yield finding("h1_multiple", f"Page has {headings} <h1> headings" + (f", {empty} of them empty" if empty else ""))


@page_check
def img_alt_missing(result, facts, ctx):
    for url in _unique(image.url for image in facts.images if image.alt is None):
        # An image no http(s) URL shows (inline data:, no src) is named by its source as written.
        what = f"Image {_short(url)}" if url.startswith("http") else f"An inline image ({_short(url)})" if url \
            else "An image without a source"
        yield finding("img_alt_missing", f"{what} has no alt attribute", url)


@page_check
def hreflang_error(result, facts, ctx):
    if not facts.hreflang:
        return
    invalid = _unique(
        code for code, _ in facts.hreflang
        if code.lower() != "x-default" and lang_code_problem(code)
    )
    if invalid:
        codes = ", ".join(f'"{code}" ({lang_code_problem(code)})' for code in invalid[:5])
        noun = "codes" if len(invalid) > 1 else "code"
        yield finding("hreflang_error", f"Invalid hreflang language {noun} {codes}", variant="codes")
    # A page canonicalised elsewhere (a sorted or filtered variant) carries its
    # canonical's hreflang set, so naming the canonical counts as naming itself.
    # Only the tags: this check judges the body, which a delta crawl carries.
    named = {_normal(url) for _, url in facts.hreflang}
    base = facts.base_url or result.final_url
    if _normal(result.final_url) not in named and not any(
            _normal(resolve_url(base, c.url) or "") in named for c in facts.canonicals):
        yield finding("hreflang_error", "hreflang set does not include this page itself", variant="self")
    if not any(code.lower() == "x-default" for code, _ in facts.hreflang):
        yield finding("hreflang_error", "hreflang set has no x-default", variant="x-default")


# ---------------------------------------------------------------- stretch checks


@page_check
def large_html(result, facts, ctx):
    size = max(result.size, len(result.body or b""))
    limit = ctx.settings.large_html_bytes
    if size > limit:
        yield finding("large_html", f"HTML is {size / 1e6:.1f} MB; keep pages under {limit / 1e6:.1f} MB")


def large_unread_html(result: FetchResult, ctx: PageContext) -> Finding:
    """large_html for a 2xx HTML page cut at a read cap (crawler.page), whose size is past what was read."""
    limit = ctx.settings.large_html_bytes / 1e6
    return finding("large_html", f"HTML is too large to read ({result.error_detail}); keep pages under {limit:.1f} MB")


def binary_html(result: FetchResult) -> Finding:
    """binary_html for a 2xx answer served as HTML whose first bytes are another kind of file (crawler.body)."""
    return finding("binary_html", f"Served as {result.content_type or 'HTML'}, but the body is binary data "
                                  "(a file signature or control bytes in its first bytes); it was not read")


@page_check
def html_lang_missing(result, facts, ctx):
    if not facts.lang:
        yield finding("html_lang_missing", "<html> has no lang attribute")
    elif problem := lang_code_problem(facts.lang):
        yield finding("html_lang_missing", f'<html lang="{_short(facts.lang, 40)}"> is not a valid language code: {problem}')


@page_check
def viewport_missing(result, facts, ctx):
    if not facts.viewport:
        yield finding("viewport_missing", "No <meta name=\"viewport\">, so phones render the desktop layout")


@page_check
def structured_data_invalid(result, facts, ctx):
    if facts.structured_data:
        yield finding("structured_data_invalid", described(facts.structured_data))


@page_check
def heading_order(result, facts, ctx):
    for previous, level in zip(facts.headings, facts.headings[1:], strict=False):
        if level > previous + 1:
            yield finding("heading_order", f"Heading levels skip from H{previous} to H{level}")
            return


@page_check(reads_response=True)
def thin_content(result, facts, ctx):
    limit = ctx.settings.thin_words
    if facts.word_count < limit and not _is_noindex(result, facts):
        yield finding(
            "thin_content",
            f"Only {_count(facts.word_count, 'word')} of body text (fewer than {limit})",
        )


@page_check
def dead_end(result, facts, ctx):
    if facts.links_dropped == 0 and not any(link.tag in ("a", "area") for link in facts.links):
        yield finding("dead_end", "Page has no outgoing links")


@page_check
def url_hygiene(result, facts, ctx):
    url = result.final_url
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    reasons = []
    if len(url) > 2048:
        reasons.append(f"{len(url):,} characters long")
    # Decoded first: normalisation writes every escape's hex digits upper-case.
    if any(c.isupper() for c in unquote(parts.path)):
        reasons.append("uppercase letters in the path")
    if "_" in parts.path:
        reasons.append("underscores in the path")
    if " " in parts.path or "%20" in parts.path:
        reasons.append("spaces in the path")
    if "//" in parts.path:
        reasons.append('"//" in the path')
    tracking = _unique(
        key for key, _ in parse_qsl(parts.query, keep_blank_values=True)
        if key.lower().startswith("utm_") or key.lower() in _TRACKING_PARAMS
    )
    if tracking:
        reasons.append("tracking parameters (" + ", ".join(tracking[:3]) + ")")
    if reasons:
        yield finding("url_hygiene", "URL has " + ", ".join(reasons))


@page_check(reads_response=True)
def security_headers_missing(result, facts, ctx):
    if not _is_https(result):
        return
    headers = result.headers
    missing = []
    if "strict-transport-security" not in headers:
        missing.append("Strict-Transport-Security")
    if "x-content-type-options" not in headers:
        missing.append("X-Content-Type-Options")
    if "content-security-policy" not in headers and "x-frame-options" not in headers:
        missing.append("Content-Security-Policy or X-Frame-Options")
    if missing:
        yield finding("security_headers_missing", "Missing " + ", ".join(missing))
