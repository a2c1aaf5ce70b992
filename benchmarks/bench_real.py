"""The performance guard: ``manage.py audit`` against Scrapy on real sites and on the synthetic corpus.

Real corpora: the Python 3.11 docs (Debian's ``python3-doc``) and the Django 3.2
docs (``python-django-doc``), the HTML those packages install, each served by
nginx on a 127.0.0.1 port of its own (start URL: the docs' index.html). Each
round crawls every site with Scrapy (``benchmarks/scrapy_spider.py``), then
runs ``manage.py audit`` (everything stored) of every build on every database,
all at the same concurrency. Then the synthetic corpus (``benchmarks/corpus.py``)
at each ``--sizes`` the same way, ``--synthetic-rounds`` times (once by default:
Scrapy's 10,000-page crawl alone takes minutes).

Reported per site, for the sites together (total pages / total seconds) and per
synthetic size: pages/s (median and range over the rounds), each audit's ratio
to the Scrapy crawl of its own round (median and range), the audit process's
peak RSS, the distinct broken internal link targets each audit stored (count
and digest; the sorted lists go to ``benchmarks/out/``), and the memory growth
from the smallest to the largest synthetic size.

A build is ``LABEL=CHECKOUT`` as in ``compare_builds`` (its own
``.venv/bin/python`` when it has one); builds run interleaved, the order rotated
each round. Without builds, this checkout is measured as ``this``.

    .venv/bin/python -m benchmarks.bench_real --install --rounds 3 \\
        --results benchmarks/RESULTS.md old=/work/bench-old new=/work/main

It is a script, never a timed test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a file as well as with -m
    sys.path.insert(0, str(REPO))

from benchmarks.bench_product import (  # noqa: E402
    compile_bytecode,
    django_env,
    fresh_database,
    machine,
    measure_child,
    migrate,
    postgres_available,
    run_audit,
    scrapy_crawl,
)
from benchmarks.compare_builds import Build, describe, parse_build  # noqa: E402
from benchmarks.corpus import build_corpus  # noqa: E402
from benchmarks.static_server import install_nginx, nginx_sites, serve  # noqa: E402

# site name: (Debian package, what it is)
SITES = {"python": ("python3-doc", "Python 3.11 docs"), "django": ("python-django-doc", "Django 3.2 docs")}
TARGET_SITE_RATIO = 2.5  # x Scrapy's pages/s on each site
TARGET_TOGETHER_RATIO = 3.0  # on the sites together
TARGET_SYNTHETIC_RATIO = 2.5  # at the largest synthetic size
TARGET_PEAK_MB = 150.0
TARGET_GROWTH_MB = 30.0
BROKEN_CODE = "broken_link_internal"  # crawler/catalogue.py
MAX_PAGES = 5000  # a cap for audits and Scrapy alike; each site has under 1,000 pages
OUT = REPO / "benchmarks" / "out"
DB_LABELS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
BUILD_PACKAGES = ("django", "httpx", "httpcore", "lxml", "psycopg", "uvloop")


def doc_root(package: str) -> Path:
    """The HTML directory ``package`` installed, with its symlinks resolved (nginx follows them)."""
    listed = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=True).stdout.split()
    roots = sorted((p for p in listed if p.endswith("/html") and Path(p, "index.html").is_file()), key=len)
    if not roots:
        raise RuntimeError(f"{package} installs no html/index.html; run with --install")
    return Path(os.path.realpath(roots[0]))


# --- one measured crawl ------------------------------------------------------------


def audit_site(start_url: str, kind: str, build: Build, workdir: Path, args, tag: str) -> dict:
    """``manage.py audit`` of a real site by ``build`` on a fresh ``kind`` database."""
    with fresh_database(kind, workdir) as (url, query, what):
        env = django_env(url, workdir, build.root) | build.env
        migrate(build.python, build.root, env)
        cmd = [build.python, str(build.root / "manage.py"), "audit", start_url, "--allow-private",
               "--max-pages", str(MAX_PAGES), "--max-depth", "50", "--concurrency", str(args.concurrency),
               "--no-external", "--out", "/dev/null"]
        run = measure_child(cmd, env, args.timeout, workdir / f"audit-{tag}.log", cwd=build.root)
        # Exit 1 means "issues at the fail-on level were found": broken links, here.
        if run["returncode"] not in (0, 1):
            raise RuntimeError(f"audit exited {run['returncode']}: {Path(run['log']).read_text()[-2000:]}")
        ((status,),) = query("SELECT status FROM audits_audit")
        kinds = dict(query("SELECT kind, COUNT(*) FROM audits_page GROUP BY kind"))
        targets = query(f"SELECT DISTINCT target_url FROM audits_issue WHERE code = '{BROKEN_CODE}'")
    # The port changes from run to run: a target is compared by its path and query.
    broken = sorted({urlsplit(t).path + (f"?{urlsplit(t).query}" if urlsplit(t).query else "") for (t,) in targets})
    return {**run, "status": status, "pages": kinds.get("page", 0), "resources": kinds.get("resource", 0),
            "broken": broken, "database": what}


def measured(record: dict, results: list[dict], crawl) -> None:
    """Run ``crawl()``, print one line and keep the record, or a record of why it failed."""
    what = f"round {record['round']} {record['target']:>6} {record['crawler']:>8} {record.get('db') or '':8}"
    try:
        run = crawl()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        # A traceback's last line names the exception: keep the tail.
        lines = [line for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
        print(f"{what} FAILED: {lines[0][:200]} ... {lines[-1][:300]}", flush=True)
        results.append({**record, "error": str(exc)[-2000:]})
        return
    run.pop("samples", None)
    pages = run.get("pages", run.get("responses", 0))
    record.update(run, pages=pages, pps=pages / run["wall"])
    extra = f", {len(run['broken'])} broken targets, {run['status']}" if "broken" in run else ""
    print(f"{what} {pages:6d} pages in {run['wall']:6.1f} s = {record['pps']:6.1f} pages/s, "
          f"peak {run['peak_mb']:.0f} MB{extra}", flush=True)
    results.append(record)


def round_of(rnd: int, target, base: str, max_pages: int, builds: list[Build], kinds: list[str], workdir: Path,
             args, results: list[dict], audit) -> None:
    """Scrapy (up to ``max_pages``), then every build on every database: the order rotated each round."""
    base_record = {"round": rnd, "target": target}
    measured({**base_record, "crawler": "Scrapy"}, results,
             lambda: scrapy_crawl(base + "/", max_pages, args.concurrency, workdir, args.timeout, str(target)))
    shift = (rnd - 1) % len(builds)
    for kind in kinds if rnd % 2 else kinds[::-1]:
        for build in builds[shift:] + builds[:shift]:
            measured({**base_record, "crawler": build.label, "db": kind}, results,
                     lambda build=build, kind=kind: audit(build, kind, f"{target}-{build.label}-{kind}-{rnd}"))


# --- summary -----------------------------------------------------------------------


def spread(values: list[float], spec: str = ".0f") -> str:
    """Median and range, e.g. '86 (80-91)'; one value alone; 'n/a' for none."""
    if not values:
        return "n/a"
    median = format(statistics.median(values), spec)
    if len(values) == 1:
        return median
    return f"{median} ({format(min(values), spec)}-{format(max(values), spec)})"


def verdict(value: float | None, target: float, higher_is_better: bool = True) -> str:
    if value is None:
        return ""
    return "met" if (value >= target if higher_is_better else value < target) else "MISSED"


def ok(runs: list[dict]) -> list[dict]:
    return [r for r in runs if "error" not in r]


def ratios(results: list[dict], targets: list, crawler: str, db: str) -> list[float]:
    """Per round: the audits' pages/s over ``targets`` together against Scrapy's in the same round."""
    out = []
    for rnd in sorted({r["round"] for r in results}):
        ours = [r for r in ok(results) if r["round"] == rnd and r["crawler"] == crawler and r.get("db") == db
                and r["target"] in targets]
        theirs = [r for r in ok(results) if r["round"] == rnd and r["crawler"] == "Scrapy" and r["target"] in targets]
        if len(ours) == len(theirs) == len(targets):
            out.append(together(ours) / together(theirs))
    return out


def together(runs: list[dict]) -> float:
    return sum(r["pages"] for r in runs) / sum(r["wall"] for r in runs)


def per_round_pps(results: list[dict], targets: list, crawler: str, db: str | None) -> list[float]:
    out = []
    for rnd in sorted({r["round"] for r in results}):
        runs = [r for r in ok(results) if r["round"] == rnd and r["crawler"] == crawler and r.get("db") == db
                and r["target"] in targets]
        if len(runs) == len(targets):
            out.append(together(runs))
    return out


def broken_summary(runs: list[dict], site: str, label: str, db: str) -> str:
    """Count and digest of the broken targets; the sorted list is written to benchmarks/out/."""
    lists = {tuple(r["broken"]) for r in runs}
    if not lists:
        return "n/a"
    OUT.mkdir(exist_ok=True)
    cells = []
    for targets in sorted(lists, key=len):
        digest = hashlib.sha256("\n".join(targets).encode()).hexdigest()[:12]
        (OUT / f"broken-{site}-{label}-{db}-{digest}.txt").write_text("".join(t + "\n" for t in targets))
        cells.append(f"{len(targets)} `{digest}`")
    return " / ".join(cells) + ("" if len(lists) == 1 else " (runs differ)")


def render(args, info: dict, builds: list[Build], sites: dict[str, Path], server: str, results: list[dict],
           kinds: list[str], sizes: list[int]) -> str:
    site_names = list(sites)
    crawlers = [b.label for b in builds]
    lines = [
        f"Measured {info['date']} on {info['nproc']} CPU(s) ({info['cpu']}), Python {info['python']}, "
        f"{info['platform']}, SQLite {info['sqlite']}; load average (1/5/15 min) "
        f"{', '.join(f'{x:.2f}' for x in info['load_before'])} before and "
        f"{', '.join(f'{x:.2f}' for x in info['load_after'])} after.",
        "Runner's packages: " + ", ".join(f"{k} {v}" for k, v in info["packages"].items()) + ".",
        "",
        "Builds:",
        "",
    ]
    for build in info["builds"]:
        lines.append(f"- `{build['label']}`: {build['root']} at {build['commit'][:10]}"
                     f"{' (uncommitted changes)' if build['dirty'] else ''}, {build['python']} "
                     f"({', '.join(f'{k} {v}' for k, v in build['packages'].items())})")
    lines += [
        "",
        "Command (from the repository root):",
        "",
        "```",
        ".venv/bin/python -m benchmarks.bench_real " + shlex.join(args.argv),
        "```",
        "",
        f"Each audit: `manage.py audit URL --allow-private --max-pages {MAX_PAGES} --max-depth 50 "
        f"--concurrency {args.concurrency} --no-external --out /dev/null` after `migrate` on a fresh "
        "database; Scrapy: `python -m benchmarks.scrapy_spider URL --pages N --concurrency "
        f"{args.concurrency}`. {args.rounds} round(s) on the real sites, {args.synthetic_rounds} on the synthetic "
        "corpus; each round runs Scrapy, then every build on every "
        "database (order rotated). *pages/s* = page rows stored (200s and broken targets) / the process's wall "
        "seconds, Scrapy's responses / its wall seconds; *x Scrapy* is each audit against the Scrapy crawl of "
        "its own round (median and range over rounds); *peak RSS* the highest of the audit process's RSS "
        "sampled every 50 ms (psutil), highest of all rounds; *broken targets* the distinct targets of "
        f"`{BROKEN_CODE}` issues (path and query), count and sha256 prefix of the sorted list (in "
        "`benchmarks/out/`).",
        "",
    ]
    if site_names:
        lines += [
            f"### Real sites ({server}, concurrency {args.concurrency})",
            "",
            "Sites: " + "; ".join(f"{name}: {SITES[name][1]} (`{SITES[name][0]}`, {root})"
                                  for name, root in sites.items()) + ".",
            "",
            f"| site | crawler | database | pages | pages/s | x Scrapy (target >= {TARGET_SITE_RATIO}, "
            f"together >= {TARGET_TOGETHER_RATIO}) | peak RSS MB (< {TARGET_PEAK_MB:.0f}) | broken targets |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for site in site_names + (["together"] if len(site_names) > 1 else []):
            targets = site_names if site == "together" else [site]
            target_ratio = TARGET_TOGETHER_RATIO if site == "together" else TARGET_SITE_RATIO
            scrapy = [r for r in ok(results) if r["crawler"] == "Scrapy" and r["target"] in targets]
            pages = sorted({r["pages"] for r in scrapy if r["target"] == site}) if site != "together" else []
            lines.append(f"| {site} | Scrapy | - | {'/'.join(map(str, pages)) or '-'} | "
                         f"{spread(per_round_pps(results, targets, 'Scrapy', None))} | | | |")
            for label in crawlers:
                for kind in kinds:
                    runs = [r for r in ok(results) if r["crawler"] == label and r.get("db") == kind
                            and r["target"] in targets]
                    failed = sum(1 for r in results if "error" in r and r["crawler"] == label
                                 and r.get("db") == kind and r["target"] in targets)
                    x = ratios(results, targets, label, kind)
                    peak = max((r["peak_mb"] for r in runs), default=None)
                    pages = sorted({r["pages"] for r in runs}) if site != "together" else []
                    lines.append(
                        f"| {site} | {label} | {DB_LABELS[kind]} | {'/'.join(map(str, pages)) or '-'} | "
                        f"{spread(per_round_pps(results, targets, label, kind))}"
                        f"{f', {failed} FAILED' if failed else ''}"
                        f"{' (an audit did not complete)' if any(r['status'] != 'completed' for r in runs) else ''} | "
                        f"{spread(x, '.2f')} {verdict(statistics.median(x) if x else None, target_ratio)} | "
                        f"{'n/a' if peak is None else f'{peak:.0f}'} {verdict(peak, TARGET_PEAK_MB, False)} | "
                        f"{broken_summary(runs, site, label, kind) if site != 'together' else ''} |")
        lines.append("")
    if sizes:
        lines += [
            f"### Synthetic corpus (`benchmarks/corpus.py`, seed {args.seed}, concurrency {args.concurrency})",
            "",
            f"| size | crawler | database | pages | pages/s | x Scrapy (target >= {TARGET_SYNTHETIC_RATIO} at "
            f"{max(sizes):,}) | peak RSS MB |",
            "| ---: | --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for size in sizes:
            scrapy = [r for r in ok(results) if r["crawler"] == "Scrapy" and r["target"] == size]
            lines.append(f"| {size:,} | Scrapy | - | {'/'.join(str(n) for n in sorted({r['pages'] for r in scrapy}))} | "
                         f"{spread(per_round_pps(results, [size], 'Scrapy', None))} | | |")
            for label in crawlers:
                for kind in kinds:
                    runs = [r for r in ok(results) if r["crawler"] == label and r.get("db") == kind
                            and r["target"] == size]
                    x = ratios(results, [size], label, kind)
                    complete = all(r.get("complete") for r in runs)
                    judged = verdict(statistics.median(x) if x else None, TARGET_SYNTHETIC_RATIO)
                    lines.append(
                        f"| {size:,} | {label} | {DB_LABELS[kind]} | "
                        f"{'/'.join(str(n) for n in sorted({r['pages'] for r in runs}))} | "
                        f"{spread(per_round_pps(results, [size], label, kind))}"
                        f"{'' if complete else ' (NOT all stored)'} | {spread(x, '.2f')} "
                        f"{judged if size == max(sizes) else ''} | "
                        f"{max((r['peak_mb'] for r in runs), default=0):.0f} |")
        lines.append("")
        if len(sizes) > 1:
            small, large = min(sizes), max(sizes)
            lines += [f"Memory growth from {small:,} to {large:,} pages (highest peaks; target < "
                      f"{TARGET_GROWTH_MB:.0f} MB):", ""]
            for label in crawlers:
                for kind in kinds:
                    peaks = {size: max((r["peak_mb"] for r in ok(results) if r["crawler"] == label
                                        and r.get("db") == kind and r["target"] == size), default=None)
                             for size in (small, large)}
                    if None not in peaks.values():
                        growth = peaks[large] - peaks[small]
                        lines.append(f"- {label} {DB_LABELS[kind]}: {peaks[small]:.0f} -> {peaks[large]:.0f} MB, "
                                     f"{growth:+.0f} MB ({verdict(growth, TARGET_GROWTH_MB, False)})")
            lines.append("")
    failures = [r for r in results if "error" in r]
    if failures:
        lines += ["Failed runs:", ""] + [
            f"- round {r['round']} {r['target']} {r['crawler']} {r.get('db') or ''}: "
            f"{r['error'].splitlines()[-1][:200] if r['error'].strip() else 'no message'}" for r in failures] + [""]
    return "\n".join(lines)


def write_results(path: Path, title: str, body: str) -> None:
    """Put ``body`` under ``## title`` in ``path``, replacing that section when it is already there."""
    begin, end = f"<!-- bench_real: {title} -->", f"<!-- /bench_real: {title} -->"
    section = f"{begin}\n## {title}\n\n{body.strip()}\n{end}\n"
    text = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end) + "\n?", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + section
    path.write_text(text)


