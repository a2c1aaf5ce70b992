"""A deterministic corpus of realistic pages for the library benchmark.

Each page is about 40 KB of HTML shaped like a content site: a head with
title, description, canonical, stylesheet and script; a header nav; an article
with headings, paragraphs, inline links, images (some without alt) and a
JSON-LD block; a related-links aside; a footer. It carries 60-110 links, a few
percent of which point at URLs that answer 404. Every page is reachable from
``/`` (a link to ``i+1`` and to its binary-tree children keeps the click depth
near log2 N), and the same seed always gives byte-identical pages.

    python -m benchmarks.corpus --pages 2000 --out /tmp/corpus   # write files for nginx
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
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
    """Path -> HTML bytes for every page that exists; other paths answer 404."""

    pages: dict[str, bytes]
    broken: frozenset[str]  # paths linked from pages that do not exist
    seed: int

    @property
    def reachable(self) -> int:
        """URLs a full crawl fetches: every page plus every distinct broken target."""
        return len(self.pages) + len(self.broken)

    @property
    def bytes_total(self) -> int:
        return sum(len(body) for body in self.pages.values())


def page_path(i: int) -> str:
    return "/" if i == 0 else f"/p/{i}.html"


def _sentence(rng: random.Random, low: int, high: int) -> str:
    words = rng.choices(_WORDS, k=rng.randint(low, high))
    return " ".join(words).capitalize()


def _render(
    i: int, n: int, rng: random.Random, broken_pool: list[str], used_broken: set[str]
) -> bytes:
    """One page; link targets mix structure (children, next) with random picks."""
    total_links = rng.randint(60, 110)
    nav = [page_path(k) for k in range(1, min(n, 15))]
    footer = [page_path(k) for k in rng.sample(range(n), min(n, 10))]
    structural = [page_path(k) for k in (i + 1, 2 * i + 1, 2 * i + 2) if k < n]
    # The logo and eight related links are the rest of the page's links.
    inline_count = max(0, total_links - len(nav) - len(footer) - len(structural) - 9)
    inline: list[str] = []
    for _ in range(inline_count):
        if rng.random() < 0.03:
            target = rng.choice(broken_pool)
            used_broken.add(target)
            inline.append(target)
        elif rng.random() < 0.04:
            inline.append(f"https://external{rng.randint(1, 40)}.example/{rng.randint(1, 999)}")
        else:
            inline.append(page_path(rng.randrange(n)))

    title = _sentence(rng, 2, 12)
    out: list[str] = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
        f"<title>{title}</title>\n",
    ]
    if rng.random() < 0.9:
        out.append(f'<meta name="description" content="{_sentence(rng, 8, 30)}">\n')
    out.append('<meta name="viewport" content="width=device-width, initial-scale=1">\n')
    out.append(f'<link rel="canonical" href="{page_path(i)}">\n')
    out.append('<link rel="stylesheet" href="/static/site.css">\n')
    out.append('<link rel="preconnect" href="https://fonts.example">\n')
    out.append('<script src="/static/app.js" defer></script>\n</head>\n<body class="page">\n')
    out.append('<header class="site-header"><a class="logo" href="/">Siteward Gazette</a>\n')
    out.append('<nav class="main-nav" aria-label="Main"><ul>\n')
    for k, href in enumerate(nav):
        label = _SECTIONS[k % len(_SECTIONS)].capitalize()
        out.append(f'<li class="nav-item"><a class="nav-link" href="{href}">{label}</a></li>\n')
    out.append('</ul></nav></header>\n<main id="content">\n<article class="post">\n')
    out.append(f'<h1 class="post-title">{title}</h1>\n')
    if rng.random() < 0.05:
        out.append(f"<h1>{_sentence(rng, 2, 5)}</h1>\n")
    out.append(
        f'<p class="byline">By <span class="author">{_sentence(rng, 2, 3)}</span>'
        f' on <time datetime="2026-0{1 + i % 9}-1{i % 10}">day {i}</time></p>\n'
    )
    links = structural + inline
    rng.shuffle(links)
    paragraphs = 28
    per_paragraph = len(links) // paragraphs + 1
    for paragraph in range(paragraphs):
        if paragraph % 4 == 0:
            out.append(f'<h2 id="s{paragraph}" class="section-title">{_sentence(rng, 3, 8)}</h2>\n')
        out.append('<div class="para-wrap"><p class="body-text">')
        for k in range(rng.randint(8, 12)):
            out.append(_sentence(rng, 10, 24))
            out.append(". ")
            if links and k < per_paragraph:
                href = links.pop()
                out.append(f'<a href="{href}" class="inline-link">{_sentence(rng, 1, 4)}</a>. ')
        out.append("</p></div>\n")
        if paragraph % 5 == 2:
            src = f"/img/{rng.randrange(5000)}.jpg"
            alt = f' alt="{_sentence(rng, 2, 6)}"' if rng.random() < 0.8 else ""
            out.append(
                f'<figure class="media"><img src="{src}"{alt} width="800" height="450" '
                f'loading="lazy"><figcaption>{_sentence(rng, 4, 10)}</figcaption></figure>\n'
            )
    out.append(
        '<script type="application/ld+json">{"@context":"https://schema.org",'
        f'"@type":"Article","headline":"{title}","wordCount":{rng.randint(900, 3000)}}}'
        "</script>\n</article>\n"
    )
    out.append('<aside class="related"><h2>Related</h2><ul>\n')
    for k in rng.sample(range(n), min(n, 8)):
        out.append(f'<li><a href="{page_path(k)}">{_sentence(rng, 3, 7)}</a></li>\n')
    out.append('</ul></aside>\n</main>\n<footer class="site-footer"><ul>\n')
    for href in footer:
        out.append(f'<li><a href="{href}">{_sentence(rng, 1, 3)}</a></li>\n')
    out.append(
        '</ul><p class="legal">&copy; 2026 Siteward Gazette. '
        f"{_sentence(rng, 20, 40)}.</p></footer>\n</body>\n</html>\n"
    )
    return "".join(out).encode()


def build_corpus(n_pages: int = 2000, seed: int = 20260101) -> Corpus:
    """Generate ``n_pages`` pages; the same arguments give the same bytes."""
    if n_pages < 2:
        raise ValueError("a corpus needs at least two pages")
    rng = random.Random(seed)
    broken_pool = [f"/gone/{k}.html" for k in range(max(5, n_pages // 20))]
    used_broken: set[str] = set()
    pages = {
        page_path(i): _render(i, n_pages, rng, broken_pool, used_broken) for i in range(n_pages)
    }
    return Corpus(pages=pages, broken=frozenset(used_broken), seed=seed)


def write_corpus(corpus: Corpus, root: Path) -> None:
    """Write pages as files (``/`` becomes ``index.html``) for a file server such as nginx."""
    for path, body in corpus.pages.items():
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
        f"{len(corpus.broken)} broken targets, written to {args.out}"
    )


if __name__ == "__main__":
    main()
