"""libxml2 reading an HTML page for ``parse``: its tree (None when libxml2 stopped before the end), ready to walk, or its events."""

from __future__ import annotations

import threading

from lxml import etree

from .html_rules import is_shadow_root

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


# What a shadow-root <template> is renamed to in the tree, so that it holds ordinary content.
SHADOW_ROOT_TAG = "siteward-shadow-root"


def tree_tops(root) -> list:
    """The document's top-level elements, ready to walk: libxml2 reopens ``<html>`` for content
    after ``</html>``, which the tree keeps as further roots, in order. A shadow-root ``<template>``
    is renamed on the way (SHADOW_ROOT_TAG): to every rule that reads a tree it is shown content."""
    tops = [root]
    for sibling in root.itersiblings():
        if isinstance(sibling.tag, str):
            tops.append(sibling)
    for top in tops:
        for template in top.iter("template"):
            if is_shadow_root(template.attrib):
                template.tag = SHADOW_ROOT_TAG
    return tops


def feed_events(target, text: str) -> None:
    """Read ``text`` with libxml2's event parser into ``target`` (a parser target with ``close``): any depth,
    flat memory. Where libxml2 gives up part-way (it reports rather than recovers from a few input
    errors), ``target`` is closed: what it gathered so far still describes the page."""
    parser = etree.HTMLParser(target=target, recover=True, no_network=True)
    try:
        parser.feed(text)
        parser.close()
    except (etree.LxmlError, ValueError):
        target.close()
