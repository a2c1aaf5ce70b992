"""One read of an HTML page with lxml, into a frozen PageFacts.

libxml2 builds the page's tree in C, and Python then visits only the elements
that carry facts (``root.iter`` over a list of tags) and gets text in bulk
(one XPath call for all text nodes). Python callbacks per parser event, the
earlier design, cost about twice the whole C parse in call overhead alone.
The tree is dropped when the call returns: only strings reach PageFacts.

libxml2's tree builder stops at a nesting depth of 256, so a page it does not
finish is read again with an event *target* (``_Collector``), which keeps no
stack in libxml2 and reads any depth with flat memory. Both see the event
stream BeautifulSoup's lxml builder consumes, which is what makes the parity
test with ``parse_bs4`` exact.

What counts as a link and how text is measured is documented on the helpers
below; ``parse_bs4`` follows the same rules the obvious way, over a tree.
"""

from __future__ import annotations

import codecs
import dataclasses
import hashlib
import re
import threading
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


def _fast_constructor(cls, names: tuple[str, ...]):
    """A faster way to build the frozen, slotted ``cls`` from ``names`` in order.

    A frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``; calling the slot descriptors directly takes half
    the time, which matters for the hundred links of a page. Used only while
    ``names`` are exactly the class's fields and it has no ``__post_init__``;
    otherwise the class itself is returned, so a field added to it later
    cannot be skipped.
    """
    if (
        tuple(f.name for f in dataclasses.fields(cls)) != names
        or hasattr(cls, "__post_init__")
        or getattr(cls, "__slots__", None) != names
    ):
        return cls
    new = object.__new__
    setters = tuple(cls.__dict__[name].__set__ for name in names)
    if len(names) == 5:
        s0, s1, s2, s3, s4 = setters

        def build5(a, b, c, d, e):
            obj = new(cls)
            s0(obj, a)
            s1(obj, b)
            s2(obj, c)
            s3(obj, d)
            s4(obj, e)
            return obj

        return build5
    return cls


_make_link = _fast_constructor(Link, ("url", "tag", "text", "rel", "nofollow"))


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
    return hashlib.blake2b(lower_utf8(" ".join(words)), digest_size=16).hexdigest()


# Bisection of a page's text stops at pieces this long, and gives up (lowering
# the whole text) past this many pieces holding non-ASCII characters.
_LOWER_PIECE = 256
_LOWER_PIECES_MAX = 32


def lower_utf8(text: str) -> bytes:
    """``text.lower().encode()``, without lowering a whole page of text character by character.

    One non-ASCII character (a "©" in the footer) makes CPython lower every
    character of the string through its Unicode tables, more than the rest of
    the hash costs. ``bytes.lower`` lowers ASCII
    letters only, and every byte of a multi-byte UTF-8 character is 0x80 or
    above, so the encoded text lowered that way is exactly the answer when no
    non-ASCII character changes under ``lower()``. Those characters are found
    by bisecting the bytes with ``isascii`` (a few slices for a few of them)
    and each piece holding one is checked; a piece that changes (a capital
    letter outside ASCII, or many pieces, as in most non-English text) means
    the whole text is lowered as before. The only mapping that depends on its
    neighbours, capital sigma's, changes its own piece, so it never takes the
    shortcut.
    """
    data = text.encode()
    if text.isascii():
        return data.lower()
    pending = [(0, len(data))]
    pieces = 0
    while pending:
        low, high = pending.pop()
        if data[low:high].isascii():
            continue
        if high - low > _LOWER_PIECE:
            middle = (low + high) // 2
            pending += ((low, middle), (middle, high))
            continue
        pieces += 1
        if pieces > _LOWER_PIECES_MAX:
            break
        # Whole characters: widen the cut over continuation bytes (0b10xxxxxx).
        while low > 0 and 0x80 <= data[low] < 0xC0:
            low -= 1
        while high < len(data) and 0x80 <= data[high] < 0xC0:
            high += 1
        piece = data[low:high]
        if piece.decode().lower() != piece.lower().decode():  # a non-ASCII character changes
            break
    else:
        return data.lower()
    return text.lower().encode()


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


