"""URL normalisation, scope and crawler-trap guards.

Every URL the crawler queues, stores or compares goes through ``normalize``
first, so two spellings of one page become one string (and one ``url_hash``).
The rules follow RFC 3986 section 6 plus what browsers do with hostile input
(WHATWG URL): nothing here touches the network.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import SplitResult, unquote, urlsplit

import idna
import re2

__all__ = [
    "InvalidURL",
    "Scope",
    "TrapGuard",
    "compile_patterns",
    "normalize",
    "origin_of",
    "template_key",
    "trap_reason",
    "url_hash",
]


class InvalidURL(ValueError):
    """A URL the crawler refuses; the message says why."""


class _BadPort(InvalidURL):
    """The authority's text after its ':' is no port (``_port``): maybe a password cut short (``normalize``)."""


# A raw "/", "?" or "#" in a password ends the authority (URL standard): "https://ann:pa/ss@host/" is host
# "ann", port "pa". Such a message must not quote the "port": it is part of a password.
_PASSWORD_HINT = "invalid port; a password with '/', '?' or '#' must have them percent-encoded (%2F, %3F, %23)"


# Input longer than this is refused before any parsing so a hostile page cannot
# make normalisation itself expensive; the trap guard's 2,048 limit is separate.
_MAX_INPUT = 32_768

_DEFAULT_PORTS = {"http": 80, "https": 443}

# Leading/trailing C0 controls and spaces are trimmed and TAB/CR/LF removed
# anywhere, as browsers do (WHATWG "basic URL parser").
_TRIM = "".join(chr(c) for c in range(0x21))
_TAB_NEWLINE = str.maketrans("", "", "\t\r\n")

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

# An escape, or one character that may not appear raw in a path or query part.
# A "%" not followed by two hex digits falls to the second branch and becomes %25.
_PERCENT_OR_UNSAFE = re.compile(r"%[0-9A-Fa-f]{2}|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?]")

# Session ids make every visit a new URL (Heritrix StripSessionIDs does the same).
_SESSION_PATH_PARAM = re.compile(r";jsessionid=[^/]*", re.IGNORECASE)
_SESSION_QUERY_KEYS = frozenset({"phpsessid", "jsessionid", "cfid", "cftoken"})
# Names a site may give its own ids too (PHP-Nuke's ?sid=123 is a story): dropped only with a token's value.
_MAYBE_SESSION_KEYS = frozenset({"sid", "sessionid"})
_SESSION_TOKEN = re.compile(r"[0-9A-Za-z_-]{16,}")

# Characters that can never be part of a host name (WHATWG forbidden host code
# points plus everything outside letters, digits, hyphen, underscore and dot).
_HOST_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
_PORT = re.compile(r"[0-9]{1,5}")
_HEX_NUMBER = re.compile(r"0[xX][0-9A-Fa-f]*")


# An absolute URL that may already be canonical: lower-case http(s) scheme and
# host, an optional port, a path of characters normalisation never changes (no
# "%", ";" or dot segment; checked below), no query, any fragment. Most links
# on a page look like this; ``already_normal`` confirms one without the parse.
_PLAIN = re.compile(r"(https?)://([a-z0-9.\-]+(?::[0-9]+)?)(/[A-Za-z0-9\-._~!$&'()*+,=:@/]*)?(?:#.*)?", re.DOTALL)


def normalize(url: str, base: str | None = None) -> str:
    """Return the one canonical absolute http(s) spelling of ``url``.

    ``url`` may be relative when ``base`` (an absolute http(s) URL) is given.
    Raises InvalidURL with a short reason for anything that is not a crawlable
    web address: other schemes, no host, bad ports, ambiguous credentials,
    hosts with characters no DNS name can have.
    """
    if not isinstance(url, str):
        raise InvalidURL("URL is not a string")
    if len(url) > _MAX_INPUT:
        raise InvalidURL(f"URL longer than {_MAX_INPUT} characters")
    if base is None and (normal := already_normal(url)) is not None:
        return normal
    return normalize_by_parsing(url, base)


