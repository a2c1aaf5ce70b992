"""Include/exclude patterns are user input: they run on RE2, in time linear in the URL."""

from __future__ import annotations

import re
import time

import pytest

from crawler.urls import Scope, compile_patterns

# 2**50 backtracking paths for Python's re; RE2 reads the URL once.
CATASTROPHIC = r"(a+)+$"
LONG_URL = "http://x/" + "a" * 50 + "!"


# pytest-timeout's SIGALRM interrupts a backtracking re (sre checks signals), so
# on a backtracking engine this fails instead of hanging the run.
@pytest.mark.timeout(5, method="signal")
@pytest.mark.parametrize("pattern", [CATASTROPHIC, r"(a|aa)+$", r"(a*)*b", r"(.*a){20}!x"])
def test_a_catastrophic_pattern_matches_in_well_under_a_second(pattern):
    (compiled,) = compile_patterns([pattern])
    started = time.perf_counter()
    found = compiled.search(LONG_URL)
    assert time.perf_counter() - started < 0.5
    assert found is None


@pytest.mark.timeout(5, method="signal")
def test_scope_with_a_catastrophic_include_or_exclude_answers_quickly():
    started = time.perf_counter()
    assert not Scope("http://x/", include=(CATASTROPHIC,)).contains(LONG_URL)
    assert Scope("http://x/", exclude=(CATASTROPHIC,)).contains(LONG_URL)
    assert not Scope("http://x/", exclude=(CATASTROPHIC,)).contains("http://x/aaaa")
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(("pattern", "construct"), [
    (r"(a)\1", r"\1"),
    (r"(?P<y>\d+)-(?P=y)", "(?P"),
    (r"/blog/(?=draft)", "(?="),
    (r"/blog/(?!draft)", "(?!"),
    (r"(?<=/)private", "(?<="),
    (r"(?<!/)private", "(?<!"),
])
def test_backreferences_and_lookaround_are_refused_with_the_re2_hint(pattern, construct):
    with pytest.raises(ValueError) as caught:
        compile_patterns(["/ok/", pattern])
    message = str(caught.value)
    # The pattern as typed (no doubled backslashes), RE2's reason, and which syntax applies.
    assert f"'{pattern}'" in message and construct in message
    assert "RE2 syntax: no backreferences or lookaround" in message


def test_a_syntax_error_still_names_the_pattern():
    with pytest.raises(ValueError, match=re.escape("invalid pattern '/blog/(unclosed': missing )")):
        compile_patterns(["/blog/(unclosed"])


def test_an_undecodable_pattern_is_refused_not_crashed():
    # An undecodable command-line byte arrives as a lone surrogate.
    with pytest.raises(ValueError, match="not valid UTF-8"):
        compile_patterns(["/caf\udce9/"])


def test_pattern_count_and_length_are_capped():
    assert len(compile_patterns([f"/s{i}/" for i in range(50)])) == 50
    with pytest.raises(ValueError, match="more than 50 patterns"):
        compile_patterns([f"/s{i}/" for i in range(51)])
    assert len(compile_patterns(["a" * 500])) == 1
    with pytest.raises(ValueError, match="longer than 500 characters"):
        compile_patterns(["a" * 501])


# Patterns people write for URLs mean the same on RE2 as they did on re.
EVERYDAY = [
    r"^https://example\.com/blog/",
    r"/blog/\d{4}/\d{2}/",
    r"(?i)/PRODUCTS/",
    r"\.(pdf|zip|jpe?g)$",
    r"[?&]page=[0-9]+",
    r"print=1|utm_[a-z]+=",
    r"/tag/[^/]+/?$",
    r"^https?://[^/]+/(en|de)(/|$)",
    r"(?P<lang>en|fr)/docs",
    r"\bsale\b",
    r"/a{2,3}b",
]
URLS = [
    "https://example.com/", "https://example.com/blog/2024/05/post", "https://example.com/Products/x",
    "https://example.com/files/report.pdf", "https://example.com/photo.jpeg?x=1",
    "https://example.com/list?sort=a&page=12", "https://example.com/x?utm_source=mail",
    "https://example.com/tag/python/", "https://example.com/tag/python/feed", "https://example.com/en",
    "https://example.com/de/about", "https://example.com/fr/docs/", "https://example.com/spring-sale",
    "https://example.com/presale", "https://example.com/aab", "https://example.com/ab",
]


@pytest.mark.parametrize("pattern", EVERYDAY)
def test_everyday_patterns_match_as_pythons_re_did(pattern):
    (compiled,) = compile_patterns([pattern])
    for url in URLS:
        assert bool(compiled.search(url)) == bool(re.search(pattern, url)), (pattern, url)


def test_scope_include_then_exclude_is_unchanged():
    scope = Scope("https://example.com", include=(r"/blog/", r"/tag/"), exclude=(r"/blog/drafts/", r"(?i)PRINT=1"))
    assert scope.contains("https://example.com/blog/post")
    assert scope.contains("https://example.com/tag/x")
    assert not scope.contains("https://example.com/about")
    assert not scope.contains("https://example.com/blog/drafts/x")
    assert not scope.contains("https://example.com/blog/post?Print=1")
    assert not scope.contains("https://other.example/blog/post")
