"""JSON-LD blocks judged as a validator's first pass would (check ``structured_data_invalid``).

A block must parse as JSON, and each object in it (or in its ``@graph``) must
say what vocabulary it uses (``@context``, or its container's) and what it
describes (``@type``). Deeper checks (schema.org properties, Google's rich
result rules) are the job of the search engines' own testing tools.
"""

from __future__ import annotations

import json
import re

# What one page's blocks may cost: a page with more, or larger, is judged on these.
MAX_BLOCKS = 20
MAX_BLOCK_CHARS = 1_000_000


def is_jsonld(type_attr: str | None) -> bool:
    return (type_attr or "").split(";")[0].strip().lower() == "application/ld+json"


# What sites wrap their blocks in, which JSON-LD processors strip: an HTML
# comment or a CDATA section (each line's // too), and a trailing semicolon.
_WRAPPERS = re.compile(r"^\s*(?://\s*)?(?:<!--|<!\[CDATA\[)|(?://\s*)?(?:-->|\]\]>)\s*$")


def problem(text: str) -> str | None:
    """Why the JSON-LD block ``text`` is invalid, or None (a blank block is left alone)."""
    if len(text) > MAX_BLOCK_CHARS:
        return None  # not judged: parsing it would cost more than the page
    text = _WRAPPERS.sub("", text.strip().lstrip("\ufeff")).strip().rstrip(";").strip()
    if not text:
        return None
    try:
        data = json.loads(text)
    except RecursionError:
        return "nests too deeply to read"
    except ValueError as exc:
        return f"does not parse as JSON ({getattr(exc, 'msg', exc)}, line {getattr(exc, 'lineno', '?')})"
    items = data if isinstance(data, list) else [data]
    for item in items:
        if not isinstance(item, dict):
            return "holds something other than JSON objects"
        if "@context" not in item:
            return "has no @context"
        graph = item.get("@graph")
        nodes = [graph] if isinstance(graph, dict) else graph if isinstance(graph, list) else [item]
        for node in nodes:
            if not isinstance(node, dict):
                return "has a @graph entry that is not an object"
            # A node that only names another ({"@id": ...}) is a reference, not a description.
            if "@type" not in node and set(node) - {"@id", "@context"}:
                return "has an object without @type"
    return None


def judged(blocks: list[str]) -> tuple[str, ...]:
    """Each invalid block's problem, numbered in page order ("block 2 has no @context")."""
    return tuple(f"block {n} {why}" for n, text in enumerate(blocks[:MAX_BLOCKS], 1)
                 if (why := problem(text)) is not None)


def described(problems: tuple[str, ...]) -> str:
    """A page's invalid blocks for people: "2 JSON-LD blocks invalid: block 1 …; block 3 …"."""
    blocks = "1 JSON-LD block" if len(problems) == 1 else f"{len(problems)} JSON-LD blocks"
    return f"{blocks} invalid: " + "; ".join(problems)