def already_normal(url: str) -> str | None:
    """``url`` without its fragment if that is already its canonical form, else None (parse it).

    A regex match instead of the full parse, for the common case: most links
    on a page are already canonical.
    """
    match = _PLAIN.fullmatch(url)
    if match is None:
        return None
    scheme, netloc, path = match.groups()
    if path is None or "/." in path:
        return None
    try:
        host, port = _authority(netloc)
    except InvalidURL:
        return None  # the full parse says why
    if port is None:
        if host != netloc:
            return None
    elif port == _DEFAULT_PORTS[scheme] or netloc != f"{host}:{port}":
        return None
    return url if match.end(3) == len(url) else url[: match.end(3)]


def normalize_by_parsing(url: str, base: str | None) -> str:
    """``normalize`` without the shortcut for already canonical URLs: the full parse."""
    text = _clean(url)
    try:
        parts = urlsplit(text)
    except ValueError as exc:
        raise InvalidURL(f"unparsable URL: {exc}") from None
    scheme = parts.scheme.lower()
    if base is not None:
        base_parts = _base(base)
        # "http:page" with an http base is relative too (RFC 3986 section 5.2.2
        # lets parsers allow it, and browsers do).
        if not scheme or (scheme == base_parts.scheme and not parts.netloc):
            parts = _resolve(parts, text, base_parts)
            scheme = parts.scheme
    if not scheme:
        raise InvalidURL("relative URL without a base")
    if scheme not in _DEFAULT_PORTS:
        raise InvalidURL(f"scheme {scheme!r} is not http or https")
    try:
        host, port = _authority(parts.netloc)
    except _BadPort:
        if "@" in f"{parts.path}{parts.query}{parts.fragment}":
            raise InvalidURL(_PASSWORD_HINT) from None
        raise
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"

    path = _SESSION_PATH_PARAM.sub("", parts.path)
    path = _remove_dot_segments(_normalize_percent(path)) if path else "/"
    if not path.startswith("/"):
        path = "/" + path
    query = _normalize_query(parts.query)
    return f"{scheme}://{netloc}{path}?{query}" if query else f"{scheme}://{netloc}{path}"


def origin_of(url: str) -> str:
    """Scheme, host and non-default port of ``url``: ``https://example.com``."""
    normal = normalize(url)
    return normal[: normal.index("/", normal.index("://") + 3)]


def holds_userinfo(url: str) -> bool:
    """Whether ``url`` carries a user name or password (``user:pass@host``); ValueError when it does not parse.

    normalize() drops them, and an address is stored and shown as typed: a form refuses such
    an address and says where a secret goes instead.
    """
    return "@" in urlsplit(url.strip()).netloc


def url_hash(url: str) -> str:
    """A stable 32-hex-character key for ``url`` (pass it a normalised URL)."""
    return hashlib.blake2b(url.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


# Identifiers that differ between variants of one page template. Digit runs that
# are part of a percent escape (the "5B" of "%5B") are left alone.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_HEX_ID = re.compile(
    r"(?<![0-9a-z])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}(?![0-9a-z])", re.IGNORECASE
)
_DIGITS = re.compile(r"(?<!%)(?<!%[0-9A-Fa-f])[0-9]+")


def template_key(url: str) -> str:
    """The page template ``url`` is a variant of, for per-template trap budgets.

    Origin, then the path with uuids, hex ids and digit runs collapsed, then the
    sorted distinct query keys (values dropped): ``/cal?month=5&year=2026`` and
    ``/cal?year=2027&month=6`` share ``/cal?month&year``. Pure string work on a
    normalised URL, so the database can count variants by it across processes.
    """
    parts = urlsplit(url)
    path = _DIGITS.sub("{n}", _HEX_ID.sub("{hex}", _UUID.sub("{uuid}", parts.path or "/")))
    keys = sorted({_DIGITS.sub("{n}", p.partition("=")[0]) for p in parts.query.split("&") if p})
    base = f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}"
    return f"{base}?{'&'.join(keys)}" if keys else base


def trap_reason(
    url: str,
    *,
    max_length: int = 2048,
    max_segments: int = 15,
    max_repeats: int = 3,
    max_params: int = 50,
) -> str | None:
    """Why ``url`` looks like a crawler trap, or None if it looks like a page.

    Checked before a URL is queued: very long URLs, very deep paths, a segment
    (or a group of up to three segments) repeated more than ``max_repeats``
    times in a row (relative-link loops such as ``/a/b/a/b/a/b/a/b``) and
    queries with more than ``max_params`` parameters.
    """
    if len(url) > max_length:
        return f"URL is {len(url)} characters long (limit {max_length})"
    parts = urlsplit(url)
    segments = parts.path[1:].split("/") if parts.path.startswith("/") else parts.path.split("/")
    if segments and segments[-1] == "":
        segments.pop()
    if len(segments) > max_segments:
        return f"path has {len(segments)} segments (limit {max_segments})"
    repeated = _repeated_block(segments, max_repeats)
    if repeated:
        return f"path repeats {repeated!r} more than {max_repeats} times in a row"
    params = sum(1 for p in parts.query.split("&") if p)
    if params > max_params:
        return f"query has {params} parameters (limit {max_params})"
    return None


