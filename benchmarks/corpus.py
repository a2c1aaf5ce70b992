"""A deterministic corpus of realistic pages for the library benchmark.

Each page is about 40 KB of HTML shaped like a content site's article page:
a head with title, description, canonical, Open Graph tags, stylesheets, an
inline critical-CSS block and an analytics snippet; a header with an SVG
logo, a 14-item nav and a search form; a breadcrumb; an article of about
1,800 words with headings, inline links, responsive images (a fifth without
alt) and JSON-LD; related-article cards; comments; a footer. About 30% of the
bytes are visible text, the rest markup, styles, scripts and icons (a usual
text-to-HTML ratio). It carries 60-110 ``<a>`` links (86 on average), about
3% of them to URLs that answer 404 and a few to external hosts. Every page is
reachable from ``/`` (links to ``i+1`` and to its binary-tree children keep
the click depth low), and the same seed always gives byte-identical pages.

The images, stylesheets and scripts an audit checks (``src`` of ``<img>`` and
``<script>``, the ``srcset`` candidates of ``<picture><source>``, stylesheet
links) and the icon exist too, as small placeholder files, except 3% of the
article and card images, chosen by their path: a site whose every image
answered 404 would make an audit record tens of thousands of broken-resource
issues no real site has. (The ``og:image`` and the JSON-LD logo are not
served: nothing requests them.)

    python -m benchmarks.corpus --pages 2000 --out /tmp/corpus   # write files for nginx
"""

from __future__ import annotations

import argparse
import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

_WORDS = (
    "audit site crawl page link index search engine content title meta description "
    "canonical redirect status server response header body image alt text heading "
    "article section navigation footer sitemap robots directive performance cache "
    "latency request client browser render script style layout mobile desktop user "
    "visitor traffic ranking keyword query result snippet schema structured data "
    "the a of and to in is for on with as by that this from at are be it or an was "
    "garden recipe travel market history science music film health river mountain "
    "coffee bread winter summer harbour station library museum village festival"
).split()

_SECTIONS = (
    "news guides reviews recipes travel science culture sport business "
    "technology health opinion archive about contact"
).split()


@dataclass(frozen=True)
class Corpus:
    """Path -> HTML bytes for every page that exists, path -> bytes for every asset; other paths answer 404."""

    pages: dict[str, bytes]
    broken: frozenset[str]  # paths linked from pages that do not exist
    seed: int
    assets: dict[str, bytes] = field(default_factory=dict)  # images, stylesheets, scripts, the icon
    missing_assets: frozenset[str] = frozenset()  # asset paths referenced but not served

    @property
    def reachable(self) -> int:
        """URLs a full crawl fetches: every page plus every distinct broken target."""
        return len(self.pages) + len(self.broken)

    @property
    def bytes_total(self) -> int:
        return sum(len(body) for body in self.pages.values())


def page_path(i: int) -> str:
    return "/" if i == 0 else f"/p/{i}.html"


# Referenced by every page, always there.
_SITE_ASSETS = ("/static/site.css", "/static/print.css", "/static/app.js", "/favicon.ico", "/img/avatar.png")
# Each asset kind by extension: its content type (both static servers send
# it) and a placeholder body; what a HEAD check sees is the type and length.
ASSET_KINDS = {
    ".css": ("text/css", b"body{margin:0}\n" * 64),
    ".js": ("application/javascript", b"void 0;\n" * 128),
    ".ico": ("image/x-icon", b"\x00\x00\x01\x00" + bytes(1020)),
    ".png": ("image/png", b"\x89PNG\r\n\x1a\n" + bytes(2040)),
    ".jpg": ("image/jpeg", b"\xff\xd8\xff\xe0" + bytes(4092)),
    ".avif": ("image/avif", b"\x00\x00\x00\x1cftypavif" + bytes(3060)),
    ".webp": ("image/webp", b"RIFF\xf8\x0b\x00\x00WEBPVP8 " + bytes(3060)),
}
MISSING_ASSET_PERCENT = 3


