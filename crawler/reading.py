"""Which reading of pages an audit holds, so a delta crawl reuses only pages read as this crawler reads them.

A page a delta reuses keeps the facts, links and page issues an earlier crawl worked out. After an
upgrade that reads pages otherwise (a new check, a mended parser) or judges by other default
thresholds, they would differ from what a full audit finds now; so a reading is named by the
crawler package's source, lxml's and libxml2's versions and the default thresholds, and a delta
whose source was read otherwise fetches every page in full.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from lxml import etree

from .checks import CheckSettings


@cache
def reading() -> str:
    """16 hex digits naming this crawler's way of reading pages."""
    digest = hashlib.blake2b(digest_size=8)
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    digest.update(repr(CheckSettings()).encode())
    # The parser's own version reads pages too (libxml2's HTML parser has changed what it builds).
    digest.update(repr((etree.LXML_VERSION, etree.LIBXML_VERSION)).encode())
    return digest.hexdigest()
