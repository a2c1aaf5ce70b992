"""Delta audits against full audits: an unchanged synthetic corpus served by nginx with ETags.

The target (the delta-crawl issue): on an unchanged 10,000-page corpus served
by nginx with ETags, ``manage.py audit --mode delta --from previous`` takes at
most a third of a full audit's wall time and CPU.

The corpus (``benchmarks/corpus.py``, ``--size`` pages, seeded) is written
once and served by nginx on 127.0.0.1 for the whole run, so every file keeps
its mtime and size and nginx its ETag and Last-Modified; one curl request with
``If-None-Match`` checks first that nginx answers 304. Then, for ``--rounds``
rounds, on each database of ``--databases`` (the order alternating by round),
in a database of its own made empty for the round (SQLite: a fresh
``SITEWARD_VAR_DIR``, no ``DATABASE_URL``; PostgreSQL: ``siteward_benchdelta``
on 127.0.0.1:5432 as ``postgres``, dropped and created again):

1. ``manage.py migrate``;
2. a full audit: ``manage.py audit URL --allow-private --no-external --max-pages N --max-depth 50
   --concurrency C --out FULL.jsonl``;
3. immediately after, the delta audit of the same URL: the same command with
   ``--mode delta --from previous --out DELTA.jsonl``.

Each audit is a child process measured alone (``benchmarks.bench_product.measure_child``):
wall seconds, and its CPU seconds (user + system, ``os.wait4`` rusage of that
child). The CPU the PostgreSQL server and nginx burned in the same span is
recorded beside it (from ``/proc``), since on PostgreSQL part of the work runs
in the server. Each run's JSON Lines report is read back: the summary record
(the last line) must say ``completed``, both audits must report the same page
count, and the delta's page records with ``"unchanged": true`` are counted.

    .venv/bin/python -m benchmarks.bench_delta --install --size 10000 --rounds 3 \\
        --results benchmarks/RESULTS.md --title "Delta audits: an unchanged 10,000-page corpus"

With ``--profile``, one more full audit and then the delta audit under
``cProfile`` (first database of ``--databases``), and the top entries by
cumulative and by own time. It is a script, never a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import pstats
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a file as well as with -m
    sys.path.insert(0, str(REPO))

from benchmarks.bench_product import (  # noqa: E402
    PG_HOST,
    PG_PORT,
    PG_USER,
    compile_bytecode,
    django_env,
    machine,
    measure_child,
    migrate,
    postgres_available,
)
from benchmarks.bench_real import write_results  # noqa: E402
from benchmarks.corpus import Corpus, build_corpus  # noqa: E402
from benchmarks.static_server import NGINX, install_nginx, nginx_server  # noqa: E402

TARGET = 1 / 3  # delta / full, for wall time and for CPU
TARGET_TEXT = "0.33"
PG_DATABASE = "siteward_benchdelta"
DB_LABELS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
TITLE = "Delta audits: an unchanged 10,000-page corpus"


# --- preparing ------------------------------------------------------------------------


def conditional_check(base: str) -> dict:
    """nginx's validators for ``/`` and its answer to one curl request that sends the ETag back."""
    with urllib.request.urlopen(base + "/", timeout=10) as response:  # 127.0.0.1 only
        etag, modified = response.headers.get("ETag", ""), response.headers.get("Last-Modified", "")
    if not etag:
        raise RuntimeError(f"nginx sent no ETag for {base}/")
    cmd = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", f"If-None-Match: {etag}", base + "/"]
    if shutil.which("curl"):
        status = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    else:  # the same request without curl
        request = urllib.request.Request(base + "/", headers={"If-None-Match": etag})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status = str(response.status)
        except urllib.error.HTTPError as exc:
            status = str(exc.code)
        cmd = ["urllib"] + cmd[1:]
    if status != "304":
        raise RuntimeError(f"nginx answered {status}, not 304, to If-None-Match: {etag}")
    return {"etag": etag, "last_modified": modified, "status": status,
            "command": shlex.join(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                                   f"If-None-Match: {etag}", "http://127.0.0.1:PORT/"])}


