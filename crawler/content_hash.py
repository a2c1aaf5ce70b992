"""The content hash that tells duplicate pages apart: their visible words, lower-cased."""

from __future__ import annotations

import hashlib


def content_hash(words: list[str]) -> str:
    """Hash of the lower-cased visible text; empty when there is no text at all."""
    if not words:
        return ""
    return hashlib.blake2b(lower_utf8(" ".join(words)), digest_size=16).hexdigest()


# Bisection of a page's text stops at pieces this long, and gives up (lowering
# the whole text) past this many pieces holding non-ASCII characters.
_LOWER_PIECE = 256
_LOWER_PIECES_MAX = 32


def lower_utf8(text: str) -> bytes:
    """``text.lower().encode()``, without lowering a whole page of text character by character.

    One non-ASCII character (a "©" in the footer) makes CPython lower every
    character of the string through its Unicode tables, more than the rest of
    the hash costs. ``bytes.lower`` lowers ASCII
    letters only, and every byte of a multi-byte UTF-8 character is 0x80 or
    above, so the encoded text lowered that way is exactly the answer when no
    non-ASCII character changes under ``lower()``. Those characters are found
    by bisecting the bytes with ``isascii`` (a few slices for a few of them)
    and each piece holding one is checked; a piece that changes (a capital
    letter outside ASCII, or many pieces, as in most non-English text) means
    the whole text is lowered as before. The only mapping that depends on its
    neighbours, capital sigma's, changes its own piece, so it never takes the
    shortcut.
    """
    data = text.encode()
    if text.isascii():
        return data.lower()
    pending = [(0, len(data))]
    pieces = 0
    while pending:
        low, high = pending.pop()
        if data[low:high].isascii():
            continue
        if high - low > _LOWER_PIECE:
            middle = (low + high) // 2
            pending += ((low, middle), (middle, high))
            continue
        pieces += 1
        if pieces > _LOWER_PIECES_MAX:
            break
        # Whole characters: widen the cut over continuation bytes (0b10xxxxxx).
        while low > 0 and 0x80 <= data[low] < 0xC0:
            low -= 1
        while high < len(data) and 0x80 <= data[high] < 0xC0:
            high += 1
        piece = data[low:high]
        if piece.decode().lower() != piece.lower().decode():  # a non-ASCII character changes
            break
    else:
        return data.lower()
    return text.lower().encode()

