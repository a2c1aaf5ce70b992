"""The rules every HTML reader here follows: field caps, where URLs live, how text and links are cleaned.

``parse`` (lxml) and ``parse_bs4`` (the reference) share them, which is what keeps their
answers comparable.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from urllib.parse import urljoin, urlsplit

from .urls import backslashes_as_slashes

# Field caps: crawled text ends up in database columns and HTML views, so every
# string a hostile page controls is bounded here, once.
TITLE_MAX = 1000
DESCRIPTION_MAX = 2000
ANCHOR_MAX = 200
ALT_MAX = 1000
URL_MAX = 4096
META_MAX = 4096
LANG_MAX = 100
DIRECTIVE_MAX = 100
# Count caps: how many of each repeated fact a page may contribute.
MAX_IMAGES = 1000
MAX_HEADINGS = 1000
MAX_HREFLANG = 500
MAX_CANONICALS = 20
MAX_DESCRIPTIONS = 20
MAX_DIRECTIVES = 50
# References collected before resolution; past this they are only counted, so a
# page made of nothing but links cannot grow the raw list without bound.
MAX_RAW_REFS = 100_000

# Where a reference lives, per tag: the attribute holding the URL.
RESOURCE_ATTRS = {
    "img": "src",
    "script": "src",
    "iframe": "src",
    "source": "src",
    "video": "src",
    "audio": "src",
    "embed": "src",
    "object": "data",
    "form": "action",
}
# Where lazy-loading scripts keep an <img>'s URL until it scrolls into view. The
# alt check reads them when src is missing, blank or a data: placeholder; nothing fetches them.
LAZY_SRC_ATTRS = ("data-src", "data-lazy-src", "data-original")
LAZY_SRCSET_ATTRS = ("srcset", "data-srcset")
# A browser picks one srcset candidate by screen, so any of them can be the one a visitor gets:
# each is checked as the element's resource, the first MAX_SRCSET of an attribute.
SRCSET_TAGS = frozenset({"img", "source"})
MAX_SRCSET = 32
# Text inside these never counts as visible body text.
HIDDEN_TEXT_TAGS = frozenset({"head", "script", "style", "noscript", "template", "title"})
# <title> inside inline SVG or MathML is an accessible name, not the page title.
FOREIGN_TAGS = frozenset({"svg", "math"})
# What these hold a browser running scripts (and Google, which renders) never shows: an image,
# heading, title or refresh inside is none of the page's (a tracking pixel's <img> has no alt,
# a "please enable JavaScript" <h1> is no second heading). Its links are still followed.
INERT_TAGS = frozenset({"noscript", "template"})
# ... except a <template> declaring a shadow root (declarative shadow DOM, and how a rendered page's open shadow
# roots are written out): the browser shows its content as the component's.
SHADOW_ROOT_ATTRS = ("shadowrootmode", "shadowroot")


def is_shadow_root(attrib) -> bool:
    return any(attrib.get(name) is not None for name in SHADOW_ROOT_ATTRS)
HEADING_LEVELS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
HTML_SPACE = " \t\n\r\x0c"

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f]")
_URL_NOISE = str.maketrans("", "", "\t\n\r")
_WS = re.compile(r"\s+")


# ---------------------------------------------------------------- small helpers


def sanitize(text: str) -> str:
    """Drop NUL and C0 control characters (tab, LF and CR stay): databases reject NUL."""
    if _CONTROL.search(text):
        return _CONTROL.sub("", text)
    return text


def clip(text: str, cap: int) -> str:
    """Whitespace-collapsed ``text`` cut to ``cap`` characters."""
    return " ".join(text.split())[:cap].rstrip()


_SRCSET_GAP = re.compile(r"[ \t\n\r\x0c,]*")
_SRCSET_URL = re.compile(r"[^ \t\n\r\x0c]*")


def image_url(src: str | None, attrib) -> str | None:
    """The URL an ``<img>`` shows, as written: ``src``, or when that is missing,
    blank or a ``data:`` placeholder, the first lazy-loading attribute's URL
    (a srcset's first candidate), else ``src`` as it is."""
    if src is not None:
        value = src.strip(HTML_SPACE)
        if value and value[:5].lower() != "data:":
            return src
    for name in LAZY_SRC_ATTRS:
        value = attrib.get(name)
        if value and value.strip(HTML_SPACE):
            return value
    for name in LAZY_SRCSET_ATTRS:
        value = attrib.get(name)
        if value and (first := srcset_urls(value, most=1)):
            return first[0]
    return src


def srcset_urls(value: str, most: int = MAX_SRCSET) -> list[str]:
    """The first ``most`` candidates' URLs of a ``srcset``, as HTML parses it: a URL runs to whitespace
    (less trailing commas), and its descriptors to the next comma outside parentheses."""
    urls: list[str] = []
    pos, end = 0, len(value)
    while len(urls) < most:
        pos = _SRCSET_GAP.match(value, pos).end()
        if pos >= end:
            break
        url = _SRCSET_URL.match(value, pos)[0]
        pos += len(url)
        if url.endswith(","):
            url = url.rstrip(",")
        else:
            pos = _descriptors_end(value, pos)
        if url:
            urls.append(url)
    return urls


def _descriptors_end(value: str, pos: int) -> int:
    while True:
        comma, paren = value.find(",", pos), value.find("(", pos)
        if comma == -1:
            return len(value)
        if paren == -1 or comma < paren:
            return comma + 1
        close = value.find(")", paren)
        if close == -1:
            return len(value)
        pos = close + 1


def media_urls(tag: str, attrib) -> list[str]:
    """The URLs an element makes a browser fetch besides its main attribute's: an
    ``<img>``'s or ``<picture><source>``'s srcset candidates, a ``<video>``'s poster."""
    if tag in SRCSET_TAGS:
        value = attrib.get("srcset")
        return srcset_urls(value) if value else []
    if tag == "video":
        poster = attrib.get("poster")
        return [poster] if poster is not None else []
    return []


def image_name(shown: str, resolved: str | None) -> str:
    """What the alt check calls an image: its URL, or for one no http(s) URL shows (an inline ``data:`` image,
    an empty or missing src) its source as written, cut to 100 characters ("" for none)."""
    return resolved if resolved is not None else shown.strip(HTML_SPACE)[:100]


_HAS_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.\-]*:")


