"""A page's outcome once rendered: the browser's facts, checks and links, with the raw ones kept beside them."""

from __future__ import annotations

import dataclasses
import hashlib
import logging

from .catalogue import finding
from .checks import PageContext, run_page_checks
from .page import PageOutcome, outlinks_of
from .parse import parse_html
from .render import Rendered
from .render_rules import differences
from .types import Finding

log = logging.getLogger(__name__)

# Findings of one kind a page reports at most: a page that fails 500 requests says so 20 times.
MAX_PER_KIND = 20
# Chromium's own line for a request that failed; the request itself is reported with its URL.
_RESOURCE_NOISE = "Failed to load resource"


def rendered_outcome(raw: PageOutcome, rendered: Rendered, ctx: PageContext, origin: str) -> PageOutcome:
    """``raw`` as a browser saw it; if rendering failed, ``raw`` with a finding that says why.

    A page whose render failed keeps its HTML's facts but no anchors: it was rendered for what its
    scripts add, and ids they add are missing from the HTML (no link into it is judged anchor_missing).
    """
    extra = request_findings(rendered)
    if rendered.problem or rendered.html is None:
        problem = finding(rendered.problem or "render_failed", rendered.detail or "No DOM came back")
        return _unrendered(raw, problem, *extra)
    result = raw.result
    try:
        facts = parse_html(rendered.html, result.final_url or raw.url, http_charset="utf-8")
        findings = [*run_page_checks(result, facts, ctx), *differences(raw.facts, facts, origin)]
    except Exception as exc:  # as for raw HTML: a parser or check bug must not end the crawl
        log.exception("reading the rendered %s failed", raw.url)
        failed = finding("render_failed", f"The rendered page could not be read: {type(exc).__name__}: {exc}"[:300])
        return _unrendered(raw, failed, *extra)
    if not rendered.idle:
        findings.append(finding("render_timeout", "The network never went quiet: the page was read at the "
                                                  "render deadline", variant="idle"))
    outlinks, invalid = outlinks_of(facts, result.final_url or raw.url)
    return dataclasses.replace(raw, facts=facts, findings=(*findings, *extra), outlinks=outlinks,
                               invalid_links=invalid, rendered=True, raw_facts=raw.facts)


def _unrendered(raw: PageOutcome, *findings: Finding) -> PageOutcome:
    """``raw`` with ``findings`` added and, its render having failed, no anchors (``rendered_outcome``)."""
    facts = dataclasses.replace(raw.facts, anchors=None) if raw.facts is not None else None
    return dataclasses.replace(raw, facts=facts, findings=(*raw.findings, *findings))


def request_findings(rendered: Rendered) -> list[Finding]:
    """Script errors, and the requests the page made that failed or were refused."""
    found = []
    errors = [e for e in dict.fromkeys(rendered.errors) if not e.startswith(_RESOURCE_NOISE)]
    for error in errors[:MAX_PER_KIND]:
        found.append(finding("render_js_error", error, variant=hashlib.blake2b(error.encode(), digest_size=8)
                             .hexdigest()))
    for code, requests in (("render_request_failed", rendered.failed), ("render_request_blocked", rendered.blocked)):
        for url, why in list(dict.fromkeys(requests))[:MAX_PER_KIND]:
            found.append(finding(code, f"{url}: {why}"[:500], target_url=url))
    return found
