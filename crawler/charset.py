"""Decoding an HTML body to text: BOM, then the HTTP charset, then a <meta> charset, as browsers do."""

from __future__ import annotations

import codecs
import re

from .html_rules import sanitize

# ---------------------------------------------------------------- decoding

# The WHATWG Encoding Standard's labels (https://encoding.spec.whatwg.org/#names-and-labels),
# the only charsets a page may declare, mapped to the Python codec that decodes
# them. Anything else (punycode, idna, rot13, utf-7...) is not a web encoding:
# some are quadratic or raise on bytes, so such a page counts as undeclared.
# The "replacement" labels and x-user-defined have no Python codec and are
# left to detection too.
_WHATWG: dict[str, tuple[str, ...]] = {
    "utf-8": ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8",
              "x-unicode20utf8"),
    "cp866": ("866", "cp866", "csibm866", "ibm866"),
    "iso8859-2": ("csisolatin2", "iso-8859-2", "iso-ir-101", "iso8859-2", "iso88592",
                  "iso_8859-2", "iso_8859-2:1987", "l2", "latin2"),
    "iso8859-3": ("csisolatin3", "iso-8859-3", "iso-ir-109", "iso8859-3", "iso88593",
                  "iso_8859-3", "iso_8859-3:1988", "l3", "latin3"),
    "iso8859-4": ("csisolatin4", "iso-8859-4", "iso-ir-110", "iso8859-4", "iso88594",
                  "iso_8859-4", "iso_8859-4:1988", "l4", "latin4"),
    "iso8859-5": ("csisolatincyrillic", "cyrillic", "iso-8859-5", "iso-ir-144", "iso8859-5",
                  "iso88595", "iso_8859-5", "iso_8859-5:1988"),
    "iso8859-6": ("arabic", "asmo-708", "csiso88596e", "csiso88596i", "csisolatinarabic",
                  "ecma-114", "iso-8859-6", "iso-8859-6-e", "iso-8859-6-i", "iso-ir-127",
                  "iso8859-6", "iso88596", "iso_8859-6", "iso_8859-6:1987"),
    "iso8859-7": ("csisolatingreek", "ecma-118", "elot_928", "greek", "greek8", "iso-8859-7",
                  "iso-ir-126", "iso8859-7", "iso88597", "iso_8859-7", "iso_8859-7:1987",
                  "sun_eu_greek"),
    "iso8859-8": ("csiso88598e", "csisolatinhebrew", "hebrew", "iso-8859-8", "iso-8859-8-e",
                  "iso-ir-138", "iso8859-8", "iso88598", "iso_8859-8", "iso_8859-8:1988",
                  "visual", "csiso88598i", "iso-8859-8-i", "logical"),
    "iso8859-10": ("csisolatin6", "iso-8859-10", "iso-ir-157", "iso8859-10", "iso885910",
                   "l6", "latin6"),
    "iso8859-13": ("iso-8859-13", "iso8859-13", "iso885913"),
    "iso8859-14": ("iso-8859-14", "iso8859-14", "iso885914"),
    "iso8859-15": ("csisolatin9", "iso-8859-15", "iso8859-15", "iso885915", "iso_8859-15", "l9"),
    "iso8859-16": ("iso-8859-16",),
    "koi8-r": ("cskoi8r", "koi", "koi8", "koi8-r", "koi8_r"),
    "koi8-u": ("koi8-ru", "koi8-u"),
    "mac-roman": ("csmacintosh", "mac", "macintosh", "x-mac-roman"),
    "cp874": ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620", "windows-874"),
    "cp1250": ("cp1250", "windows-1250", "x-cp1250"),
    "cp1251": ("cp1251", "windows-1251", "x-cp1251"),
    # Latin-1 and ASCII mean windows-1252 on the web.
    "cp1252": ("ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819",
               "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1",
               "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252", "x-cp1252"),
    "cp1253": ("cp1253", "windows-1253", "x-cp1253"),
    "cp1254": ("cp1254", "csisolatin5", "iso-8859-9", "iso-ir-148", "iso8859-9", "iso88599",
               "iso_8859-9", "iso_8859-9:1989", "l5", "latin5", "windows-1254", "x-cp1254"),
    "cp1255": ("cp1255", "windows-1255", "x-cp1255"),
    "cp1256": ("cp1256", "windows-1256", "x-cp1256"),
    "cp1257": ("cp1257", "windows-1257", "x-cp1257"),
    "cp1258": ("cp1258", "windows-1258", "x-cp1258"),
    "mac-cyrillic": ("x-mac-cyrillic", "x-mac-ukrainian"),
    "gb18030": ("chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312", "gb_2312-80",
                "gbk", "iso-ir-58", "x-gbk", "gb18030"),
    "big5hkscs": ("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    "euc_jp": ("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp"),
    "iso2022_jp": ("csiso2022jp", "iso-2022-jp"),
    # Shift_JIS means its Microsoft superset.
    "cp932": ("csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis",
              "windows-31j", "x-sjis"),
    "cp949": ("cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean", "ks_c_5601-1987",
              "ks_c_5601-1989", "ksc5601", "ksc_5601", "windows-949"),
    "utf-16-be": ("unicodefffe", "utf-16be"),
    "utf-16-le": ("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16",
                  "utf-16le"),
}
_LABELS = {label: codecs.lookup(codec).name for codec, labels in _WHATWG.items() for label in labels}
_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_META_CHARSET = re.compile(rb"""(?i)<meta[^>]*?charset\s*=\s*["']?\s*([a-z0-9_.:\-]+)""")
META_SCAN_BYTES = 4096