def _asset_missing(path: str) -> bool:
    """3% of the numbered images, by a hash of the path (no random state: pages stay byte-identical)."""
    return path not in _SITE_ASSETS and zlib.crc32(path.encode()) % 100 < MISSING_ASSET_PERCENT


def _sentence(rng: random.Random, low: int, high: int) -> str:
    words = rng.choices(_WORDS, k=rng.randint(low, high))
    return " ".join(words).capitalize()


_LOGO_SVG = (
    '<svg class="logo-mark" viewBox="0 0 64 64" width="32" height="32" aria-hidden="true">'
    '<path d="M32 2 L62 17 L62 47 L32 62 L2 47 L2 17 Z M32 10 L10 21 L10 43 L32 54 L54 43 '
    'L54 21 Z" fill="currentColor"/><circle cx="32" cy="32" r="9" fill="#e4572e"/></svg>'
)
_ICON_SVG = (
    '<svg class="icon icon-{name}" viewBox="0 0 24 24" width="18" height="18" aria-hidden="true">'
    '<path d="M18 16.1c-.8 0-1.4.3-2 .8l-7.1-4.2c.1-.2.1-.5.1-.7s0-.5-.1-.7L16 7.2c.5.5 1.2.8 '
    "2 .8 1.7 0 3-1.3 3-3s-1.3-3-3-3-3 1.3-3 3c0 .2 0 .5.1.7L8 9.8C7.5 9.3 6.8 9 6 9c-1.7 0-3 "
    "1.3-3 3s1.3 3 3 3c.8 0 1.5-.3 2-.8l7.1 4.2c-.1.2-.1.4-.1.6 0 1.6 1.3 2.9 2.9 2.9s2.9-1.3 "
    '2.9-2.9-1.3-2.9-2.9-2.9z"/></svg>'
)


# Themes inline an SVG sprite of their icons at the top of the body.
_SPRITE = (
    '<svg xmlns="http://www.w3.org/2000/svg" style="display:none">'
    + "".join(
        f'<symbol id="i-{name}" viewBox="0 0 24 24"><path d="M{k} 2h{20 - k}v{k + 3}H{k}z'
        "m0 7h20v2H0zm3 5h18v2H3zm-3 5h24v2H0zM12 2.5c2.5 0 4.5 2 4.5 4.5S14.5 11.5 12 11.5 "
        '7.5 9.5 7.5 7 9.5 2.5 12 2.5z"/></symbol>'
        for k, name in enumerate(
            "home search menu close share mail print copy user clock tag rss arrow chevron "
            "play pause".split()
        )
    )
    + "</svg>\n"
)


def _style_block(rng: random.Random) -> str:
    """An inline stylesheet of the size themes inline for above-the-fold CSS."""
    rules = []
    for k in range(rng.randint(85, 105)):
        selector = f".{rng.choice(_SECTIONS)}-{k} .{rng.choice(_WORDS)}"
        rules.append(
            f"{selector}{{margin:{rng.randint(0, 24)}px {rng.randint(0, 24)}px;"
            f"padding:{rng.randint(0, 16)}px;color:#{rng.randrange(0x1000000):06x};"
            f"font-size:{rng.randint(12, 22)}px;line-height:1.{rng.randint(2, 8)}}}"
        )
    return "<style>" + "\n".join(rules) + "</style>\n"


