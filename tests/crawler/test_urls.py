"""URL normalisation, scope and trap guards: pure functions over hostile input."""

from __future__ import annotations

import hashlib
import re

import pytest

from crawler.urls import (
    TRAP_DEPTH_SPREAD,
    InvalidURL,
    Scope,
    TrapGuard,
    compile_patterns,
    normalize,
    origin_of,
    template_key,
    trap_reason,
    url_hash,
)

# (input, expected normal form). Each row is one way a page can spell a URL.
NORMALISED = [
    ("HTTP://Example.COM/", "http://example.com/"),
    ("http://example.com/page#section-2", "http://example.com/page"),
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("http://example.com:443/a", "http://example.com:443/a"),
    ("http://example.com:0080/a", "http://example.com/a"),
    ("http://example.com", "http://example.com/"),
    ("http://example.com?q=1", "http://example.com/?q=1"),
    ("http://example.com/a/./b/../../c/./d/", "http://example.com/c/d/"),
    ("http://example.com/../../../etc/passwd", "http://example.com/etc/passwd"),
    ("http://example.com/a/%2e%2E/b", "http://example.com/b"),
    ("http://example.com/%7euser/%41%62c", "http://example.com/~user/Abc"),
    ("http://example.com/a%2fb%3f", "http://example.com/a%2Fb%3F"),
    ('http://example.com/a b"<>`{}|^', "http://example.com/a%20b%22%3C%3E%60%7B%7D%7C%5E"),
    ("http://example.com/100%/50%zz", "http://example.com/100%25/50%25zz"),
    ("http://example.com/café?q=é ü", "http://example.com/caf%C3%A9?q=%C3%A9%20%C3%BC"),
    ("http://example.com/a\x01b\x7f", "http://example.com/a%01b%7F"),
    ("  \x00 http://example.com/x \x1f ", "http://example.com/x"),
    ("http://exa\tmple.com/a\r\nb", "http://example.com/ab"),
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("http://BÜCHER.de/", "http://xn--bcher-kva.de/"),
    ("http://例え.テスト/", "http://xn--r8jz45g.xn--zckzah/"),
    ("http://a。b.com/", "http://a.b.com/"),
    ("http://i❤.ws/", "http://xn--i-7iq.ws/"),
    ("http://ex%61mple.com/", "http://example.com/"),
    ("http://example.com./", "http://example.com/"),
    ("http://user:secret@example.com/a", "http://example.com/a"),
    # Browsers read everything before the last "@" as credentials, so do we.
    ("http://example.com%2F@evil.org/", "http://evil.org/"),
    ("http://example.com\\@evil.com/", "http://example.com/@evil.com/"),
    ("http:\\\\example.com\\a\\b?x=\\", "http://example.com/a/b?x=%5C"),
    ("http://2130706433/", "http://127.0.0.1/"),
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://127.1/", "http://127.0.0.1/"),
    ("http://0177.0.0.1/", "http://127.0.0.1/"),
    ("http://[::1]:8080/", "http://[::1]:8080/"),
    ("http://[0:0:0:0:0:0:0:1]/", "http://[::1]/"),
    ("http://[2001:DB8::A]/", "http://[2001:db8::a]/"),
    ("http://example.com/?", "http://example.com/"),
    ("http://example.com/?&&", "http://example.com/"),
    ("http://example.com/?b=2&a=1&b=1", "http://example.com/?b=2&a=1&b=1"),
    ("http://example.com/?a=1&&b=2&", "http://example.com/?a=1&b=2"),
    ("http://example.com/s?q=a+b&r=[1]", "http://example.com/s?q=a+b&r=%5B1%5D"),
    ("http://example.com/x;jsessionid=0A1B2C3D", "http://example.com/x"),
    ("http://example.com/x;JSESSIONID=abc/y", "http://example.com/x/y"),
    ("http://example.com/?PHPSESSID=9f8e&page=2", "http://example.com/?page=2"),
    ("http://example.com/?page=2&sid=9f8e7d6c5b4a39281706&SessionId=A1B2C3D4E5F6G7H8I9&jsessionid=3",
     "http://example.com/?page=2"),
    # A short or non-token sid is the site's own id (PHP-Nuke's story number): kept, or every story is one URL.
    ("http://example.com/article.php?file=article&sid=123", "http://example.com/article.php?file=article&sid=123"),
    ("http://example.com/?sessionid=spring-sale", "http://example.com/?sessionid=spring-sale"),
    ("http://example.com/?ASPSESSIONIDQAQBTC=xyz&CFID=1&cftoken=2&a=1", "http://example.com/?a=1"),
    ("http://example.com/?side=1&sidebar=2", "http://example.com/?side=1&sidebar=2"),
]


