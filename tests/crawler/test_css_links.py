"""Link targets of a stylesheet (crawler.css): url() in its spellings and @import, with
comments, data: URLs and fragment references left out, resolved against the sheet's URL."""

from crawler.css import css_links, decode_css
from crawler.types import Link

BASE = "https://example.com/static/css/site.css"


def targets(text: str, limit: int = 500) -> list[tuple[str, str]]:
    return [(link.url, link.tag) for link in css_links(text, BASE, limit)]


def test_url_spellings_quoted_unquoted_and_spaced_resolve_against_the_stylesheet():
    css = """
        .a { background: url(img/a.png) }
        .b { background-image: url("../img/b.png") }
        .c { background: url( 'https://cdn.example.org/c.png' ) no-repeat }
        .d { background: URL(/root/d.png) }
    """
    assert targets(css) == [
        ("https://example.com/static/css/img/a.png", "css"),
        ("https://example.com/static/img/b.png", "css"),
        ("https://cdn.example.org/c.png", "css"),
        ("https://example.com/root/d.png", "css"),
    ]


def test_font_face_src_lists_keep_every_url_and_skip_local():
    css = """@font-face {
        font-family: Body;
        src: local("Body"), url(../fonts/body.woff2) format("woff2"),
             url("../fonts/body.woff") format("woff"), url(../fonts/body.svg#body) format("svg");
    }"""
    assert targets(css) == [
        ("https://example.com/static/fonts/body.woff2", "css"),
        ("https://example.com/static/fonts/body.woff", "css"),
        ("https://example.com/static/fonts/body.svg", "css"),  # the fragment is not part of the target
    ]


def test_import_in_both_forms_is_tagged_css_import_and_its_conditions_are_not_targets():
    css = """@charset "utf-8";
        @import "base.css";
        @import url(print.css) print;
        @IMPORT url("layers.css") layer(base) supports(display: grid) screen;
        @namespace svg url(http://www.w3.org/2000/svg);
        a { color: red }
    """
    assert targets(css) == [
        ("https://example.com/static/css/base.css", "css-import"),
        ("https://example.com/static/css/print.css", "css-import"),
        ("https://example.com/static/css/layers.css", "css-import"),
    ]


def test_data_urls_fragment_references_comments_and_other_schemes_are_not_targets():
    css = """
        /* .old { background: url(commented-out.png) } */
        .e { background: url(data:image/png;base64,iVBORw0KGgo=) }
        .f { background: url("DATA:image/svg+xml;utf8,<svg></svg>") }
        .g { clip-path: url(#clip) ; filter: url( "#blur" ) }
        .h { behavior: url(javascript:alert(1)) }
        .i { content: "url(in-a-string.png)" }
        .j { background: url() }
        .k { background: url(kept.png) }
    """
    assert targets(css) == [("https://example.com/static/css/kept.png", "css")]


def test_escapes_are_decoded_as_css_does():
    css = r""".a { background: url(we\(ird\).png) }
              .b { background: url("sp\61 ce\"d.png") }
              .c { background: url(\2f abs.png) }"""
    assert targets(css) == [
        ("https://example.com/static/css/we(ird).png", "css"),
        ("https://example.com/static/css/space%22d.png", "css"),
        ("https://example.com/abs.png", "css"),
    ]


def test_nested_rules_image_set_and_duplicates():
    css = """
        @media (min-width: 40em) { .a { background: url(wide.png) } @supports (x: y) { .b { mask: url(m.svg) } } }
        .c { background-image: image-set("one.png" 1x, url(two.png) 2x) }
        .d { background: url(wide.png) }
    """
    assert targets(css) == [
        ("https://example.com/static/css/wide.png", "css"),
        ("https://example.com/static/css/m.svg", "css"),
        ("https://example.com/static/css/one.png", "css"),
        ("https://example.com/static/css/two.png", "css"),
    ]


def test_at_most_limit_targets_are_returned():
    css = "".join(f".r{n} {{ background: url(sprite-{n}.png) }}\n" for n in range(2000))
    links = css_links(css, BASE, 500)
    assert len(links) == 500
    assert links[0] == Link("https://example.com/static/css/sprite-0.png", "css")
    assert links[-1].url.endswith("/sprite-499.png")
    assert css_links(css, BASE, 0) == []


def test_unterminated_and_broken_css_still_yields_what_it_can():
    assert targets(".a { background: url(ok.png) } .b { background: url(\"never-closed.png") == [
        ("https://example.com/static/css/ok.png", "css"),
        ("https://example.com/static/css/never-closed.png", "css"),
    ]
    assert targets("}}}{{{ @import ; @import 42; url(") == []


def test_decoding_follows_the_bom_then_the_http_charset_then_charset_rule():
    latin = '@charset "iso-8859-1"; .a { background: url(caf\xe9.png) }'.encode("latin-1")
    assert "café.png" in decode_css(latin, None)
    assert "café.png" in decode_css(".a{background:url(café.png)}".encode(), "utf-8")
    assert "café.png" in decode_css(b"\xef\xbb\xbf.a{background:url(caf\xc3\xa9.png)}", "latin-1")