def build_packages(build: Build) -> dict[str, str]:
    code = ("import importlib.metadata as m, json, sys\n"
            "def v(n):\n try: return m.version(n)\n except m.PackageNotFoundError: return 'not installed'\n"
            "print(json.dumps({n: v(n) for n in sys.argv[1:]}))")
    done = subprocess.run([build.python, "-c", code, *BUILD_PACKAGES], capture_output=True, text=True,
                          cwd=build.root, timeout=60)
    return json.loads(done.stdout) if done.returncode == 0 else {}


# --- main --------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("builds", nargs="*", help="LABEL=CHECKOUT[:NAME=VALUE,...] (default: this=.)")
    parser.add_argument("--install", action="store_true", help="apt-get install nginx and the doc packages if missing")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sites", default="python,django", help="real sites, comma-separated ('' for none)")
    parser.add_argument("--sizes", default="1000,10000", help="synthetic corpus sizes ('' for none)")
    # Scrapy's 10,000-page crawl alone takes 2-4 minutes on two shared cores:
    # three rounds of it would take a run past its 20-minute budget.
    parser.add_argument("--synthetic-rounds", type=int, default=1, help="rounds on the synthetic corpus")
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=600, help="seconds allowed for each crawl")
    parser.add_argument("--results", type=Path, help="write or update the section --title in this markdown file")
    parser.add_argument("--title", default="Latest run", help="the section of --results to write")
    parser.add_argument("--json", type=Path, help="also dump every run here")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    try:
        builds = [parse_build(spec) for spec in args.builds or ["this=" + str(REPO)]]
    except ValueError as exc:
        parser.error(str(exc))
    if len({b.label for b in builds}) != len(builds):
        parser.error("each build needs a label of its own")
    if min(args.rounds, args.synthetic_rounds) < 1:
        parser.error("--rounds and --synthetic-rounds must be at least 1")
    site_names = [s for s in args.sites.split(",") if s]
    if unknown := set(site_names) - set(SITES):
        parser.error(f"unknown site {', '.join(sorted(unknown))}")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    kinds = [k for k in args.databases.split(",") if k]
    if unknown := set(kinds) - set(DB_LABELS):
        parser.error(f"unknown database {', '.join(sorted(unknown))}")
    if "postgres" in kinds and (why := postgres_available()):
        parser.error(f"PostgreSQL: {why}")

    if args.install:
        install_nginx(tuple(SITES[name][0] for name in site_names))
    sites = {name: doc_root(SITES[name][0]) for name in site_names}
    info = machine()
    for build in builds:
        if not compile_bytecode(build.root, build.python)["compiled"]:
            print(f"{build.label}: compiling its bytecode failed", flush=True)
    info["builds"] = [describe(b) | {"packages": build_packages(b)} for b in builds]
    workdir = Path(tempfile.mkdtemp(prefix="siteward-bench-real-"))
    results: list[dict] = []
    server = "no server"
    try:
        if sites:
            with nginx_sites(sites) as (bases, server):
                print(f"serving {', '.join(f'{n} {bases[n]} ({sites[n]})' for n in sites)} with {server}", flush=True)
                for rnd in range(1, args.rounds + 1):
                    for name in sites:
                        def audit(build, kind, tag, name=name):
                            return audit_site(bases[name] + "/", kind, build, workdir, args, tag)
                        round_of(rnd, name, bases[name], MAX_PAGES, builds, kinds, workdir, args, results, audit)
        for size in sizes:
            corpus = build_corpus(size, args.seed)
            with serve(corpus) as (base, _):
                for rnd in range(1, args.synthetic_rounds + 1):
                    def audit(build, kind, tag, base=base, corpus=corpus):
                        return run_audit(base, corpus, kind, args.concurrency, workdir, args.timeout,
                                         root=build.root, python=build.python, env_extra=build.env, log_tag=tag)
                    round_of(rnd, size, base, corpus.reachable, builds, kinds, workdir, args, results, audit)
            del corpus
    finally:
        info["load_after"] = os.getloadavg()
        if args.json:
            args.json.write_text(json.dumps({"argv": args.argv, "machine": info, "results": results},
                                            indent=1, default=str))
        if os.environ.get("BENCH_KEEP_WORKDIR"):
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    body = render(args, info, builds, sites, server, results, kinds, sizes)
    print()
    print(body)
    if args.results:
        write_results(args.results, args.title, body)
        print(f"wrote section {args.title!r} of {args.results}")


if __name__ == "__main__":
    main()
