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

What counts as a link and how text is measured lives in ``html_rules`` (caps,
URL attributes, resolution) and ``tree_text`` (anchor text, visible words);
``parse_bs4`` follows the same rules the obvious way, over a tree. Decoding is
``charset``'s, the content hash ``content_hash``'s, robots and Link-header
directives ``directives``'.
"""

from __future__ import annotations

from lxml import etree

from .anchors import TREE_UNSEARCHED_TAGS, AnchorSet
from .charset import decode_html, utf8_source
from .content_hash import content_hash
from .directives import robots_directives
from .html_rules import (
    ALT_MAX,
    ANCHOR_MAX,
    DESCRIPTION_MAX,
    FOREIGN_TAGS,
    HEADING_LEVELS,
    HIDDEN_TEXT_TAGS,
    HTML_SPACE,
    INERT_TAGS,
    LANG_MAX,
    MAX_CANONICALS,
    MAX_DESCRIPTIONS,
    MAX_HEADINGS,
    MAX_HREFLANG,
    MAX_IMAGES,
    MAX_RAW_REFS,
    META_MAX,
    RESOURCE_ATTRS,
    TITLE_MAX,
    URL_MAX,
    Resolver,
    TextBuffer,
    clip,
    image_name,
    image_url,
    is_shadow_root,
    media_urls,
    rel_tokens,
    resolve_url,
    settle_chunk,
)
from .html_tree import build_tree, feed_events, tree_tops
from .structured_data import MAX_BLOCKS, is_jsonld, judged
from .tree_text import AnchorText, has_ancestor, has_image_alt, joined_text, visible_text
from .types import Canonical, Image, Link, PageFacts
from .word_count import count_words

# ---------------------------------------------------------------- the parser target


class _SharedText:
    """The text of the anchors opened with no text between them (one buffer
    for a thousand nested anchors). Text goes only to the innermost group; a
    group that closes hands its text, at most a full buffer, to the group
    around it, so nesting costs each chunk one buffer, not one per anchor."""

    __slots__ = ("buf", "open")

    def __init__(self) -> None:
        self.buf = TextBuffer(ANCHOR_MAX)
        self.open = 0


class _Collector:
    """lxml parser target: turns the event stream into the facts of one page."""

    def __init__(self, url: str):
        self.url = url
        self.stack: list[str] = []
        self.sep = False  # an element boundary since the last text chunk
        self.hidden = 0  # open elements whose text is not visible body text
        self.in_head = 0
        self.foreign = 0
        self.inert = 0  # open INERT_TAGS
        self.templates: list[bool] = []  # open <template>s: whether each is inert (no shadow root)
        self.text: list[str] = []
        self.anchors: list[list | None] = []  # open <a>: their link record, or None
        # Open anchors' text groups, outermost first; only the last reads text.
        self.groups: list[_SharedText] = []
        self.fresh: _SharedText | None = None  # opened since the last text chunk
        self.need_alt: list[list] = []  # open anchor records without an alt yet
        self.h1_open: list[list[bool]] = []
        self.title_buf: TextBuffer | None = None
        self.title_depth = 0
        # Facts.
        self.base_href: str | None = None
        self.refs: list[list] = []  # [raw url, tag, text or TextBuffer, rel tokens, image alt]
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
        self.jsonld: list[str] = []  # JSON-LD blocks' text, in page order (structured_data caps them)
        self.jsonld_buf: list[str] | None = None  # the event path's open JSON-LD <script>
        self.ids = AnchorSet()  # what a fragment may name (crawler.anchors)

    # -- events -------------------------------------------------------------

    def start(self, tag: str, attrib) -> None:
        self.stack.append(tag)
        self.sep = True
        if attrib:
            searched = not self.inert and not self.templates  # UNSEARCHED_TAGS' content (a shadow root's too)
            self.ids.add(attrib.get("id"), searched)
            if tag == "a":
                self.ids.add(attrib.get("name"), searched)
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
        elif self.jsonld_buf is not None:
            self.jsonld_buf.append(chunk)
        self.fresh = None
        if self.groups and not self.groups[-1].buf.full:
            self.groups[-1].buf.add(settle_chunk(chunk, ANCHOR_MAX))
        if self.title_depth and self.title_buf is not None:
            self.title_buf.add(chunk)
        if self.h1_open and chunk.strip():
            for flag in self.h1_open:
                flag[0] = True

    def _boundary(self, *args) -> None:
        self.sep = True

    comment = pi = doctype = _boundary

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
            shared = self.fresh
            record = self._add_ref(href, "a", shared, rel_tokens(attrib.get("rel")))
            if record is not None:
                if shared is None:
                    shared = self.fresh = record[2] = _SharedText()
                    self.groups.append(shared)
                shared.open += 1
                record.append(None)  # alt of the first image inside, the fallback text
                self.need_alt.append(record)
        self.anchors.append(record)

    def _a_end(self, tag) -> None:
        if not self.anchors:
            return
        record = self.anchors.pop()
        if record is None:
            return
        # Anchors close in reverse order of opening, so this one's group and
        # record are last in their lists when they are there at all.
        shared = record[2]
        record[2] = shared.buf.value()
        shared.open -= 1
        if not shared.open and self.groups and self.groups[-1] is shared:
            self.groups.pop()
            if self.fresh is shared:
                self.fresh = None
            if self.groups and not self.groups[-1].buf.full and shared.buf.parts:
                # A full inner text settles the outer one too: cap + 2 is enough.
                self.groups[-1].buf.add("".join(shared.buf.parts))
        if self.need_alt and self.need_alt[-1] is record:
            self.need_alt.pop()

    def _area(self, tag, attrib) -> None:
        self._add_ref(
            attrib.get("href"), "area", clip(attrib.get("alt") or "", ANCHOR_MAX),
            rel_tokens(attrib.get("rel")),
        )

    def _img(self, tag, attrib) -> None:
        src = attrib.get("src")
        if self.inert:
            self._resource(tag, attrib)
            return
        alt = attrib.get("alt")
        if alt is not None:
            alt = clip(alt, ALT_MAX)
            if alt and self.need_alt:
                for record in self.need_alt:
                    record[4] = alt[:ANCHOR_MAX].rstrip()
                self.need_alt.clear()
            if alt and self.h1_open:  # a logo heading's alt text is its text
                for flag in self.h1_open:
                    flag[0] = True
        shown = image_url(src, attrib)
        self.images.append((shown or "", alt))
        self._resource(tag, attrib)

    def _resource(self, tag, attrib) -> None:
        self._add_ref(attrib.get(RESOURCE_ATTRS[tag]), tag)
        for url in media_urls(tag, attrib):
            self._add_ref(url, tag)

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
            if not (self.inert if element is None else has_ancestor(element, *INERT_TAGS)):
                self.meta_refresh = clip(attrib.get("content") or "", META_MAX)

    def _in_head(self, element) -> bool:
        """Inside <head>: from the open-element count, or a tree element's ancestors."""
        return self.in_head > 0 if element is None else has_ancestor(element, "head")

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
        if self.foreign or self.inert:
            return
        self.title_count += 1
        if not self.in_head:
            self.head_tags_in_body = True
        if self.title_buf is None:
            self.title_buf = TextBuffer(TITLE_MAX)
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

    def _inert_start(self, tag, attrib) -> None:
        if tag == "template":
            self.templates.append(not is_shadow_root(attrib))
            if not self.templates[-1]:
                return  # a shadow root's content is the page's
        self.hidden += 1
        self.inert += 1

    def _inert_end(self, tag) -> None:
        if tag == "template" and self.templates and not self.templates.pop():
            return
        self.hidden -= 1
        self.inert -= 1

    def _heading(self, tag, attrib) -> None:
        if self.inert:
            return
        if len(self.headings) < MAX_HEADINGS:
            self.headings.append(HEADING_LEVELS[tag])
        if tag == "h1":
            self.h1_open.append([False])

    def _h1_end(self, tag) -> None:
        if self.inert:
            return  # its start was passed over too
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
        anchor_text = None if tops is None else AnchorText(tops, self.refs)
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
                    if isinstance(text, _SharedText):  # never closed
                        text = text.buf.value()
                    text = text or record[4] or ""
                else:
                    text = anchor_text(text)
            rel = record[3]
            links.append(Link(url, tag, text, rel, "nofollow" in rel))

        images: list[Image] = []
        seen_images: set[tuple[str, str | None]] = set()
        for raw, alt in self.images:
            url = image_name(raw, resolve(raw) if raw else None)
            if (url, alt) in seen_images:
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

        text = "".join(self.text) if tops is None else visible_text(tops)
        words = text.split()
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
            word_count=count_words(text, words),
            content_hash=content_hash(words),
            meta_refresh=self.meta_refresh,
            head_tags_in_body=self.head_tags_in_body,
            viewport=self.viewport,
            base_url=base,
            structured_data=judged(self.jsonld),
            anchors=self.ids.value(),
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
    **dict.fromkeys(HIDDEN_TEXT_TAGS - {"head", "title"} - INERT_TAGS, _Collector._hide),
    **dict.fromkeys(INERT_TAGS, _Collector._inert_start),
    **dict.fromkeys(FOREIGN_TAGS, _Collector._foreign),
    **dict.fromkeys(HEADING_LEVELS, _Collector._heading),
}