@pytest.mark.parametrize(("raw", "expected"), NORMALISED)
def test_normalize_gives_one_spelling_per_page(raw, expected):
    assert normalize(raw) == expected


@pytest.mark.parametrize(("raw", "expected"), NORMALISED)
def test_normalize_is_idempotent(raw, expected):
    assert normalize(normalize(raw)) == normalize(raw)


# (input, words the refusal message must contain)
REFUSED = [
    ("mailto:someone@example.com", "scheme"),
    ("javascript:alert(document.cookie)", "scheme"),
    (" JavaScript:alert(1)", "scheme"),
    ("data:text/html,<script>alert(1)</script>", "scheme"),
    ("tel:+15551234567", "scheme"),
    ("ftp://example.com/file", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("ws://example.com/socket", "scheme"),
    ("//example.com/no-base", "relative"),
    ("/just/a/path", "relative"),
    ("http://user@evil@127.0.0.1/", "ambiguous"),
    ("http://a@b@c@example.com/", "ambiguous"),
    ("http:///path-without-host", "no host"),
    ("http://exa mple.com/", "invalid characters"),
    ("http://exa<mple.com/", "invalid characters"),
    ("http://exa%00mple.com/", "invalid characters"),
    ("http://exa%2Fmple.com/", "invalid characters"),
    ("http://a..b.com/", "invalid characters"),
    ("http://" + "a" * 64 + ".com/", "invalid characters"),
    ("http://example.com:99999/", "out of range"),
    ("http://example.com:0/", "out of range"),
    ("http://example.com:8o/", "invalid port"),
    ("http://example.com:80:80/", "invalid port"),
    ("http://[::1/", "IPv6"),
    ("http://[fe80::1%25eth0]/", "zone"),
    ("http://[not-an-address]/", "IPv6"),
    ("http://[::1]junk/", "junk"),
    ("http://256.1.1.1/", "out of range"),
    ("http://1.2.3.4.5/", "too many parts"),
    ("http://09.1.1.1/", "IPv4"),
    ("http://example.123/", "IPv4"),
    ("http://%FF%FE.com/", "percent-escapes"),
    ("http://" + "x" * 40_000 + ".com/", "longer than"),
]


@pytest.mark.parametrize(("raw", "reason"), REFUSED)
def test_normalize_refuses_what_is_not_a_crawlable_web_address(raw, reason):
    with pytest.raises(InvalidURL, match=re.escape(reason)):
        normalize(raw)


@pytest.mark.parametrize("raw", [
    "https://ann:hunt/er2@example.com/",
    "https://ann:hunt?er2@example.com/",
    "https://ann:hunt#er2@example.com/",
    "https://ann:hunt/er2@example.com/page?q=1#top",
])
def test_a_password_cut_short_by_a_raw_slash_question_mark_or_hash_is_never_quoted_and_the_fix_is_named(raw):
    # By the URL standard the authority ends at the "/", "?" or "#": "hunt" would be the port.
    with pytest.raises(InvalidURL) as caught:
        normalize(raw)
    message = str(caught.value)
    assert "hunt" not in message and "er2" not in message
    assert "percent-encoded (%2F, %3F, %23)" in message and "password with '/', '?' or '#'" in message


def test_a_password_of_digits_cut_short_is_not_quoted_as_an_out_of_range_port_either():
    with pytest.raises(InvalidURL) as caught:
        normalize("https://ann:271828/18@example.com/")
    assert "271828" not in str(caught.value) and "%2F" in str(caught.value)


def test_a_bad_port_without_a_password_after_it_is_named_without_quoting_it():
    with pytest.raises(InvalidURL) as caught:
        normalize("http://example.com:8oo0/")
    assert str(caught.value) == "invalid port: a port is a number from 1 to 65535"
    # A number is no secret: an out-of-range port is quoted, so the person sees which one.
    with pytest.raises(InvalidURL, match="port 99999 is out of range"):
        normalize("http://example.com:99999/")


def test_hostile_cases_cover_at_least_thirty_inputs():
    assert len(NORMALISED) + len(REFUSED) >= 30 + 30


RELATIVE = [
    ("../x?y=1", "http://example.com/a/b/c", "http://example.com/a/x?y=1"),
    ("../../../../x", "http://example.com/a/b", "http://example.com/x"),
    ("//other.example.org/p", "https://example.com/", "https://other.example.org/p"),
    ("?page=2", "http://example.com/list?page=1#top", "http://example.com/list?page=2"),
    ("#only-a-fragment", "http://example.com/a?b=1", "http://example.com/a?b=1"),
    ("", "http://example.com/a?b=1#c", "http://example.com/a?b=1"),
    ("  page.html\n", "http://example.com/dir/", "http://example.com/dir/page.html"),
    ("http:other", "http://example.com/dir/x", "http://example.com/dir/other"),
    ("HTTPS://Example.com:443/", "http://example.com/", "https://example.com/"),
]


@pytest.mark.parametrize(("ref", "base", "expected"), RELATIVE)
def test_relative_references_resolve_against_the_base(ref, base, expected):
    assert normalize(ref, base) == expected


# RFC 3986 section 5.4, base "http://a/b/c/d;p?q" (fragments dropped, empty
# path as "/"; "http:g" takes the lenient reading the RFC allows).
RFC3986_EXAMPLES = {
    "g": "http://a/b/c/g",
    "./g": "http://a/b/c/g",
    "g/": "http://a/b/c/g/",
    "/g": "http://a/g",
    "//g": "http://g/",
    "?y": "http://a/b/c/d;p?y",
    "g?y": "http://a/b/c/g?y",
    "#s": "http://a/b/c/d;p?q",
    "g#s": "http://a/b/c/g",
    "g?y#s": "http://a/b/c/g?y",
    ";x": "http://a/b/c/;x",
    "g;x": "http://a/b/c/g;x",
    "g;x?y#s": "http://a/b/c/g;x?y",
    "": "http://a/b/c/d;p?q",
    ".": "http://a/b/c/",
    "./": "http://a/b/c/",
    "..": "http://a/b/",
    "../": "http://a/b/",
    "../g": "http://a/b/g",
    "../..": "http://a/",
    "../../": "http://a/",
    "../../g": "http://a/g",
    "../../../g": "http://a/g",
    "../../../../g": "http://a/g",
    "/./g": "http://a/g",
    "/../g": "http://a/g",
    "g.": "http://a/b/c/g.",
    ".g": "http://a/b/c/.g",
    "g..": "http://a/b/c/g..",
    "..g": "http://a/b/c/..g",
    "./../g": "http://a/b/g",
    "./g/.": "http://a/b/c/g/",
    "g/./h": "http://a/b/c/g/h",
    "g/../h": "http://a/b/c/h",
    "g;x=1/./y": "http://a/b/c/g;x=1/y",
    "g;x=1/../y": "http://a/b/c/y",
    "g?y/./x": "http://a/b/c/g?y/./x",
    "g#s/../x": "http://a/b/c/g",
    "http:g": "http://a/b/c/g",
}


@pytest.mark.parametrize(("ref", "expected"), sorted(RFC3986_EXAMPLES.items()))
def test_rfc3986_reference_resolution_examples(ref, expected):
    assert normalize(ref, "http://a/b/c/d;p?q") == expected


def test_relative_reference_to_another_scheme_is_still_refused():
    with pytest.raises(InvalidURL, match="scheme"):
        normalize("javascript:void(0)", "http://example.com/")


def test_a_base_that_is_not_http_is_refused():
    with pytest.raises(InvalidURL, match="base"):
        normalize("/a", "file:///etc/")


def test_origin_of_keeps_only_scheme_host_and_non_default_port():
    assert origin_of("HTTPS://Example.com:443/a?b#c") == "https://example.com"
    assert origin_of("http://127.0.0.1:8080/x") == "http://127.0.0.1:8080"
    assert origin_of("http://[::1]:81") == "http://[::1]:81"


def test_url_hash_is_a_stable_32_hex_key():
    digest = url_hash("https://example.com/")
    assert re.fullmatch(r"[0-9a-f]{32}", digest)
    # Pinned: the key is stored in the database, so it must never change.
    assert digest == "3259687d649f8e86106dd28ba70f1016"
    assert url_hash("https://example.com/") != url_hash("https://example.com/a")


def test_url_hash_matches_blake2b_128():
    import hashlib

    url = "https://example.com/caf%C3%A9"
    assert url_hash(url) == hashlib.blake2b(url.encode(), digest_size=16).hexdigest()


# ---------------------------------------------------------------- templates


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("https://e.com/cal?month=5&year=2026", "https://e.com/cal?year=2027&month=6"),
        ("https://e.com/2026/01/01/", "https://e.com/1999/12/31/"),
        ("https://e.com/archive/page-12", "https://e.com/archive/page-13"),
        (
            "https://e.com/o/550e8400-e29b-41d4-a716-446655440000",
            "https://e.com/o/6ba7b810-9dad-11d1-80b4-00c04fd430c8",
        ),
        ("https://e.com/c/5f3a9c2e1b7d", "https://e.com/c/a1b2c3d4e5f6a7b8"),
        ("https://e.com/f?color=red", "https://e.com/f?color=red&color=blue"),
    ],
)
def test_variants_of_one_page_template_share_a_template_key(first, second):
    assert template_key(first) == template_key(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("https://e.com/cal?month=5", "https://e.com/cal?day=5"),
        ("https://e.com/blog/hello", "https://e.com/blog/world"),
        ("https://e.com/a/1", "https://other.com/a/1"),
        ("https://e.com/deadbeefcafe", "https://e.com/facadebeef"),
    ],
)
def test_different_pages_keep_different_template_keys(first, second):
    assert template_key(first) != template_key(second)


