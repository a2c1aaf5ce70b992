"""Compare builds: the same ``manage.py audit`` run by one or more checkouts, interleaved.

A change to the crawl is judged here before it goes into a run of record
(``bench_product``). This machine's speed drifts by tens of percent within
minutes, so one run of each build says little: each repetition runs every
build once on each database, the order rotated by one each repetition, and
the summary gives each build's median and fastest run and lists every run.
Each run's line splits its time by the audit's own timestamps: start-up
(spawn to ``started_at``), start and crawl (to the last chunk's end),
finalize (to ``finished_at``) and after (the report's finalize issues, the
console summary, interpreter exit; read to the 50 ms the exit is polled at),
and gives the whole machine's busy CPU over the run (every core, the audit
and this script's 50 ms sampling included) and what the database server and
nginx spent of it: on two cores, their share is taken from the audit.
With ``--scrapy`` each repetition also crawls the corpus with Scrapy first,
and every run gets its ratio against the fastest Scrapy run (pages/s, as in
bench_product, which also crawls once more after its last round), so how
often a build meets a target shows, not only its best. A run that fails is
listed as failed and the comparison goes on.

    .venv/bin/python -m benchmarks.compare_builds --size 1000 --reps 5 \\
        before=/tmp/siteward-before after=.

A build is ``LABEL=CHECKOUT``, optionally with environment variables for its
runs: ``LABEL=CHECKOUT:NAME=VALUE,NAME=VALUE``. Each checkout runs with its own
``.venv/bin/python`` when it has one (a ``git worktree`` can link this one's),
else with this interpreter. It is a script, never a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a file as well as with -m
    sys.path.insert(0, str(REPO))

from benchmarks.bench_product import (  # noqa: E402
    _ratio,
    _yardstick,
    compile_bytecode,
    machine,
    postgres_available,
    run_audit,
    run_scrapy,
)
from benchmarks.corpus import build_corpus  # noqa: E402
from benchmarks.static_server import serve  # noqa: E402


@dataclass
class Build:
    label: str
    root: Path
    env: dict[str, str]

    @property
    def python(self) -> str:
        own = self.root / ".venv" / "bin" / "python"
        return str(own) if own.exists() else sys.executable


def parse_build(spec: str) -> Build:
    """``LABEL=CHECKOUT[:NAME=VALUE,...]`` as a Build; ValueError when it is not that."""
    label, sep, rest = spec.partition("=")
    if not sep or not label or not rest:
        raise ValueError(f"a build is LABEL=CHECKOUT[:NAME=VALUE,...], got {spec!r}")
    checkout, _, assignments = rest.partition(":")
    env = {}
    for assignment in filter(None, assignments.split(",")):
        name, sep, value = assignment.partition("=")
        if not sep or not name:
            raise ValueError(f"environment for {label} must be NAME=VALUE, got {assignment!r}")
        env[name] = value
    root = Path(checkout).resolve()
    if not (root / "manage.py").exists():
        raise ValueError(f"{root} has no manage.py")
    return Build(label, root, env)


def describe(build: Build) -> dict:
    """What reproduces a build: its checkout, interpreter, environment and commit."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(build.root), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {"label": build.label, "root": str(build.root), "python": build.python, "env": build.env,
            "commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def phases(run: dict) -> str:
    def fmt(value) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    audit, finalize = run.get("audit_seconds"), run.get("finalize_seconds")
    crawl = audit - finalize if audit is not None and finalize is not None else None
    servers = ", ".join(f"{name} {seconds:.2f}" for name, seconds in run.get("server_cpu", {}).items())
    return (f"start-up {fmt(run.get('startup_seconds'))}, start+crawl {fmt(crawl)}, finalize {fmt(finalize)}, "
            f"after {fmt(run.get('after_finish_seconds'))}; machine CPU {fmt(run.get('machine_cpu'))} "
            f"(servers: {servers or 'n/a'})")


