"""What a page's head says to robots and about its canonical: robots directives and Link headers."""

from __future__ import annotations

import re

from .html_rules import DIRECTIVE_MAX, MAX_CANONICALS, MAX_DIRECTIVES, URL_MAX, sanitize

# Robots directives that carry a value after a colon, so "max-snippet: 50" is a
# directive, whereas "otherbot: noindex" names a user agent.
_VALUED_DIRECTIVES = frozenset(
    {"max-snippet", "max-image-preview", "max-video-preview", "unavailable_after"}
)
# Agents whose directives apply to us: none named, the generic names, Google's.
_OUR_AGENTS = frozenset({"", "robots", "*", "googlebot"})
# An agent is one name (letters first, no spaces), so the "06 Nov 2026 08:49"
# left of a colon in an RFC 822 date split at its comma is not taken for one.
_AGENT_PREFIX = re.compile(r"([a-z*][a-z0-9_.*\-]*)\s*:\s*(.*)", re.S)
# Google documents comma-separated lists, but "noindex nofollow" is common and
# other crawlers read it as two directives: an entry made only of bare names is
# split at its spaces. Any other entry stays whole, so no value is cut: "max-snippet:
# 20", "unavailable_after: 25 Jun 2010 15:00:00 PST", an RFC 822 date's tail.
_BARE_NAMES = re.compile(r"[a-z][a-z0-9_\-]*(?:\s+[a-z][a-z0-9_\-]*)+")


def robots_directives(value: str | None) -> frozenset[str]:
    """Directives from an ``X-Robots-Tag`` value (or a meta robots content).

    ``googlebot: noindex, nofollow`` (or ``googlebot: noindex nofollow``) applies
    both directives to googlebot; directives for other named agents are ignored.
    Entries are read in order, each agent prefix holding until the next one
    within this value.
    """
    if not value:
        return frozenset()
    agent = ""
    found: list[str] = []
    for part in sanitize(value).lower().split(",")[: MAX_DIRECTIVES * 2]:
        token = part.strip()
        match = _AGENT_PREFIX.fullmatch(token)
        if match and match.group(1).strip() not in _VALUED_DIRECTIVES:
            agent = match.group(1).strip()
            token = match.group(2).strip()
        elif match:
            token = f"{match.group(1).strip()}:{match.group(2).strip()}"
        if not token or agent not in _OUR_AGENTS:
            continue
        if _BARE_NAMES.fullmatch(token):
            found.extend(name[:DIRECTIVE_MAX] for name in token.split()[:MAX_DIRECTIVES])
        else:
            found.append(" ".join(token.split())[:DIRECTIVE_MAX])
    return frozenset(found[:MAX_DIRECTIVES])


def header_robots_directives(value: str | None) -> frozenset[str]:
    """Directives from a response's ``X-Robots-Tag`` headers, each header line its own list.

    The fetch joins separate header lines with a newline, which no header value
    holds, so an agent prefix ends with its line: ``otherbot: nofollow`` does not
    claim a ``noindex`` sent in the next header.
    """
    if not value or "\n" not in value:
        return robots_directives(value)
    found: set[str] = set()
    for line in value.split("\n"):
        if len(found) >= MAX_DIRECTIVES:
            break
        found |= robots_directives(line)
    return frozenset(found)


_LINK_ENTRY = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,<]*)*)")
_REL_PARAM = re.compile(r"""(?i)\brel\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s;,"']+))""")


def canonical_from_link_header(value: str | None) -> tuple[str, ...]:
    """URLs of the ``rel=canonical`` entries of an HTTP ``Link`` header, as written."""
    if not value:
        return ()
    found: list[str] = []
    for match in _LINK_ENTRY.finditer(sanitize(value)):
        rel = _REL_PARAM.search(match.group(2))
        if rel is None:
            continue
        tokens = (rel.group(1) or rel.group(2) or rel.group(3) or "").lower().split()
        if "canonical" in tokens:
            found.append(match.group(1).strip()[:URL_MAX])
            if len(found) >= MAX_CANONICALS:
                break
    return tuple(found)
