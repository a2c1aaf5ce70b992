"""Sitemap discovery: robots.txt ``Sitemap:`` lines or ``/sitemap.xml``,
sitemap indexes, gzip, with caps on files, depth, bytes and URLs.

Sitemaps come from the site, so they are hostile input: the XML parser
resolves no entities, loads no DTD and touches no network (no XXE, no
billion laughs), gzip is inflated with a bounded ``decompressobj`` so a bomb
stops at the byte cap, and a broken file is reported, never fatal.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import re
import tempfile
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from lxml import etree

from .types import FetchError
from .urls import InvalidURL, normalize, origin_of

if TYPE_CHECKING:
    from .fetch import Fetcher
    from .types import FetchResult

__all__ = ["SitemapFile", "SitemapReport", "discover_sitemaps", "parse_sitemap"]

# The sitemaps.org limits: 50,000 URLs and 50 MiB uncompressed per file.
MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
MAX_FILES = 50
# Robots-listed (or /sitemap.xml) files are depth 1; an index at depth 3 is
# reported but not followed, which stops index -> index -> ... chains.
MAX_DEPTH = 3
# Discovery as a whole must end well inside the start task's timeout: one
# tarpit file already costs a full fetch deadline, so a budget bounds the sum.
MAX_SECONDS = 60.0
# A site whose sitemaps time out or refuse connections several times in a row
# is not going to answer the next one either.
MAX_FAILURES_IN_A_ROW = 3
# Entries with no usable <loc> cost parsing but give nothing, so a file of
# them is abandoned instead of read to the byte cap.
MAX_EMPTY_ENTRIES = 10_000

# A sitemap file is read into memory up to this, and spills to a temporary file past it.
SPOOL_BYTES = 1024 * 1024

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 64 * 1024
_MAX_PROBLEM = 200
# A line of a text sitemap longer than this is no URL (they stop at 2048
# characters), so it is skipped instead of buffered.
_MAX_LINE = 64 * 1024
# The root start tag comes first; a file that has not shown <urlset> or
# <sitemapindex> by then is not a sitemap, and its tree is not pruned meanwhile.
_ROOT_WINDOW = 256 * 1024


@dataclass(frozen=True)
class SitemapFile:
    """One sitemap file read: ``kind`` is urlset, index, invalid, unreachable or skipped (never requested);
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
    data: bytes | BinaryIO, *, max_bytes: int = MAX_BYTES, max_urls: int = MAX_URLS
) -> tuple[str, list[str], str]:
    """Read one sitemap file, its bytes or a binary file of them: ``(kind, locs, problem)``.

    ``kind`` is ``urlset`` (page URLs), ``index`` (child sitemap URLs) or
    ``invalid``. gzip is recognised by its magic bytes whatever the file is
    called. A plain-text sitemap (one URL per line) counts as a urlset. ``locs``
    are the ``<loc>`` texts as written, at most ``max_urls`` of them; a malformed
    file keeps the locs read before the error and says what went wrong.
    """
    file = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    file.seek(0)
    gzipped = file.read(2) == _GZIP_MAGIC
    size = file.seek(0, io.SEEK_END)
    file.seek(0)
    if not gzipped and size > max_bytes:
        return "invalid", [], f"larger than {max_bytes} bytes"
    chunks = _inflate(file, max_bytes) if gzipped else _slices(file)
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
        return _parse_text(itertools.chain((head,), chunks), max_urls, max_bytes)
    return _parse_xml(itertools.chain((head,), chunks), max_urls, max_bytes)


def _slices(file: BinaryIO) -> Iterator[bytes]:
    # Feeding the parser in slices lets entries be dropped as they are read,
    # instead of lxml building the tree of a 50 MiB file first.
    while chunk := file.read(_CHUNK):
        yield chunk