def summary_line(kind: str, build: Build, runs: list[dict], yardstick: dict | None) -> str:
    failed = sum(1 for r in runs if "error" in r)
    runs = [r for r in runs if "error" not in r]
    if not runs:
        return f"{kind:8s} {build.label:12s} every run failed"
    walls = [r["wall"] for r in runs]
    line = (f"{kind:8s} {build.label:12s} wall median {statistics.median(walls):6.2f} s, fastest {min(walls):6.2f} s, "
            f"CPU median {statistics.median(r['cpu'] for r in runs):6.2f} s; all {'yes' if all(r['complete'] for r in runs) else 'NO'} "
            f"stored; runs " + " ".join(f"{w:.2f}" for w in walls))
    servers = sorted({name for r in runs for name in r.get("server_cpu", {})})
    if servers:
        line += "; servers' CPU median " + ", ".join(
            f"{name} {statistics.median(r.get('server_cpu', {}).get(name, 0.0) for r in runs):.2f} s"
            for name in servers)
    if yardstick:
        # bench_product's ratio (pages/s against Scrapy's fastest run), every run, best first.
        ratios = sorted((_ratio(r, yardstick) for r in runs), reverse=True)
        line += "; x Scrapy " + " ".join(f"{x:.2f}" for x in ratios)
    if failed:
        line += f"; {failed} run(s) FAILED"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("builds", nargs="+", help="LABEL=CHECKOUT[:NAME=VALUE,...], one or more")
    parser.add_argument("--size", type=int, default=1000, help="corpus pages")
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--reps", type=int, default=5, help="runs of each build on each database")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--scrapy", action="store_true", help="crawl with Scrapy at the start of each repetition")
    parser.add_argument("--python-server", action="store_true", help="serve from Python, not nginx")
    parser.add_argument("--json", type=Path, help="also dump every run here")
    args = parser.parse_args()
    try:
        builds = [parse_build(spec) for spec in args.builds]
    except ValueError as exc:
        parser.error(str(exc))
    if len({b.label for b in builds}) != len(builds):
        parser.error("each build needs a label of its own")
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    kinds = [k.strip() for k in args.databases.split(",") if k.strip()]
    if unknown := set(kinds) - {"sqlite", "postgres"}:
        parser.error(f"unknown database {', '.join(sorted(unknown))}")
    if "postgres" in kinds and (why := postgres_available()):
        print(f"PostgreSQL skipped: {why}", flush=True)
        kinds.remove("postgres")
    if not kinds:
        parser.error("no database left to run on")
    for build in builds:
        if not compile_bytecode(build.root, build.python)["compiled"]:
            print(f"{build.label}: compiling its bytecode failed; its runs may compile modules at start-up")

    corpus = build_corpus(args.size, args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="siteward-compare-"))
    results: dict[tuple[str, str], list[dict]] = {}
    scrapy: list[dict] = []
    try:
        with serve(corpus, prefer_nginx=not args.python_server) as (base, what):
            print(f"corpus: {args.size} pages + {len(corpus.broken)} broken targets, {len(corpus.assets)} assets "
                  f"({len(corpus.missing_assets)} missing), served by {what}", flush=True)
            for rep in range(1, args.reps + 1):
                if args.scrapy:
                    try:
                        run = run_scrapy(base, corpus, args.concurrency, workdir, args.timeout)
                    except (RuntimeError, subprocess.SubprocessError) as exc:
                        print(f"rep {rep} Scrapy FAILED: {str(exc)[:300]}", flush=True)
                    else:
                        run.pop("samples", None)
                        scrapy.append(run)
                        print(f"rep {rep} Scrapy wall {run['wall']:.2f} s, CPU {run['cpu']:.2f} s", flush=True)
                # Rotated, so each build goes first (just after Scrapy) as often as the others.
                shift = (rep - 1) % len(builds)
                for kind in kinds:
                    for build in builds[shift:] + builds[:shift]:
                        results.setdefault((kind, build.label), []).append(
                            one_run(base, corpus, kind, build, rep, workdir, args))
    finally:
        yardstick = _yardstick({"scrapy_runs": [r for r in scrapy if r.get("responses")]})
        print()
        if yardstick:
            print(f"Scrapy fastest {yardstick['wall']:.2f} s of " + " ".join(f"{r['wall']:.2f}" for r in scrapy))
        for kind in kinds:
            for build in builds:
                if (kind, build.label) in results:
                    print(summary_line(kind, build, results[(kind, build.label)], yardstick))
        if args.json:
            dump = {"argv": sys.argv, "machine": machine(), "builds": [describe(b) for b in builds],
                    "scrapy": scrapy, "runs": [r for runs in results.values() for r in runs]}
            args.json.write_text(json.dumps(dump, indent=1, default=str))
        if os.environ.get("BENCH_KEEP_WORKDIR"):
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def one_run(base: str, corpus, kind: str, build: Build, rep: int, workdir: Path, args) -> dict:
    """One audit by ``build``, or a record of why it failed."""
    try:
        run = run_audit(base, corpus, kind, args.concurrency, workdir, args.timeout, root=build.root,
                        python=build.python, env_extra=build.env, log_tag=f"-{build.label}-{rep}")
    except (RuntimeError, subprocess.SubprocessError) as exc:
        print(f"rep {rep} {kind:8s} {build.label:12s} FAILED: {str(exc)[:300]}", flush=True)
        return {"build": build.label, "database": kind, "rep": rep, "error": str(exc)}
    run.pop("samples", None)
    run.update(build=build.label, rep=rep)
    print(f"rep {rep} {kind:8s} {build.label:12s} wall {run['wall']:6.2f} s, CPU {run['cpu']:6.2f} s, "
          f"peak {run['peak_mb']:.0f} MB, {phases(run)}, all stored: {run['complete']}", flush=True)
    return run


if __name__ == "__main__":
    main()
