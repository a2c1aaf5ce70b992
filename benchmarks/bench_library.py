"""The library benchmark: parse + checks CPU, and crawl throughput against Scrapy.

One run measures, side by side on the same generated corpus:

(a) CPU per page (``time.process_time``) of ``parse_html`` + ``run_page_checks``
    against ``parse_html_bs4`` + the same checks, over the same pages;
(b) pages per second of ``crawl_site`` (no database) against Scrapy's
    CrawlSpider, both crawling the whole corpus from one loopback static
    server with the same concurrency, each in its own process.

It writes the figures to ``benchmarks/RESULTS-library.md`` (``--results``). It is a
script, never a timed test. Reproduce with::

    .venv/bin/pip install -r benchmarks/requirements.txt
    .venv/bin/python -m benchmarks.bench_library --install --results benchmarks/RESULTS-library.md
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a file as well as with -m
    sys.path.insert(0, str(REPO))

from benchmarks.corpus import Corpus, build_corpus  # noqa: E402
from benchmarks.static_server import install_nginx, probe, serve  # noqa: E402

TARGET_PARSE_RATIO = 5.0
TARGET_CRAWL_RATIO = 5.0


# (a) Parse + checks CPU per page ------------------------------------------------


def _page_inputs(corpus: Corpus, sample: int, base: str = "http://127.0.0.1:8080"):
    from crawler.types import FetchResult

    paths = sorted(corpus.pages)[:sample]
    inputs = []
    for path in paths:
        body = corpus.pages[path]
        url = base + path
        result = FetchResult(
            url=url,
            final_url=url,
            status=200,
            content_type="text/html",
            charset="utf-8",
            headers={"content-type": "text/html; charset=utf-8"},
            body=body,
            size=len(body),
            ttfb=0.01,
            elapsed=0.02,
        )
        inputs.append((url, body, result))
    return inputs


def _cpu_per_page(fn, inputs, rounds: int) -> float:
    """Best of ``rounds`` passes over all inputs, in ms of CPU per page."""
    best = float("inf")
    for _ in range(rounds):
        began = time.process_time()
        for url, body, result in inputs:
            fn(url, body, result)
        best = min(best, time.process_time() - began)
    return 1000 * best / len(inputs)


def measure_parse(corpus: Corpus, sample: int, rounds: int) -> dict:
    from crawler.checks import CheckSettings, PageContext, run_page_checks
    from crawler.page import outlinks_of
    from crawler.parse import parse_html
    from crawler.parse_bs4 import parse_html_bs4

    inputs = _page_inputs(corpus, sample)
    origin = "http://127.0.0.1:8080"
    ctx = PageContext(settings=CheckSettings(), is_internal=lambda url: url.startswith(origin))
    # Facts computed once, so the checks alone can be timed without the parser.
    facts = {url: parse_html(body, url, http_charset="utf-8") for url, body, _ in inputs}

    def ours(url, body, result):
        run_page_checks(result, parse_html(body, url, http_charset="utf-8"), ctx)

    def theirs(url, body, result):
        run_page_checks(result, parse_html_bs4(body, url, http_charset="utf-8"), ctx)

    def parse_only(url, body, result):
        parse_html(body, url, http_charset="utf-8")

    def bs4_only(url, body, result):
        parse_html_bs4(body, url, http_charset="utf-8")

    def checks_only(url, body, result):
        run_page_checks(result, facts[url], ctx)

    def outlinks(url, body, result):
        outlinks_of(facts[url], url)

    ours_ms = _cpu_per_page(ours, inputs, rounds)
    bs4_ms = _cpu_per_page(theirs, inputs, max(1, rounds - 1))
    links = statistics.mean(len(f.links) for f in facts.values())
    return {
        "pages": len(inputs),
        "mean_bytes": statistics.mean(len(body) for _, body, _ in inputs),
        "mean_links": links,
        "mean_anchors": statistics.mean(
            sum(1 for link in f.links if link.tag == "a") for f in facts.values()
        ),
        "ours_ms": ours_ms,
        "bs4_ms": bs4_ms,
        "ratio": bs4_ms / ours_ms,
        "parse_ms": _cpu_per_page(parse_only, inputs, rounds),
        "bs4_parse_ms": _cpu_per_page(bs4_only, inputs, max(1, rounds - 1)),
        "checks_ms": _cpu_per_page(checks_only, inputs, rounds),
        "outlinks_ms": _cpu_per_page(outlinks, inputs, rounds),
    }


# (b) Crawl throughput -----------------------------------------------------------


async def _crawl(start: str, pages: int, concurrency: int) -> dict:
    from crawler.crawl import CrawlLimits, crawl_site

    limits = CrawlLimits(
        max_pages=pages,
        max_depth=1000,
        concurrency=concurrency,
        check_external=False,
        allow_private=True,
        trap_variants=1_000_000,  # the corpus is one template, /p/{n}.html, on purpose
    )
    cpu = time.process_time()
    report = await crawl_site(start, limits)
    cpu = time.process_time() - cpu
    return {
        "responses": report.pages,
        "status_404": report.status_counts.get("404", 0),
        "seconds": report.elapsed,
        "cpu_seconds": cpu,
        "window_peak": report.window_peak,
        "max_depth": report.max_depth_reached,
    }


def run_crawl_child(start: str, pages: int, concurrency: int) -> None:
    """Entry point of the crawl subprocess: one JSON line on stdout."""
    from benchmarks.netguard import refuse_non_loopback

    refuse_non_loopback()
    from crawler.loop import run

    print(json.dumps(run(_crawl(start, pages, concurrency))))


def _child(args: list[str], timeout: float = 900) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{args[:3]} failed ({out.returncode}): {out.stderr[-3000:]}")
    return json.loads(lines[-1])


def measure_crawls(base: str, corpus: Corpus, concurrency: int, repeat: int, scrapy: bool) -> dict:
    start = base + "/"
    pages = corpus.reachable
    ours = [
        _child(
            [
                "-m",
                "benchmarks.bench_library",
                "--run-crawl",
                start,
                "--pages",
                str(pages),
                "--concurrency",
                str(concurrency),
            ]
        )
        for _ in range(repeat)
    ]
    result = {"ours": ours}
    if scrapy:
        spider = ["-m", "benchmarks.scrapy_spider", start, "--pages", str(pages),
                  "--concurrency", str(concurrency)]
        # Stock Scrapy is the yardstick; Scrapy on uvloop, the loop our crawl
        # runs on, is measured too so the ratio can be read both ways.
        result["scrapy"] = [_child(spider) for _ in range(repeat)]
        if _has_uvloop():
            result["scrapy_uvloop"] = [_child([*spider, "--uvloop"]) for _ in range(repeat)]
    return result


def _has_uvloop() -> bool:
    from crawler.loop import uvloop

    return uvloop is not None


# Report ------------------------------------------------------------------------


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


LIBRARY_PACKAGES = (
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "sniffio",
    "uvloop",
    "lxml",
    "beautifulsoup4",
    "protego",
    "scrapy",
    "twisted",
)


def machine(packages: tuple[str, ...] = LIBRARY_PACKAGES) -> dict:
    """What the figures were measured on (bench_product reuses it with its own package list)."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in packages},
        "load_before": os.getloadavg()[0],
    }