def test_template_key_is_readable_and_leaves_percent_escapes_alone():
    assert (
        template_key("https://e.com/cal/2026/01/?year=2026&month=1&f%5B0%5D=x")
        == "https://e.com/cal/{n}/{n}/?f%5B{n}%5D&month&year"
    )
    assert template_key("https://e.com/caf%C3%A9/7") == "https://e.com/caf%C3%A9/{n}"


# ---------------------------------------------------------------- traps


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://e.com/" + "a" * 2100, "characters long"),
        ("https://e.com/" + "/".join(str(i) for i in range(16)), "16 segments"),
        ("https://e.com/a/a/a/a", "repeats 'a'"),
        ("https://e.com/x/a/b/a/b/a/b/a/b/", "repeats 'a/b'"),
        ("https://e.com/img/x/y/z/x/y/z/x/y/z/x/y/z", "repeats 'x/y/z'"),
        ("https://e.com/s?" + "&".join(f"p{i}=1" for i in range(51)), "51 parameters"),
        ("https://e.com/s?" + "&".join("a" for _ in range(500)), "500 parameters"),
    ],
)
def test_trap_reason_names_the_trap(url, reason):
    assert reason in trap_reason(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://e.com/",
        "https://e.com/" + "a" * 2000,
        "https://e.com/" + "/".join(str(i) for i in range(15)) + "/",
        "https://e.com/a/a/a/b",
        "https://e.com/news/2026/01/01/news",
        "https://e.com/s?" + "&".join(f"p{i}=1" for i in range(50)),
    ],
)
def test_trap_reason_lets_ordinary_urls_through(url):
    assert trap_reason(url) is None


