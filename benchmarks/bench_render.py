"""Rendered audits: pages per second and peak memory at a given number of pages rendered at once.

A 200-page fixture app whose titles, canonicals and links exist only after its
script runs is served by nginx on 127.0.0.1 (``static_server.nginx_sites``). For each render concurrency
(``SITEWARD_RENDER_PAGES``, default 2 and 4), interleaved over the rounds,
``manage.py audit URL --render all`` runs on a fresh SQLite database as a
subprocess, while this script samples the resident memory of its whole process
tree (the audit process, Playwright's driver and every Chromium process, as
PSS) every 100 ms. It reports wall time, pages stored, pages per second, the
peak tree PSS and the audit process's own peak RSS.

    .venv/bin/python -m benchmarks.bench_render --results benchmarks/RESULTS.md

It is a script, never a timed test; it sends nothing beyond 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.bench_product import django_env, migrate
from benchmarks.bench_real import write_results
from benchmarks.static_server import nginx_sites

REPO = Path(__file__).resolve().parent.parent
SAMPLE_SECONDS = 0.1

SHELL = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Loading</title></head>
<body><noscript>Please enable JavaScript to use this app.</noscript><div id="root"></div>
<script src="/app.js"></script></body></html>"""
# The home page is the app's index (it links every page, as a docs index does:
# one template of numbered pages may only go a few clicks deep before the
# crawl's trap rule stops it), and each page links the next ten, wrapping.
APP_JS = """
const pages = %(pages)d;
const here = location.pathname;
const n = here === "/" ? 0 : Number(here.split("/").pop().replace(".html", ""));
document.title = `Page ${n} of the rendered benchmark app`;
const canonical = document.createElement("link");
canonical.rel = "canonical"; canonical.href = location.origin + here;
document.head.appendChild(canonical);
const root = document.getElementById("root");
for (let k = 0; k < 5; k++) {
  const p = document.createElement("p");
  p.textContent = ("A paragraph the script writes for this page of the app. ").repeat(12);
  root.appendChild(p);
}
const targets = here === "/" ? [...Array(pages).keys()] : [...Array(10).keys()].map((m) => (n + m + 1) %% pages);
for (const to of targets) {
  const a = document.createElement("a"); a.href = `/app/${to}.html`; a.textContent = `Page ${to}`;
  root.appendChild(a);
}
"""


def build_site(root: Path, pages: int) -> None:
    (root / "app").mkdir(parents=True)
    (root / "index.html").write_text(SHELL)
    (root / "app.js").write_text(APP_JS % {"pages": pages})
    for n in range(pages):
        (root / "app" / f"{n}.html").write_text(SHELL)


def tree_memory(process: psutil.Process) -> tuple[int, int]:
    """(the whole tree's PSS, the process's own RSS), in bytes; 0 for processes already gone.

    PSS (proportional set size) splits each shared page between the processes
    that map it: Chromium's processes share most of their code, so a sum of
    their RSS would count it once per process.
    """
    own = total = 0
    try:
        own = process.memory_info().rss
        for member in [process, *process.children(recursive=True)]:
            try:
                total += member.memory_full_info().pss
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total, own


def run(base: str, pages: int, slots: int, workdir: Path, timeout: float) -> dict:
    env = django_env("sqlite:///" + str(workdir / "db.sqlite3"), workdir)
    env.update(SITEWARD_RENDER_PAGES=str(slots))
    migrate(sys.executable, REPO, env)
    out = workdir / "report.jsonl"
    cmd = [sys.executable, str(REPO / "manage.py"), "audit", base + "/", "--allow-private", "--no-external",
           "--render", "all", "--max-pages", str(pages + 50), "--max-depth", "100", "--concurrency", "8",
           "--out", str(out)]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    handle = psutil.Process(proc.pid)
    peak_tree = peak_own = 0
    while proc.poll() is None:
        total, own = tree_memory(handle)
        peak_tree, peak_own = max(peak_tree, total), max(peak_own, own)
        if time.monotonic() - began > timeout:
            proc.kill()
            raise RuntimeError(f"the rendered audit took more than {timeout:.0f} s")
        time.sleep(SAMPLE_SECONDS)
    wall = time.monotonic() - began
    records = [json.loads(line) for line in out.read_text().splitlines()]
    summary = records[-1]
    rendered = sum(1 for r in records if r["type"] == "page" and r.get("rendered"))
    return {"slots": slots, "wall": wall, "pages": summary["pages"], "rendered": rendered,
            "status": summary["status"], "pages_per_second": summary["pages"] / wall,
            "peak_tree_mb": peak_tree / 2**20, "peak_audit_mb": peak_own / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--slots", default="2,4", help="render concurrencies to compare")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--results", type=Path, help="write or update the section --title in this markdown file")
    parser.add_argument("--title", default="Rendered audits: a 200-page JavaScript app")
    args = parser.parse_args()
    slots = [int(s) for s in args.slots.split(",")]
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="siteward-bench-render-") as tmp:
        Path(tmp).chmod(0o755)  # nginx's workers read the app from here
        site = Path(tmp) / "site"
        build_site(site, args.pages)
        with nginx_sites({"app": site}) as (bases, server):
            for rnd in range(args.rounds):
                for n in slots:
                    workdir = Path(tmp) / f"r{rnd}-s{n}"
                    workdir.mkdir()
                    result = run(bases["app"], args.pages, n, workdir, args.timeout)
                    result["round"] = rnd + 1
                    print(json.dumps(result), flush=True)
                    runs.append(result)
    body = render(args, slots, runs, server)
    print(body)
    if args.results:
        write_results(args.results, args.title, body)


def render(args, slots: list[int], runs: list[dict], server: str) -> str:
    chromium = subprocess.run(["/usr/bin/chromium", "--version"], capture_output=True, text=True).stdout.strip()
    lines = [
        f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}, "
        f"{chromium or 'Chromium (version unknown)'}. {args.pages}-page app built by JavaScript, served by "
        f"{server} on 127.0.0.1; `manage.py audit --render all --concurrency 8`, SQLite, "
        f"{args.rounds} rounds interleaved. Memory is the whole process tree's PSS (audit process, Playwright "
        "driver, Chromium; shared pages split between them), sampled every 100 ms.",
        "",
        "| pages rendered at once | round | status | pages | pages/s | wall (s) | peak tree PSS (MB) | "
        "peak audit process RSS (MB) |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(f"| {r['slots']} | {r['round']} | {r['status']} | {r['pages']} | {r['pages_per_second']:.2f} "
                     f"| {r['wall']:.1f} | {r['peak_tree_mb']:.0f} | {r['peak_audit_mb']:.0f} |")
    lines += ["", "| pages rendered at once | median pages/s | median peak tree PSS (MB) |", "|---:|---:|---:|"]
    for n in slots:
        mine = [r for r in runs if r["slots"] == n]
        lines.append(f"| {n} | {statistics.median(r['pages_per_second'] for r in mine):.2f} | "
                     f"{statistics.median(r['peak_tree_mb'] for r in mine):.0f} |")
    lines += ["", f"Rerun: `.venv/bin/python -m benchmarks.bench_render --pages {args.pages} --slots "
                  f"{','.join(map(str, slots))} --rounds {args.rounds} --results benchmarks/RESULTS.md`"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