def _best(runs: list[dict]) -> dict:
    return max(runs, key=lambda run: run["responses"] / run["seconds"])


def render(args, info, server, parse, crawls, profile=None) -> str:
    ours, theirs = _best(crawls["ours"]), _best(crawls["scrapy"]) if "scrapy" in crawls else None
    ours_rate = ours["responses"] / ours["seconds"]
    lines = [
        "# Library benchmark results",
        "",
        f"Measured {info['date']} on {info['nproc']} CPU(s) ({info['cpu']}), Python {info['python']},",
        f"{info['platform']}. Load average (1 min) {info['load_before']:.2f} before the run and "
        f"{os.getloadavg()[0]:.2f} after it: other work on the machine slows both crawlers.",
        "",
        "Packages: " + ", ".join(f"{k} {v}" for k, v in info["packages"].items()) + ".",
        "",
        "Reproduce (from the repository root):",
        "",
        "```",
        ".venv/bin/pip install -r benchmarks/requirements.txt",
        f".venv/bin/python -m benchmarks.bench_library {' '.join(args.argv)}",
        "```",
        "",
        f"Corpus: {args.pages} generated pages (seed {args.seed}), mean {parse['mean_bytes'] / 1024:.1f} KiB "
        f"with {parse['mean_anchors']:.0f} distinct `<a>` links ({parse['mean_links']:.0f} references "
        f"counting images, scripts and stylesheets) a page, plus {crawls.get('broken', 0)} distinct "
        "broken targets (404); see `benchmarks/corpus.py` for its shape.",
        f"Static server: {server['what']}; alone it answered {server['per_second']:.0f} requests/s "
        f"at concurrency {args.concurrency} (a minimal keep-alive client), so it is not the limit below.",
        "",
        "## (a) CPU per page: parse + page checks",
        "",
        f"Over {parse['pages']} corpus pages, best of {args.rounds} passes, `time.process_time`.",
        "",
        "| what | ms CPU / page |",
        "| --- | ---: |",
        f"| ours: `parse_html` + `run_page_checks` | {parse['ours_ms']:.2f} |",
        f"| reference: `parse_html_bs4` + `run_page_checks` | {parse['bs4_ms']:.2f} |",
        f"| `parse_html` alone | {parse['parse_ms']:.2f} |",
        f"| `parse_html_bs4` alone | {parse['bs4_parse_ms']:.2f} |",
        f"| `run_page_checks` alone | {parse['checks_ms']:.2f} |",
        f"| outlink normalisation + dedup (`crawler.page.outlinks_of`) | {parse['outlinks_ms']:.2f} |",
        "",
        f"**Ratio: {parse['ratio']:.1f}x less CPU than the bs4 reference** "
        f"(target {TARGET_PARSE_RATIO:.0f}x: {'met' if parse['ratio'] >= TARGET_PARSE_RATIO else 'MISSED'}).",
        "",
        "## (b) Crawl throughput: `crawl_site` (no database) against Scrapy",
        "",
        f"Both crawl the whole corpus ({args.pages} pages + broken targets) from `/`, concurrency "
        f"{args.concurrency}, each in its own process; best of {args.repeat} run(s) each. Scrapy: "
        "CrawlSpider with one `Rule(LinkExtractor(), follow=True)`, robots, retries, cookies, "
        "telnet and throttling off. Ours: robots.txt and sitemap discovery on (both 404 here), "
        "external checks off, every page parsed and checked.",
        "",
        "| crawler | responses | seconds | pages/s | CPU s | ms CPU / page |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| Siteward `crawl_site` | {ours['responses']} | {ours['seconds']:.2f} | {ours_rate:.0f} | "
        f"{ours['cpu_seconds']:.2f} | {1000 * ours['cpu_seconds'] / ours['responses']:.2f} |",
    ]
    if theirs:
        their_rate = theirs["responses"] / theirs["seconds"]
        ratio = ours_rate / their_rate
        lines += [
            f"| Scrapy {theirs['scrapy']} CrawlSpider | {theirs['responses']} | {theirs['seconds']:.2f} | "
            f"{their_rate:.0f} | {theirs['cpu_seconds']:.2f} | "
            f"{1000 * theirs['cpu_seconds'] / theirs['responses']:.2f} |",
        ]
        uv = _best(crawls["scrapy_uvloop"]) if crawls.get("scrapy_uvloop") else None
        if uv:
            uv_rate = uv["responses"] / uv["seconds"]
            lines.append(
                f"| Scrapy {uv['scrapy']} CrawlSpider on uvloop | {uv['responses']} | "
                f"{uv['seconds']:.2f} | {uv_rate:.0f} | {uv['cpu_seconds']:.2f} | "
                f"{1000 * uv['cpu_seconds'] / uv['responses']:.2f} |"
            )
        lines += [
            "",
            f"**Ratio: {ratio:.1f}x Scrapy's pages/s** (target {TARGET_CRAWL_RATIO:.0f}x: "
            f"{'met' if ratio >= TARGET_CRAWL_RATIO else 'MISSED'}).",
        ]
        if uv:
            lines += [
                "",
                f"Against Scrapy on uvloop (`ASYNCIO_EVENT_LOOP = \"uvloop.Loop\"`, not its default; "
                f"our crawl runs on uvloop, see `crawler/loop.py`): {ours_rate / uv_rate:.1f}x.",
            ]
    all_runs = ", ".join(f"{r['responses'] / r['seconds']:.0f}" for r in crawls["ours"])
    lines += ["", f"All our runs (pages/s): {all_runs}."]
    for key, label in (("scrapy", "Scrapy"), ("scrapy_uvloop", "Scrapy on uvloop")):
        if crawls.get(key):
            lines.append(
                f"All {label} runs (pages/s): "
                + ", ".join(f"{r['responses'] / r['seconds']:.0f}" for r in crawls[key])
                + "."
            )
    if profile:
        lines += [
            "",
            "## Where our crawl's CPU goes",
            "",
            "py-spy sampling (250 Hz) of one more `crawl_site` run over the same corpus; inclusive "
            "share of the crawl process's samples (nested rows are part of the row above).",
            "",
            "| part | share |",
            "| --- | ---: |",
        ]
        lines += [f"| {label.strip()} | {share:.1f}% |" for label, share in profile]
    if args.notes:
        lines += ["", "## Notes", "", Path(args.notes).read_text().strip()]
    return "\n".join(lines) + "\n"