def test_trap_reason_limits_are_configurable():
    assert trap_reason("https://e.com/a/b/c", max_segments=2) is not None
    assert trap_reason("https://e.com/a/a", max_repeats=1) is not None
    assert trap_reason("https://e.com/abc", max_length=10) is not None


def test_endless_calendar_stops_once_its_variants_keep_getting_deeper():
    guard = TrapGuard(max_variants=12)
    admitted = []
    for month in range(1, 1000):  # each month is found on the previous one, a click deeper
        url = f"https://e.com/cal?month={month}&year={2026 + month // 12}"
        if guard.check(url, depth=month) is None:
            admitted.append(url)
        else:
            assert "share the template https://e.com/cal?month&year" in guard.check(url, depth=month)
    assert len(admitted) == 12


def test_date_path_calendar_stops_after_the_template_budget():
    guard = TrapGuard(max_variants=5)
    results = [guard.check(f"https://e.com/{2026 + d // 365}/01/{d:02d}/", depth=d) for d in range(40)]
    assert results[:6] == [None] * 6  # the sixth is still within TRAP_DEPTH_SPREAD of the first
    assert all(r is not None for r in results[6:])


def test_a_template_whose_variants_sit_at_one_depth_is_a_catalogue_not_a_trap():
    guard = TrapGuard(max_variants=2)
    assert all(guard.check(f"https://e.com/product/{n}", depth=2) is None for n in range(1, 200))


