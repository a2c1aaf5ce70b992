"""Per-page checks: each one fires on the page that has the problem and not on one that lacks it.

Pages go through the real parser, so a case reads as the HTML (and headers) a
site would serve. ``clean_page`` passes every check; each case changes one thing.
"""

from __future__ import annotations

import pytest

from crawler.catalogue import CATALOGUE
from crawler.checks import CHECKS, CheckSettings, PageContext, run_page_checks
from crawler.parse import parse_html
from crawler.types import FetchError, FetchResult, Hop, Severity

PAGE = "https://example.com/guide"
GOOD_HEADERS = {
    "strict-transport-security": "max-age=31536000",
    "x-content-type-options": "nosniff",
    "content-security-policy": "frame-ancestors 'self'",
}
WORDS = " ".join(["audit"] * 250)
TITLE = "A practical guide to site audits"  # 32 characters
DESCRIPTION = "How to crawl a site, read its problems and fix the ones that matter first, with examples and tips."


def internal(url: str) -> bool:
    return url == "https://example.com" or url.startswith("https://example.com/")


def context(in_sitemap: bool = False, **settings) -> PageContext:
    return PageContext(CheckSettings(**settings), is_internal=internal, in_sitemap=in_sitemap)


def html(
    *, title=f"<title>{TITLE}</title>", description=f'<meta name="description" content="{DESCRIPTION}">',
    canonical=f'<link rel="canonical" href="{PAGE}">', lang=' lang="en"',
    viewport='<meta name="viewport" content="width=device-width">', head="",
    h1="<h1>Site audits</h1>", words=WORDS, links='<a href="/next">Next</a>', body="",
) -> str:
    return (
        f"<!doctype html><html{lang}><head><meta charset='utf-8'>{title}{description}{viewport}"
        f"{canonical}{head}</head><body>{h1}<p>{words}</p>{links}{body}</body></html>"
    )


def page(markup: str | None = None, *, url=PAGE, headers=None, **result):
    """(FetchResult, PageFacts) for an HTML page served at ``url``."""
    body = (markup if markup is not None else html()).encode()
    fetched = FetchResult(
        url=result.pop("requested", url), final_url=url, status=result.pop("status", 200),
        content_type="text/html", headers=GOOD_HEADERS if headers is None else headers,
        body=body, size=result.pop("size", len(body)), **result,
    )
    return fetched, parse_html(body, url)


def failed(**result):
    return FetchResult(url=PAGE, final_url=PAGE, **result), None


def findings(case, ctx=None):
    result, facts = case
    return run_page_checks(result, facts, ctx or context())


def codes(case, ctx=None):
    return [f.code for f in findings(case, ctx)]


def of(code, case, ctx=None):
    return [f for f in findings(case, ctx) if f.code == code]


CHAIN = (Hop("https://example.com/a", 301, "https://example.com/b"),
         Hop("https://example.com/b", 301, PAGE))

