"""hreflang and <html lang> codes are read as Google reads them: an ISO 639-1 language, an optional ISO 15924
script and an ISO 3166-1 region; a code of the right shape naming none of them is an error too."""

import pytest

from crawler.lang_codes import LANGUAGES, REGIONS, SCRIPTS, lang_code_problem
from tests.crawler.readers import page_findings


@pytest.mark.parametrize("code", ["en", "en-GB", "en-gb", "EN-us", "zh-Hans", "zh-Hant-TW", "sr-Latn", "es-419",
                                  "pt-BR", "fil-PH", "yue", "nb-NO"])
def test_codes_search_engines_read_are_valid(code):
    assert lang_code_problem(code) is None


@pytest.mark.parametrize(("code", "why"), [
    ("en-UK", "UK is no ISO 3166-1 region; the United Kingdom is GB"),
    ("xx-YY", "xx is no ISO 639-1 language"),
    ("us", "us is no ISO 639-1 language"),
    ("en-EU", "EU is no ISO 3166-1 region"),
    ("zh-Abcd", "Abcd is no ISO 15924 script"),
    ("en_US", "not a language code"),
    ("english", "not a language code"),
])
def test_a_code_of_the_right_shape_naming_no_language_script_or_region_is_invalid(code, why):
    assert why in lang_code_problem(code)


def test_the_tables_hold_what_iso_lists():
    assert len(LANGUAGES) == 184 and {"en", "he", "nb", "zh"} <= LANGUAGES and "iw" not in LANGUAGES
    assert len(REGIONS) == 249 and {"GB", "US", "XK"} - REGIONS == {"XK"} and "UK" not in REGIONS
    assert {"Latn", "Hans", "Hant", "Cyrl"} <= SCRIPTS


def page(head: str, lang: str = "en") -> bytes:
    return (f'<!doctype html><html lang="{lang}"><head><title>Guide to the shop</title>{head}</head>'
            f'<body><h1>Guide</h1><p>{"words " * 300}</p></body></html>').encode()


def test_an_hreflang_for_the_uk_written_en_uk_is_reported_with_the_fix():
    head = ('<link rel="alternate" hreflang="en-UK" href="https://example.com/guide">'
            '<link rel="alternate" hreflang="x-default" href="https://example.com/guide">')
    messages = [f.message for f in page_findings(page(head)) if f.code == "hreflang_error"]
    assert messages == ['Invalid hreflang language code "en-UK" (UK is no ISO 3166-1 region; the United Kingdom is GB)']


def test_an_html_lang_naming_no_language_is_reported_and_a_real_one_is_not():
    assert "html_lang_missing" not in {f.code for f in page_findings(page("", lang="de-CH"))}
    messages = [f.message for f in page_findings(page("", lang="en-UK")) if f.code == "html_lang_missing"]
    assert messages == ['<html lang="en-UK"> is not a valid language code: UK is no ISO 3166-1 region; '
                        'the United Kingdom is GB']