class Resolver:
    """Resolves attribute values against one base URL, as browsers do.

    The shapes that make up nearly every real page (absolute, scheme-relative,
    root-relative, plain relative, ``?query``, ``#fragment``) are joined by
    string concatenation, as RFC 3986 5.2 and browsers do: ``urljoin`` keeps the
    base's query for an empty one and drops empty path segments. Anything with a
    dot segment, a scheme or an odd base goes through ``urljoin``.
    """

    __slots__ = ("base", "scheme", "origin", "directory", "no_query", "no_fragment")

    def __init__(self, base: str):
        self.base = base
        parts = urlsplit(base) if base.startswith(("http://", "https://")) else None
        if parts is None or not parts.netloc or "/." in parts.path:
            # Dot segments (or no usable base) in the base itself: urljoin always.
            self.scheme = None
            return
        self.scheme = parts.scheme
        self.origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path or "/"
        self.directory = self.origin + path[: path.rfind("/") + 1]
        self.no_query = self.origin + path
        self.no_fragment = base.split("#", 1)[0]

    def __call__(self, raw: str) -> str | None:
        """Absolute http(s) URL for an attribute value, or None if it is not one.

        Surrounding whitespace is stripped and tabs and newlines inside dropped.
        Empty values, ``javascript:``/``mailto:``/``tel:``/``data:`` and every
        other non-http(s) scheme give None, as do URLs longer than ``URL_MAX``
        (cutting one would invent a different URL).
        """
        value = raw.strip(HTML_SPACE)
        if not value:
            return None
        if "\t" in value or "\n" in value or "\r" in value:
            value = value.translate(_URL_NOISE)
        if "\\" in value:
            value = backslashes_as_slashes(value)
        first = value[0]
        if first in "/?#" or first == ".":
            # Cannot carry a scheme.
            if self.scheme is None or first == "." or "/." in value:
                url = self._join(value)
            elif first == "/":
                url = (self.scheme + ":" + value) if value[1:2] == "/" else self.origin + value
            elif first == "?":
                url = self.no_query + value
            else:
                url = self.no_fragment + value
        elif value.startswith(("http://", "https://")):
            url = value
        elif scheme := _HAS_SCHEME.match(value):
            # Schemes are case-insensitive; urljoin only lower-cases them when
            # it recognises the base's scheme, so do it first.
            value = value[: scheme.end()].lower() + value[scheme.end():]
            url = value if value.startswith(("http://", "https://")) else self._join(value)
        elif self.scheme is None or "/." in value:
            url = self._join(value)
        else:
            url = self.directory + value
        if url is None or not url.startswith(("http://", "https://")):
            return None
        return url if len(url) <= URL_MAX else None

    def _join(self, value: str) -> str | None:
        try:
            return urljoin(self.base, value)
        except ValueError:  # e.g. an unbalanced IPv6 bracket
            return None