# Crawler traps (an endless calendar, "next" links forever) show up as one path
# template (``/cal?month={n}``) whose variants keep getting deeper, each found on
# the previous one. A shop's ``/product/{n}`` pages share a template too, but sit
# at about the same depth. So a template is cut once it has TRAP_VARIANTS
# variants AND a new one would lie more than TRAP_DEPTH_SPREAD clicks below its
# shallowest variant; TEMPLATE_CEILING bounds any single template outright.
TRAP_VARIANTS = 50
TRAP_DEPTH_SPREAD = 5
TEMPLATE_CEILING = 100_000


def template_has_room(variants: int, shallowest: int, depth: int, max_variants: int = TRAP_VARIANTS) -> bool:
    """Whether a template with ``variants`` URLs, the shallowest at ``shallowest``, takes one at ``depth``."""
    if variants >= TEMPLATE_CEILING:
        return False
    return variants < max_variants or depth - shallowest <= TRAP_DEPTH_SPREAD


class TrapGuard:
    """``trap_reason`` plus the per-template budget of ``template_has_room``, in memory.

    One guard per crawl (the audits app keeps the same counts in its frontier
    table instead). A URL already admitted stays admitted when checked again.
    """

    def __init__(self, max_variants: int = TRAP_VARIANTS) -> None:
        self.max_variants = max_variants
        self._templates: dict[str, tuple[set[str], int]] = {}

    def check(self, url: str, depth: int) -> str | None:
        reason = trap_reason(url)
        if reason:
            return reason
        key = template_key(url)
        seen, shallowest = self._templates.get(key, (set(), depth))
        digest = url_hash(url)
        if digest in seen:
            return None
        if not template_has_room(len(seen), shallowest, depth, self.max_variants):
            return f"more than {len(seen)} URLs share the template {key}, each deeper than the last"
        seen.add(digest)
        self._templates[key] = (seen, min(shallowest, depth))
        return None


# Patterns come from the audit form; the caps keep one audit from handing the
# crawler thousands of regexes or a megabyte-long one. A crawl's exclude list
# holds one more than a person may give: its private site's logout pattern.
_MAX_PATTERNS = 50
CRAWL_MAX_PATTERNS = _MAX_PATTERNS + 1
_MAX_PATTERN_LENGTH = 500

# User patterns run on RE2, whose matching is linear in the URL: Python's re
# backtracks, and "(a+)+$" would pin a worker. RE2 refuses what needs
# backtracking (backreferences, lookaround), so the hint says which syntax applies.
_RE2_HINT = "Siteward uses RE2 syntax: no backreferences or lookaround"


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.never_capture = True  # only "does it match" is asked; no group spans to compute
    options.log_errors = False  # a bad pattern is reported to its author, not to stderr
    return options


_RE2_OPTIONS = _re2_options()


def _quoted(pattern: str) -> str:
    # Shown as typed (repr would double every backslash), unless unprintable.
    return f"'{pattern}'" if pattern.isprintable() else repr(pattern)


def compile_patterns(patterns: Iterable[str], *, most: int = _MAX_PATTERNS) -> tuple:
    """Compile include/exclude regexes with RE2, at most ``most`` of them; ValueError names
    the pattern that fails.

    The compiled patterns offer ``search(url)`` and ``pattern`` like ``re``'s.
    """
    compiled = []
    for raw in patterns:
        pattern = raw.strip()
        if not pattern:
            continue
        if len(compiled) == most:
            raise ValueError(f"more than {most} patterns")
        if len(pattern) > _MAX_PATTERN_LENGTH:
            raise ValueError(
                f"pattern {pattern[:40]!r}... is longer than {_MAX_PATTERN_LENGTH} characters"
            )
        try:
            compiled.append(re2.compile(pattern, _RE2_OPTIONS))
        except UnicodeError:  # a lone surrogate (undecodable argv) cannot become UTF-8 for RE2
            raise ValueError(f"invalid pattern {_quoted(pattern)}: not valid UTF-8") from None
        except re2.error as exc:
            reason = exc.args[0] if exc.args else b""
            if isinstance(reason, bytes):
                reason = reason.decode("utf-8", "replace")
            raise ValueError(f"invalid pattern {_quoted(pattern)}: {reason} ({_RE2_HINT})") from None
    return tuple(compiled)


