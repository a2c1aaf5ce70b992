"""The reference extraction: the same PageFacts as ``parse.parse_html``, via BeautifulSoup.

Written to be obviously right rather than fast: build the whole tree, then ask
it one question per fact. The parity test holds the one-pass parser to this
answer, and the benchmark measures the parser against it. It shares with
``parse`` only the leaf rules (decoding, URL resolution, clipping, robots
directives, the text hash), which have their own tests.
"""

from __future__ import annotations

import warnings

from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning
from bs4.element import NavigableString, PreformattedString, Tag

from .anchors import UNSEARCHED_TAGS, AnchorSet
from .charset import decode_html
from .content_hash import content_hash
from .directives import robots_directives
from .html_rules import (
    ALT_MAX,
    ANCHOR_MAX,
    DESCRIPTION_MAX,
    FOREIGN_TAGS,
    HEADING_LEVELS,
    HIDDEN_TEXT_TAGS,
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
    clip,
    image_name,
    image_url,
    is_shadow_root,
    joined_clip,
    media_urls,
    rel_tokens,
    resolve_url,
)
from .structured_data import is_jsonld, judged
from .types import Canonical, Image, Link, PageFacts
from .word_count import count_words


def _strings(tag: Tag) -> list[str]:
    """Every text node under ``tag`` (comments and doctypes are not text)."""
    return [s for s in tag.find_all(string=True) if not isinstance(s, PreformattedString)]


def _text(tag: Tag) -> str:
    return " ".join(_strings(tag))


def _anchor_text(tag: Tag) -> str:
    # Read only until the clipped text is settled: anchors nest, and each one
    # joining all the text below it made nested anchors quadratic.
    strings = (
        node
        for node in tag.descendants
        if isinstance(node, NavigableString) and not isinstance(node, PreformattedString)
    )
    return joined_clip(strings, ANCHOR_MAX)


def _image_alt(tag: Tag) -> bool:
    """An image below ``tag`` has non-blank alt text: a logo heading's name."""
    return any((img.get("alt") or "").strip() for img in tag.find_all("img"))


def _rel(tag: Tag) -> tuple[str, ...]:
    rel = tag.get("rel")
    if isinstance(rel, list):
        rel = " ".join(rel)
    return rel_tokens(rel)


def _in_head(tag: Tag) -> bool:
    return tag.find_parent("head") is not None


def _in_foreign(tag: Tag) -> bool:
    return any(parent.name in FOREIGN_TAGS for parent in tag.parents)


def _inert(tag) -> bool:
    return any(_hides(parent, INERT_TAGS) for parent in tag.parents)


def _hides(parent: Tag, tags) -> bool:
    """Whether ``parent`` is one of ``tags`` whose content is not shown (a shadow-root <template>'s is)."""
    return parent.name in tags and not (parent.name == "template" and is_shadow_root(parent.attrs))


def _meta_name(tag: Tag) -> str:
    return (tag.get("name") or "").strip().lower()


