"""The README names the checks a validation leaves unknown by design, and the gate leaves out: exactly
``SITE_WIDE_CODES``, so a code added there is not missing from what people read."""

from __future__ import annotations

import re
from pathlib import Path

from crawler.catalogue import SITE_WIDE_CODES

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_lists_every_check_across_the_whole_site_and_no_other():
    text = (ROOT / "README.md").read_text()
    start = text.index("the check spans\n  the whole site")
    listed = text[start:text.index("; or robots.txt now keeps it", start)]
    assert "`SITE_WIDE_CODES` in `crawler/catalogue.py`" in listed
    codes = set(re.findall(r"`([a-z0-9_]+)`", listed))
    assert codes == SITE_WIDE_CODES