@dataclass(frozen=True)
class Scope:
    """Which URLs belong to the audit: the start origin (after its redirects),
    narrowed by include patterns and then by exclude patterns (exclude wins).

    ``www.example.com`` and ``example.com`` are different origins, as are http
    and https; patterns are searched (RE2, unanchored) in the full normalised URL.
    """

    origin: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    _compiled: tuple = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "_compiled",
            (
                origin_of(self.origin),
                compile_patterns(self.include),
                compile_patterns(self.exclude, most=CRAWL_MAX_PATTERNS),
            ),
        )

    def contains(self, url: str) -> bool:
        origin, include, exclude = self._compiled
        try:
            normal = normalize(url)
        except InvalidURL:
            return False
        if normal[: normal.index("/", normal.index("://") + 3)] != origin:
            return False
        if include and not any(p.search(normal) for p in include):
            return False
        return not any(p.search(normal) for p in exclude)


def _clean(text: str) -> str:
    return backslashes_as_slashes(text.strip(_TRIM).translate(_TAB_NEWLINE))


def backslashes_as_slashes(text: str) -> str:
    """``text`` with each backslash before its query or fragment a slash, as browsers read an http(s) URL:
    a link to two backslashes and a host is on that host, and "https://example.com" + backslash + "@evil.com"
    means evil.com to them, so it does to us."""
    head, sep, tail = text.partition("?")
    if "#" in head:
        head, hash_sep, frag = head.partition("#")
        return head.replace("\\", "/") + hash_sep + frag + sep + tail
    return head.replace("\\", "/") + sep + tail


@lru_cache(maxsize=256)
def _base(base: str) -> SplitResult:
    # One page resolves all its links against the same base: parse it once.
    try:
        parts = urlsplit(_clean(base))
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in _DEFAULT_PORTS or not parts.netloc:
        raise InvalidURL("base URL is not an absolute http(s) URL")
    return parts._replace(scheme=parts.scheme.lower(), fragment="")


def _resolve(ref: SplitResult, text: str, base: SplitResult) -> SplitResult:
    """RFC 3986 section 5.2.2 (dot segments are removed later, for every URL)."""
    if ref.netloc:
        return ref._replace(scheme=base.scheme)
    if not ref.path:
        has_query = "?" in text.partition("#")[0]
        return SplitResult(
            base.scheme, base.netloc, base.path, ref.query if has_query else base.query, ""
        )
    if ref.path.startswith("/"):
        path = ref.path
    elif not base.path:
        path = "/" + ref.path
    else:
        path = base.path[: base.path.rfind("/") + 1] + ref.path
    return SplitResult(base.scheme, base.netloc, path, ref.query, "")


