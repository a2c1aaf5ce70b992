"""structured_data_invalid (CHECKS, stretch): JSON-LD blocks that do not parse, or whose objects lack
@context or @type, read alike by the tree path, the event path and the BeautifulSoup reference."""

from __future__ import annotations

import pytest

from crawler.structured_data import MAX_BLOCKS, problem
from tests.crawler.readers import READERS, page_findings

VALID = '{"@context": "https://schema.org", "@type": "Organization", "name": "Example"}'


@pytest.mark.parametrize(("text", "why"), [
    (VALID, None),
    ('[{"@context": "https://schema.org", "@type": "Thing"}]', None),
    ('{"@context": "https://schema.org", "@graph": [{"@type": "WebSite"}, {"@type": "Person"}]}', None),
    ('{"@context": "https://schema.org", "@type": "Thing",}', "does not parse as JSON"),
    ('{"@type": "Thing"}', "has no @context"),
    ('{"@context": "https://schema.org", "name": "x"}', "has an object without @type"),
    ('{"@context": "https://schema.org", "@graph": [{"@type": "A"}, {"name": "b"}]}', "has an object without @type"),
    ('["just a string"]', "holds something other than JSON objects"),
    # What real sites wrap blocks in, and what JSON-LD allows, is not a fault.
    (f"<!-- {VALID} -->", None), (f"//<![CDATA[\n{VALID}\n//]]>", None), (f"{VALID};", None),
    (f"\ufeff{VALID}", None), ("", None), ("  \n ", None),
    ('{"@context": "https://schema.org", "@graph": {"@type": "WebSite"}}', None),
    ('{"@context": "https://schema.org", "@graph": [{"@id": "#site"}, {"@type": "WebPage"}]}', None),
    ('{"@context": {"@vocab": "https://schema.org/"}, "@type": "Thing"}', None),
    # A block nested past the JSON reader's stack is named, not a crash of the page's parse.
    ("[" * 5000, "nests too deeply to read"),
])
def test_a_block_is_judged_on_its_json_context_and_type(text, why):
    found = problem(text)
    assert (found is None) if why is None else found.startswith(why), found


def page(scripts: str) -> bytes:
    return (f'<html lang="en"><head><title>Structured data page</title>{scripts}</head>'
            "<body><p>text</p></body></html>").encode()


BLOCKS = (f'<script type="application/ld+json">{VALID}</script>'
          '<script type="application/ld+json">{"@type": "Thing"}</script>'
          '<script>var notJson = {;</script>'
          '<script type="Application/LD+JSON; charset=utf-8">{broken</script>')


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_finds_the_same_invalid_blocks(reader):
    facts = READERS[reader](page(BLOCKS), None)
    assert [p.split(" (")[0] for p in facts.structured_data] == [
        "block 2 has no @context", "block 3 does not parse as JSON"]


def test_the_check_reports_one_issue_a_page_naming_each_block():
    [found] = [f for f in page_findings(page(BLOCKS)) if f.code == "structured_data_invalid"]
    assert found.message.startswith("2 JSON-LD blocks invalid: block 2 has no @context; block 3 does not parse")
    assert not [f for f in page_findings(page(f'<script type="application/ld+json">{VALID}</script>'))
                if f.code == "structured_data_invalid"]


def test_a_page_with_many_blocks_is_judged_on_the_first_twenty():
    many = "".join('<script type="application/ld+json">{"@type": "Thing"}</script>' for _ in range(50))
    facts = READERS["tree"](page(many), None)
    assert len(facts.structured_data) == MAX_BLOCKS


@pytest.mark.parametrize("reader", READERS)
def test_a_block_nested_past_the_json_readers_stack_leaves_the_pages_facts_whole(reader):
    facts = READERS[reader](page('<script type="application/ld+json">' + "[" * 5000 + "</script>"), None)
    assert facts.title == "Structured data page"
    assert facts.structured_data == ("block 1 nests too deeply to read",)
