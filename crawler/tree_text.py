"""Text read from an lxml tree: anchor texts and the visible words of a page."""

from __future__ import annotations

from lxml import etree

from .html_rules import ANCHOR_MAX, HIDDEN_TEXT_TAGS, TextBuffer, clip, joined_clip, settle_chunk

HIDDEN = tuple(HIDDEN_TEXT_TAGS)
# Every text node of the document (comments and processing instructions are
# not text nodes), as plain strings: several times faster than itertext().
_ALL_TEXT = etree.XPath("//text()", smart_strings=False)
_TEXT_BELOW = etree.XPath("descendant::text()", smart_strings=False)
# Text nodes a page's anchors may read with _TEXT_BELOW before AnchorText
# switches to one walk of the page (a usual page reads a few hundred).
ANCHOR_TEXT_NODES = 20_000


def has_ancestor(element, *tags: str) -> bool:
    for _ in element.iterancestors(*tags):
        return True
    return False


def has_image_alt(element) -> bool:
    """An ``<img>`` below ``element`` has non-blank alt text: a logo heading's name."""
    for img in element.iter("img"):
        alt = img.get("alt")
        if alt and not alt.isspace():
            return True
    return False


def joined_text(element, cap: int) -> str:
    """All text under ``element`` (comments are not text), whitespace-collapsed
    and clipped to ``cap``; reading stops once the clipped text is settled."""
    if not len(element):
        return clip(element.text or "", cap)
    buf = TextBuffer(cap)
    for chunk in element.itertext():
        buf.add(" ")
        buf.add(chunk)
        if buf.full:
            break
    return buf.value()


class AnchorText:
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
                text = joined_clip(chunks, ANCHOR_MAX)
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
        open_buffers: dict = {}  # anchor element -> its TextBuffer while it is open
        filling: list[TextBuffer] = []

        def add(chunk: str | None) -> None:
            nonlocal filling
            if chunk and filling and not chunk.isspace():
                chunk = settle_chunk(chunk, ANCHOR_MAX)
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
                    buf = open_buffers[node] = TextBuffer(ANCHOR_MAX)
                    filling.append(buf)
                if isinstance(node.tag, str):  # a comment's own text is not text
                    add(node.text)
                stack.append(node)
            while stack:
                close(stack.pop())
        return texts



def visible_text(tops: list) -> str:
    """The text outside head, script, style, noscript, template and title, its nodes joined by spaces.

    Destructive: the hidden elements are cut out of the tree (their tails, which
    are outside them, stay), so it runs after everything else has been read.
    One XPath call then returns every remaining text node, in document order,
    across all the roots.
    """
    for top in tops:
        etree.strip_elements(top, *HIDDEN, with_tail=False)
    return " ".join(_ALL_TEXT(tops[0]))