def _script(self: _Collector, tag, attrib) -> None:
    # Both a resource and hidden text; a JSON-LD one's text is kept for structured_data.
    self._hide(tag, attrib)
    self._resource(tag, attrib)
    if is_jsonld(attrib.get("type")) and len(self.jsonld) < MAX_BLOCKS:
        self.jsonld_buf = []


def _script_end(self: _Collector, tag) -> None:
    self._hide_end(tag)
    if self.jsonld_buf is not None:
        self.jsonld.append("".join(self.jsonld_buf))
        self.jsonld_buf = None


_START["script"] = _script
_END = {
    "a": _Collector._a_end,
    "head": _Collector._head_end,
    "title": _Collector._title_end,
    "h1": _Collector._h1_end,
    **dict.fromkeys(HIDDEN_TEXT_TAGS - {"head", "title"} - INERT_TAGS, _Collector._hide_end),
    **dict.fromkeys(INERT_TAGS, _Collector._inert_end),
    **dict.fromkeys(FOREIGN_TAGS, _Collector._foreign_end),
    "script": _script_end,
}


# ---------------------------------------------------------------- the tree path

# Elements the tree walk looks at; everything else is passed over in C.
_WANTED = tuple(
    {"a", "area", "img", "link", "meta", "base", "html", "title", *RESOURCE_ATTRS, *HEADING_LEVELS}
)
# All text below an element as one string; whether it is blank needs no separators.
_STRING = etree.XPath("string()", smart_strings=False)