def postgres_version() -> str:
    import psycopg

    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", connect_timeout=5) as conn:
        return conn.execute("SHOW server_version").fetchone()[0]


def _pg_admin(*statements: str) -> None:
    import psycopg

    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@contextlib.contextmanager
def isolated_database(kind: str, workdir: Path, tag: str, root: Path):
    """The environment of ``manage.py`` (of the tree at ``root``) on an empty database of its own, removed after."""
    var = workdir / f"var-{tag}"
    var.mkdir()
    env = django_env("", workdir, root)
    env["SITEWARD_VAR_DIR"] = str(var)
    if kind == "sqlite":
        # No DATABASE_URL: the settings' default, a SQLite file in SITEWARD_VAR_DIR.
        env.pop("DATABASE_URL")
        try:
            yield env
        finally:
            shutil.rmtree(var, ignore_errors=True)
        return
    env["DATABASE_URL"] = f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/{PG_DATABASE}"
    _pg_admin(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)', f'CREATE DATABASE "{PG_DATABASE}"')
    try:
        yield env
    finally:
        _pg_admin(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
        shutil.rmtree(var, ignore_errors=True)


# --- the tree measured ------------------------------------------------------------------

# What a snapshot leaves out: history, environments, databases, caches, build output.
SNAPSHOT_IGNORE = shutil.ignore_patterns(".git", ".venv", "var", "__pycache__", "*.pyc", "*.egg-info", ".pytest_cache",
                                         "node_modules", "out")
DIGESTED = ("audits", "crawler", "config", "manage.py")


def head_commit(root: Path) -> str:
    """The commit ``root``'s HEAD names, read from ``.git`` (no git command); '' when unknown."""
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        if (git / ref).exists():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        pass
    return ""


def tree_digest(root: Path) -> str:
    """sha256 of the product code (``DIGESTED``): its paths and bytes, caches left out."""
    digest = hashlib.sha256()
    for name in DIGESTED:
        top = root / name
        files = [top] if top.is_file() else sorted(f for f in top.rglob("*") if f.is_file()
                                                   and "__pycache__" not in f.parts and f.suffix != ".pyc")
        for path in files:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def prepare_tree(args, workdir: Path) -> dict:
    """The tree whose ``manage.py`` runs: ``--checkout``, or with ``--snapshot`` a copy of it taken now.

    A snapshot keeps the measured code still while others edit the checkout:
    every audit of the run then runs the same bytes.
    """
    source = args.checkout.resolve()
    info = {"source": str(source), "head": head_commit(source), "snapshot": args.snapshot,
            "taken": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")}
    if args.snapshot:
        args.tree = workdir / "tree"
        shutil.copytree(source, args.tree, ignore=SNAPSHOT_IGNORE, symlinks=True)
    else:
        args.tree = source
    info["digest"] = tree_digest(args.tree)
    # The project is installed editable into the venv: check that the audits import this tree's code.
    env = django_env("", workdir, args.tree)
    done = subprocess.run([sys.executable, "-c", "import audits, crawler; print(audits.__file__); print(crawler.__file__)"],
                          env=env, cwd=args.tree, capture_output=True, text=True, timeout=60)
    files = done.stdout.split()
    if done.returncode or len(files) != 2 or not all(Path(f).is_relative_to(args.tree) for f in files):
        raise RuntimeError(f"the audits would not import {args.tree}'s code: {done.stdout} {done.stderr[-1000:]}")
    if not compile_bytecode(args.tree)["compiled"]:
        print("compiling the tree's bytecode failed: runs may compile modules at start-up", flush=True)
    return info


# --- one audit ------------------------------------------------------------------------


def audit_command(root: Path, base: str, max_pages: int, concurrency: int, out: Path, delta: bool) -> list[str]:
    """The real ``manage.py audit`` command line; the delta run adds ``--mode delta --from previous``."""
    cmd = [sys.executable, str(root / "manage.py"), "audit", base + "/", "--allow-private", "--no-external",
           "--max-pages", str(max_pages), "--max-depth", "50", "--concurrency", str(concurrency),
           "--out", str(out)]
    return cmd + (["--mode", "delta", "--from", "previous"] if delta else [])


def read_report(path: Path) -> dict:
    """The JSON Lines report: its summary record and what its page records say."""
    summary = None
    pages = unchanged = issues = 0
    statuses: Counter = Counter()
    codes: Counter = Counter()
    # Corpus pages (``/`` and ``/p/N.html``) that answered 200 but were not reused.
    refetched: list[str] = []
    with open(path) as lines:
        for line in lines:
            record = json.loads(line)
            kind = record.get("type")
            if kind == "page":
                pages += 1
                statuses[record.get("status")] += 1
                unchanged += record.get("unchanged") is True
                if record.get("unchanged") is False and record.get("status") == 200:
                    page_path = urlsplit(record["url"]).path or "/"
                    if page_path == "/" or page_path.startswith("/p/"):
                        refetched.append(page_path)
            elif kind == "issue":
                issues += 1
                codes[record.get("code")] += 1
            elif kind == "summary":
                summary = record
    if summary is None:
        raise RuntimeError(f"{path}: no summary record")
    return {"summary": summary, "page_records": pages, "unchanged": unchanged, "issue_records": issues,
            "issue_codes": dict(codes),
            "refetched_pages": len(refetched), "refetched_examples": refetched[:5],
            "statuses": {str(k): v for k, v in sorted(statuses.items(), key=lambda kv: str(kv[0]))}}


def run_audit(base: str, max_pages: int, args, env: dict, workdir: Path, tag: str, delta: bool) -> dict:
    out = workdir / f"{tag}.jsonl"
    log = workdir / f"{tag}.log"
    run = measure_child(audit_command(args.tree, base, max_pages, args.concurrency, out, delta), env,
                        args.timeout, log, cwd=args.tree)
    run.pop("samples", None)
    # Exit 1 means "issues at the fail-on level were found": the corpus has broken links. An uncaught
    # exception exits 1 too, so a traceback in the log is a failure whatever the code.
    text = log.read_text(errors="replace")
    if run["returncode"] not in (0, 1) or "Traceback (most recent call last)" in text:
        raise RuntimeError(f"audit ({tag}) exited {run['returncode']}: {text[-3000:]}")
    try:
        run.update(read_report(out))
    except (OSError, ValueError, RuntimeError) as exc:
        raise RuntimeError(f"audit ({tag}) exited {run['returncode']}, report unusable ({exc}); its log ends: "
                           f"{text[-1500:]}") from exc
    summary = run["summary"]
    if summary["status"] != "completed":
        raise RuntimeError(f"audit ({tag}) ended {summary['status']}: {summary.get('error_detail')}")
    if delta and summary.get("mode") != "delta":
        raise RuntimeError(f"audit ({tag}) ran in mode {summary.get('mode')!r}, not delta")
    run["pages"] = summary["pages"]
    run["servers"] = sum(run["server_cpu"].values())
    if not os.environ.get("BENCH_KEEP_WORKDIR"):
        out.unlink()
    return run


def one_round(rnd: int, kind: str, base: str, max_pages: int, args, workdir: Path) -> dict:
    """migrate, a full audit, then at once the delta audit from it, on an empty ``kind`` database."""
    tag = f"r{rnd}-{kind}"
    with isolated_database(kind, workdir, tag, args.tree) as env:
        migrate(sys.executable, args.tree, env)
        full = run_audit(base, max_pages, args, env, workdir, f"{tag}-full", delta=False)
        delta = run_audit(base, max_pages, args, env, workdir, f"{tag}-delta", delta=True)
    if full["pages"] != delta["pages"]:
        raise RuntimeError(f"round {rnd} {kind}: full audit reported {full['pages']} pages, "
                           f"delta {delta['pages']}")
    return {"round": rnd, "db": kind, "full": full, "delta": delta}


def show(record: dict) -> None:
    full, delta = record["full"], record["delta"]
    print(f"round {record['round']} {DB_LABELS[record['db']]:10} "
          f"full {full['pages']} pages {full['wall']:6.1f} s wall {full['cpu']:6.1f} s CPU | "
          f"delta {delta['pages']} pages ({delta['unchanged']} unchanged) {delta['wall']:6.1f} s wall "
          f"{delta['cpu']:6.1f} s CPU | ratio wall {delta['wall'] / full['wall']:.3f} "
          f"CPU {delta['cpu'] / full['cpu']:.3f}", flush=True)


# --- profile ----------------------------------------------------------------------------


def profile_delta(base: str, max_pages: int, args, kind: str, workdir: Path, top: int) -> dict:
    """A full audit, then the delta audit under cProfile; the top ``top`` entries by cumulative and own time."""
    prof = Path(args.profile_out)
    tag = f"profile-{kind}"
    with isolated_database(kind, workdir, tag, args.tree) as env:
        migrate(sys.executable, args.tree, env)
        run_audit(base, max_pages, args, env, workdir, f"{tag}-full", delta=False)
        cmd = audit_command(args.tree, base, max_pages, args.concurrency, workdir / f"{tag}-delta.jsonl", delta=True)
        cmd = [cmd[0], "-m", "cProfile", "-o", str(prof)] + cmd[1:]
        run = measure_child(cmd, env, args.timeout * 3, workdir / f"{tag}-delta.log", cwd=args.tree)
        run.pop("samples", None)
    tables = {}
    for order in ("cumulative", "tottime"):
        text = _pstats_text(prof, order, top)
        tables[order] = text
    return {"wall": run["wall"], "cpu": run["cpu"], "returncode": run["returncode"], "tables": tables,
            "prof": str(prof), "db": kind}


def _pstats_text(prof: Path, order: str, top: int) -> str:
    import io

    buffer = io.StringIO()
    stats = pstats.Stats(str(prof), stream=buffer)
    stats.strip_dirs().sort_stats(order).print_stats(top)
    text = buffer.getvalue()
    # From the column header on: the preamble names the file and the totals line.
    lines = text.splitlines()
    total = next((line.strip() for line in lines if "function calls" in line), "")
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("ncalls")), 0)
    return (total + "\n\n" if total else "") + "\n".join(line.rstrip() for line in lines[start:] if line.strip())