# Pages repeat a handful of hosts thousands of times; IDNA and IPv4 parsing are
# the slow part of normalising, so remember the last few answers.
@lru_cache(maxsize=1024)
def _authority(netloc: str) -> tuple[str, int | None]:
    """Host (lower-case, punycode, IPv4 dotted, IPv6 bracketed) and port."""
    userinfo, at, hostport = netloc.rpartition("@")
    if at and "@" in userinfo:
        # "user@evil@127.0.0.1": parsers disagree about which host is meant.
        raise InvalidURL("ambiguous '@' in the host part")
    # Credentials are dropped: never sent, never stored.
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise InvalidURL("unterminated IPv6 address")
        host = _ipv6(hostport[1:end])
        rest = hostport[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidURL("junk after the IPv6 address")
        port_text = rest[1:]
    else:
        host_text, _, port_text = hostport.partition(":")
        host = _host(host_text)
    return host, _port(port_text)


def _port(text: str) -> int | None:
    # Never quotes what is no number: it may be a password (_PASSWORD_HINT).
    if not text:
        return None
    if not _PORT.fullmatch(text.lstrip("0") or "0"):
        raise _BadPort("invalid port: a port is a number from 1 to 65535")
    port = int(text)
    if not 0 < port < 65536:
        raise _BadPort(f"port {port} is out of range")
    return port


def _ipv6(text: str) -> str:
    if "%" in text:
        raise InvalidURL("IPv6 zone identifiers are not crawlable")
    try:
        return f"[{ipaddress.IPv6Address(text).compressed}]"
    except ValueError:
        raise InvalidURL(f"invalid IPv6 address {text[:60]!r}") from None


def _host(text: str) -> str:
    try:
        host = unquote(text, errors="strict")
    except UnicodeDecodeError:
        raise InvalidURL("host has invalid percent-escapes") from None
    if not host:
        raise InvalidURL("no host")
    if not host.isascii():
        host = _to_punycode(host)
    host = host.lower()
    if host.endswith("."):
        # "example.com." is the same DNS name; one spelling keeps dedupe exact.
        host = host[:-1]
    labels = host.split(".")
    if _ends_in_number(labels):
        return _ipv4(labels)
    if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise InvalidURL(f"host {text[:60]!r} contains invalid characters")
    return host


def _to_punycode(host: str) -> str:
    try:
        return idna.encode(host.rstrip("."), uts46=True).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        pass
    # IDNA 2008 refuses symbols (emoji, "☃") that browsers still resolve through
    # the IDNA 2003 rules, which is what the standard library codec implements.
    try:
        return host.rstrip(".").encode("idna").decode("ascii")
    except UnicodeError:
        raise InvalidURL(f"host {host[:60]!r} is not a valid international name") from None


def _ends_in_number(labels: list[str]) -> bool:
    last = labels[-1]
    return bool(last) and (last.isdigit() or bool(_HEX_NUMBER.fullmatch(last)))


def _ipv4(labels: list[str]) -> str:
    """WHATWG IPv4 parsing, so 2130706433, 0x7f.1 and 127.1 all read 127.0.0.1."""
    if len(labels) > 4:
        raise InvalidURL("host looks like an IPv4 address with too many parts")
    numbers = []
    for label in labels:
        try:
            if label[:2].lower() == "0x":
                numbers.append(int(label[2:] or "0", 16))
            elif len(label) > 1 and label.startswith("0"):
                numbers.append(int(label, 8))
            else:
                numbers.append(int(label, 10))
        except ValueError:
            raise InvalidURL(f"invalid IPv4 address {'.'.join(labels)[:60]!r}") from None
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise InvalidURL(f"IPv4 address {'.'.join(labels)[:60]!r} is out of range")
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value += number << (8 * (3 - index))
    return str(ipaddress.IPv4Address(value))


def _percent_replace(match: re.Match[str]) -> str:
    text = match.group()
    if len(text) == 3 and text[0] == "%":
        char = chr(int(text[1:], 16))
        return char if char in _UNRESERVED else text.upper()
    return "".join(f"%{byte:02X}" for byte in text.encode("utf-8", "surrogatepass"))


def _normalize_percent(text: str) -> str:
    return _PERCENT_OR_UNSAFE.sub(_percent_replace, text)


def _normalize_query(query: str) -> str:
    # Order is kept: some servers read parameters positionally.
    kept = []
    for part in query.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        key = unquote(key).lower()
        if key in _SESSION_QUERY_KEYS or key.startswith("aspsessionid") or (
                key in _MAYBE_SESSION_KEYS and _SESSION_TOKEN.fullmatch(unquote(value))):
            continue
        kept.append(_normalize_percent(part))
    return "&".join(kept)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 on an absolute path."""
    if "/." not in path:
        return path
    segments = path.split("/")
    out: list[str] = []
    for segment in segments[1:]:
        if segment == "..":
            if out:
                out.pop()
        elif segment != ".":
            out.append(segment)
    if segments[-1] in (".", ".."):
        out.append("")
    return "/" + "/".join(out)


def _repeated_block(segments: list[str], max_repeats: int) -> str | None:
    """The first block of 1-3 segments repeated more than ``max_repeats`` times."""
    count = len(segments)
    for size in (1, 2, 3):
        for start in range(count - size * (max_repeats + 1) + 1):
            block = segments[start : start + size]
            runs = 1
            while segments[start + runs * size : start + (runs + 1) * size] == block:
                runs += 1
                if runs > max_repeats:
                    return "/".join(block)
    return None