def _inflate(file: BinaryIO, max_bytes: int) -> Iterator[bytes]:
    """gzip-decode ``file`` in chunks, never holding more than ``max_bytes`` + 1
    decoded bytes in total; raises _TooLarge past the cap."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    produced = 0
    for pending in _slices(file):
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
    # Only the root, entry and <loc> events reach Python, which keeps 50,000
    # entries fast.
    return etree.XMLPullParser(
        events=("start", "end"),
        tag=("{*}urlset", "{*}sitemapindex", "{*}url", "{*}sitemap", "{*}loc"),
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


def _prune(root: etree._Element) -> None:
    # Every finished element is dropped, whatever its name: only the open
    # elements, always the last child at each level, are kept.
    node = root
    while len(node):
        del node[:-1]
        node = node[-1]


def _top(element: etree._Element) -> etree._Element:
    while (parent := element.getparent()) is not None:
        element = parent
    return element


def _parse_xml(
    chunks: Iterator[bytes], max_urls: int, max_bytes: int
) -> tuple[str, list[str], str]:
    parser = _parser()
    kind = entry_name = namespace = ""
    root = None
    locs: list[str] = []
    skipped = empty = missing = fed = 0
    mark = 0  # len(locs) when the current entry started
    has_loc = False
    try:
        for chunk in chunks:
            parser.feed(chunk)
            fed += len(chunk)
            for event, element in parser.read_events():
                if root is None:
                    top = _top(element)
                    name = _split_tag(top.tag)[1]
                    if top is not element or event != "start" or name not in _KINDS:
                        return "invalid", [], _not_a_sitemap(name)
                    root, (kind, entry_name) = element, _KINDS[name]
                    namespace = _split_tag(element.tag)[0]
                    continue
                parent = element.getparent()
                # Only /urlset/url/loc or /sitemapindex/sitemap/loc in one
                # namespace count: <image:loc> and friends are not pages.
                if parent is root:
                    if _split_tag(element.tag) != (namespace, entry_name):
                        continue
                    if event == "start":
                        mark, has_loc = len(locs), False
                        continue
                    missing += not has_loc
                    if len(locs) == mark:
                        empty += 1
                        if empty >= MAX_EMPTY_ENTRIES:
                            return kind, locs, f"stopped after {empty} entries without a URL"
                    continue
                if event == "start" or parent is None or parent.getparent() is not root:
                    continue
                if _split_tag(parent.tag) != (namespace, entry_name):
                    continue
                if _split_tag(element.tag) != (namespace, "loc"):
                    continue
                has_loc = True
                # A <loc> holding an entity reference or markup is not a URL.
                text = (element.text or "").strip() if len(element) == 0 else ""
                if not text:
                    skipped += 1
                elif len(locs) >= max_urls:
                    return kind, locs, f"more than {max_urls} URLs; the rest were not read"
                else:
                    locs.append(text)
            if root is not None:
                _prune(root)
            elif fed > _ROOT_WINDOW:
                return "invalid", [], f"no <urlset> or <sitemapindex> in the first {_ROOT_WINDOW} bytes"
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
    problems = [f"{skipped} <loc> entries without a usable URL"] if skipped else []
    if missing:
        problems.append(f"{missing} entries without <loc>")
    return kind, locs, "; ".join(problems)


def _not_a_sitemap(root_name: str) -> str:
    return f"root element <{root_name[:40]}> is not <urlset> or <sitemapindex>"


# A URL runs to the end of its line; lines end at \n or \r, as
# str.splitlines() would cut them. The pattern is searched in a lowercased copy
# so the regex engine can skip to each "http" at C speed.
_TEXT_URL = re.compile(rb"https?://[^\r\n]*")
_LINE_BREAK = re.compile(rb"[\r\n]")
_LINE_BLANKS = b" \t\f\v"


def _text_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Blocks of whole lines from ``chunks``: a partial last line is carried
    to the next chunk, and one longer than _MAX_LINE is skipped."""
    carry = b""
    skipping = False
    for chunk in chunks:
        if skipping:
            if (found := _LINE_BREAK.search(chunk)) is None:
                continue
            chunk, skipping = chunk[found.start() :], False
        block = carry + chunk
        cut = max(block.rfind(b"\n"), block.rfind(b"\r")) + 1
        carry = block[cut:]
        if len(carry) > _MAX_LINE:
            carry, skipping = b"", True
        if cut:
            yield block[:cut]
    if carry:
        yield carry