# Where our crawl spends its CPU (py-spy, sampling, so the profiler does not
# distort cheap Python calls the way cProfile does). Inclusive shares.
PROFILE_FRAMES = (
    ("page pipeline (`crawler.page.build_outcome`)", "build_outcome", "page.py"),
    ("parse (`crawler.parse.parse_html`)", "parse_html", "parse.py"),
    ("  of which decoding (`decode_html`)", "decode_html", "parse.py"),
    ("  of which building PageFacts (`_Collector.facts`)", "facts", "parse.py"),
    ("page checks (`run_page_checks`)", "run_page_checks", "checks.py"),
    ("outlink normalisation (`outlinks_of`)", "outlinks_of", "page.py"),
    ("frontier admission (`_Frontier.follow`)", "follow", "crawl.py"),
    ("fetching (`Fetcher.fetch`)", "fetch", "fetch.py"),
    ("  of which reading bodies (`_read_body`)", "_read_body", "fetch.py"),
    ("window scheduling and sink (`run_window`, `_consume`)", "run_window|_consume", "window.py"),
)


def profile_crawl(base: str, pages: int, concurrency: int, out: Path) -> list[tuple[str, float]]:
    """Sample one crawl child with py-spy; inclusive share of each PROFILE_FRAMES entry."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    spy = Path(sys.executable).parent / "py-spy"
    cmd = [
        str(spy),
        "record",
        "-r",
        "250",
        "-f",
        "raw",
        "-o",
        str(out),
        "--",
        sys.executable,
        "-m",
        "benchmarks.bench_library",
        "--run-crawl",
        base + "/",
        "--pages",
        str(pages),
        "--concurrency",
        str(concurrency),
    ]
    out.unlink(missing_ok=True)
    # py-spy 0.4 exits 1 ("No child process") after a clean recording of a child
    # it spawned, so success is judged by the samples written.
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    if not out.exists() or not out.stat().st_size:
        raise RuntimeError(f"py-spy wrote no samples: {done.stderr[-2000:]}")
    total = 0
    hits = [0] * len(PROFILE_FRAMES)
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples = int(count)
        total += samples
        frames = [(f.split(" (")[0], f.rsplit("/", 1)[-1].split(":")[0]) for f in stack.split(";")]
        for i, (_, names, module) in enumerate(PROFILE_FRAMES):
            wanted = set(names.split("|"))
            if any(name in wanted and file == module for name, file in frames):
                hits[i] += samples
    return [
        (label, 100 * hit / max(total, 1))
        for (label, _, _), hit in zip(PROFILE_FRAMES, hits, strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description="Siteward library benchmark")
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--parse-sample", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each crawler; the best counts"
    )
    parser.add_argument("--install", action="store_true", help="apt-get install nginx if missing")
    parser.add_argument("--python-server", action="store_true", help="serve from Python, not nginx")
    parser.add_argument("--skip-scrapy", action="store_true")
    parser.add_argument(
        "--profile", action="store_true", help="sample one of our crawls with py-spy, report shares"
    )
    parser.add_argument("--notes", type=Path, help="markdown appended to RESULTS.md as Notes")
    parser.add_argument("--results", type=Path, help="write the figures here (markdown)")
    parser.add_argument("--run-crawl", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.run_crawl:
        run_crawl_child(args.run_crawl, args.pages, args.concurrency)
        return

    args.argv = [a for a in sys.argv[1:]]
    if args.install:
        install_nginx()
    info = machine()
    corpus = build_corpus(args.pages, args.seed)
    print(f"corpus: {len(corpus.pages)} pages, {len(corpus.broken)} broken targets", flush=True)
    parse = measure_parse(corpus, min(args.parse_sample, len(corpus.pages)), args.rounds)
    print(
        f"(a) ours {parse['ours_ms']:.2f} ms/page, bs4 {parse['bs4_ms']:.2f} ms/page, "
        f"ratio {parse['ratio']:.1f}x",
        flush=True,
    )
    with serve(corpus, prefer_nginx=not args.python_server) as (base, what):
        server = probe(base, list(corpus.pages), concurrency=args.concurrency, seconds=2.0)
        server["what"] = what
        print(f"server: {what}, {server['per_second']:.0f} responses/s alone", flush=True)
        crawls = measure_crawls(base, corpus, args.concurrency, args.repeat, not args.skip_scrapy)
        crawls["broken"] = len(corpus.broken)
        for name in ("ours", "scrapy", "scrapy_uvloop"):
            for run in crawls.get(name, []):
                print(
                    f"(b) {name}: {run['responses']} responses in {run['seconds']:.2f} s = "
                    f"{run['responses'] / run['seconds']:.0f} pages/s, "
                    f"{1000 * run['cpu_seconds'] / run['responses']:.2f} ms CPU/page",
                    flush=True,
                )
        profile = None
        if args.profile:
            try:
                profile = profile_crawl(
                    base, corpus.reachable, args.concurrency, Path("/tmp/siteward-bench-pyspy.txt")
                )
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                print(f"profile: not taken ({exc})", flush=True)
            for label, share in profile or ():
                print(f"profile: {share:5.1f}%  {label}")
    if args.results:
        args.results.write_text(render(args, info, server, parse, crawls, profile))
        print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
