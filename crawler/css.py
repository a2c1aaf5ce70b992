"""Link targets of a stylesheet: ``url(...)`` references and ``@import``.

Read with tinycss2, the CSS Syntax tokenizer, so comments, strings and escapes
follow the spec; a regex would find ``url()`` inside comments and miss escaped
ones. No Django: the audit and the library crawl can both use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import tinycss2
from tinycss2.ast import (
    AtRule,
    CurlyBracketsBlock,
    FunctionBlock,
    Node,
    ParenthesesBlock,
    QualifiedRule,
    SquareBracketsBlock,
    StringToken,
    URLToken,
)
from tinycss2.bytes import decode_stylesheet_bytes

from crawler.types import Link
from crawler.urls import InvalidURL, normalize

CSS_TAG = "css"
IMPORT_TAG = "css-import"
CSS_TYPE = "text/css"
# Link targets read from one stylesheet; icon-font and sprite sheets stay far below.
MAX_CSS_LINKS = 500
# At-rules whose prelude names something that is not fetched (@namespace's
# identifier, the legacy @document's match conditions).
_NOT_FETCHED = frozenset({"namespace", "document", "-moz-document"})
_BLOCKS = (CurlyBracketsBlock, ParenthesesBlock, SquareBracketsBlock)
# In image-set() a plain string is a URL too.
_IMAGE_SETS = frozenset({"image-set", "-webkit-image-set"})


def decode_css(body: bytes, charset: str | None) -> str:
    """A stylesheet's text: BOM, then the HTTP charset, then @charset, else UTF-8 (CSS Syntax 3.2)."""
    text, _ = decode_stylesheet_bytes(body, protocol_encoding=charset)
    return text


def css_links(text: str, base_url: str, limit: int) -> list[Link]:
    """The absolute targets of ``text``, one per (URL, tag), at most ``limit``, in order.

    ``@import`` targets have the tag ``css-import``, every other ``url()`` the
    tag ``css``. data: URLs, fragment-only references (``url(#clip)``, into
    the document using the style) and anything not an http(s) address are left
    out.
    """
    links: list[Link] = []
    seen: set[tuple[str, str]] = set()
    if limit <= 0:
        return links
    for raw, tag in _references(tinycss2.parse_stylesheet(text, skip_comments=True, skip_whitespace=True)):
        raw = raw.strip()
        if not raw or raw.startswith("#") or raw[:5].lower() == "data:":
            continue
        try:
            url = normalize(raw, base_url)
        except InvalidURL:
            continue
        if (url, tag) in seen:
            continue
        seen.add((url, tag))
        links.append(Link(url, tag))
        if len(links) >= limit:
            break
    return links


def _references(rules: Iterable[Node]) -> Iterator[tuple[str, str]]:
    for rule in rules:
        if isinstance(rule, AtRule):
            keyword = rule.lower_at_keyword
            if keyword == "import":
                # Only the first token is the target; the rest are media/layer/supports conditions.
                first = next((t for t in rule.prelude if t.type != "whitespace"), None)
                target = _url_of(first) if first is not None else None
                if target is None and isinstance(first, StringToken):
                    target = first.value
                if target is not None:
                    yield target, IMPORT_TAG
                continue
            if keyword not in _NOT_FETCHED:
                yield from _urls(rule.prelude)
            yield from _urls(rule.content or ())
        elif isinstance(rule, QualifiedRule):
            yield from _urls(rule.prelude)
            yield from _urls(rule.content)


def _urls(tokens: Iterable[Node]) -> Iterator[tuple[str, str]]:
    """Every url() in a token list, nested blocks and functions included."""
    for token in tokens:
        target = _url_of(token)
        if target is not None:
            yield target, CSS_TAG
        elif isinstance(token, FunctionBlock):
            if token.lower_name in _IMAGE_SETS:
                yield from ((t.value, CSS_TAG) for t in token.arguments if isinstance(t, StringToken))
            yield from _urls(token.arguments)
        elif isinstance(token, _BLOCKS):
            yield from _urls(token.content)


def _url_of(token: Node) -> str | None:
    """The target of ``url(x)`` (an URLToken) or ``url("x")`` (a url function with a string)."""
    if isinstance(token, URLToken):
        return token.value
    if isinstance(token, FunctionBlock) and token.lower_name in ("url", "src"):
        strings = [t for t in token.arguments if isinstance(t, StringToken)]
        return strings[0].value if strings else None
    return None