def resolve_url(base: str, raw: str) -> str | None:
    """One-off form of ``Resolver(base)(raw)``."""
    return Resolver(base)(raw)


def rel_tokens(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(dict.fromkeys(value.lower().split()))



class TextBuffer:
    """Bounded accumulator for text that ends up whitespace-collapsed and clipped.

    Raw text is compacted (whitespace runs to one space) when it grows; once the
    compacted form is longer than the cap plus the one space ``strip`` may
    remove, later text cannot change the clipped result, so it is ignored and
    only that prefix is kept: a full buffer holds ``cap + 2`` characters.
    """

    __slots__ = ("parts", "size", "cap", "full")

    def __init__(self, cap: int):
        self.parts: list[str] = []
        self.size = 0
        self.cap = cap
        self.full = False

    def add(self, chunk: str) -> None:
        if self.full:
            return
        self.parts.append(chunk)
        self.size += len(chunk)
        if self.size > 4 * self.cap + 64:
            compact = _WS.sub(" ", "".join(self.parts))
            self.full = len(compact) > self.cap + 2
            if self.full:
                compact = compact[: self.cap + 2]
            self.parts = [compact]
            self.size = len(compact)

    def value(self) -> str:
        return clip("".join(self.parts), self.cap)


@functools.cache
def _word_pieces(cap: int) -> re.Pattern[str]:
    # Bounded repetition, so a 5 MB word is not scanned to its end.
    return re.compile(rf"\S{{1,{cap + 2}}}")


def settle_chunk(chunk: str, cap: int) -> str:
    """``chunk`` as a TextBuffer of ``cap`` would keep it, read only as far as
    needed: a long chunk is compacted and cut to ``cap + 2`` characters once,
    so handing it to many buffers (nested anchors share their text) costs its
    length once, not once per buffer."""
    if len(chunk) <= 4 * cap + 64:
        return chunk
    out: list[str] = []
    size = end = 0
    for match in _word_pieces(cap).finditer(chunk):
        if match.start() != end:  # a whitespace run before this word
            out.append(" ")
            size += 1
        out.append(match[0])
        size += len(match[0])
        end = match.end()
        if size > cap + 2:
            break
    else:
        if end != len(chunk):
            out.append(" ")
    return "".join(out)[: cap + 2]


def joined_clip(chunks: Iterable[str], cap: int) -> str:
    """``clip(" ".join(chunks), cap)``, reading the chunks only until the
    clipped text is settled."""
    if isinstance(chunks, list) and sum(map(len, chunks)) <= 4 * cap + 64:  # nearly every anchor: one join
        return clip(" ".join(chunks), cap)
    buf = TextBuffer(cap)
    for chunk in chunks:
        buf.add(" ")
        buf.add(settle_chunk(chunk, cap))
        if buf.full:
            break
    return buf.value()
