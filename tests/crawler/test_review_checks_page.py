"""Page checks compare URLs as the crawl stores them: a page's own URL written in
Unicode, with an IDN host, or with escapes the normaliser upper-cases is still
that URL, and is not reported as another page, another host or untidy."""

from __future__ import annotations

from tests.crawler.test_checks import html, of, page

CAFE = "https://example.com/caf%C3%A9-menu"  # as the crawl stores /café-menu


def test_upper_case_escapes_of_a_non_latin_path_are_not_uppercase_letters():
    assert of("url_hygiene", page(url=CAFE)) == []
    assert of("url_hygiene", page(url="https://example.com/%C3%9Cber-uns"))  # /Über-uns: a real capital


def test_an_hreflang_self_reference_written_in_unicode_or_with_the_default_port_names_this_page():
    alternates = ('<link rel="alternate" hreflang="fr" href="https://example.com/café-menu">'
                  '<link rel="alternate" hreflang="x-default" href="https://EXAMPLE.com:443/">')
    assert of("hreflang_error", page(html(head=alternates), url=CAFE)) == []
    home = page(html(head=alternates), url="https://example.com/")
    assert of("hreflang_error", home) == []
    elsewhere = page(html(head=alternates), url="https://example.com/other")
    assert [f.message for f in of("hreflang_error", elsewhere)] == ["hreflang set does not include this page itself"]


def test_a_canonical_on_the_pages_idn_host_written_in_unicode_is_not_another_host():
    tag = '<link rel="canonical" href="https://bücher.example/guide">'
    assert of("canonical_relative_or_invalid", page(html(canonical=tag), url="https://xn--bcher-kva.example/guide")) == []
    [hit] = of("canonical_relative_or_invalid", page(html(canonical=tag), url="https://example.com/guide"))
    assert hit.message.endswith("points to another host (bücher.example)")


def test_a_canonical_tag_and_link_header_naming_one_url_in_two_spellings_do_not_conflict():
    tag = '<link rel="canonical" href="https://example.com/café-menu">'
    same = {"link": f'<{CAFE}>; rel="canonical"'}
    assert of("canonical_conflict", page(html(canonical=tag), url=CAFE, headers=same)) == []
    other = {"link": '<https://example.com/menu>; rel="canonical"'}
    assert of("canonical_conflict", page(html(canonical=tag), url=CAFE, headers=other))


def test_noindex_after_an_unavailable_after_date_with_a_comma_is_still_read():
    # RFC 822 and RFC 850 dates, both formats Google reads, hold a comma.
    for date in ("Sun, 06 Nov 2026 08:49:37 GMT", "Sunday, 06-Nov-26 08:49:37 GMT"):
        header = {"x-robots-tag": f"unavailable_after: {date}, noindex"}
        [hit] = of("noindex", page(headers=header))
        assert "X-Robots-Tag" in hit.message
    assert of("noindex", page(headers={"x-robots-tag": "otherbot: unavailable_after: Sun, 06 Nov 2026, noindex"})) == []


def test_a_page_canonicalised_elsewhere_may_carry_its_canonicals_hreflang_set():
    alternates = ('<link rel="alternate" hreflang="en" href="https://example.com/guide">'
                  '<link rel="alternate" hreflang="x-default" href="https://example.com/guide">')
    variant = "https://example.com/guide?sort=new"
    assert of("hreflang_error", page(html(head=alternates), url=variant)) == []
    uncanonical = page(html(head=alternates, canonical=""), url=variant)
    assert [f.message for f in of("hreflang_error", uncanonical)] == ["hreflang set does not include this page itself"]
