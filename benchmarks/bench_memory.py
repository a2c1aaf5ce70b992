"""Memory against the site's size: ``manage.py audit`` at 10,000, 50,000 and 95,000 pages (~100,000 page rows).

For each size (``--sizes``) the synthetic corpus (``benchmarks.corpus``) is
written once to ``--corpus-dir`` (page by page, never held whole in memory)
and served by nginx on 127.0.0.1; for each database (``--databases``: a fresh
SQLite file in a fresh SITEWARD_VAR_DIR, or a throwaway PostgreSQL database
``siteward_h2_mem_*`` on 127.0.0.1:5432, created and dropped around the run)
it runs ``migrate`` and then the real command, unchanged::

    python manage.py audit http://127.0.0.1:PORT/ --allow-private --max-pages N --max-depth 50 \\
        --concurrency 32 --no-external --out /dev/null

and records the audit process's peak RSS (its kernel high-water mark, VmHWM,
read from /proc every 50 ms, and the RSS samples themselves), the RSS when the
audit had stored 10%, 50% and 100% of the corpus's pages (its row's
``pages_crawled``, polled every second), the pages stored and the wall time.

``--snapshots`` runs the same command inside a child Python instead
(``execute_from_command_line``, as ``manage.py`` does) with tracemalloc on and
a thread that, at each page-count milestone (``--milestones``; by default 10%,
50% and 100% of the corpus) and once more after the command returns, takes a
snapshot and prints the allocation sites that grew most since the previous one,
with tracemalloc's traced total beside the RSS (what lxml, SQLite and the
allocator hold is in the RSS only) and the object types that grew in number.
tracemalloc slows the audit and adds its own memory: those runs' RSS are not
the figures of record.

    .venv/bin/pip install -r benchmarks/requirements.txt
    .venv/bin/python -m benchmarks.bench_memory --install --sizes 10000,95000 --databases sqlite,postgres
    .venv/bin/python -m benchmarks.bench_memory --sizes 95000 --databases sqlite --snapshots

Every connection stays on 127.0.0.0/8. It is a script, never a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a file as well as with -m
    sys.path.insert(0, str(REPO))

TARGET_PEAK_MB = 200.0
PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
SAMPLE_SECONDS = 0.05
POLL_EVERY = 20  # RSS samples between two reads of the audit's page count
TOP_SITES = 15


# --- the corpus, written once per size ----------------------------------------------


def corpus_on_disk(n_pages: int, seed: int, cache: Path) -> tuple[Path, dict]:
    """``build_corpus(n_pages, seed)``'s files under ``cache``, written page by page; (root, facts).

    The pages come from the same generator calls in the same order as
    ``build_corpus``, so the bytes are the same, but each is written and dropped
    at once: 100,000 pages would be 4 GB in memory. A finished corpus is reused.
    """
    from benchmarks import corpus as c

    root = cache / f"corpus-{n_pages}-{seed}"
    done = root / "corpus.json"
    if done.exists():
        return root / "www", json.loads(done.read_text())
    shutil.rmtree(root, ignore_errors=True)
    www = root / "www"
    (www / "p").mkdir(parents=True)
    rng = random.Random(seed)
    broken_pool = [f"/gone/{k}.html" for k in range(max(5, n_pages // 20))]
    used_broken: set[str] = set()
    images: set[str] = set()
    size = 0
    for i in range(n_pages):
        body = c._render(i, n_pages, rng, broken_pool, used_broken, images)
        size += len(body)
        path = c.page_path(i)
        (www / ("index.html" if path == "/" else path.lstrip("/"))).write_bytes(body)
    referenced = images | set(c._SITE_ASSETS)
    served = {path for path in referenced if not c._asset_missing(path)}
    for path in sorted(served):
        target = www / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(c.ASSET_KINDS[Path(path).suffix][1])
    facts = {"pages": n_pages, "broken": len(used_broken), "seed": seed, "html_bytes": size,
             "assets": len(served), "missing_assets": len(referenced - served)}
    done.write_text(json.dumps(facts))
    return www, facts


# --- databases ------------------------------------------------------------------------


@contextlib.contextmanager
def fresh_database(kind: str, workdir: Path):
    """(DATABASE_URL, open a read connection) for an empty database, removed afterwards."""
    if kind == "sqlite":
        path = workdir / f"h2-{uuid.uuid4().hex[:8]}.sqlite3"
        try:
            yield f"sqlite:///{path}", lambda: sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
        return
    import psycopg

    name = f"siteward_h2_mem_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(**PG, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield (f"postgres://{PG['user']}@{PG['host']}:{PG['port']}/{name}",
                   lambda: psycopg.connect(**PG, dbname=name, autocommit=True, connect_timeout=3))
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def query_one(connect, sql: str):
    """One row of ``sql``, or None while the table is not there or the database is busy."""
    try:
        conn = connect()
    except Exception:  # noqa: BLE001 - a poll that fails is retried at the next one
        return None
    try:
        return conn.execute(sql).fetchone()
    except Exception:  # noqa: BLE001
        return None
    finally:
        conn.close()


STORED_SQL = (
    "SELECT (SELECT status FROM audits_audit ORDER BY id DESC LIMIT 1), "
    "(SELECT COUNT(*) FROM audits_page WHERE kind = 'page'), "
    "(SELECT COUNT(*) FROM audits_page WHERE kind = 'page' AND status_code = 404), "
    "(SELECT COUNT(*) FROM audits_page WHERE kind = 'resource')"
)


# --- measuring one audit ----------------------------------------------------------------


def proc_memory(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in bytes; (0, 0) once it is gone.

    VmHWM is the kernel's high-water mark of this process image's RSS: it starts
    afresh at exec, unlike ``ru_maxrss``, which keeps the parent's at fork.
    """
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, hwm