def parse_html_bs4(
    body: bytes, url: str, *, http_charset: str | None = None, max_links: int = 2000
) -> PageFacts:
    text, charset = decode_html(body, http_charset)
    with warnings.catch_warnings():
        # Pages that start with <?xml ...> are still parsed as HTML, on purpose.
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(text, "lxml")
    tags = soup.find_all(True)

    base = url
    for tag in soup.find_all("base"):
        if tag.get("href") is not None:
            base = resolve_url(url, tag["href"]) or url
            break

    resolve = Resolver(base)
    # References in document order, before resolution, as (raw url, tag, text, rel).
    refs: list[tuple[str, str, str, tuple[str, ...]]] = []
    for tag in tags:
        if tag.name == "a" and tag.get("href") is not None:
            anchor_text = _anchor_text(tag)
            if not anchor_text:
                for img in tag.find_all("img"):
                    alt = clip(img.get("alt") or "", ANCHOR_MAX)
                    if alt:
                        anchor_text = alt
                        break
            refs.append((tag["href"], "a", anchor_text, _rel(tag)))
        elif tag.name == "area" and tag.get("href") is not None:
            refs.append((tag["href"], "area", clip(tag.get("alt") or "", ANCHOR_MAX), _rel(tag)))
        elif tag.name == "link" and tag.get("href") is not None and "stylesheet" in _rel(tag):
            refs.append((tag["href"], "link", "", _rel(tag)))
        elif tag.name in RESOURCE_ATTRS:
            if tag.get(RESOURCE_ATTRS[tag.name]) is not None:
                refs.append((tag[RESOURCE_ATTRS[tag.name]], tag.name, "", ()))
            refs.extend((url, tag.name, "", ()) for url in media_urls(tag.name, tag))
    dropped = max(0, len(refs) - MAX_RAW_REFS)
    links: list[Link] = []
    seen: set[tuple[str, str]] = set()
    for raw, name, anchor_text, rel in refs[:MAX_RAW_REFS]:
        target = resolve(raw)
        if target is None or (target, name) in seen:
            continue
        seen.add((target, name))
        if len(links) < max_links:
            links.append(Link(target, name, anchor_text, rel, "nofollow" in rel))
        else:
            dropped += 1

    images: list[Image] = []
    for img in soup.find_all("img"):
        if len(images) >= MAX_IMAGES or _inert(img):
            continue
        shown = image_url(img.get("src"), img) or ""
        target = image_name(shown, resolve(shown) if shown else None)
        alt = None if img.get("alt") is None else clip(img["alt"], ALT_MAX)
        if Image(target, alt) not in images:
            images.append(Image(target, alt))

    titles = [t for t in soup.find_all("title") if not _in_foreign(t) and not _inert(t)]
    metas = soup.find_all("meta")
    descriptions = [m for m in metas if _meta_name(m) == "description"]
    robots_metas = [m for m in metas if _meta_name(m) in ("robots", "googlebot")]
    robots: set[str] = set()
    for meta in robots_metas:
        robots |= robots_directives(meta.get("content"))
    refreshes = [m for m in metas if (m.get("http-equiv") or "").strip().lower() == "refresh" and not _inert(m)]

    link_tags = soup.find_all("link")
    canonicals = [
        Canonical(t["href"].strip(" \t\n\r\x0c")[:URL_MAX], _in_head(t))
        for t in link_tags
        if "canonical" in _rel(t) and t.get("href") is not None
    ]
    alternates = [
        (t["hreflang"], t["href"])
        for t in link_tags
        if "alternate" in _rel(t) and t.get("hreflang") is not None and t.get("href") is not None
    ]
    hreflang = []
    for lang, raw in alternates[:MAX_HREFLANG]:
        target = resolve(raw)
        if target is not None:
            hreflang.append((clip(lang, LANG_MAX), target))

    html = soup.find("html")
    lang = clip(html.get("lang") or "", LANG_MAX) if html is not None else ""

    visible = [
        s
        for s in soup.find_all(string=True)
        if not isinstance(s, PreformattedString)
        and not any(_hides(parent, HIDDEN_TEXT_TAGS) for parent in s.parents)
    ]
    text = " ".join(visible)
    words = text.split()

    anchors = AnchorSet()
    for tag in tags:
        searched = not any(parent.name in UNSEARCHED_TAGS for parent in tag.parents)
        anchors.add(tag.get("id"), searched)
        if tag.name == "a":
            anchors.add(tag.get("name"), searched)
    return PageFacts(
        title=clip(_text(titles[0]), TITLE_MAX) if titles else None,
        title_count=len(titles),
        descriptions=tuple(clip(m.get("content") or "", DESCRIPTION_MAX) for m in descriptions)[
            :MAX_DESCRIPTIONS
        ],
        robots=frozenset(robots),
        canonicals=tuple(canonicals[:MAX_CANONICALS]),
        h1_count=sum(1 for h in soup.find_all("h1") if not _inert(h) and (_text(h).strip() or _image_alt(h))),
        headings=tuple(HEADING_LEVELS[h.name] for h in soup.find_all(list(HEADING_LEVELS)) if not _inert(h))[
            :MAX_HEADINGS
        ],
        links=tuple(links),
        links_dropped=dropped,
        images=tuple(images),
        hreflang=tuple(hreflang),
        charset=charset,
        lang=lang or None,
        word_count=count_words(text, words),
        content_hash=content_hash(words),
        meta_refresh=clip(refreshes[0].get("content") or "", META_MAX) if refreshes else None,
        head_tags_in_body=any(not _in_head(t) for t in titles + descriptions + robots_metas),
        viewport=any(_meta_name(m) == "viewport" for m in metas),
        base_url=base,
        structured_data=judged([t.get_text() for t in soup.find_all("script") if is_jsonld(t.get("type"))]),
        anchors=anchors.value(),
    )