# (code, a page that has the problem, a page that does not); the clean page is
# also checked against every code below.
CASES = [
    ("http_4xx", lambda: failed(status=404), lambda: failed(status=200)),
    ("http_5xx", lambda: failed(status=503), lambda: failed(status=404)),
    ("fetch_failed", lambda: failed(error=FetchError.CONNECT_TIMEOUT, error_detail="no answer in 5 s"),
     lambda: failed(error=FetchError.REDIRECT_LOOP)),
    ("redirect_loop", lambda: failed(error=FetchError.REDIRECT_LOOP, redirects=CHAIN),
     lambda: page(redirects=CHAIN)),
    ("redirect_chain", lambda: page(redirects=CHAIN), lambda: page(redirects=CHAIN[1:])),
    ("redirect_temporary", lambda: page(redirects=(Hop("https://example.com/old", 302, PAGE),)),
     lambda: page(redirects=(Hop("https://other.org/x", 302, PAGE),))),
    ("slow_response", lambda: page(ttfb=1.25), lambda: page(ttfb=0.3)),
    ("meta_refresh", lambda: page(html(head='<meta http-equiv="refresh" content="0; url=/new">')),
     lambda: page(html(head='<meta http-equiv="content-language" content="en">'))),
    ("mixed_content_active", lambda: page(html(body='<script src="http://cdn.org/a.js"></script>')),
     lambda: page(html(body='<script src="http://cdn.org/a.js"></script>'),
                  url="http://example.com/guide")),
    ("mixed_content_passive", lambda: page(html(body='<img src="http://cdn.org/a.png" alt="">')),
     lambda: page(html(body='<img src="https://cdn.org/a.png" alt="">'))),
    ("insecure_link_or_form", lambda: page(html(body='<a href="http://example.com/x">x</a>')),
     lambda: page(html(body='<a href="http://other.org/x">x</a>'))),
    ("noindex", lambda: page(html(head='<meta name="robots" content="noindex">')),
     lambda: page(headers={**GOOD_HEADERS, "x-robots-tag": "otherbot: noindex"})),
    ("nofollow", lambda: page(headers={**GOOD_HEADERS, "x-robots-tag": "nofollow"}),
     lambda: page(html(body='<a href="https://other.org/" rel="nofollow">ad</a>'))),
    ("canonical_missing", lambda: page(html(canonical="")),
     lambda: page(html(canonical=""), headers={**GOOD_HEADERS, "link": f'<{PAGE}>; rel="canonical"'})),
    ("canonical_conflict",
     lambda: page(headers={**GOOD_HEADERS, "link": '<https://example.com/other>; rel="canonical"'}),
     lambda: page(headers={**GOOD_HEADERS, "link": f'<{PAGE}>; rel="canonical"'})),
    ("canonical_relative_or_invalid", lambda: page(html(canonical='<link rel="canonical" href="/guide">')),
     lambda: page(html(canonical='<link rel="canonical" href="https://example.com/guide?">'))),
    ("title_missing", lambda: page(html(title="")), lambda: page(html(title="<title>x</title>"))),
    ("title_length", lambda: page(html(title="<title>" + "t" * 74 + "</title>")),
     lambda: page(html(title="<title>" + "t" * 60 + "</title>"))),
    ("meta_description_missing", lambda: page(html(description="")),
     lambda: page(html(description='<meta name="description" content="short">'))),
    ("meta_description_length", lambda: page(html(description='<meta name="description" content="short">')),
     lambda: page(html(description=""))),
    ("head_tags_multiple", lambda: page(html(head="<title>Second title</title>")),
     lambda: page(html(body="<svg><title>icon</title></svg>"))),
    ("h1_missing", lambda: page(html(h1="<h1> </h1>")), lambda: page(html(h1="<h1>One</h1>"))),
    ("h1_multiple", lambda: page(html(h1="<h1>One</h1><h1></h1>")),
     lambda: page(html(h1="<h1>One</h1><h2>Two</h2>"))),
    ("img_alt_missing", lambda: page(html(body='<img src="/a.png">')),
     lambda: page(html(body='<img src="/a.png" alt="">'))),
    ("hreflang_error",
     lambda: page(html(head='<link rel="alternate" hreflang="en_US" href="/guide">'
                            '<link rel="alternate" hreflang="x-default" href="/guide">')),
     lambda: page(html(head='<link rel="alternate" hreflang="en-US" href="/guide">'
                            '<link rel="alternate" hreflang="x-default" href="/">'))),
    ("large_html", lambda: page(size=2_500_000), lambda: page(size=1_900_000)),
    ("html_lang_missing", lambda: page(html(lang="")), lambda: page(html(lang=' lang="pt-BR"'))),
    ("structured_data_invalid", lambda: page(html(head='<script type="application/ld+json">{"@type": "X"}</script>')),
     lambda: page(html(head='<script type="application/ld+json">'
                            '{"@context": "https://schema.org", "@type": "X"}</script>'))),
    ("viewport_missing", lambda: page(html(viewport="")),
     lambda: page(html(viewport='<meta name="Viewport" content="width=device-width">'))),
    ("heading_order", lambda: page(html(body="<h2>a</h2><h4>b</h4>")),
     lambda: page(html(body="<h2>a</h2><h3>b</h3><h2>c</h2>"))),
    ("thin_content", lambda: page(html(words="Just a few words here.")),
     lambda: page(html(words="Few words.", head='<meta name="robots" content="noindex">'))),
    ("dead_end", lambda: page(html(links="")),
     lambda: page(html(links='<map><area href="/x" alt="x"></map>'))),
    ("url_hygiene", lambda: page(url="https://example.com/My_Page?utm_source=news"),
     lambda: page(url="https://example.com/my-page?id=3")),
    ("security_headers_missing", lambda: page(headers={}),
     lambda: page(headers={}, url="http://example.com/guide")),
]