def measure(cmd: list[str], env: dict, cwd: Path, log: Path, timeout: float, connect,
            milestones: list[int]) -> dict:
    """Run ``cmd``; its peak RSS, the RSS at each page milestone, wall and CPU time."""
    with open(log, "w") as out:
        began = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        peak = peak_sampled = 0
        pages = 0
        at_pages: dict[int, float] = {}
        curve: list[tuple[float, int, float]] = []  # (seconds, pages, RSS MB), once a second
        tick = 0
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            rss, hwm = proc_memory(proc.pid)
            peak, peak_sampled = max(peak, hwm), max(peak_sampled, rss)
            if tick % POLL_EVERY == 0:
                row = query_one(connect, "SELECT COALESCE(MAX(pages_crawled), 0) FROM audits_audit")
                pages = row[0] if row else pages
                curve.append((round(time.monotonic() - began, 1), pages, round(rss / 2**20, 1)))
                for mark in milestones:
                    if pages >= mark and mark not in at_pages:
                        at_pages[mark] = rss / 2**20
            tick += 1
            if time.monotonic() - began > timeout:
                proc.kill()
                os.wait4(proc.pid, 0)
                raise RuntimeError(f"{cmd[:4]} killed after {timeout:.0f} s; see {log}")
            time.sleep(SAMPLE_SECONDS)
        wall = time.monotonic() - began
    return {
        "returncode": os.waitstatus_to_exitcode(status), "wall": wall,
        "cpu": rusage.ru_utime + rusage.ru_stime, "peak_mb": peak / 2**20,
        "peak_sampled_mb": peak_sampled / 2**20, "ru_maxrss_mb": rusage.ru_maxrss / 1024,
        "rss_at_pages": {str(mark): round(mb, 1) for mark, mb in at_pages.items()},
        "curve": curve, "log": str(log),
    }


# The command's --max-pages bound: a corpus of 95,000 pages (99,750 page rows with its
# broken targets) is the largest whose whole crawl fits under it.
MAX_PAGES = 100_000


def audit_args(base: str, facts: dict, concurrency: int) -> list[str]:
    max_pages = min(facts["pages"] + facts["broken"] + 100, MAX_PAGES)
    return ["audit", base + "/", "--allow-private", "--max-pages", str(max_pages),
            "--max-depth", "50", "--concurrency", str(concurrency), "--no-external", "--out", "/dev/null"]


def run_one(base: str, facts: dict, kind: str, args, workdir: Path) -> dict:
    from benchmarks.bench_product import django_env, migrate

    size = facts["pages"]
    milestones = [int(size * share) for share in (0.1, 0.5, 1.0)]
    snap_marks = [int(m) for m in args.milestones.split(",")] if args.milestones else milestones
    run_dir = workdir / f"{kind}-{size}-{uuid.uuid4().hex[:6]}"
    run_dir.mkdir()
    with fresh_database(kind, run_dir) as (url, connect):
        env = django_env(url, run_dir, args.tree) | dict(pair.split("=", 1) for pair in args.env)
        migrate(sys.executable, args.tree, env)
        tail = audit_args(base, facts, args.concurrency)
        trace = run_dir / "snapshots.jsonl"
        if args.snapshots:
            cmd = [sys.executable, "-m", "benchmarks.bench_memory", "--child", str(trace),
                   "--child-marks", ",".join(map(str, snap_marks)), "--frames", str(args.frames), "--", *tail]
            env["PYTHONPATH"] = f"{args.tree}{os.pathsep}{REPO}"
        else:
            cmd = [sys.executable, str(args.tree / "manage.py"), *tail]
        log = run_dir / "audit.log"
        run = measure(cmd, env, args.tree, log, args.timeout, connect, milestones)
        if run["returncode"] not in (0, 1):  # 1: issues at the fail-on level, which this corpus has
            raise RuntimeError(f"audit exited {run['returncode']} on {kind}: {log.read_text()[-3000:]}")
        status, stored, broken, resources = query_one(connect, STORED_SQL) or (None, 0, 0, 0)
        run.update(kind=kind, size=size, status=status, pages=stored, broken_stored=broken, resources=resources,
                   complete=status == "completed" and stored == facts["pages"] + facts["broken"],
                   snapshots=args.snapshots)
        if args.snapshots and trace.exists():
            run["milestones"] = [json.loads(line) for line in trace.read_text().splitlines()]
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    return run