def _codec(label: str | None, *, from_meta: bool = False) -> str | None:
    """Python codec name for a WHATWG charset label, or None if it is not one."""
    if not label:
        return None
    name = _LABELS.get(label.strip().strip("\"'").strip().lower())
    if from_meta and name is not None and name.startswith("utf-16"):
        # A meta tag readable as ASCII proves the body is not UTF-16 (WHATWG).
        return "utf-8"
    return name


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


def decode_text(body: bytes, charset: str | None) -> str:
    """``body`` as text, read with the ``charset`` it was declared with (a
    Content-Type parameter) only when that is a web encoding: a byte-order
    mark wins, any other label is ignored and the encoding detected. Invalid
    bytes become U+FFFD; it never raises and takes time linear in the body.
    """
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(name, "replace")
    codec = _codec(charset)
    if codec is None:
        return _detect(body)[0]
    return body.decode(codec, "replace")


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


# ---------------------------------------------------------------- binary sniffing

# How much of a body is sniffed: the WHATWG MIME Sniffing Standard's resource header.
SNIFF_BYTES = 1445
# The standard's "binary data bytes": control bytes that text in a web encoding
# other than UTF-16 does not use, though a page may carry a stray one (a
# vertical tab pasted from a word processor, a NUL in a title).
_BINARY_BYTES = bytes((*range(0x00, 0x09), 0x0B, *range(0x0E, 0x1B), *range(0x1C, 0x20)))
# A prefix with at least this share of them is data, not a page with strays:
# random or compressed bytes have about one in ten, text next to none.
_BINARY_SHARE = 0.05
# Files commonly served with the wrong type, by their first bytes (the standard's
# image, audio, video and archive patterns, and PDF, whose header is text).
_SIGNATURES = (b"%PDF-", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"\xff\xd8\xff", b"PK\x03\x04",
               b"\x1f\x8b\x08", b"Rar!\x1a\x07", b"7z\xbc\xaf\x27\x1c", b"OggS\x00", b"ID3", b"\x00asm",
               b"\x7fELF", b"%!PS-Adobe-")


def looks_binary(prefix: bytes | bytearray, http_charset: str | None) -> bool:
    """Whether a body served as HTML is really a file of another kind (a PDF, an image, an archive).

    Told by a known file signature, or by binary data bytes making up a
    twentieth of the first SNIFF_BYTES. UTF-16 text is full of NUL bytes, so a
    UTF-16 BOM or a UTF-16 charset label makes a body text, as the standard's rules do.
    """
    head = prefix[:SNIFF_BYTES]
    if head.startswith(_SIGNATURES):
        return True
    if head.startswith((codecs.BOM_UTF16_BE, codecs.BOM_UTF16_LE)) or \
            (_codec(http_charset) or "").startswith("utf-16"):
        return False
    controls = len(head) - len(head.translate(None, _BINARY_BYTES))
    return bool(head) and controls >= _BINARY_SHARE * len(head)