def test_a_clean_page_has_no_findings():
    assert findings(page()) == []


@pytest.mark.parametrize(("code", "positive", "negative"), CASES, ids=[c[0] for c in CASES])
def test_check_fires_on_the_problem_and_not_on_its_absence(code, positive, negative):
    hits = of(code, positive())
    assert hits, f"{code} did not fire"
    assert all(f.message and f.severity in Severity for f in hits)
    assert of(code, negative()) == []


def test_h1_multiple_counts_headings_past_the_kept_outline_and_says_how_many_are_empty():
    # The outline (facts.headings) keeps the first MAX_HEADINGS; the <h1>s after it still count.
    long_page = page(html(h1="<h2>s</h2>" * 1000 + "<h1>One</h1><h1>Two</h1>"))
    assert [f.message for f in of("h1_multiple", long_page)] == ["Page has 2 <h1> headings"]
    assert [f.message for f in of("h1_multiple", page(html(h1="<h1>One</h1><h1> </h1>")))] == [
        "Page has 2 <h1> headings, 1 of them empty"]


def test_every_registered_check_is_named_for_a_catalogue_code_and_tested():
    names = {check.__name__ for check, _ in CHECKS}
    assert names <= CATALOGUE.keys()
    assert names == {code for code, _, _ in CASES}


def test_only_parsed_2xx_html_gets_on_page_checks():
    pdf = (FetchResult(url=PAGE, final_url=PAGE, status=200, content_type="application/pdf"), None)
    assert codes(pdf) == []
    not_found, facts = page(html(title=""), status=404)
    assert codes((not_found, facts)) == ["http_4xx"]
    broken = failed(error=FetchError.TLS_ERROR, error_detail="certificate has expired")
    assert codes(broken) == ["fetch_failed"]


def test_fetch_failed_message_is_the_label_and_the_detail():
    [hit] = of("fetch_failed", failed(error=FetchError.DNS_FAILURE, error_detail="nx.example.com"))
    assert hit.message == "Host name could not be resolved: nx.example.com"
    assert hit.severity == Severity.CRITICAL


def test_title_length_message_names_the_length_and_the_limit():
    [long] = of("title_length", page(html(title="<title>" + "t" * 74 + "</title>")))
    assert long.message == "Title is 74 characters; keep it under 60"
    [short] = of("title_length", page(html(title="<title>Home</title>")))
    assert short.message == "Title is 4 characters; aim for at least 20"
    assert of("title_length", page(html(title="<title>Home</title>")), context(title_min=3)) == []


def test_noindex_is_critical_when_the_page_is_in_the_sitemap():
    case = page(headers={**GOOD_HEADERS, "x-robots-tag": "googlebot: noindex"})
    [plain] = of("noindex", case)
    [escalated] = of("noindex", case, context(in_sitemap=True))
    assert plain.severity == Severity.WARNING and "X-Robots-Tag" in plain.message
    assert escalated.severity == Severity.CRITICAL and "sitemap" in escalated.message


def test_noindex_page_is_not_asked_for_a_canonical():
    case = page(html(canonical="", head='<meta name="robots" content="none">'))
    assert "canonical_missing" not in codes(case)


def test_internal_nofollow_links_give_one_finding_per_target():
    case = page(html(body='<a href="/a" rel="nofollow">1</a><a href="/a" rel="nofollow">2</a>'
                          '<a href="/b" rel="ugc nofollow">3</a>'))
    assert [f.target_url for f in of("nofollow", case)] == [
        "https://example.com/a", "https://example.com/b",
    ]


def test_mixed_content_names_each_target():
    case = page(html(body='<script src="http://cdn.org/a.js"></script><link rel="stylesheet" '
                          'href="http://cdn.org/s.css"><iframe src="http://v.org/e"></iframe>'))
    assert [f.target_url for f in of("mixed_content_active", case)] == [
        "http://cdn.org/a.js", "http://cdn.org/s.css", "http://v.org/e",
    ]