# --- the child of --snapshots: the command under tracemalloc ---------------------------------


def child(out: Path, marks: list[int], frames: int, argv: list[str]) -> None:
    """``manage.py`` ``argv`` in this process, with a snapshot at each page milestone and at the end."""
    import gc
    import tracemalloc
    from collections import Counter

    tracemalloc.start(frames)
    import django
    from django.core.management import execute_from_command_line

    django.setup()
    from django.db import connections

    from audits.models import Audit

    state = {"previous": None, "types": Counter()}
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
              tracemalloc.Filter(False, __file__)]

    def snap(label: str, pages: int) -> None:
        snapshot = tracemalloc.take_snapshot().filter_traces(ignore)
        types = Counter(type(o).__name__ for o in gc.get_objects())
        current, peak = tracemalloc.get_traced_memory()
        record = {"label": label, "pages": pages, "rss_mb": proc_memory(os.getpid())[0] / 2**20,
                  "traced_mb": current / 2**20, "traced_peak_mb": peak / 2**20,
                  "top_sites": [_stat(s) for s in snapshot.statistics("lineno")[:TOP_SITES]]}
        if state["previous"] is not None:
            grew = snapshot.compare_to(state["previous"], "lineno")
            record["grew"] = [_stat(s, diff=True) for s in grew[:TOP_SITES] if s.size_diff > 0]
            if frames > 1:
                # Frames as file:line, innermost first (format() would read every source file).
                record["grew_traces"] = [
                    {"kb": s.size_diff / 1024, "count": s.count_diff,
                     "trace": [f"{_short(f.filename)}:{f.lineno}" for f in reversed(s.traceback)]}
                    for s in snapshot.compare_to(state["previous"], "traceback")[:5] if s.size_diff > 0]
            record["types_grew"] = (types - state["types"]).most_common(12)
        state["previous"], state["types"] = snapshot, types
        with open(out, "a") as f:
            f.write(json.dumps(record) + "\n")

    stop = threading.Event()

    def watch() -> None:
        pending = sorted(marks)
        try:
            snap("start", 0)
            while pending and not stop.wait(0.5):
                pages = Audit.objects.order_by("-id").values_list("pages_crawled", flat=True).first() or 0
                while pending and pages >= pending[0]:
                    snap(f"{pending.pop(0)} pages", pages)
        finally:
            connections.close_all()

    watcher = threading.Thread(target=watch, name="h2-snapshots", daemon=True)
    watcher.start()
    code = 0
    try:
        execute_from_command_line(["manage.py", *argv])
    except SystemExit as exc:
        code = exc.code or 0
    stop.set()
    watcher.join()
    snap("after the command", Audit.objects.order_by("-id").values_list("pages_crawled", flat=True).first() or 0)
    raise SystemExit(code)


def _stat(stat, diff: bool = False) -> dict:
    frame = stat.traceback[0]
    where = f"{_short(frame.filename)}:{frame.lineno}"
    if diff:
        return {"where": where, "kb": stat.size_diff / 1024, "count": stat.count_diff, "total_kb": stat.size / 1024}
    return {"where": where, "kb": stat.size / 1024, "count": stat.count}


