"""Decoding an HTML body to text: BOM, then the HTTP charset, then a <meta> charset, as browsers do."""

from __future__ import annotations

import codecs
import re

from .html_rules import sanitize

# ---------------------------------------------------------------- decoding

# Labels browsers treat as another encoding (WHATWG Encoding Standard): Latin-1
# and ASCII mean windows-1252 on the web, Shift_JIS means its Microsoft superset.
_ALIASES = {
    **dict.fromkeys(
        ("iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1", "l1", "cp819",
         "ibm819", "us-ascii", "ascii", "ansi_x3.4-1968", "windows-1252", "x-cp1252"),
        "cp1252",
    ),
    **dict.fromkeys(
        ("shift_jis", "shift-jis", "sjis", "x-sjis", "ms_kanji", "csshiftjis", "windows-31j"),
        "cp932",
    ),
    **dict.fromkeys(("euc-kr", "ks_c_5601-1987", "windows-949", "cseuckr"), "cp949"),
    **dict.fromkeys(("gb2312", "gbk", "x-gbk", "chinese", "csgb2312"), "gb18030"),
    "iso-8859-9": "cp1254",
    "latin5": "cp1254",
    "tis-620": "cp874",
    "iso-8859-11": "cp874",
    "utf8": "utf-8",
}
# UTF-7 is refused by browsers (it smuggles markup past filters); the rest are not text codecs.
_REFUSED = frozenset({"utf-7", "utf_7", "unicode-1-1-utf-7", "csunicode11utf7"})
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_META_CHARSET = re.compile(rb"""(?i)<meta[^>]*?charset\s*=\s*["']?\s*([a-z0-9_.:\-]+)""")
META_SCAN_BYTES = 4096


def _codec(label: str | None, *, from_meta: bool = False) -> str | None:
    """Python codec name for a charset label, or None if unknown or unusable."""
    if not label:
        return None
    name = label.strip().strip("\"'").strip().lower()
    if not name or name in _REFUSED:
        return None
    name = _ALIASES.get(name, name)
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _REFUSED:
        return None
    if from_meta and info.name.startswith("utf-16"):
        # A meta tag readable as ASCII proves the body is not UTF-16 (WHATWG).
        return "utf-8"
    return info.name


def _detect(body: bytes) -> tuple[str, str]:
    """No declaration: UTF-8 if it is (mostly) UTF-8, else windows-1252."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    text = body.decode("utf-8", "replace")
    replaced = text.count("\ufffd")
    invalid = replaced - body.count(b"\xef\xbf\xbd")
    valid_non_ascii = len(text) - len(text.encode("ascii", "ignore")) - replaced
    # Windows-1252 prose almost never forms valid UTF-8 sequences, so a page
    # with real multi-byte characters and a few bad bytes is UTF-8 with damage;
    # random binary forms about one valid sequence per dozen invalid ones.
    if valid_non_ascii and valid_non_ascii * 4 >= invalid:
        return text, "utf-8"
    return body.decode("cp1252", "replace"), "cp1252"


def _declared(body: bytes, http_charset: str | None) -> tuple[bytes, str | None]:
    """The body without its byte-order mark, and the charset declared for it, if any.

    Order: a byte-order mark, the HTTP header charset, a meta charset in the
    first 4 KiB. The BOM goes first, as in browsers (WHATWG Encoding
    Standard): a UTF-16 page served with a stale header still reads.
    """
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom):], name
    charset = _codec(http_charset)
    if charset is None:
        match = _META_CHARSET.search(body, 0, META_SCAN_BYTES)
        charset = _codec(match.group(1).decode("ascii"), from_meta=True) if match else None
    return body, charset


def decode_html(body: bytes, http_charset: str | None) -> tuple[str, str]:
    """Decode a page: (text, python codec name).

    The charset is the one declared (``_declared``), else detected. Invalid
    bytes become U+FFFD; NUL and C0 controls are removed.
    """
    body, charset = _declared(body, http_charset)
    if charset is None:
        text, charset = _detect(body)
    else:
        text = body.decode(charset, "replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    return sanitize(text), charset


# The C0 controls ``sanitize`` removes, as bytes: in UTF-8 they only ever stand
# for themselves (every byte of a multi-byte sequence is 0x80 or above).
_CONTROL_BYTES = bytes(range(0x00, 0x09)) + b"\x0b\x0c" + bytes(range(0x0E, 0x20))


def utf8_source(body: bytes, http_charset: str | None) -> bytes | None:
    """The page as clean UTF-8 bytes when decoding would only have checked it.

    Nearly every page is valid UTF-8: then ``decode_html`` followed by lxml
    re-encoding the text for libxml2 is a round trip that changes nothing but
    the control characters, and deleting those from the bytes is the same edit.
    Anything else (another charset, invalid bytes, a second BOM) gives None.
    """
    raw, charset = _declared(body, http_charset)
    if charset not in (None, "utf-8") or raw.startswith(codecs.BOM_UTF8):
        return None
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return raw.translate(None, _CONTROL_BYTES)