# --- summary ----------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def judged(ratio: float) -> str:
    return "met" if ratio <= TARGET else "MISSED"


def tree_line(tree: dict) -> str:
    where = (f"a snapshot of {tree['source']} taken {tree['taken']} (`--snapshot`: the files copied, without "
             f".git, .venv and var, so edits to the checkout during the run changed nothing measured)"
             if tree["snapshot"] else tree["source"])
    return (f"Code measured: {where}; HEAD {tree['head'][:10] or 'unknown'} plus any uncommitted changes; "
            f"sha256 of `audits/`, `crawler/`, `config/` and `manage.py` (paths and bytes): `{tree['digest']}`.")


def render(args, info: dict, corpus: Corpus, server: str, check: dict, results: list[dict],
           failures: list[str], kinds: list[str], profile: dict | None) -> str:
    rounds_done = sorted({r["round"] for r in results})
    lines = [
        f"Measured {info['date']} on {info['nproc']} CPU(s) ({info['cpu']}), Python {info['python']}, "
        f"{info['platform']}; SQLite {info['sqlite']}"
        + (f", PostgreSQL {info['postgres']} (127.0.0.1:5432)" if "postgres" in kinds else "")
        + f"; {server}. Load average (1/5/15 min) {', '.join(f'{x:.2f}' for x in info['load_before'])} before "
        f"and {', '.join(f'{x:.2f}' for x in info['load_after'])} after.",
        "Packages: " + ", ".join(f"{k} {v}" for k, v in info["packages"].items()) + ".",
        "",
        tree_line(info["tree"]),
        "",
        "Command (from the repository root):",
        "",
        "```",
        ".venv/bin/python -m benchmarks.bench_delta " + shlex.join(args.argv),
        "```",
        "",
        f"Corpus: `benchmarks/corpus.py`, {len(corpus.pages):,} pages (seed {args.seed}) plus "
        f"{len(corpus.broken):,} broken link targets (404) and {len(corpus.assets):,} assets, written once and "
        f"served unchanged by nginx on 127.0.0.1 for the whole run. nginx's validators, checked before the "
        f"runs: `/` has ETag `{check['etag']}` and Last-Modified `{check['last_modified']}`, and "
        f"`{check['command']}` answered **{check['status']}**.",
        "",
        f"Each round, on each database (order alternating by round), on an empty database of its own (SQLite: "
        f"a fresh `SITEWARD_VAR_DIR`, no `DATABASE_URL`; PostgreSQL: `{PG_DATABASE}`, dropped and created "
        f"again): `manage.py migrate`, then the full audit `manage.py audit URL --allow-private --no-external "
        f"--max-pages {args.max_pages} --max-depth 50 --concurrency {args.concurrency} --out FULL.jsonl`, "
        f"then at once the delta audit, the same command with `--mode delta --from previous`. *wall*: the "
        f"audit process's wall seconds; *CPU*: its user + system seconds (`os.wait4` rusage of that child); "
        f"*servers*: CPU seconds PostgreSQL's processes and nginx burned in the same span (from `/proc`; on "
        f"SQLite, nginx's alone), not counted in *CPU*. *pages*: the summary record's page count (both "
        f"audits must report the same); *unchanged*: the delta report's page records with "
        f"`\"unchanged\": true`. Target: delta / full <= {TARGET_TEXT} for wall time and for CPU.",
        "",
        "Another engineer's test run shared this machine's two cores during the measurement, so absolute "
        "seconds carry that noise; each delta audit runs right after its full audit (the pair interleaved "
        "round by round, databases alternating), so the noise hits both, and the ratios are taken per pair "
        "as well as of the medians.",
        "",
        "### Every run",
        "",
        "| round | database | full: pages | wall s | CPU s | servers s | delta: pages | unchanged | wall s | "
        "CPU s | servers s | delta/full wall | delta/full CPU |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        f, d = r["full"], r["delta"]
        lines.append(
            f"| {r['round']} | {DB_LABELS[r['db']]} | {f['pages']:,} | {f['wall']:.1f} | {f['cpu']:.1f} | "
            f"{f['servers']:.1f} | {d['pages']:,} | {d['unchanged']:,} | {d['wall']:.1f} | {d['cpu']:.1f} | "
            f"{d['servers']:.1f} | {d['wall'] / f['wall']:.3f} | {d['cpu'] / f['cpu']:.3f} |")
    lines += [
        "",
        f"### Medians over {len(rounds_done)} round(s) and verdict (target: delta/full <= {TARGET_TEXT})",
        "",
        "| database | full wall s | delta wall s | wall ratio (of medians; per pair median, range) | "
        "full CPU s | delta CPU s | CPU ratio (of medians; per pair median, range) | CPU + servers ratio | "
        "verdict |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    verdicts = []
    for kind in kinds:
        runs = [r for r in results if r["db"] == kind]
        if not runs:
            lines.append(f"| {DB_LABELS[kind]} | n/a | | | | | | | no complete round |")
            continue
        fw, dw = median([r["full"]["wall"] for r in runs]), median([r["delta"]["wall"] for r in runs])
        fc, dc = median([r["full"]["cpu"] for r in runs]), median([r["delta"]["cpu"] for r in runs])
        fs = median([r["full"]["cpu"] + r["full"]["servers"] for r in runs])
        ds = median([r["delta"]["cpu"] + r["delta"]["servers"] for r in runs])
        pw = [r["delta"]["wall"] / r["full"]["wall"] for r in runs]
        pc = [r["delta"]["cpu"] / r["full"]["cpu"] for r in runs]
        wall_ratio, cpu_ratio = dw / fw, dc / fc
        ok = wall_ratio <= TARGET and cpu_ratio <= TARGET
        verdict = ("met" if ok else "MISSED") + f" (wall {judged(wall_ratio)}, CPU {judged(cpu_ratio)})"
        verdicts.append((kind, ok, wall_ratio, cpu_ratio))
        lines.append(
            f"| {DB_LABELS[kind]} | {fw:.1f} | {dw:.1f} | **{wall_ratio:.3f}**; {median(pw):.3f} "
            f"({min(pw):.3f}-{max(pw):.3f}) | {fc:.1f} | {dc:.1f} | **{cpu_ratio:.3f}**; {median(pc):.3f} "
            f"({min(pc):.3f}-{max(pc):.3f}) | {ds / fs:.3f} | {verdict} |")
    lines.append("")
    if verdicts:
        all_met = all(ok for _, ok, _, _ in verdicts) and not failures
        lines.append(
            ("**Verdict: target met**" if all_met else "**Verdict: target MISSED**")
            + f" (delta/full <= {TARGET_TEXT} for both wall time and CPU, ratio of the medians): "
            + "; ".join(f"{DB_LABELS[k]} wall {w:.3f}, CPU {c:.3f}" for k, _, w, c in verdicts) + ".")
        lines.append("")
    checks = []
    for r in results:
        f, d = r["full"], r["delta"]
        same_issues = f["summary"].get("issues") == d["summary"].get("issues")
        codes = sorted(set(f["issue_codes"]) | set(d["issue_codes"]))
        differ = {c: (f["issue_codes"].get(c, 0), d["issue_codes"].get(c, 0)) for c in codes
                  if f["issue_codes"].get(c, 0) != d["issue_codes"].get(c, 0)}
        checks.append(f"- round {r['round']} {DB_LABELS[r['db']]}: both completed; {f['pages']:,} pages each "
                      f"({d['page_records']:,} page records in the delta report, pages and checked resources, "
                      f"{d['unchanged']:,} unchanged; statuses {d['statuses']}; corpus pages answering 200 not "
                      f"reused: {d['refetched_pages']}"
                      f"{' (' + ', '.join(d['refetched_examples']) + ')' if d['refetched_pages'] else ''}); issue counts by severity "
                      f"{'the same' if same_issues else 'DIFFER'}: full {f['summary'].get('issues')}, delta "
                      f"{d['summary'].get('issues')}"
                      + ("" if not differ else "; issue records by code that differ (full, delta): "
                         + ", ".join(f"`{c}` {a}/{b}" for c, (a, b) in differ.items()))
                      + ".")
    if checks:
        lines += ["Checks (from each run's JSON Lines report):", ""] + checks + [""]
    if failures:
        lines += ["Failed rounds:", ""] + [f"- {text}" for text in failures] + [""]
    if profile:
        lines += [
            f"### Profile of one delta audit ({DB_LABELS[profile['db']]}, cProfile)",
            "",
            f"`python -m cProfile -o {profile['prof']} manage.py audit ... --mode delta --from previous` "
            f"after a full audit: {profile['wall']:.1f} s wall, {profile['cpu']:.1f} s CPU under the profiler.",
            "",
        ]
        for order, text in profile["tables"].items():
            lines += [f"Top {args.profile_top} by {order}:", "", "```", text, "```", ""]
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--install", action="store_true", help="apt-get install nginx when it is missing")
    parser.add_argument("--size", type=int, default=10_000, help="corpus pages (default 10,000)")
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--rounds", type=int, default=3, help="full + delta pairs per database")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--max-pages", type=int, help="--max-pages of each audit (default: more than the corpus)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed for each audit")
    parser.add_argument("--results", type=Path, help="write or update the section --title in this markdown file")
    parser.add_argument("--title", default=TITLE, help="the section of --results to write")
    parser.add_argument("--json", type=Path, help="also dump every run here")
    parser.add_argument("--profile", action="store_true",
                        help="then profile one more delta audit (after its full audit) with cProfile")
    parser.add_argument("--profile-only", action="store_true", help="only the profile, no measured rounds")
    parser.add_argument("--profile-out", default="/tmp/delta.prof")
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--checkout", type=Path, default=REPO, help="the tree whose manage.py runs (default: this one)")
    parser.add_argument("--snapshot", action="store_true",
                        help="copy --checkout's files (no .git, .venv, var) to the work directory first and run "
                             "the copy, so edits to the checkout during the run change nothing measured")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    kinds = [k for k in args.databases.split(",") if k]
    if not kinds or (unknown := set(kinds) - set(DB_LABELS)):
        parser.error(f"unknown database {', '.join(sorted(unknown)) if kinds else '(none)'}")
    if "postgres" in kinds and (why := postgres_available()):
        parser.error(f"PostgreSQL: {why} (start it: pg_ctlcluster --skip-systemctl-redirect 15 main start)")
    if args.install:
        install_nginx()
    if not os.path.exists(NGINX):
        parser.error(f"{NGINX} is missing: run with --install (or apt-get install -y nginx)")

    info = machine()
    info["load_before"] = os.getloadavg()
    info["sqlite"] = sqlite3.sqlite_version
    if "postgres" in kinds:
        info["postgres"] = postgres_version()
    corpus = build_corpus(args.size, args.seed)
    args.max_pages = args.max_pages or corpus.reachable + 100
    print(f"corpus: {len(corpus.pages):,} pages, {len(corpus.broken):,} broken targets, "
          f"{len(corpus.assets):,} assets", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="siteward-bench-delta-"))
    info["tree"] = prepare_tree(args, workdir)
    print(f"measuring {args.tree} (from {info['tree']['source']}, HEAD {info['tree']['head'][:10] or 'unknown'}, "
          f"code digest {info['tree']['digest']})", flush=True)
    results: list[dict] = []
    failures: list[str] = []
    profile = None
    try:
        with nginx_server(corpus) as (base, server):
            check = conditional_check(base)
            print(f"serving {base} with {server}; If-None-Match {check['etag']} -> {check['status']}", flush=True)
            for rnd in range(1, 0 if args.profile_only else args.rounds + 1):
                for kind in kinds if rnd % 2 else kinds[::-1]:
                    try:
                        record = one_round(rnd, kind, base, args.max_pages, args, workdir)
                    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                        text = f"round {rnd} {DB_LABELS[kind]}: {str(exc).strip().splitlines()[-1][:300]}"
                        print(text, flush=True)
                        failures.append(text)
                        continue
                    show(record)
                    results.append(record)
            if args.profile or args.profile_only:
                profile = profile_delta(base, args.max_pages, args, kinds[0], workdir, args.profile_top)
                for order, text in profile["tables"].items():
                    print(f"\nTop {args.profile_top} by {order} ({profile['prof']}):\n{text}", flush=True)
    finally:
        info["load_after"] = os.getloadavg()
        if args.json:
            args.json.write_text(json.dumps({"argv": args.argv, "machine": info, "results": results,
                                             "failures": failures, "profile": profile}, indent=1, default=str))
        if os.environ.get("BENCH_KEEP_WORKDIR"):
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    body = render(args, info, corpus, server, check, results, failures, kinds, profile)
    print()
    print(body)
    if args.results and (results or profile):
        write_results(args.results, args.title, body)
        print(f"wrote section {args.title!r} of {args.results}")
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
