"""Sitemap discovery: robots.txt ``Sitemap:`` lines or ``/sitemap.xml``,
sitemap indexes, gzip, with caps on files, depth, bytes and URLs.

Sitemaps come from the site, so they are hostile input: the XML parser
resolves no entities, loads no DTD and touches no network (no XXE, no
billion laughs), gzip is inflated with a bounded ``decompressobj`` so a bomb
stops at the byte cap, and a broken file is reported, never fatal.
"""

from __future__ import annotations

import itertools
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lxml import etree

from .types import FetchError
from .urls import InvalidURL, normalize, origin_of

if TYPE_CHECKING:
    from .fetch import Fetcher

__all__ = ["SitemapFile", "SitemapReport", "discover_sitemaps", "parse_sitemap"]

# The sitemaps.org limits: 50,000 URLs and 50 MiB uncompressed per file.
MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
MAX_FILES = 50
# Robots-listed (or /sitemap.xml) files are depth 1; an index at depth 3 is
# reported but not followed, which stops index -> index -> ... chains.
MAX_DEPTH = 3

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 64 * 1024
_MAX_PROBLEM = 200


@dataclass(frozen=True)
class SitemapFile:
    """One sitemap file read: ``kind`` is urlset, index, invalid or unreachable;
    ``url_count`` is how many ``<loc>`` entries it listed (URLs or child sitemaps);
    ``problem`` is empty when nothing was wrong."""

    url: str
    status: int | None
    kind: str
    url_count: int
    problem: str = ""


@dataclass(frozen=True)
class SitemapReport:
    """URLs found (normalised, on the crawl origin, deduplicated, at most the URL
    cap), every file read, and whether the site has a sitemap at all (robots.txt
    names one, or ``/sitemap.xml`` answered with one). ``problems`` holds notes
    about the discovery as a whole (a cap reached)."""

    urls: tuple[str, ...]
    files: tuple[SitemapFile, ...]
    found: bool
    problems: tuple[str, ...] = ()


class _TooLarge(Exception):
    pass


_INFLATE_ERRORS = (_TooLarge, zlib.error, EOFError)
_BLANK = b"\xef\xbb\xbf \t\r\n"


def _inflate_problem(exc: Exception, max_bytes: int) -> str:
    if isinstance(exc, _TooLarge):
        return f"decompresses to more than {max_bytes} bytes"
    return f"corrupt gzip data ({exc})"[:_MAX_PROBLEM]


def parse_sitemap(
    data: bytes, *, max_bytes: int = MAX_BYTES, max_urls: int = MAX_URLS
) -> tuple[str, list[str], str]:
    """Read one sitemap file: ``(kind, locs, problem)``.

    ``kind`` is ``urlset`` (page URLs), ``index`` (child sitemap URLs) or
    ``invalid``. gzip is recognised by its magic bytes whatever the file is
    called. A plain-text sitemap (one URL per line) counts as a urlset. ``locs``
    are the ``<loc>`` texts as written, at most ``max_urls`` of them; a malformed
    file keeps the locs read before the error and says what went wrong.
    """
    gzipped = data[:2] == _GZIP_MAGIC
    if not gzipped and len(data) > max_bytes:
        return "invalid", [], f"larger than {max_bytes} bytes"
    chunks = _inflate(data, max_bytes) if gzipped else _slices(data)
    # Look at the first non-blank byte to tell XML from a list of URLs.
    head = b""
    try:
        for chunk in chunks:
            head += chunk
            if head.lstrip(_BLANK) or len(head) > 4096:
                break
    except _INFLATE_ERRORS as exc:
        return "invalid", [], _inflate_problem(exc, max_bytes)
    start = head.lstrip(_BLANK)
    if not start:
        return "invalid", [], "empty file"
    if not start.startswith(b"<"):
        try:
            text = head + b"".join(chunks)
        except _INFLATE_ERRORS as exc:
            return "invalid", [], _inflate_problem(exc, max_bytes)
        return _parse_text(text, max_urls)
    return _parse_xml(itertools.chain((head,), chunks), max_urls, max_bytes)


def _slices(data: bytes) -> Iterator[bytes]:
    # Feeding the parser in slices lets entries be dropped as they are read,
    # instead of lxml building the tree of a 50 MiB file first.
    for offset in range(0, len(data), _CHUNK):
        yield data[offset : offset + _CHUNK]