def _declared(body: bytes, http_charset: str | None) -> tuple[bytes, str | None]:
    """The body without its byte-order mark, and the charset declared for it, if any.

    Order: a byte-order mark, the HTTP header charset, a meta charset in the
    first 4 KiB. The BOM goes first, as in browsers (WHATWG Encoding
    Standard): a UTF-16 page served with a stale header still reads.
    """
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom):], name
    charset = _codec(http_charset)
    if charset is None:
        match = _META_CHARSET.search(body, 0, META_SCAN_BYTES)
        charset = _codec(match.group(1).decode("ascii"), from_meta=True) if match else None
    return body, charset


def decode_html(body: bytes, http_charset: str | None) -> tuple[str, str]:
    """Decode a page: (text, python codec name).

    The charset is the one declared (``_declared``), else detected. Invalid
    bytes become U+FFFD; NUL and C0 controls are removed.
    """
    body, charset = _declared(body, http_charset)
    if charset is None:
        text, charset = _detect(body)
    else:
        text = body.decode(charset, "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return sanitize(text), charset


# The C0 controls ``sanitize`` removes, as bytes: in UTF-8 they only ever stand
# for themselves (every byte of a multi-byte sequence is 0x80 or above).
_CONTROL_BYTES = bytes(range(0x00, 0x09)) + b"\x0b\x0c" + bytes(range(0x0E, 0x20))


def _utf8_source(body: bytes, http_charset: str | None) -> bytes | None:
    """The page as clean UTF-8 bytes when decoding would only have checked it.

    Nearly every page is valid UTF-8: then ``decode_html`` followed by lxml
    re-encoding the text for libxml2 is a round trip that changes nothing but
    the control characters, and deleting those from the bytes is the same edit.
    Anything else (another charset, invalid bytes, a second BOM) gives None.
    """
    raw, charset = _declared(body, http_charset)
    if charset not in (None, "utf-8") or raw.startswith(codecs.BOM_UTF8):
        return None
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return raw.translate(None, _CONTROL_BYTES)


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

    def _link(self, tag, attrib, element=None) -> None:
        href = attrib.get("href")
        if href is None:
            return
        rel = rel_tokens(attrib.get("rel"))
        if "stylesheet" in rel:
            self._add_ref(href, "link", "", rel)
        if "canonical" in rel and len(self.canonicals) < MAX_CANONICALS:
            self.canonicals.append(
                Canonical(href.strip(HTML_SPACE)[:URL_MAX], self._in_head(element))
            )
        if "alternate" in rel:
            lang = attrib.get("hreflang")
            if lang is not None and len(self.hreflang) < MAX_HREFLANG:
                self.hreflang.append((lang, href))

    def _meta(self, tag, attrib, element=None) -> None:
        name = (attrib.get("name") or "").strip().lower()
        if name == "description":
            if len(self.descriptions) < MAX_DESCRIPTIONS:
                self.descriptions.append(clip(attrib.get("content") or "", DESCRIPTION_MAX))
            if not self._in_head(element):
                self.head_tags_in_body = True
        elif name in ("robots", "googlebot"):
            self.robots.update(robots_directives(attrib.get("content")))
            if not self._in_head(element):
                self.head_tags_in_body = True
        elif name == "viewport":
            self.viewport = True
        equiv = attrib.get("http-equiv")
        if equiv is not None and self.meta_refresh is None and equiv.strip().lower() == "refresh":
            self.meta_refresh = clip(attrib.get("content") or "", META_MAX)

    def _in_head(self, element) -> bool:
        """Inside <head>: from the open-element count, or a tree element's ancestors."""
        return self.in_head > 0 if element is None else _in(element, "head")

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

    def facts(self, max_links: int, charset: str, tops: list | None = None) -> PageFacts:
        """The PageFacts; ``tops`` are the tree's roots when the page was read as a tree."""
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
        anchor_text = None if tops is None else _AnchorText(tops, self.refs)
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
                if tops is None:
                    text = text.value() or record[4] or ""
                else:
                    text = anchor_text(text)
            rel = record[3]
            links.append(_make_link(url, tag, text, rel, "nofollow" in rel))

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

        words = "".join(self.text).split() if tops is None else _visible_words(tops)
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


# ---------------------------------------------------------------- the tree path

# Elements the tree walk looks at; everything else is passed over in C.
_WANTED = tuple(
    {"a", "area", "img", "link", "meta", "base", "html", "title", *RESOURCE_ATTRS, *HEADING_LEVELS}
)
_HIDDEN = tuple(HIDDEN_TEXT_TAGS)
# Every text node of the document (comments and processing instructions are
# not text nodes), as plain strings: several times faster than itertext().
_ALL_TEXT = etree.XPath("//text()", smart_strings=False)
_TEXT_BELOW = etree.XPath("descendant::text()", smart_strings=False)
# Text nodes a page's anchors may read with _TEXT_BELOW before _AnchorText
# switches to one walk of the page (a usual page reads a few hundred).
ANCHOR_TEXT_NODES = 20_000
# All text below an element as one string; whether it is blank needs no separators.
_STRING = etree.XPath("string()", smart_strings=False)
_local = threading.local()


def _parsers() -> tuple[etree.HTMLParser, etree.HTMLParser]:
    # Per thread: creating a parser costs more than a small page's parse, and
    # an lxml parser must not be used by two threads at once. The second one
    # reads UTF-8 bytes and ignores the page's own charset declarations.
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = (
            etree.HTMLParser(recover=True, no_network=True),
            etree.HTMLParser(recover=True, no_network=True, encoding="utf-8"),
        )
    return parsers


def _tree(source: str | bytes):
    """The page's first root element, or None when libxml2 stopped before the end.

    libxml2's tree builder gives up at a nesting depth of 256 (raising the
    limit needs huge_tree, which also lifts its size guards), and a few other
    inputs end the parse early (text with an XML encoding declaration is
    refused outright); the caller then uses the event path, which keeps no
    stack in libxml2 and reads the page to its end.
    """
    parser = _parsers()[isinstance(source, bytes)]
    try:
        root = etree.fromstring(source, parser)
    except (etree.LxmlError, ValueError):
        return None
    if root is None or parser.error_log.filter_from_fatals():
        return None
    return root


def _in(element, *tags: str) -> bool:
    for _ in element.iterancestors(*tags):
        return True
    return False


def _joined(element, cap: int) -> str:
    """All text under ``element`` (comments are not text), whitespace-collapsed
    and clipped to ``cap``; reading stops once the clipped text is settled."""
    if not len(element):
        return clip(element.text or "", cap)
    buf = _Text(cap)
    for chunk in element.itertext():
        buf.add(" ")
        buf.add(chunk)
        if buf.full:
            break
    return buf.value()


class _AnchorText:
    """Anchor texts from a tree: the text, else the first non-empty image alt, else "".

    Each anchor's text nodes come from one XPath call, several times faster
    than itertext(). Anchors nest, though, and each holds all the text below
    it, so a page of nested anchors over a huge body would cost the body once
    per anchor: past a budget of text nodes read, every anchor's text is
    gathered instead in one walk of the document (``_one_pass``).
    """

    def __init__(self, tops: list, refs: list[list]):
        self.tops = tops
        self.refs = refs
        self.budget = ANCHOR_TEXT_NODES
        self.texts: dict | None = None

    def __call__(self, element) -> str:
        if not len(element):
            text = clip(element.text or "", ANCHOR_MAX)
        elif self.texts is not None:
            text = self.texts.get(element, "")
        else:
            chunks = _TEXT_BELOW(element)
            self.budget -= len(chunks)
            if self.budget < 0:
                self.texts = self._one_pass()
                text = self.texts.get(element, "")
            else:
                text = clip(" ".join(chunks), ANCHOR_MAX)
        if text:
            return text
        for img in element.iter("img"):
            alt = img.get("alt")
            if alt is not None:
                alt = clip(alt, ANCHOR_MAX)
                if alt:
                    return alt
        return ""

    def _one_pass(self) -> dict:
        """Every anchor's clipped text from one walk: each non-blank text node
        goes to the anchors open around it that are not yet full, so the work
        is the page plus a few hundred characters per anchor."""
        anchors = {record[2] for record in self.refs if record[1] == "a"}
        texts: dict = {}
        open_buffers: dict = {}  # anchor element -> its _Text while it is open
        filling: list[_Text] = []

        def add(chunk: str | None) -> None:
            nonlocal filling
            if chunk and filling and not chunk.isspace():
                for buf in filling:
                    buf.add(" ")
                    buf.add(chunk)
                if any(buf.full for buf in filling):
                    filling = [buf for buf in filling if not buf.full]

        def close(element) -> None:
            buf = open_buffers.pop(element, None)
            if buf is not None:
                texts[element] = buf.value()
                if buf in filling:
                    filling.remove(buf)
            add(element.tail)

        # iter() yields comments too (iterwalk does not), and their tails are
        # text; an element is closed when a node that is not inside it comes.
        for top in self.tops:
            stack: list = []
            for node in top.iter():
                parent = node.getparent()
                while stack and stack[-1] is not parent:
                    close(stack.pop())
                if node in anchors:
                    buf = open_buffers[node] = _Text(ANCHOR_MAX)
                    filling.append(buf)
                if isinstance(node.tag, str):  # a comment's own text is not text
                    add(node.text)
                stack.append(node)
            while stack:
                close(stack.pop())
        return texts


def _tops(root) -> list:
    """The document's top-level elements: libxml2 reopens ``<html>`` for content
    after ``</html>``, which the tree keeps as further roots, in order."""
    tops = [root]
    for sibling in root.itersiblings():
        if isinstance(sibling.tag, str):
            tops.append(sibling)
    return tops


def _walk(c: _Collector, tops: list) -> None:
    """Fill the collector from a tree: one C-level pass over the wanted elements."""
    for top in tops:
        _walk_top(c, top)


def _walk_top(c: _Collector, top) -> None:
    refs = c.refs
    for el in top.iter(_WANTED):
        tag = el.tag
        if tag == "a":
            # Anchors are most of the elements visited: inlined.
            href = el.get("href")
            if href is not None:
                if len(refs) < MAX_RAW_REFS:
                    rel = el.get("rel")
                    refs.append([href, "a", el, rel_tokens(rel) if rel else ()])
                else:
                    c.refs_over += 1
        elif tag == "img":
            src = el.get("src")
            if src is not None:
                alt = el.get("alt")
                c.images.append((src, None if alt is None else clip(alt, ALT_MAX)))
                c._add_ref(src, "img")
        elif tag in RESOURCE_ATTRS:
            c._add_ref(el.get(RESOURCE_ATTRS[tag]), tag)
        elif tag == "link":
            c._link(tag, el.attrib, el)
        elif tag == "meta":
            c._meta(tag, el.attrib, el)
        elif tag in HEADING_LEVELS:
            if len(c.headings) < MAX_HEADINGS:
                c.headings.append(HEADING_LEVELS[tag])
            if tag == "h1" and ((el.text or "").strip() or _STRING(el).strip()):
                c.h1_count += 1
        elif tag == "title":
            if _in(el, *FOREIGN_TAGS):
                continue
            c.title_count += 1
            if not _in(el, "head"):
                c.head_tags_in_body = True
            if c.title is None:
                c.title = _joined(el, TITLE_MAX)
        elif tag == "area":
            c._area(tag, el.attrib)
        elif tag == "base":
            c._base(tag, el.attrib)
        elif tag == "html":
            c._html(tag, el.attrib)


def _visible_words(tops: list) -> list[str]:
    """Words of the text outside head, script, style, noscript, template and title.

    Destructive: the hidden elements are cut out of the tree (their tails, which
    are outside them, stay), so it runs after everything else has been read.
    One XPath call then returns every remaining text node, in document order,
    across all the roots.
    """
    for top in tops:
        etree.strip_elements(top, *_HIDDEN, with_tail=False)
    return " ".join(_ALL_TEXT(tops[0])).split()


def _parse_events(collector: _Collector, text: str) -> None:
    parser = etree.HTMLParser(target=collector, recover=True, no_network=True)
    try:
        parser.feed(text)
        parser.close()
    except (etree.LxmlError, ValueError):
        # libxml2 gave up part-way (it reports rather than recovers from a few
        # input errors); the facts gathered so far still describe the page.
        collector.close()


def parse_html(
    body: bytes, url: str, *, http_charset: str | None = None, max_links: int = 2000
) -> PageFacts:
    """Extract the facts of one HTML page. Never raises for what the page contains."""
    collector = _Collector(url)
    source = _utf8_source(body, http_charset)
    if source is None:
        source, charset = decode_html(body, http_charset)
    else:
        charset = "utf-8"
    root = _tree(source) if source else None
    if root is None:
        if source:
            if isinstance(source, bytes):
                source = source.decode("utf-8")
            _parse_events(collector, source)
        return collector.facts(max_links, charset)
    tops = _tops(root)
    _walk(collector, tops)
    return collector.facts(max_links, charset, tops)