def _render(
    i: int, n: int, rng: random.Random, broken_pool: list[str], used_broken: set[str], images: set[str]
) -> bytes:
    """One page shaped like a content site's article: about 40 KB, roughly a
    quarter of it visible text, the rest markup, styles, scripts and icons."""
    total_links = rng.randint(60, 110)
    nav = [page_path(k) for k in range(1, min(n, 15))]
    footer = [page_path(k) for k in rng.sample(range(n), min(n, 10))]
    related = [page_path(k) for k in rng.sample(range(n), min(n, 8))]
    structural = [page_path(k) for k in (i + 1, 2 * i + 1, 2 * i + 2) if k < n]
    # The logo, the skip link, two breadcrumb links and four heading anchors
    # complete the page's fixed links.
    fixed = len(nav) + len(footer) + len(related) + len(structural) + 8
    inline: list[str] = []
    for _ in range(max(0, total_links - fixed)):
        if rng.random() < 0.03:
            target = rng.choice(broken_pool)
            used_broken.add(target)
            inline.append(target)
        elif rng.random() < 0.04:
            inline.append(f"https://external{rng.randint(1, 40)}.example/{rng.randint(1, 999)}")
        else:
            inline.append(page_path(rng.randrange(n)))

    title = _sentence(rng, 2, 12)
    section = _SECTIONS[i % len(_SECTIONS)]
    out: list[str] = [
        '<!DOCTYPE html>\n<html lang="en" class="no-js">\n<head>\n<meta charset="utf-8">\n',
        f"<title>{title}</title>\n",
    ]
    if rng.random() < 0.9:
        out.append(f'<meta name="description" content="{_sentence(rng, 8, 30)}">\n')
    out.append('<meta name="viewport" content="width=device-width, initial-scale=1">\n')
    out.append(f'<link rel="canonical" href="{page_path(i)}">\n')
    for prop, value in (
        ("og:type", "article"),
        ("og:title", title),
        ("og:url", page_path(i)),
        ("og:image", f"/img/{i}-social.jpg"),
        ("og:site_name", "Siteward Gazette"),
        ("article:section", section),
    ):
        out.append(f'<meta property="{prop}" content="{value}">\n')
    out.append('<link rel="stylesheet" href="/static/site.css?v=20260101">\n')
    out.append('<link rel="stylesheet" href="/static/print.css" media="print">\n')
    out.append('<link rel="preconnect" href="https://fonts.example">\n')
    out.append('<link rel="icon" href="/favicon.ico" sizes="any">\n')
    out.append(_style_block(rng))
    out.append(
        "<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}"
        f'gtag("js",new Date());gtag("config","G-BENCH{i % 97:02d}",{{"anonymize_ip":true,'
        f'"page_path":"{page_path(i)}","content_group":"{section}"}});'
        'document.documentElement.className=document.documentElement.className.replace("no-js","js");'
        "</script>\n"
    )
    out.append('<script src="/static/app.js?v=20260101" defer></script>\n</head>\n')
    out.append(f'<body class="page page-article section-{section}" data-page-id="{i}">\n')
    out.append('<a class="skip-link visually-hidden" href="#content">Skip to content</a>\n')
    out.append(_SPRITE)
    out.append(
        '<header class="site-header" role="banner"><div class="container header-inner">'
        f'<a class="logo" href="/" aria-label="Home">{_LOGO_SVG}'
        '<span class="logo-text">Siteward Gazette</span></a>\n'
    )
    out.append('<nav class="main-nav" aria-label="Main"><ul class="nav-list" role="menubar">\n')
    for k, href in enumerate(nav):
        label = _SECTIONS[k % len(_SECTIONS)].capitalize()
        out.append(
            f'<li class="nav-item nav-item-{k}" role="none"><a class="nav-link" role="menuitem" '
            f'href="{href}" data-track="nav-{k}"><span class="nav-label">{label}</span></a></li>\n'
        )
    out.append(
        '</ul></nav><form class="search-form" role="search" action="/search" method="get">'
        '<label class="visually-hidden" for="q">Search</label><input id="q" name="q" '
        'type="search" placeholder="Search the site" autocomplete="off">'
        '<button type="submit" class="btn btn-icon">'
        + _ICON_SVG.format(name="search")
        + "</button>"
        "</form></div></header>\n"
    )
    out.append(
        '<main id="content" class="site-main" role="main"><div class="container layout-grid">\n'
        '<nav class="breadcrumb" aria-label="Breadcrumb"><ol>'
        f'<li><a href="/">Home</a></li><li><a href="{nav[i % len(nav)]}">{section.capitalize()}</a>'
        f'</li><li aria-current="page">{title}</li></ol></nav>\n'
    )
    out.append('<article class="post" itemscope itemtype="https://schema.org/Article">\n')
    out.append(
        f'<header class="post-header"><h1 class="post-title" itemprop="headline">{title}</h1>\n'
    )
    if rng.random() < 0.05:
        out.append(f"<h1>{_sentence(rng, 2, 5)}</h1>\n")
    out.append(
        f'<div class="post-meta"><span class="author" itemprop="author">{_sentence(rng, 2, 3)}</span>'
        f' <time class="published" datetime="2026-0{1 + i % 9}-1{i % 10}" itemprop="datePublished">'
        f"day {i}</time></div>"
        '<div class="share-buttons" role="group" aria-label="Share">'
        + "".join(
            f'<button type="button" class="btn btn-share btn-{name}" data-share="{name}" '
            f'aria-label="Share on {name}">{_ICON_SVG.format(name=name)}</button>'
            for name in ("mail", "copy", "print")
        )
        + "</div></header>\n"
    )
    links = structural + inline
    rng.shuffle(links)
    paragraphs = 18
    per_paragraph = len(links) // paragraphs + 1
    out.append('<div class="post-body" itemprop="articleBody">\n')
    for paragraph in range(paragraphs):
        if paragraph % 4 == 0:
            out.append(
                f'<h2 id="s{paragraph}" class="section-title"><a class="anchor" '
                f'href="#s{paragraph}" aria-hidden="true">#</a>{_sentence(rng, 3, 8)}</h2>\n'
            )
        out.append('<p class="body-text">')
        for k in range(rng.randint(4, 6)):
            out.append(_sentence(rng, 10, 22))
            out.append(". ")
            if links and k < per_paragraph:
                href = links.pop()
                out.append(f'<a href="{href}" class="inline-link">{_sentence(rng, 1, 4)}</a>. ')
        out.append("</p>\n")
        if paragraph % 4 == 2:
            img = rng.randrange(5000)
            images.add(f"/img/{img}-800.jpg")
            images.update(f"/img/{img}-{width}.{kind}" for width in (400, 800, 1600) for kind in ("avif", "webp"))
            alt = f' alt="{_sentence(rng, 2, 6)}"' if rng.random() < 0.8 else ""
            out.append(
                '<figure class="media media-wide"><picture>'
                f'<source type="image/avif" srcset="/img/{img}-400.avif 400w, /img/{img}-800.avif 800w, '
                f'/img/{img}-1600.avif 1600w" sizes="(max-width: 800px) 100vw, 800px">'
                f'<source type="image/webp" srcset="/img/{img}-400.webp 400w, /img/{img}-800.webp 800w, '
                f'/img/{img}-1600.webp 1600w" sizes="(max-width: 800px) 100vw, 800px">'
                f'<img src="/img/{img}-800.jpg"{alt} width="800" height="450" loading="lazy" '
                f'decoding="async"></picture><figcaption class="caption">{_sentence(rng, 4, 10)}'
                "</figcaption></figure>\n"
            )
    while links:  # whatever did not fit in the prose goes in a "see also" list
        out.append(f'<p class="see-also"><a href="{links.pop()}">{_sentence(rng, 2, 5)}</a></p>\n')
    out.append("</div>\n")
    out.append(
        '<script type="application/ld+json">{"@context":"https://schema.org",'
        f'"@type":"Article","headline":"{title}","wordCount":{rng.randint(900, 3000)},'
        f'"articleSection":"{section}","publisher":{{"@type":"Organization",'
        '"name":"Siteward Gazette","logo":{"@type":"ImageObject","url":"/img/logo.png"}}}'
        "</script>\n</article>\n"
    )
    out.append('<aside class="related" aria-labelledby="related-title">')
    out.append('<h2 id="related-title" class="widget-title">Related</h2><div class="card-grid">\n')
    for href in related:
        img = rng.randrange(5000)
        images.add(f"/img/{img}-320.jpg")
        out.append(
            f'<div class="card"><a class="card-link" href="{href}" data-track="related">'
            f'<div class="card-media"><img src="/img/{img}-320.jpg" alt="" width="320" height="180" '
            f'loading="lazy"></div><div class="card-body"><h3 class="card-title">'
            f'{_sentence(rng, 3, 7)}</h3><span class="card-meta">{rng.randint(2, 12)} min read'
            "</span></div></a></div>\n"
        )
    out.append("</div></aside>\n")
    out.append('<section class="comments" aria-label="Comments"><h2>Comments</h2>\n')
    for _ in range(rng.randint(2, 4)):
        out.append(
            '<div class="comment"><div class="comment-avatar"><img src="/img/avatar.png" alt="" '
            'width="40" height="40"></div><div class="comment-content"><div class="comment-author">'
            f"{_sentence(rng, 1, 2)}</div><p>{_sentence(rng, 8, 25)}.</p>"
            '<button type="button" class="btn btn-link btn-reply">Reply</button></div></div>\n'
        )
    out.append("</section>\n</div></main>\n")
    out.append('<footer class="site-footer" role="contentinfo"><div class="container footer-grid">')
    for col in range(0, len(footer), 4):
        out.append('<div class="footer-col"><ul class="footer-links">')
        for href in footer[col : col + 4]:
            out.append(f'<li><a href="{href}">{_sentence(rng, 1, 3)}</a></li>')
        out.append("</ul></div>\n")
    out.append(
        '<p class="legal">&copy; 2026 Siteward Gazette. '
        f"{_sentence(rng, 10, 20)}.</p></div></footer>\n"
        '<div id="cookie-banner" class="cookie-banner" hidden><p>We use no cookies at all.</p>'
        '<button type="button" class="btn">OK</button></div>\n</body>\n</html>\n'
    )
    return "".join(out).encode()


