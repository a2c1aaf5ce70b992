"""libxml2's tree of an HTML page, for ``parse`` to walk; None when libxml2 stopped before the end."""

from __future__ import annotations

import threading

from lxml import etree

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


def build_tree(source: str | bytes):
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