def _short(filename: str) -> str:
    for marker in ("site-packages/", str(REPO) + "/", "/lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


# --- report -------------------------------------------------------------------------------


def render(runs: list[dict], info: dict) -> str:
    lines = [
        "| pages in corpus | database | peak RSS MB (VmHWM) | RSS at 10% / 50% / 100% of the pages, MB "
        "| pages stored | all stored | wall s | CPU s | pages/s |",
        "| ---: | --- | ---: | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for run in runs:
        if "error" in run:
            lines.append(f"| {run['size']:,} | {run['kind']} | failed: {run['error'][:120]} | | | | | | |")
            continue
        curve = " / ".join(f"{mb:.0f}" for mb in run["rss_at_pages"].values())
        lines.append(
            f"| {run['size']:,} | {run['kind']} | {run['peak_mb']:.0f} | {curve} | {run['pages']:,} | "
            f"{'yes' if run['complete'] else 'NO (' + str(run['status']) + ')'} | {run['wall']:.0f} | "
            f"{run['cpu']:.0f} | {run['pages'] / run['wall']:.0f} |")
    lines.append("")
    for kind in sorted({r["kind"] for r in runs}):
        ok = sorted((r for r in runs if r["kind"] == kind and "error" not in r), key=lambda r: r["size"])
        if len(ok) >= 2:
            low, high = ok[0], ok[-1]
            lines.append(f"- {kind}: {low['peak_mb']:.0f} MB at {low['size']:,} pages -> {high['peak_mb']:.0f} MB "
                         f"at {high['size']:,}, +{high['peak_mb'] - low['peak_mb']:.0f} MB; target < "
                         f"{TARGET_PEAK_MB:.0f} MB at the largest: {'met' if high['peak_mb'] < TARGET_PEAK_MB else 'missed'}.")
    for run in runs:
        for m in run.get("milestones", []):
            lines.append(f"\n{run['kind']} {run['size']:,}, snapshot at {m['label']} ({m['pages']:,} pages): "
                         f"RSS {m['rss_mb']:.0f} MB, traced {m['traced_mb']:.1f} MB (peak {m['traced_peak_mb']:.1f})")
            for s in m.get("grew", []):
                lines.append(f"    +{s['kb']:9.1f} KB {s['count']:+8d} blocks  {s['where']} (now {s['total_kb']:.0f} KB)")
            for t in m.get("grew_traces", []):
                lines.append(f"    trace +{t['kb']:.0f} KB {t['count']:+d}: " + " <- ".join(t["trace"]))
            if m.get("types_grew"):
                lines.append("    types grown: " + ", ".join(f"{name} +{n}" for name, n in m["types_grew"]))
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        split = sys.argv.index("--")
        opts = dict(zip(sys.argv[1:split:2], sys.argv[2:split:2], strict=True))
        child(Path(opts["--child"]), [int(m) for m in opts["--child-marks"].split(",")], int(opts["--frames"]),
              sys.argv[split + 1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000,95000",
                        help="corpus pages; 95,000 pages make 99,750 page rows, under --max-pages' bound")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--corpus-dir", type=Path, default=Path(tempfile.gettempdir()) / "h2-memory-corpus",
                        help="where each size's corpus is written once and kept for later runs")
    parser.add_argument("--checkout", type=Path, default=REPO, help="the tree whose manage.py runs")
    parser.add_argument("--freeze", action="store_true",
                        help="run a copy of the checkout taken at the start (others may be editing it)")
    parser.add_argument("--snapshots", action="store_true", help="tracemalloc snapshots at page milestones")
    parser.add_argument("--milestones", default="", help="page counts of the snapshots (default 10/50/100%%)")
    parser.add_argument("--frames", type=int, default=1, help="traceback depth of the snapshots")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable for migrate and the audit (e.g. DEBUG=1); the runs of record set none")
    parser.add_argument("--install", action="store_true", help="apt-get install nginx when missing")
    parser.add_argument("--keep", action="store_true", help="keep each run's directory (logs, SQLite file)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from benchmarks.static_server import install_nginx, nginx_sites

    if args.install:
        install_nginx()
    workdir = Path(tempfile.mkdtemp(prefix="h2-memory-"))
    args.tree = args.checkout.resolve()
    if args.freeze:
        from benchmarks.bench_delta import SNAPSHOT_IGNORE

        args.tree = workdir / "tree"
        shutil.copytree(args.checkout.resolve(), args.tree, ignore=SNAPSHOT_IGNORE, symlinks=True)
    taken = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    info = {"taken": taken, "tree": str(args.tree), "argv": sys.argv[1:], "loadavg_before": os.getloadavg()}
    runs: list[dict] = []
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            www, facts = corpus_on_disk(size, args.seed, args.corpus_dir)
            print(f"corpus: {facts}", flush=True)
            with nginx_sites({"corpus": www}) as (bases, what):
                for kind in args.databases.split(","):
                    try:
                        run = run_one(bases["corpus"], facts, kind, args, workdir)
                    except Exception as exc:  # noqa: BLE001 - one failed run is a row, not the end
                        run = {"size": size, "kind": kind, "error": str(exc)}
                    runs.append(run)
                    print(json.dumps({k: v for k, v in run.items() if k not in ("curve", "milestones")}), flush=True)
                    if args.json:
                        args.json.write_text(json.dumps({"info": info, "runs": runs}, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    info["loadavg_after"] = os.getloadavg()
    print(f"\nMeasured {taken}; load average before {info['loadavg_before']}, after {info['loadavg_after']}\n")
    print(render(runs, info))


if __name__ == "__main__":
    main()