def _walk_top(c: _Collector, top, inert: bool) -> None:
    """Fill the collector from one top: one C-level pass. ``inert``: whether it holds INERT_TAGS (most don't)."""
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
            if not (inert and has_ancestor(el, *INERT_TAGS)):
                alt = el.get("alt")
                c.images.append((image_url(src, el) or "", None if alt is None else clip(alt, ALT_MAX)))
            c._resource(tag, el.attrib)
        elif tag in RESOURCE_ATTRS:
            c._resource(tag, el.attrib)
            if tag == "script" and is_jsonld(el.get("type")) and len(c.jsonld) < MAX_BLOCKS:
                c.jsonld.append(el.text or "")
        elif tag == "link":
            c._link(tag, el.attrib, el)
        elif tag == "meta":
            c._meta(tag, el.attrib, el)
        elif tag in HEADING_LEVELS:
            if inert and has_ancestor(el, *INERT_TAGS):
                continue
            if len(c.headings) < MAX_HEADINGS:
                c.headings.append(HEADING_LEVELS[tag])
            if tag == "h1" and ((el.text or "").strip() or _STRING(el).strip() or has_image_alt(el)):
                c.h1_count += 1
        elif tag == "title":
            if has_ancestor(el, *FOREIGN_TAGS) or inert and has_ancestor(el, *INERT_TAGS):
                continue
            c.title_count += 1
            if not has_ancestor(el, "head"):
                c.head_tags_in_body = True
            if c.title is None:
                c.title = joined_text(el, TITLE_MAX)
        elif tag == "area":
            c._area(tag, el.attrib)
        elif tag == "base":
            c._base(tag, el.attrib)
        elif tag == "html":
            c._html(tag, el.attrib)


def parse_html(
    body: bytes, url: str, *, http_charset: str | None = None, max_links: int = 2000
) -> PageFacts:
    """Extract the facts of one HTML page. Never raises for what the page contains."""
    collector = _Collector(url)
    source = utf8_source(body, http_charset)
    if source is None:
        source, charset = decode_html(body, http_charset)
    else:
        charset = "utf-8"
    root = build_tree(source) if source else None
    if root is None:
        if source:
            if isinstance(source, bytes):
                source = source.decode("utf-8")
            feed_events(collector, source)
        return collector.facts(max_links, charset)
    tops = tree_tops(root)
    for top in tops:
        unsearched = list(top.iter(*TREE_UNSEARCHED_TAGS))  # INERT_TAGS, and renamed shadow roots
        _walk_top(collector, top, any(el.tag in INERT_TAGS for el in unsearched))
        collector.ids.add_tree(top, unsearched)
    return collector.facts(max_links, charset, tops)