def test_insecure_form_is_a_warning_and_insecure_link_a_notice():
    case = page(html(body='<a href="http://example.com/x">x</a><form action="http://forms.org/p">'))
    severities = {f.target_url: f.severity for f in of("insecure_link_or_form", case)}
    assert severities == {
        "http://example.com/x": Severity.NOTICE, "http://forms.org/p": Severity.WARNING,
    }


def test_canonical_conflict_reports_a_canonical_outside_head():
    case = page(html(body=f'<link rel="canonical" href="{PAGE}">'))
    [hit] = of("canonical_conflict", case)
    assert "outside <head>" in hit.message


@pytest.mark.parametrize(
    ("href", "says"),
    [("", "is empty"), ("http://[bad", "is malformed"), ("https://other.org/guide", "another host"),
     ("http://example.com/guide", "uses http://"), ("javascript:x", "not an http(s) URL")],
)
def test_canonical_problems_are_named(href, says):
    [hit] = of("canonical_relative_or_invalid", page(html(canonical=f'<link rel="canonical" href="{href}">')))
    assert says in hit.message


def test_images_without_alt_give_one_finding_per_url():
    case = page(html(body='<img src="/a.png"><img src="/a.png"><img src="/b.png"><img src="/c.png" alt="">'))
    assert [f.target_url for f in of("img_alt_missing", case)] == [
        "https://example.com/a.png", "https://example.com/b.png",
    ]


def test_hreflang_reports_each_problem():
    case = page(html(head='<link rel="alternate" hreflang="english" href="/en">'))
    messages = " | ".join(f.message for f in of("hreflang_error", case))
    assert '"english"' in messages and "itself" in messages and "x-default" in messages


def test_temporary_redirect_names_the_hop():
    case = page(redirects=(Hop("https://example.com/old", 307, PAGE),))
    [hit] = of("redirect_temporary", case)
    assert hit.message == f"https://example.com/old answers 307 (temporary) to {PAGE}"


def test_slow_response_fires_just_over_the_limit_and_not_at_it():
    [hit] = of("slow_response", page(ttfb=0.8004))
    assert hit.message.startswith("Server took 801 ms")
    assert of("slow_response", page(ttfb=0.8)) == []


def test_slow_response_threshold_is_a_setting():
    assert of("slow_response", page(ttfb=1.0), context(slow_ms=1500)) == []
    [hit] = of("slow_response", page(ttfb=1.0))
    assert "1,000 ms" in hit.message


def test_canonical_conflict_says_which_sources_disagree():
    case = page(headers={**GOOD_HEADERS, "link": '<https://example.com/other>; rel="canonical"'})
    [hit] = of("canonical_conflict", case)
    assert hit.message == (
        f"The canonical tag ({PAGE}) and the Link header (https://example.com/other) disagree"
    )
    two_tags = page(html(head='<link rel="canonical" href="https://example.com/b">'))
    [hit] = of("canonical_conflict", two_tags)
    assert hit.message == f"2 different canonicals: {PAGE}, https://example.com/b"


def test_canonical_conflict_reports_the_same_canonical_tag_twice_but_not_a_header_repeating_the_tag():
    # CHECKS: more than one canonical. A template and a plugin each writing the tag is
    # a bug to fix even when they agree; the Link header saying what the tag says is not.
    twice = page(html(head=f'<link rel="canonical" href="{PAGE}">'))
    [hit] = of("canonical_conflict", twice)
    assert hit.message == f"2 canonical tags in <head> for the same URL ({PAGE}); keep one"
    assert of("canonical_conflict", page(headers={**GOOD_HEADERS, "link": f'<{PAGE}>; rel="canonical"'})) == []
    # A second tag that is no URL is another check's finding, not "the same URL".
    assert of("canonical_conflict", page(html(head='<link rel="canonical" href="mailto:x@example.com">'))) == []
    # The same URL again outside <head> is reported as misplaced only.
    [hit] = of("canonical_conflict", page(html(body=f'<link rel="canonical" href="{PAGE}">')))
    assert hit.message == "A canonical tag sits outside <head>, where search engines ignore it"


def test_thin_content_counts_words_in_the_message():
    [hit] = of("thin_content", page(html(h1="<h1>Audits</h1>", words="", links="")))
    assert hit.message == "Only 1 word of body text (fewer than 200)"