def _parse_text(
    chunks: Iterable[bytes], max_urls: int, max_bytes: int
) -> tuple[str, list[str], str]:
    """A list of URLs, one a line, read block by block: the file is never
    joined, decoded or split whole, and reading stops at ``max_urls``."""
    locs: list[str] = []
    others = 0  # lines with "http" somewhere other than at their start
    try:
        for number, block in enumerate(_text_lines(chunks)):
            if number == 0 and block.startswith(b"\xef\xbb\xbf"):
                block = block[3:]
            lower = block.lower()
            for match in _TEXT_URL.finditer(lower):
                start = match.start()
                line = max(lower.rfind(b"\n", 0, start), lower.rfind(b"\r", 0, start)) + 1
                if lower[line:start].strip(_LINE_BLANKS):
                    others += 1
                    if others >= MAX_EMPTY_ENTRIES:
                        return _text_result(locs, f"stopped after {others} lines without a URL")
                    continue
                if len(locs) >= max_urls:
                    return "urlset", locs, f"more than {max_urls} URLs; the rest were not read"
                locs.append(block[start : match.end()].decode("utf-8", errors="replace").strip())
    except _INFLATE_ERRORS as exc:
        return "invalid", locs, _inflate_problem(exc, max_bytes)
    return _text_result(locs, "")


def _text_result(locs: list[str], problem: str) -> tuple[str, list[str], str]:
    if not locs:
        return "invalid", [], problem or "neither XML nor a list of URLs"
    return "urlset", locs, problem


async def discover_sitemaps(
    fetcher: Fetcher,
    origin: str,
    robots_sitemaps: Iterable[str],
    *,
    max_urls: int = MAX_URLS,
    max_files: int = MAX_FILES,
    max_bytes: int = MAX_BYTES,
    budget: float = MAX_SECONDS,
    never: Callable[[str], bool] | None = None,
) -> SitemapReport:
    """Read the site's sitemaps breadth-first and collect its page URLs.

    ``never``: URLs not to request at all (a private site's logout), whether
    robots.txt or an index names them; each is recorded as a file not read.

    Starts from ``robots_sitemaps`` (which may be on other hosts: robots.txt
    may point anywhere) or, when robots.txt names none, ``/sitemap.xml``, whose
    absence (4xx, or an HTML page served in its place) just means no sitemap.
    Child sitemaps of an index must be on ``origin``. Page URLs on another
    origin are reported as a problem and not collected. Files are read one at
    a time; ``max_bytes`` caps each file (on the wire and decompressed).
    ``budget`` seconds bound the whole discovery: what was read by then is
    returned with a note, as it is after MAX_FAILURES_IN_A_ROW files in a row
    timed out or could not be reached.
    """
    walk = _Walk(origin_of(origin), max_urls, max_files, max_bytes, budget, never)
    for raw in robots_sitemaps:
        try:
            # A relative Sitemap line is read against the robots.txt it came from.
            url = normalize(raw, walk.origin + "/robots.txt")
        except InvalidURL as exc:
            walk.files.append(SitemapFile(raw[:2048], None, "invalid", 0, f"invalid URL: {exc}"))
            continue
        if url not in walk.seen:
            walk.seen.add(url)
            walk.queue.append((url, 1, False))
    walk.found = bool(walk.queue) or bool(walk.files)
    if not walk.found:
        walk.queue.append((walk.origin + "/sitemap.xml", 1, True))
    ends = asyncio.get_running_loop().time() + budget
    try:
        async with asyncio.timeout_at(ends):
            await walk.run(fetcher, ends)
    except TimeoutError:
        # Cancellation can only land in a fetch: parsing has no await.
        problem = f"not read within the {budget:g} s sitemap time budget"
        walk.files.append(SitemapFile(walk.reading, None, "unreachable", 0, problem))
        walk.out_of_time()
    return SitemapReport(tuple(walk.urls), tuple(walk.files), walk.found, tuple(walk.notes))


# A file over the size caps is an answer; any other fetch error counts
# towards MAX_FAILURES_IN_A_ROW as a site that is not answering.
_SIZE_ERRORS = (FetchError.BODY_TOO_LARGE, FetchError.DECOMPRESSION_LIMIT)


