"""Reading a response's head: header values as text, the media type and charset, the declared length."""

from __future__ import annotations


def header_text(value: bytes) -> str:
    """A header value as text: ASCII, else UTF-8, else Latin-1.

    httpx tries the same three but picks one for the whole header block, so
    one Latin-1 value there garbles every UTF-8 one; here each value is read
    on its own."""
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        pass
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def parse_content_type(value: str) -> tuple[str, str | None]:
    """The media type (lower-cased) and charset of a Content-Type value.

    A type followed by its parameters with no ';' ("text/html charset=UTF-8",
    a common typo) is that type with those parameters, as browsers take it;
    of two charsets the first counts (WHATWG's MIME type parser).
    """
    mime, _, params = value.partition(";")
    mime, _, rest = mime.strip().partition(" ")
    charset = None
    for param in [*rest.split(), *params.split(";")]:
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and charset is None:
            charset = val.strip().strip("\"'").lower() or None
    return mime.strip().lower(), charset


def content_length(headers: dict[str, str]) -> int | None:
    value = headers.get("content-length", "").split(",")[0].strip()
    return int(value) if value.isascii() and value.isdigit() else None

