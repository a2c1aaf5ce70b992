"""Which pages a rendered audit renders, and what rendering changed: pure functions over parsed facts.

``needs_render`` is the ``auto`` rule. A page is rendered when its raw HTML
looks like an application shell, that is when any of these hold:

- a ``<noscript>`` that asks for JavaScript ("enable JavaScript", "requires
  JavaScript", "JavaScript is required" ...);
- an empty mount point of a known framework: ``<div id="root|app|__next|
  __nuxt|___gatsby|svelte">`` with nothing inside;
- scripts and almost no page: fewer than ``SHELL_WORDS`` words and no
  internal ``<a href>`` at all.

``differences`` turns raw versus rendered facts into findings (the
"Rendering" group of the catalogue).
"""

from __future__ import annotations

import re

from .catalogue import finding
from .types import Finding, PageFacts

RENDER_MODES = ("none", "all", "auto")
# The codes ``differences`` reports: what JavaScript changed, as a rendered page's record lists it.
DIFFERENCE_CODES = frozenset({"render_title_changed", "render_canonical_changed", "render_noindex_changed",
                              "render_links_added", "render_content_added"})
# Below this many words, a page with scripts and no internal link is a shell.
SHELL_WORDS = 50
# The rendered page has "much more" content: at least this many times the raw
# words, and at least CONTENT_GAIN_WORDS more.
CONTENT_GAIN_FACTOR = 2
CONTENT_GAIN_WORDS = 100

_NOSCRIPT = re.compile(rb"<noscript[^>]*>(.{0,2000}?)</noscript", re.I | re.S)
_ASKS_FOR_JS = re.compile(rb"(enable|requires?|turn on|need)[^<]{0,40}javascript|javascript[^<]{0,40}"
                          rb"(required|needed|disabled|enabled)", re.I)
# The id's end is looked at, not taken: an unquoted id (``<div id=app>``, as minifiers write it) ends the tag.
_EMPTY_ROOT = re.compile(rb"<div\b[^>]*\bid\s*=\s*[\"']?(root|app|__next|__nuxt|___gatsby|svelte)(?=[\"'\s>])[^>]*>"
                         rb"\s*</div>", re.I)
# The start of the body is where shells say all they have to say.
_SCAN_BYTES = 256 * 1024


def needs_render(mode: str, body: bytes | None, facts: PageFacts | None, origin: str) -> bool:
    """Whether an HTML page that answered 200 is rendered, under the audit's render mode."""
    if mode == "all":
        return facts is not None
    if mode != "auto" or facts is None or body is None:
        return False
    head = body[:_SCAN_BYTES]
    if any(_ASKS_FOR_JS.search(text) for text in _NOSCRIPT.findall(head)):
        return True
    if _EMPTY_ROOT.search(head):
        return True
    scripts = any(link.tag == "script" for link in facts.links)
    return scripts and facts.word_count < SHELL_WORDS and not internal_links(facts, origin)


def internal_links(facts: PageFacts, origin: str) -> set[str]:
    """The page's same-site ``a``/``area`` targets, as written (absolute)."""
    inside = origin.rstrip("/") + "/"
    return {link.url.split("#")[0] for link in facts.links
            if link.tag in ("a", "area") and (link.url + "/").startswith(inside)}


def differences(raw: PageFacts, rendered: PageFacts, origin: str) -> list[Finding]:
    """What JavaScript changed that an HTML-only crawler (or a search engine before rendering) would miss."""
    found = []
    if (raw.title or "") != (rendered.title or ""):
        if raw.title:
            message = f"The HTML says “{raw.title[:120]}”, the rendered page “{(rendered.title or '')[:120]}”"
        else:
            message = f"The HTML has no title; JavaScript sets “{(rendered.title or '')[:120]}”"
        found.append(finding("render_title_changed", message))
    raw_canonical = raw.canonicals[0].url if raw.canonicals else ""
    rendered_canonical = rendered.canonicals[0].url if rendered.canonicals else ""
    if raw_canonical != rendered_canonical:
        found.append(finding("render_canonical_changed", f"The HTML's canonical is {raw_canonical or 'missing'}, "
                                                         f"the rendered page's {rendered_canonical or 'missing'}"))
    raw_noindex = bool(raw.robots & {"noindex", "none"})
    if raw_noindex != bool(rendered.robots & {"noindex", "none"}):
        found.append(finding("render_noindex_changed", "JavaScript removes the HTML's noindex" if raw_noindex
                             else "JavaScript adds noindex to a page whose HTML may be indexed"))
    added = internal_links(rendered, origin) - internal_links(raw, origin)
    if added:
        sample = ", ".join(sorted(added)[:3])
        found.append(finding("render_links_added", f"{len(added)} internal link{'s' if len(added) != 1 else ''} "
                                                   f"only after rendering, e.g. {sample}"))
    if (rendered.word_count >= CONTENT_GAIN_FACTOR * raw.word_count
            and rendered.word_count - raw.word_count >= CONTENT_GAIN_WORDS):
        found.append(finding("render_content_added", f"{raw.word_count} words in the HTML, "
                                                     f"{rendered.word_count} after rendering"))
    return found