def _inflate(data: bytes, max_bytes: int) -> Iterator[bytes]:
    """gzip-decode ``data`` in chunks, never holding more than ``max_bytes`` + 1
    decoded bytes in total; raises _TooLarge past the cap."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    produced = 0
    for offset in range(0, len(data), _CHUNK):
        pending = data[offset : offset + _CHUNK]
        while pending and not inflater.eof:
            out = inflater.decompress(pending, min(_CHUNK, max_bytes + 1 - produced))
            produced += len(out)
            if produced > max_bytes:
                raise _TooLarge
            if out:
                yield out
            pending = inflater.unconsumed_tail
        if inflater.eof:
            return
    raise EOFError("gzip stream is truncated")


def _parser() -> etree.XMLPullParser:
    # resolve_entities=False: entity references stay references (no billion
    # laughs, no file:// contents); load_dtd/no_network: no external DTD or
    # entity is ever fetched; huge_tree=False keeps libxml2's depth/size limits.
    # Only <loc> end events reach Python, which keeps 50,000 entries fast.
    return etree.XMLPullParser(
        events=("end",),
        tag=("{*}loc",),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )


_KINDS = {"urlset": ("urlset", "url"), "sitemapindex": ("index", "sitemap")}


def _split_tag(tag: object) -> tuple[str, str]:
    if not isinstance(tag, str):
        return "", ""  # comments, processing instructions, entity references
    namespace, _, local = tag.rpartition("}")
    return namespace, local


def _parse_xml(
    chunks: Iterator[bytes], max_urls: int, max_bytes: int
) -> tuple[str, list[str], str]:
    parser = _parser()
    kind = ""
    root = None
    locs: list[str] = []
    skipped = 0
    try:
        for chunk in chunks:
            parser.feed(chunk)
            for _, loc in parser.read_events():
                entry = loc.getparent()
                parent = entry.getparent() if entry is not None else None
                # Only /urlset/url/loc or /sitemapindex/sitemap/loc in one
                # namespace count: <image:loc> and friends are not pages.
                if parent is None or parent.getparent() is not None:
                    continue
                namespace, root_name = _split_tag(parent.tag)
                if root is None:
                    if root_name not in _KINDS:
                        return "invalid", [], _not_a_sitemap(root_name)
                    root, kind = parent, _KINDS[root_name][0]
                if _split_tag(entry.tag) != (namespace, _KINDS[root_name][1]):
                    continue
                if _split_tag(loc.tag)[0] != namespace:
                    continue
                # A <loc> holding an entity reference or markup is not a URL.
                text = (loc.text or "").strip() if len(loc) == 0 else ""
                if not text:
                    skipped += 1
                elif len(locs) >= max_urls:
                    return kind, locs, f"more than {max_urls} URLs; the rest were not read"
                else:
                    locs.append(text)
                # Entries already read are dropped so memory stays flat.
                while entry.getprevious() is not None:
                    del parent[0]
        last = parser.close()
    except etree.XMLSyntaxError as exc:
        return "invalid", locs, f"malformed XML: {exc}"[:_MAX_PROBLEM]
    except _INFLATE_ERRORS as exc:
        return "invalid", locs, _inflate_problem(exc, max_bytes)
    if not kind:
        root_name = _split_tag(last.tag)[1] if last is not None else ""
        if root_name not in _KINDS:
            return "invalid", [], _not_a_sitemap(root_name)
        kind = _KINDS[root_name][0]
    return kind, locs, f"{skipped} <loc> entries without a usable URL" if skipped else ""


def _not_a_sitemap(root_name: str) -> str:
    return f"root element <{root_name[:40]}> is not <urlset> or <sitemapindex>"


def _parse_text(data: bytes, max_urls: int) -> tuple[str, list[str], str]:
    locs: list[str] = []
    for line in data.decode("utf-8-sig", errors="replace").splitlines():
        line = line.strip()
        if not line.lower().startswith(("http://", "https://")):
            continue
        if len(locs) >= max_urls:
            return "urlset", locs, f"more than {max_urls} URLs; the rest were not read"
        locs.append(line)
    if not locs:
        return "invalid", [], "neither XML nor a list of URLs"
    return "urlset", locs, ""


async def discover_sitemaps(
    fetcher: Fetcher,
    origin: str,
    robots_sitemaps: Iterable[str],
    *,
    max_urls: int = MAX_URLS,
    max_files: int = MAX_FILES,
    max_bytes: int = MAX_BYTES,
) -> SitemapReport:
    """Read the site's sitemaps breadth-first and collect its page URLs.

    Starts from ``robots_sitemaps`` (which may be on other hosts: robots.txt
    may point anywhere) or, when robots.txt names none, ``/sitemap.xml``, whose
    absence (4xx, or an HTML page served in its place) just means no sitemap.
    Child sitemaps of an index must be on ``origin``. Page URLs on another
    origin are reported as a problem and not collected. Files are read one at
    a time; ``max_bytes`` caps each file (on the wire and decompressed).
    """
    origin = origin_of(origin)
    files: list[SitemapFile] = []
    notes: list[str] = []
    urls: dict[str, None] = {}
    queue: deque[tuple[str, int, bool]] = deque()
    seen: set[str] = set()
    for raw in robots_sitemaps:
        try:
            # A relative Sitemap line is read against the robots.txt it came from.
            url = normalize(raw, origin + "/robots.txt")
        except InvalidURL as exc:
            files.append(SitemapFile(raw[:2048], None, "invalid", 0, f"invalid URL: {exc}"))
            continue
        if url not in seen:
            seen.add(url)
            queue.append((url, 1, False))
    found = bool(queue) or bool(files)
    if not found:
        queue.append((origin + "/sitemap.xml", 1, True))

    while queue:
        if len(urls) >= max_urls:
            # Reading more files would only cost requests: nothing more is kept.
            notes.append(f"{len(queue)} sitemap files were not read after the URL cap")
            break
        if len(files) >= max_files:
            notes.append(f"only {max_files} sitemap files were read; {len(queue)} more were not")
            break
        url, depth, fallback = queue.popleft()
        result = await fetcher.fetch(url, keep_body=True, max_bytes=max_bytes)
        status = result.status
        if result.error in (FetchError.BODY_TOO_LARGE, FetchError.DECOMPRESSION_LIMIT):
            files.append(SitemapFile(url, status, "invalid", 0, f"larger than {max_bytes} bytes"))
            continue
        if result.error is not None:
            problem = result.error_detail or result.error.label
            files.append(SitemapFile(url, status, "unreachable", 0, problem[:_MAX_PROBLEM]))
            continue
        if status is None or not 200 <= status < 300:
            if fallback and status is not None and 400 <= status < 500:
                continue
            files.append(SitemapFile(url, status, "unreachable", 0, f"answered {status}"))
            continue
        kind, locs, problem = parse_sitemap(
            result.body or b"", max_bytes=max_bytes, max_urls=max_urls
        )
        if fallback and kind == "invalid" and result.is_html:
            # Many sites answer unknown paths with their home page.
            continue
        found = True
        problems = [problem] if problem else []
        if kind == "index":
            problems += _queue_children(locs, origin, depth, seen, queue)
        elif kind == "urlset":
            capped, more = _collect(locs, origin, urls, max_urls)
            problems += more
            if capped:
                notes.append(f"the cap of {max_urls} sitemap URLs was reached")
        files.append(SitemapFile(url, status, kind, len(locs), "; ".join(problems)[:400]))
    return SitemapReport(tuple(urls), tuple(files), found, tuple(notes))


def _queue_children(
    locs: list[str],
    origin: str,
    depth: int,
    seen: set[str],
    queue: deque[tuple[str, int, bool]],
) -> list[str]:
    invalid = foreign = 0
    for loc in locs:
        try:
            child = normalize(loc)
        except InvalidURL:
            invalid += 1
            continue
        if not _on_origin(child, origin):
            foreign += 1
            continue
        if child in seen:
            continue
        if depth >= MAX_DEPTH:
            return [f"index nested deeper than {MAX_DEPTH} levels; its children were not read"]
        seen.add(child)
        queue.append((child, depth + 1, False))
    problems = []
    if invalid:
        problems.append(f"{invalid} invalid sitemap URLs")
    if foreign:
        problems.append(f"{foreign} sitemaps outside {origin} not read")
    return problems


def _collect(
    locs: list[str], origin: str, urls: dict[str, None], max_urls: int
) -> tuple[bool, list[str]]:
    invalid = foreign = 0
    capped = False
    for loc in locs:
        try:
            url = normalize(loc)
        except InvalidURL:
            invalid += 1
            continue
        if not _on_origin(url, origin):
            foreign += 1
            continue
        if url in urls:
            continue
        if len(urls) >= max_urls:
            capped = True
            break
        urls[url] = None
    problems = []
    if invalid:
        problems.append(f"{invalid} invalid URLs")
    if foreign:
        problems.append(f"{foreign} URLs outside {origin} ignored")
    if capped:
        problems.append(f"URL cap of {max_urls} reached; the rest were ignored")
    return capped, problems


def _on_origin(normal: str, origin: str) -> bool:
    return normal.startswith(origin) and normal[len(origin) : len(origin) + 1] == "/"