def test_trap_guard_keeps_admitting_urls_it_already_admitted_and_other_templates():
    guard = TrapGuard(max_variants=2)
    assert guard.check("https://e.com/p/1", depth=1) is None
    assert guard.check("https://e.com/p/2", depth=2) is None
    assert guard.check("https://e.com/p/3", depth=1 + TRAP_DEPTH_SPREAD + 1) is not None
    assert guard.check("https://e.com/p/1", depth=1) is None
    assert guard.check("https://e.com/about", depth=9) is None


def test_trap_guard_applies_the_per_url_checks_first():
    assert "repeats" in TrapGuard().check("https://e.com/a/a/a/a/a", depth=1)


# ---------------------------------------------------------------- scope


def test_scope_is_the_exact_origin():
    scope = Scope("https://example.com/start?x=1")
    assert scope.contains("https://example.com/a")
    assert scope.contains("HTTPS://EXAMPLE.COM:443/b#frag")
    assert not scope.contains("http://example.com/a")
    assert not scope.contains("https://www.example.com/a")
    assert not scope.contains("https://example.com:8443/a")
    assert not scope.contains("https://example.com.evil.org/a")
    assert not scope.contains("https://evil.org/https://example.com/")
    assert not scope.contains("mailto:a@example.com")
    assert not scope.contains("https://user@evil@example.com/")


def test_scope_for_a_www_origin_does_not_include_the_apex():
    scope = Scope("https://www.example.com")
    assert scope.contains("https://www.example.com/x")
    assert not scope.contains("https://example.com/x")


def test_scope_include_and_exclude_search_the_full_url_and_exclude_wins():
    scope = Scope(
        "https://example.com",
        include=(r"/blog/", r"\?page="),
        exclude=(r"/blog/drafts/", r"print=1"),
    )
    assert scope.contains("https://example.com/blog/post")
    assert scope.contains("https://example.com/list?page=2")
    assert not scope.contains("https://example.com/about")
    assert not scope.contains("https://example.com/blog/drafts/x")
    assert not scope.contains("https://example.com/blog/post?print=1")


def test_scope_patterns_match_the_normalised_url():
    scope = Scope("https://example.com", exclude=(r"^https://example\.com/private",))
    assert not scope.contains("HTTPS://example.com:443/./x/../private/")


def test_compile_patterns_names_the_bad_pattern():
    with pytest.raises(ValueError, match=re.escape("'/blog/(unclosed'")):
        compile_patterns(["/ok/", "/blog/(unclosed"])


def test_compile_patterns_skips_blank_lines_and_caps_length():
    assert [p.pattern for p in compile_patterns(["  /a/ ", "", "   "])] == ["/a/"]
    with pytest.raises(ValueError, match="longer than"):
        compile_patterns(["a" * 600])


def test_scope_refuses_a_bad_pattern_when_built():
    with pytest.raises(ValueError, match="invalid pattern"):
        Scope("https://example.com", include=("[",))


def test_url_hash_is_the_blake2b_digest_of_the_url_whatever_its_length():
    for url in ("https://example.com/a", "https://example.com/" + "x" * 5000):
        assert url_hash(url) == hashlib.blake2b(url.encode(), digest_size=16).hexdigest()
