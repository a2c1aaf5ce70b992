"""One pass over an HTML page with lxml, into a frozen PageFacts.

The page is fed to libxml2's HTML parser with a *target* object: libxml2 calls
``start``/``end``/``data`` as it tokenises and no tree is ever built, so memory
stays flat however large or deep the page is and nothing of the DOM outlives
the call. (A SAX target measured faster than ``lxml.html.fromstring`` plus a
walk for our pages, and it is the same event stream BeautifulSoup's lxml
builder consumes, which is what makes the parity test with ``parse_bs4`` exact.)

What counts as a link and how text is measured is documented on the helpers
below; ``parse_bs4`` follows the same rules the obvious way, over a tree.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from urllib.parse import urljoin, urlsplit

from lxml import etree

from .types import Canonical, Image, Link, PageFacts

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
# Text inside these never counts as visible body text.
HIDDEN_TEXT_TAGS = frozenset({"head", "script", "style", "noscript", "template", "title"})
# <title> inside inline SVG or MathML is an accessible name, not the page title.
FOREIGN_TAGS = frozenset({"svg", "math"})
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


_HAS_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.\-]*:")


class Resolver:
    """Resolves attribute values against one base URL, as browsers do.

    ``urljoin`` costs several microseconds a call, more than the rest of the
    parse per link, so the shapes that make up nearly every real page
    (absolute, scheme-relative, root-relative, plain relative, ``?query``,
    ``#fragment``) are joined by string concatenation; anything with a dot
    segment, a scheme or an odd base goes through ``urljoin``.
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


def content_hash(words: list[str]) -> str:
    """Hash of the lower-cased visible text; empty when there is no text at all."""
    if not words:
        return ""
    return hashlib.blake2b(" ".join(words).lower().encode(), digest_size=16).hexdigest()


# Robots directives that carry a value after a colon, so "max-snippet: 50" is a
# directive, whereas "otherbot: noindex" names a user agent.
_VALUED_DIRECTIVES = frozenset(
    {"max-snippet", "max-image-preview", "max-video-preview", "unavailable_after"}
)
# Agents whose directives apply to us: none named, the generic names, Google's.
_OUR_AGENTS = frozenset({"", "robots", "*", "googlebot"})
_AGENT_PREFIX = re.compile(r"([a-z0-9_.*\- ]+?)\s*:\s*(.*)", re.S)


def robots_directives(value: str | None) -> frozenset[str]:
    """Directives from an ``X-Robots-Tag`` value (or a meta robots content).

    ``googlebot: noindex, nofollow`` applies both directives to googlebot;
    directives for other named agents are ignored. Several headers joined with
    commas are read in order, each agent prefix holding until the next one.
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
        if token and agent in _OUR_AGENTS:
            found.append(" ".join(token.split())[:DIRECTIVE_MAX])
    return frozenset(found[:MAX_DIRECTIVES])


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


# ---------------------------------------------------------------- decoding

# Labels browsers treat as another encoding (WHATWG Encoding Standard): Latin-1
# and ASCII mean windows-1252 on the web, Shift_JIS means its Microsoft superset.
_ALIASES = {
    **dict.fromkeys(
        ("iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1", "l1", "cp819",
         "ibm819", "us-ascii", "ascii", "ansi_x3.4-1968", "windows-1252", "x-cp1252"),
        "cp1252",
    ),
    **dict.fromkeys(
        ("shift_jis", "shift-jis", "sjis", "x-sjis", "ms_kanji", "csshiftjis", "windows-31j"),
        "cp932",
    ),
    **dict.fromkeys(("euc-kr", "ks_c_5601-1987", "windows-949", "cseuckr"), "cp949"),
    **dict.fromkeys(("gb2312", "gbk", "x-gbk", "chinese", "csgb2312"), "gb18030"),
    "iso-8859-9": "cp1254",
    "latin5": "cp1254",
    "tis-620": "cp874",
    "iso-8859-11": "cp874",
    "utf8": "utf-8",
}
# UTF-7 is refused by browsers (it smuggles markup past filters); the rest are not text codecs.
_REFUSED = frozenset({"utf-7", "utf_7", "unicode-1-1-utf-7", "csunicode11utf7"})
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_META_CHARSET = re.compile(rb"""(?i)<meta[^>]*?charset\s*=\s*["']?\s*([a-z0-9_.:\-]+)""")
META_SCAN_BYTES = 4096


def _codec(label: str | None, *, from_meta: bool = False) -> str | None:
    """Python codec name for a charset label, or None if unknown or unusable."""
    if not label:
        return None
    name = label.strip().strip("\"'").strip().lower()
    if not name or name in _REFUSED:
        return None
    name = _ALIASES.get(name, name)
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _REFUSED:
        return None
    if from_meta and info.name.startswith("utf-16"):
        # A meta tag readable as ASCII proves the body is not UTF-16 (WHATWG).
        return "utf-8"
    return info.name


def _detect(body: bytes) -> tuple[str, str]:
    """No declaration: UTF-8 if it is (mostly) UTF-8, else windows-1252."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    text = body.decode("utf-8", "replace")
    replaced = text.count("\ufffd")
    invalid = replaced - body.count(b"\xef\xbf\xbd")
    valid_non_ascii = len(text) - len(text.encode("ascii", "ignore")) - replaced
    # Windows-1252 prose almost never forms valid UTF-8 sequences, so a page
    # with real multi-byte characters and a few bad bytes is UTF-8 with damage;
    # random binary forms about one valid sequence per dozen invalid ones.
    if valid_non_ascii and valid_non_ascii * 4 >= invalid:
        return text, "utf-8"
    return body.decode("cp1252", "replace"), "cp1252"


def decode_html(body: bytes, http_charset: str | None) -> tuple[str, str]:
    """Decode a page: (text, python codec name).

    Order: a byte-order mark, the HTTP header charset, a meta charset in the
    first 4 KiB, then detection. The BOM goes first, as in browsers (WHATWG
    Encoding Standard): a UTF-16 page served with a stale header still reads.
    Invalid bytes become U+FFFD; NUL and C0 controls are removed.
    """
    charset = None
    for bom, name in _BOMS:
        if body.startswith(bom):
            charset, body = name, body[len(bom):]
            break
    if charset is None:
        charset = _codec(http_charset)
    if charset is None:
        match = _META_CHARSET.search(body, 0, META_SCAN_BYTES)
        charset = _codec(match.group(1).decode("ascii"), from_meta=True) if match else None
    if charset is None:
        text, charset = _detect(body)
    else:
        text = body.decode(charset, "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return sanitize(text), charset


# ---------------------------------------------------------------- the parser target


class _Text:
    """Bounded accumulator for text that ends up whitespace-collapsed and clipped.

    Raw text is compacted (whitespace runs to one space) when it grows; once the
    compacted form is longer than the cap plus the one space ``strip`` may
    remove, later text cannot change the clipped result, so it is ignored.
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
            self.parts = [compact]
            self.size = len(compact)
            self.full = self.size > self.cap + 2

    def value(self) -> str:
        return clip("".join(self.parts), self.cap)


class _Collector:
    """lxml parser target: turns the event stream into the facts of one page."""

    def __init__(self, url: str):
        self.url = url
        self.stack: list[str] = []
        self.sep = False  # an element boundary since the last text chunk
        self.hidden = 0  # open elements whose text is not visible body text
        self.in_head = 0
        self.foreign = 0
        self.text: list[str] = []
        self.anchors: list[list | None] = []  # open <a>: their link record, or None
        self.h1_open: list[list[bool]] = []
        self.title_buf: _Text | None = None
        self.title_depth = 0
        # Facts.
        self.base_href: str | None = None
        self.refs: list[list] = []  # [raw url, tag, text or _Text, rel tokens, image alt]
        self.refs_over = 0
        self.images: list[tuple[str, str | None]] = []
        self.title: str | None = None
        self.title_count = 0
        self.descriptions: list[str] = []
        self.robots: set[str] = set()
        self.canonicals: list[Canonical] = []
        self.h1_count = 0
        self.headings: list[int] = []
        self.hreflang: list[tuple[str, str]] = []
        self.lang: str | None = None
        self.seen_html = False
        self.meta_refresh: str | None = None
        self.head_tags_in_body = False
        self.viewport = False

    # -- events -------------------------------------------------------------

    def start(self, tag: str, attrib) -> None:
        self.stack.append(tag)
        self.sep = True
        handler = _START.get(tag)
        if handler is not None:
            handler(self, tag, attrib)

    def end(self, tag: str) -> None:
        self.sep = True
        stack = self.stack
        if stack and stack[-1] == tag:
            stack.pop()
            if tag in _END:
                _END[tag](self, tag)
            return
        # An end tag closing several open elements (or none): pop up to it, as
        # BeautifulSoup's _popToTag does, running each popped element's end.
        if tag not in stack:
            return
        while stack:
            popped = stack.pop()
            if popped in _END:
                _END[popped](self, popped)
            if popped == tag:
                return

    def data(self, chunk: str) -> None:
        if self.sep:
            chunk = " " + chunk
            self.sep = False
        if not self.hidden:
            self.text.append(chunk)
        if self.anchors:
            for record in self.anchors:
                if record is not None:
                    record[2].add(chunk)
        if self.title_depth and self.title_buf is not None:
            self.title_buf.add(chunk)
        if self.h1_open and chunk.strip():
            for flag in self.h1_open:
                flag[0] = True

    def comment(self, text: str) -> None:
        self.sep = True

    def pi(self, target: str, data: str | None = None) -> None:
        self.sep = True

    def doctype(self, *args) -> None:
        self.sep = True

    def close(self) -> None:
        # Elements still open at the end of input get their end handling.
        while self.stack:
            popped = self.stack.pop()
            if popped in _END:
                _END[popped](self, popped)

    # -- element handlers -----------------------------------------------------

    def _add_ref(self, raw: str | None, tag: str, text="", rel: tuple[str, ...] = ()) -> list | None:
        if raw is None:
            return None
        if len(self.refs) >= MAX_RAW_REFS:
            self.refs_over += 1
            return None
        record = [raw, tag, text, rel]
        self.refs.append(record)
        return record

    def _a(self, tag, attrib) -> None:
        href = attrib.get("href")
        record = None
        if href is not None:
            record = self._add_ref(href, "a", _Text(ANCHOR_MAX), rel_tokens(attrib.get("rel")))
            if record is not None:
                record.append(None)  # alt of the first image inside, the fallback text
        self.anchors.append(record)

    def _a_end(self, tag) -> None:
        if self.anchors:
            self.anchors.pop()

    def _area(self, tag, attrib) -> None:
        self._add_ref(
            attrib.get("href"), "area", clip(attrib.get("alt") or "", ANCHOR_MAX),
            rel_tokens(attrib.get("rel")),
        )

    def _img(self, tag, attrib) -> None:
        src = attrib.get("src")
        alt = attrib.get("alt")
        if alt is not None:
            alt = clip(alt, ALT_MAX)
            if alt and self.anchors:
                for record in self.anchors:
                    if record is not None and record[4] is None:
                        record[4] = alt[:ANCHOR_MAX].rstrip()
        if src is not None:
            self.images.append((src, alt))
            self._add_ref(src, "img")

    def _resource(self, tag, attrib) -> None:
        self._add_ref(attrib.get(RESOURCE_ATTRS[tag]), tag)

    def _link(self, tag, attrib) -> None:
        href = attrib.get("href")
        if href is None:
            return
        rel = rel_tokens(attrib.get("rel"))
        if "stylesheet" in rel:
            self._add_ref(href, "link", "", rel)
        if "canonical" in rel and len(self.canonicals) < MAX_CANONICALS:
            self.canonicals.append(Canonical(href.strip(HTML_SPACE)[:URL_MAX], self.in_head > 0))
        if "alternate" in rel:
            lang = attrib.get("hreflang")
            if lang is not None and len(self.hreflang) < MAX_HREFLANG:
                self.hreflang.append((lang, href))

    def _meta(self, tag, attrib) -> None:
        name = (attrib.get("name") or "").strip().lower()
        if name == "description":
            if len(self.descriptions) < MAX_DESCRIPTIONS:
                self.descriptions.append(clip(attrib.get("content") or "", DESCRIPTION_MAX))
            if not self.in_head:
                self.head_tags_in_body = True
        elif name in ("robots", "googlebot"):
            self.robots.update(robots_directives(attrib.get("content")))
            if not self.in_head:
                self.head_tags_in_body = True
        elif name == "viewport":
            self.viewport = True
        equiv = attrib.get("http-equiv")
        if equiv is not None and self.meta_refresh is None and equiv.strip().lower() == "refresh":
            self.meta_refresh = clip(attrib.get("content") or "", META_MAX)

    def _base(self, tag, attrib) -> None:
        if self.base_href is None:
            href = attrib.get("href")
            if href is not None:
                self.base_href = href

    def _html(self, tag, attrib) -> None:
        if not self.seen_html:
            self.seen_html = True
            lang = clip(attrib.get("lang") or "", LANG_MAX)
            self.lang = lang or None

    def _head(self, tag, attrib) -> None:
        self.in_head += 1
        self.hidden += 1

    def _head_end(self, tag) -> None:
        self.in_head -= 1
        self.hidden -= 1

    def _hide(self, tag, attrib) -> None:
        self.hidden += 1

    def _hide_end(self, tag) -> None:
        self.hidden -= 1

    def _title(self, tag, attrib) -> None:
        self.hidden += 1
        if self.foreign:
            return
        self.title_count += 1
        if not self.in_head:
            self.head_tags_in_body = True
        if self.title_buf is None:
            self.title_buf = _Text(TITLE_MAX)
        self.title_depth += 1

    def _title_end(self, tag) -> None:
        self.hidden -= 1
        if self.title_depth:
            self.title_depth -= 1
            if self.title is None and self.title_buf is not None:
                self.title = self.title_buf.value()

    def _foreign(self, tag, attrib) -> None:
        self.foreign += 1

    def _foreign_end(self, tag) -> None:
        self.foreign -= 1

    def _heading(self, tag, attrib) -> None:
        if len(self.headings) < MAX_HEADINGS:
            self.headings.append(HEADING_LEVELS[tag])
        if tag == "h1":
            self.h1_open.append([False])

    def _h1_end(self, tag) -> None:
        if self.h1_open and self.h1_open.pop()[0]:
            self.h1_count += 1

    # -- the result -----------------------------------------------------------

    def facts(self, max_links: int, charset: str) -> PageFacts:
        base = self.url
        if self.base_href is not None:
            base = resolve_url(self.url, self.base_href) or self.url
        resolver = Resolver(base)
        cache: dict[str, str | None] = {}

        def resolve(raw: str) -> str | None:
            url = cache.get(raw, "")
            if url == "":
                url = cache[raw] = resolver(raw)
            return url

        links: list[Link] = []
        seen: set[tuple[str, str]] = set()
        dropped = self.refs_over
        for record in self.refs:
            raw, tag = record[0], record[1]
            url = cache.get(raw, "")
            if url == "":
                url = cache[raw] = resolver(raw)
            if url is None:
                continue
            key = (url, tag)
            if key in seen:
                continue
            seen.add(key)
            if len(links) >= max_links:
                dropped += 1
                continue
            text = record[2]
            if tag == "a":
                text = text.value() or record[4] or ""
            rel = record[3]
            links.append(Link(url, tag, text, rel, "nofollow" in rel))

        images: list[Image] = []
        seen_images: set[tuple[str, str | None]] = set()
        for raw, alt in self.images:
            url = resolve(raw)
            if url is None or (url, alt) in seen_images:
                continue
            seen_images.add((url, alt))
            images.append(Image(url, alt))
            if len(images) >= MAX_IMAGES:
                break

        hreflang = []
        for lang, raw in self.hreflang:
            url = resolve(raw)
            if url is not None:
                hreflang.append((clip(lang, LANG_MAX), url))

        words = "".join(self.text).split()
        return PageFacts(
            title=self.title,
            title_count=self.title_count,
            descriptions=tuple(self.descriptions),
            robots=frozenset(self.robots),
            canonicals=tuple(self.canonicals),
            h1_count=self.h1_count,
            headings=tuple(self.headings),
            links=tuple(links),
            links_dropped=dropped,
            images=tuple(images),
            hreflang=tuple(hreflang),
            charset=charset,
            lang=self.lang,
            word_count=len(words),
            content_hash=content_hash(words),
            meta_refresh=self.meta_refresh,
            head_tags_in_body=self.head_tags_in_body,
            viewport=self.viewport,
            base_url=base,
        )


_START = {
    "a": _Collector._a,
    "area": _Collector._area,
    "img": _Collector._img,
    "link": _Collector._link,
    "meta": _Collector._meta,
    "base": _Collector._base,
    "html": _Collector._html,
    "head": _Collector._head,
    "title": _Collector._title,
    **dict.fromkeys(RESOURCE_ATTRS.keys() - {"img"}, _Collector._resource),
    **dict.fromkeys(HIDDEN_TEXT_TAGS - {"head", "title"}, _Collector._hide),
    **dict.fromkeys(FOREIGN_TAGS, _Collector._foreign),
    **dict.fromkeys(HEADING_LEVELS, _Collector._heading),
}
# script is both a resource and hidden text: one handler each way.
_START["script"] = lambda self, tag, attrib: (self._hide(tag, attrib), self._resource(tag, attrib))
_END = {
    "a": _Collector._a_end,
    "head": _Collector._head_end,
    "title": _Collector._title_end,
    "h1": _Collector._h1_end,
    **dict.fromkeys(HIDDEN_TEXT_TAGS - {"head", "title"}, _Collector._hide_end),
    **dict.fromkeys(FOREIGN_TAGS, _Collector._foreign_end),
}


def parse_html(
    body: bytes, url: str, *, http_charset: str | None = None, max_links: int = 2000
) -> PageFacts:
    """Extract the facts of one HTML page. Never raises for what the page contains."""
    text, charset = decode_html(body, http_charset)
    collector = _Collector(url)
    parser = etree.HTMLParser(target=collector, recover=True, no_network=True)
    try:
        if text:
            parser.feed(text)
        parser.close()
    except (etree.LxmlError, ValueError):
        # libxml2 gave up part-way (it reports rather than recovers from a few
        # input errors); the facts gathered so far still describe the page.
        collector.close()
    return collector.facts(max_links, charset)