def build_corpus(n_pages: int = 2000, seed: int = 20260101) -> Corpus:
    """Generate ``n_pages`` pages; the same arguments give the same bytes."""
    if n_pages < 2:
        raise ValueError("a corpus needs at least two pages")
    rng = random.Random(seed)
    broken_pool = [f"/gone/{k}.html" for k in range(max(5, n_pages // 20))]
    used_broken: set[str] = set()
    images: set[str] = set()
    pages = {
        page_path(i): _render(i, n_pages, rng, broken_pool, used_broken, images) for i in range(n_pages)
    }
    referenced = images | set(_SITE_ASSETS)
    assets = {path: ASSET_KINDS[Path(path).suffix][1] for path in sorted(referenced) if not _asset_missing(path)}
    return Corpus(pages=pages, broken=frozenset(used_broken), seed=seed, assets=assets,
                  missing_assets=frozenset(referenced - assets.keys()))


def write_corpus(corpus: Corpus, root: Path) -> None:
    """Write pages and assets as files (``/`` becomes ``index.html``) for a file server such as nginx."""
    for path, body in (*corpus.pages.items(), *corpus.assets.items()):
        target = root / ("index.html" if path == "/" else path.lstrip("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    corpus = build_corpus(args.pages, args.seed)
    write_corpus(corpus, args.out)
    sizes = sorted(len(b) for b in corpus.pages.values())
    print(
        f"{len(corpus.pages)} pages, median {sizes[len(sizes) // 2]} bytes, "
        f"{len(corpus.broken)} broken targets, {len(corpus.assets)} assets "
        f"({len(corpus.missing_assets)} missing), written to {args.out}"
    )


if __name__ == "__main__":
    main()