@dataclass
class _Walk:
    """The state of one discovery, kept on an object so a budget that cuts
    the walk short still leaves everything read so far."""

    origin: str
    max_urls: int
    max_files: int
    max_bytes: int
    budget: float
    never: Callable[[str], bool] | None = None
    files: list[SitemapFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    urls: dict[str, None] = field(default_factory=dict)
    queue: deque[tuple[str, int, bool]] = field(default_factory=deque)
    seen: set[str] = field(default_factory=set)
    found: bool = False
    reading: str = ""  # the file being fetched, for the note when time runs out

    def out_of_time(self) -> None:
        self.notes.append(
            f"the {self.budget:g} s sitemap time budget ran out; {_unread(len(self.queue))}"
        )

    async def run(self, fetcher: Fetcher, ends: float) -> None:
        loop = asyncio.get_running_loop()
        failures = 0
        while self.queue:
            if len(self.urls) >= self.max_urls:
                # Reading more files would only cost requests: nothing more is kept.
                self.notes.append(f"after the URL cap, {_unread(len(self.queue))}")
                return
            if len(self.files) >= self.max_files:
                self.notes.append(
                    f"only {self.max_files} sitemap files were read; {_unread(len(self.queue))}"
                )
                return
            if failures >= MAX_FAILURES_IN_A_ROW:
                self.notes.append(
                    f"{failures} sitemap files in a row timed out or were unreachable; {_unread(len(self.queue))}"
                )
                return
            if loop.time() >= ends:
                self.out_of_time()
                return
            url, depth, fallback = self.queue.popleft()
            if self.never is not None and self.never(url):
                self.files.append(SitemapFile(url, None, "skipped", 0, "not read: it matches the logout pattern"))
                continue
            self.reading = url
            # The body goes to a file that stays in memory up to SPOOL_BYTES:
            # a sitemap may be 50 MiB, more than the crawl's whole memory budget.
            with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as body:
                result = await fetcher.fetch(url, max_bytes=self.max_bytes, into=body)
                self.reading = ""
                failed = result.error is not None and result.error not in _SIZE_ERRORS
                failures = failures + 1 if failed else 0
                self._record(url, depth, fallback, result, body)

    def _record(self, url: str, depth: int, fallback: bool, result: FetchResult, body: BinaryIO) -> None:
        status = result.status
        max_bytes, max_urls = self.max_bytes, self.max_urls
        if result.error in _SIZE_ERRORS:
            self.files.append(SitemapFile(url, status, "invalid", 0, f"larger than {max_bytes} bytes"))
            return
        if result.error is not None:
            problem = result.error_detail or result.error.label
            self.files.append(SitemapFile(url, status, "unreachable", 0, problem[:_MAX_PROBLEM]))
            return
        if status is None or not 200 <= status < 300:
            if fallback and status is not None and 400 <= status < 500:
                return
            self.files.append(SitemapFile(url, status, "unreachable", 0, f"answered {status}"))
            return
        kind, locs, problem = parse_sitemap(body, max_bytes=max_bytes, max_urls=max_urls)
        if fallback and kind == "invalid" and result.is_html:
            # Many sites answer unknown paths with their home page.
            return
        self.found = True
        problems = [problem] if problem else []
        if kind == "index":
            problems += _queue_children(locs, self.origin, depth, self.seen, self.queue)
        elif kind == "urlset":
            capped, more = _collect(locs, self.origin, self.urls, max_urls)
            problems += more
            if capped:
                self.notes.append(f"the cap of {max_urls} sitemap URLs was reached")
        self.files.append(SitemapFile(url, status, kind, len(locs), "; ".join(problems)[:400]))


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
    # The cap is the walk's, not this file's fault: the walk's notes say it (SitemapReport.problems).
    return capped, problems


def _unread(n: int) -> str:
    return "1 more file was not read" if n == 1 else f"{n:,} more files were not read"


def _on_origin(normal: str, origin: str) -> bool:
    return normal.startswith(origin) and normal[len(origin) : len(origin) + 1] == "/"
