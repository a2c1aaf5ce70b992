"""Fragments and the anchors they point at: what ``anchor_missing`` compares.

A page's anchors are the ``id`` of any element and the ``name`` of an ``<a>``
(the HTML standard's "indicated part of the document"). A link's fragment
names one of them, unless it means the top of the page (empty, ``top``), is a
text directive (``:~:text=``), an application's route (``#!/path``,
``#/path``) or a template's placeholder (``#{{slug}}``), which no element need carry: those are never judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from urllib.parse import unquote

from lxml import etree

from .html_rules import INERT_TAGS
from .html_tree import SHADOW_ROOT_TAG

# Anchors kept per page. A page with more is stored without them (None), and
# links into it are not judged: a missing anchor is then a guess, not a finding.
MAX_ANCHORS = 5000
# Longer ids are not kept, and longer fragments not judged (nothing to compare them with).
ANCHOR_MAX = 512
# Characters of anchors kept per page (a row, and what finalize holds of a target at once); past it, none.
ANCHOR_CHARS_MAX = 100_000
# Fragments kept per link target, and per page: a page of "#" links to every
# paragraph of another stays a bounded row.
MAX_FRAGMENTS_PER_TARGET = 50
MAX_FRAGMENTS_PER_PAGE = 1000
# Tags whose fragments a visitor follows.
FRAGMENT_TAGS = frozenset({"a", "area"})
# The fragment directive's delimiter (text fragments): what follows is no anchor.
DIRECTIVE = ":~:"
# A template's placeholders (Mustache, Jinja, JavaScript, ERB), as written or percent-encoded: a link
# in a <template> or a page's unrendered markup, which nobody follows as it stands.
PLACEHOLDERS = ("{{", "{%", "${", "<%", "%7B%7B", "%7b%7b", "%7B%25", "%7b%25", "$%7B", "$%7b", "%3C%25", "%3c%25")

# At most this many attribute values leave libxml2 per top: a page of a million ids costs a list of
# pointers in C, not a million Python strings. Past it, the page keeps no anchors.
READ_MAX = 2 * MAX_ANCHORS
_IDS = etree.XPath(f"(descendant-or-self::*/@id | descendant-or-self::a/@name)[position() <= {READ_MAX}]",
                   smart_strings=False)
# Elements whose content is outside the document a fragment searches: a <template>'s (a shadow root's
# too: fragments do not reach into shadow trees), and a <noscript>'s, which is text where scripts run.
# In a built tree a shadow root's template is renamed.
UNSEARCHED_TAGS = INERT_TAGS
TREE_UNSEARCHED_TAGS = (*INERT_TAGS, SHADOW_ROOT_TAG)
_IDS_BELOW = etree.XPath(f"(descendant::*/@id | descendant::a/@name)[position() <= {READ_MAX}]",
                         smart_strings=False)


class AnchorSet:
    """A page's anchors as a parse collects them: capped, and None once past the cap."""

    __slots__ = ("found", "over", "read")

    def __init__(self) -> None:
        self.found: set[str] = set()
        self.over = False
        self.read = 0  # attribute values seen, repeats, unusable and unsearched ones included (READ_MAX)

    def add(self, value: str | None, searched: bool = True) -> None:
        """One id or <a name> value; ``searched``: False inside UNSEARCHED_TAGS (read, counted, not kept)."""
        if value is None or self.over:
            return
        self.read += 1
        if searched and _usable(value):
            self.found.add(value)
        self._settle()

    def _settle(self) -> None:
        if self.read >= READ_MAX or len(self.found) > MAX_ANCHORS:
            self.over = True
            self.found = set()

    def add_tree(self, top, unsearched: Sequence = ()) -> None:
        """Every anchor below one top of a parsed tree, read in C, but those inside ``unsearched``: the top's
        TREE_UNSEARCHED_TAGS elements, as the parse found them (nested ones included)."""
        if self.over:
            return
        values = _IDS(top)
        self.read += len(values)
        outermost = [el for el in unsearched if next(el.iterancestors(*TREE_UNSEARCHED_TAGS), None) is None]
        if outermost and self.read < READ_MAX and (
                hidden := Counter(v for el in outermost for v in _IDS_BELOW(el))):
            # An id inside and again outside is still the page's: one occurrence taken off per hidden one.
            counts = Counter(values)
            counts.subtract(hidden)
            values = [value for value, left in counts.items() if left > 0]
        self.found.update(filter(_usable, values))
        self._settle()

    def value(self) -> tuple[str, ...] | None:
        if self.over or sum(map(len, self.found)) + len(self.found) > ANCHOR_CHARS_MAX:
            return None
        return tuple(sorted(self.found))


def _usable(value: str) -> bool:
    """An id a fragment can name and a row can keep: not empty, not too long, no newline (the row's separator)
    or NUL (PostgreSQL refuses it)."""
    return bool(value) and len(value) <= ANCHOR_MAX and "\n" not in value and "\x00" not in value


def judged_fragment(url: str) -> str | None:
    """The fragment of ``url`` a target page must carry, or None when there is none to judge."""
    _, hashed, fragment = url.partition("#")
    if not hashed:
        return None
    fragment = fragment.split(DIRECTIVE, 1)[0]
    if not fragment or fragment.lower() == "top" or fragment[0] in "!/" or len(fragment) > ANCHOR_MAX \
            or "\n" in fragment or "\x00" in fragment or any(mark in fragment for mark in PLACEHOLDERS):
        return None
    return fragment


def indicated(fragment: str, anchors: frozenset[str] | set[str]) -> bool:
    """Whether ``fragment`` names an anchor, as a browser finds it: as written, then percent-decoded."""
    if fragment in anchors:
        return True
    if "%" not in fragment:
        return False
    try:
        decoded = unquote(fragment, errors="strict")
    except UnicodeDecodeError:
        return False
    return decoded in anchors or decoded.lower() == "top"


def stored(anchors: tuple[str, ...] | None) -> str | None:
    """A page's anchors as its row keeps them: one per line, None when not known."""
    return None if anchors is None else "\n".join(anchors)


def loaded(text: str | None) -> tuple[str, ...] | None:
    """The anchors of a stored row (``stored``)."""
    return None if text is None else tuple(filter(None, text.split("\n")))
