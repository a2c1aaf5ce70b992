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

    .venv/bin/python -m benchmarks.bench_delta --install --snapshot --size 10000 --rounds 3 \\
        --results benchmarks/RESULTS.md --title "Delta audits: an unchanged 10,000-page corpus"

One run at a time: a second one started while another measures refuses to
start (a lock in the temporary directory), since the two would share the
cores and the PostgreSQL database. Others edit the checkout while it runs?
``--snapshot`` copies its files
(without .git, .venv, var) to the work directory first and runs the copy, so
every audit runs the same code; the section names the HEAD commit and a digest
of the product code either way.

With ``--profile`` (or ``--profile-only``, no measured rounds), after the
rounds, on one more empty database (``--profile-db``, default the first of
``--databases``): a full audit and a delta audit from it, each with every
thread under cProfile on a CPU clock (``--profile-child``: plain ``-m
cProfile`` sees only the main thread, and the crawl fetches and parses on a
helper thread), then one more delta audit under plain ``python -m cProfile -o
/tmp/delta.prof`` (``--profile-out``). The section gets the parts of the
pipeline side by side (start, leases, writer, reuse, admission, finalize, the
report, parse) and the top ``--profile-top`` (25) entries by cumulative and
by own time. It is a script, never a timed test.

With ``--floor``, after the rounds: the delta audit's requests alone
(``benchmarks.fetch_floor``: every page asked with its validators, every
broken target fetched, every asset checked, through the crawler's fetcher and
nothing else), against each database's median full audit: the part of the
target no parse, row or report saved can go below.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import pstats
import re
import shlex
import shutil
import signal
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
from benchmarks.corpus import build_corpus  # noqa: E402
from benchmarks.static_server import NGINX, install_nginx, nginx_server  # noqa: E402

TARGET = 1 / 3  # delta / full, for wall time and for CPU
TARGET_TEXT = "0.33"
PG_DATABASE = "siteward_benchdelta"
# One run at a time on a machine: two would share the cores (each measuring the other's load) and the
# PostgreSQL database above (each dropping it under the other).
LOCK = Path(tempfile.gettempdir()) / "siteward-bench-delta.lock"
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


def hold_lock():
    """(open file holding ``LOCK``, "") for this run, or (None, the holder's pid) when another run holds it."""
    import fcntl

    handle = open(LOCK, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        return None, holder
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle, ""


def stop_on_term(*_) -> None:
    """SIGTERM: kill the audit (or migrate) running, then unwind (nginx stops with its context)."""
    import psutil

    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if child.name() != "nginx":
                child.kill()
    sys.exit(143)


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


def audit_command(root: Path, base: str, max_pages: int, concurrency: int, out: Path, delta: bool,
                  source: str = "previous") -> list[str]:
    """The real ``manage.py audit`` command line; the delta run adds ``--mode delta --from previous``."""
    cmd = [sys.executable, str(root / "manage.py"), "audit", base + "/", "--allow-private", "--no-external",
           "--max-pages", str(max_pages), "--max-depth", "50", "--concurrency", str(concurrency),
           "--out", str(out)]
    return cmd + (["--mode", "delta", "--from", source] if delta else [])


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


def run_audit(base: str, max_pages: int, args, env: dict, workdir: Path, tag: str, delta: bool,
              source: str = "previous", wrap=None) -> dict:
    """One measured audit; ``wrap(cmd)`` may turn its command line into a profiled one."""
    out = workdir / f"{tag}.jsonl"
    log = workdir / f"{tag}.log"
    cmd = audit_command(args.tree, base, max_pages, args.concurrency, out, delta, source)
    timeout = args.timeout
    if wrap is not None:
        cmd, timeout = wrap(cmd), args.timeout * 4
    run = measure_child(cmd, env, timeout, log, cwd=args.tree)
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

# The parts of the pipeline, by (file, function): their cumulative CPU in the thread-CPU profiles.
COMPONENTS = [
    ("MainThread", "audits/crawl/start.py", "run_start", "start (robots, start page, frontier seed)"),
    ("MainThread", "audits/crawl/chunk.py", "lease_items", "chunk leases (lease_items)"),
    ("MainThread", "audits/crawl/writer.py", "_top_up", "top-ups (writer._top_up)"),
    ("MainThread", "audits/crawl/writer.py", "hold", "writer.hold (incl. reuse.validators)"),
    ("MainThread", "audits/crawl/reuse.py", "validators", "  reuse.validators (source validators)"),
    ("MainThread", "audits/crawl/writer.py", "_store", "writer._store (a sub-batch's transaction)"),
    ("MainThread", "audits/crawl/reuse.py", "revive", "  reuse.revive (source rows, edges, issues)"),
    ("MainThread", "audits/crawl/writer.py", "_write_pages", "  writer._write_pages"),
    ("MainThread", "audits/crawl/writer.py", "_write_issues", "  writer._write_issues"),
    ("MainThread", "audits/crawl/writer.py", "_write_links", "  writer._write_links (edges + admission)"),
    ("MainThread", "audits/crawl/writer.py", "write_edges", "    write_edges (edge rows)"),
    ("MainThread", "audits/crawl/admission.py", "admit", "    admission.admit"),
    ("MainThread", "audits/management/commands/audit.py", "batch", "JSONL report of page batches (Report.batch)"),
    ("MainThread", "audits/finalize.py", "run_finalize", "finalize (run_finalize)"),
    ("MainThread", "audits/diff.py", "record", "  diff.record (changes since the source/baseline)"),
    ("crawl-loop", "crawler/page.py", "process_page", "crawl thread: process_page (fetch, parse, checks)"),
    ("crawl-loop", "crawler/parse.py", "parse_html", "  parse_html"),
    ("crawl-loop", "crawler/checks.py", "run_page_checks", "  run_page_checks"),
    ("crawl-loop", "crawler/page.py", "check_resource", "crawl thread: check_resource (HEAD checks)"),
    ("crawl-loop", "crawler/revalidate.py", "body_hash", "crawl thread: revalidate.body_hash"),
]


def _thread_key(name: str) -> str:
    """A thread's name without the counter and target Python adds: 'Thread-3 (run)' -> 'Thread'."""
    return re.sub(r"[-_ ]?\d+$", "", name.split(" (")[0]) or "thread"


def profiled_child(prefix: str, argv: list[str]) -> None:
    """Run the script ``argv[0]`` with every thread under a CPU-time (``time.thread_time``) cProfile.

    ``python -m cProfile`` profiles the main thread only, and the audit fetches
    and parses on a helper thread ("crawl-loop"; the database calls stay on
    the main thread): here each thread started has a profiler of its own, and
    the stats are written per thread name (``PREFIX.MainThread.prof``,
    ``PREFIX.crawl-loop.prof``, ...).
    """
    import cProfile
    import runpy
    import threading
    import time

    profiles: list[tuple[str, cProfile.Profile]] = []
    lock = threading.Lock()
    original = threading.Thread.run

    def run(self):
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append((self.name, profile))
        profile.enable()
        try:
            original(self)
        finally:
            profile.disable()

    threading.Thread.run = run
    main_profile = cProfile.Profile(time.thread_time)
    sys.argv = list(argv)
    sys.path[0] = str(Path(argv[0]).resolve().parent)
    code = 0
    main_profile.enable()
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    finally:
        main_profile.disable()
        groups: dict[str, list] = {"MainThread": [main_profile]}
        with lock:
            for name, profile in profiles:
                groups.setdefault(_thread_key(name), []).append(profile)
        for key, group in groups.items():
            stats = None
            for profile in group:
                try:
                    stats = pstats.Stats(profile) if stats is None else stats.add(profile)
                except TypeError:  # a thread that ran no Python function
                    continue
            if stats is not None:
                stats.dump_stats(f"{prefix}.{key}.prof")
    sys.exit(code)


def profile_delta(base: str, max_pages: int, args, kind: str, workdir: Path, top: int) -> dict:
    """Where a delta audit's time goes, against the full audit it starts from.

    On an empty ``kind`` database: a full audit and then a delta audit from it,
    each under the thread-CPU profiler (``profiled_child``), then one more
    delta audit from the same full audit under plain ``python -m cProfile -o
    --profile-out`` (the main thread's wall time).
    """
    prof = Path(args.profile_out)
    tag = f"profile-{kind}"
    prefix = {"full": f"{prof}.threads-full", "delta": f"{prof}.threads-delta"}

    def threads(which):
        return lambda cmd: [cmd[0], "-m", "benchmarks.bench_delta", "--profile-child", prefix[which], "--"] + cmd[1:]

    with isolated_database(kind, workdir, tag, args.tree) as env:
        migrate(sys.executable, args.tree, env)
        full = run_audit(base, max_pages, args, env, workdir, f"{tag}-full", delta=False, wrap=threads("full"))
        source = str(full["summary"]["audit_id"])
        delta = run_audit(base, max_pages, args, env, workdir, f"{tag}-delta", delta=True, source=source,
                          wrap=threads("delta"))
        canonical = run_audit(base, max_pages, args, env, workdir, f"{tag}-delta-cprofile", delta=True,
                              source=source, wrap=lambda cmd: [cmd[0], "-m", "cProfile", "-o", str(prof)] + cmd[1:])
    components = []
    loaded = {which: {key: _load(f"{prefix[which]}.{key}.prof") for key in ("MainThread", "crawl-loop")}
              for which in prefix}
    for thread, path, func, label in COMPONENTS:
        components.append((label, *(_cumulative(loaded[which][thread], path, func) for which in ("full", "delta"))))
    thread_cpu = {which: {key: _total(stats) for key, stats in loaded[which].items()} for which in prefix}
    tables = {
        "main thread, wall (python -m cProfile), by cumulative": _pstats_text(str(prof), "cumulative", top),
        "main thread, wall (python -m cProfile), by tottime": _pstats_text(str(prof), "tottime", top),
        "crawl-loop threads, CPU, by tottime": _pstats_text(f"{prefix['delta']}.crawl-loop.prof", "tottime", top),
        "main thread, CPU, by tottime": _pstats_text(f"{prefix['delta']}.MainThread.prof", "tottime", top),
    }
    return {"db": kind, "prof": str(prof), "prefix": prefix, "components": components, "thread_cpu": thread_cpu,
            "tables": tables, "runs": {name: {"wall": r["wall"], "cpu": r["cpu"], "unchanged": r["unchanged"],
                                              "pages": r["pages"]}
                                       for name, r in (("full", full), ("delta", delta), ("cprofile", canonical))}}


def _load(path: str):
    try:
        return pstats.Stats(path)
    except (OSError, TypeError, EOFError):
        return None


def _total(stats) -> float:
    return stats.total_tt if stats is not None else 0.0


def _cumulative(stats, path: str, func: str) -> float:
    """The cumulative seconds of ``func`` defined in a file ending in ``path`` (summed over its entries)."""
    if stats is None:
        return 0.0
    return sum(ct for (filename, _, name), (_, _, _, ct, _) in stats.stats.items()
               if name == func and filename.replace(os.sep, "/").endswith(path))


def _pstats_text(prof: str, order: str, top: int) -> str:
    import io

    buffer = io.StringIO()
    try:
        stats = pstats.Stats(prof, stream=buffer)
    except (OSError, TypeError, EOFError) as exc:
        return f"(no profile: {exc})"
    stats.strip_dirs().sort_stats(order).print_stats(top)
    lines = buffer.getvalue().splitlines()
    # From the column header on: the preamble names the file and the totals line.
    total = next((line.strip() for line in lines if "function calls" in line), "")
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("ncalls")), 0)
    return (total + "\n\n" if total else "") + "\n".join(line.rstrip() for line in lines[start:] if line.strip())


def render_profile(profile: dict, top: int) -> list[str]:
    runs = profile["runs"]
    lines = [
        f"### Profile: one full and one delta audit ({DB_LABELS[profile['db']]}, cProfile)",
        "",
        f"On one more empty database: a full audit, then a delta audit from it (`--from ID`), each with every "
        f"thread under cProfile with a CPU clock (`time.thread_time`; `--profile-child`, stats per thread in "
        f"`{profile['prefix']['full']}.*.prof` and `{profile['prefix']['delta']}.*.prof`), then another delta "
        f"audit from the same full audit under plain `python -m cProfile -o {profile['prof']} manage.py audit "
        f"...`, which sees only the main thread: the database side (start, leases, writer, admission, reuse, "
        f"finalize, the report), timed by wall clock. Fetching and parsing run on the `crawl-loop` helper "
        f"thread(s) (`audits/crawl/bridge.py`), invisible to plain `-m cProfile`. Under the profilers: full "
        f"{runs['full']['wall']:.0f} s wall / {runs['full']['cpu']:.0f} s CPU, thread-profiled delta "
        f"{runs['delta']['wall']:.0f} s / {runs['delta']['cpu']:.0f} s ({runs['delta']['unchanged']:,} "
        f"unchanged), `-m cProfile` delta {runs['cprofile']['wall']:.0f} s / {runs['cprofile']['cpu']:.0f} s.",
        "",
        "CPU seconds by thread (profiled): "
        + "; ".join(f"{which}: " + ", ".join(f"{key} {secs:.1f}" for key, secs in cpu.items())
                    for which, cpu in profile["thread_cpu"].items()) + ".",
        "",
        "| part of the pipeline (cumulative CPU, profiled) | full s | delta s | delta - full s |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, full, delta in profile["components"]:
        lines.append(f"| {label.replace('  ', '&nbsp;&nbsp;')} | {full:.1f} | {delta:.1f} | {delta - full:+.1f} |")
    lines.append("")
    for title, text in profile["tables"].items():
        lines += [f"Delta audit, top {top}, {title}:", "", "```", text, "```", ""]
    return lines


# --- summary ----------------------------------------------------------------------------


def request_floor(corpus, base: str, concurrency: int, workdir: Path, tree: Path) -> dict:
    """The delta audit's requests alone, sent by ``benchmarks.fetch_floor`` in a child process.

    The same requests the delta audit makes of the corpus: every page asked
    with its validators, every broken target fetched, every asset (served or
    missing) checked with HEAD.
    """
    urls = workdir / "floor-urls.txt"
    urls.write_text("".join(
        [f"GET {base}{path}\n" for path in corpus.pages]
        + [f"GET! {base}{path}\n" for path in sorted(corpus.broken)]
        + [f"HEAD {base}{path}\n" for path in [*corpus.assets, *sorted(corpus.missing_assets)]]))
    done = subprocess.run([sys.executable, "-m", "benchmarks.fetch_floor", str(urls), "--concurrency",
                           str(concurrency)], cwd=tree, capture_output=True, text=True, check=True)
    floor = {**json.loads(done.stdout.strip().splitlines()[-1]), "concurrency": concurrency}
    print(f"requests alone: {floor['requests']:,} in {floor['wall']:.1f} s wall, {floor['cpu']:.1f} s CPU", flush=True)
    return floor


def render_floor(floor: dict, results: list[dict], kinds: list[str]) -> list[str]:
    """The requests alone, and what they are of each database's median full audit."""
    lines = [
        "### The requests alone",
        "",
        f"`benchmarks/fetch_floor.py` sent the delta audit's {floor['requests']:,} requests through "
        f"`crawler.fetch.Fetcher` on the crawl's event loop, {floor['concurrency']} at once, and did "
        f"nothing else (no parse, no database, no report): {floor['wall']:.1f} s wall, **{floor['cpu']:.1f} s "
        f"CPU** (answers: " + ", ".join(f"{k} {v:,}" for k, v in floor["answers"].items()) + ").",
        "",
    ]
    for kind in kinds:
        runs = [r for r in results if r["db"] == kind]
        if runs:
            full = median([r["full"]["cpu"] for r in runs])
            lines.append(f"- {DB_LABELS[kind]}: the requests alone are {floor['cpu'] / full:.2f} of the full "
                         f"audit's median CPU ({full:.1f} s); a delta within {TARGET_TEXT} would have "
                         f"{TARGET * full - floor['cpu']:.1f} s CPU left for everything else.")
    return lines + [""]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def judged(ratio: float) -> str:
    return "met" if ratio <= TARGET else "MISSED"


def others(run: dict) -> float:
    """The machine's busy CPU seconds during ``run`` that were neither the audit's nor the servers'."""
    return max(0.0, run["machine_cpu"] - run["cpu"] - run["servers"])


def tree_line(tree: dict) -> str:
    where = (f"a snapshot of {tree['source']} taken {tree['taken']} (`--snapshot`: the files copied, without "
             f".git, .venv and var, so edits to the checkout during the run changed nothing measured)"
             if tree["snapshot"] else tree["source"])
    return (f"Code measured: {where}; HEAD {tree['head'][:10] or 'unknown'} plus any uncommitted changes; "
            f"sha256 of `audits/`, `crawler/`, `config/` and `manage.py` (paths and bytes): `{tree['digest']}`.")


def render(run: dict, info: dict, results: list[dict], failures: list[str], profile: dict | None,
           floor: dict | None = None) -> str:
    """The section: ``run`` is what the run was (command, corpus, server; ``run_facts``), ``info`` the machine."""
    kinds, corpus, check = run["kinds"], run["corpus"], run["check"]
    rounds_done = sorted({r["round"] for r in results})
    lines = [
        f"Measured {info['date']} on {info['nproc']} CPU(s) ({info['cpu']}), Python {info['python']}, "
        f"{info['platform']}; SQLite {info['sqlite']}"
        + (f", PostgreSQL {info['postgres']} (127.0.0.1:5432)" if "postgres" in kinds else "")
        + f"; {run['server']}. Load average (1/5/15 min) {', '.join(f'{x:.2f}' for x in info['load_before'])} before "
        f"and {', '.join(f'{x:.2f}' for x in info['load_after'])} after.",
        "Packages: " + ", ".join(f"{k} {v}" for k, v in info["packages"].items()) + ".",
        "",
        tree_line(info["tree"]),
        "",
        "Command (from the repository root):",
        "",
        "```",
        ".venv/bin/python -m benchmarks.bench_delta " + shlex.join(run["argv"]),
        "```",
        "",
        f"Corpus: `benchmarks/corpus.py`, {corpus['pages']:,} pages (seed {run['seed']}) plus "
        f"{corpus['broken']:,} broken link targets (404) and {corpus['assets']:,} assets, written once and "
        f"served unchanged by nginx on 127.0.0.1 for the whole run. nginx's validators, checked before the "
        f"runs: `/` has ETag `{check['etag']}` and Last-Modified `{check['last_modified']}`, and "
        f"`{check['command']}` answered **{check['status']}**.",
    ]
    if not results and profile:
        return "\n".join(lines + [""] + render_profile(profile, run["profile_top"]))
    lines += [
        "",
        f"Each round, on each database (order alternating by round), on an empty database of its own (SQLite: "
        f"a fresh `SITEWARD_VAR_DIR`, no `DATABASE_URL`; PostgreSQL: `{PG_DATABASE}`, dropped and created "
        f"again): `manage.py migrate`, then the full audit `manage.py audit URL --allow-private --no-external "
        f"--max-pages {run['max_pages']} --max-depth 50 --concurrency {run['concurrency']} --out FULL.jsonl`, "
        f"then at once the delta audit, the same command with `--mode delta --from previous`. *wall*: the "
        f"audit process's wall seconds; *CPU*: its user + system seconds (`os.wait4` rusage of that child); "
        f"*servers*: CPU seconds PostgreSQL's processes and nginx burned in the same span (from `/proc`; on "
        f"SQLite, nginx's alone), not counted in *CPU*; *others*: the rest of the machine's busy CPU seconds in "
        f"the same span (`/proc/stat`, all cores, minus *CPU* and *servers*), the noise. *pages*: the summary record's page count (both "
        f"audits must report the same); *unchanged*: the delta report's page records with "
        f"`\"unchanged\": true`. Target: delta / full <= {TARGET_TEXT} for wall time and for CPU.",
        "",
        "Other processes sharing the cores (*others*, and the load averages above) move the absolute seconds; "
        "each delta audit runs right after its full audit (the pairs interleaved round by round, the databases "
        "alternating), so a noisy spell tends to hit both of a pair, and the ratios are given per pair as well "
        "as of the medians.",
        "",
        "### Every run",
        "",
        "| round | database | full: pages | wall s | CPU s | servers s | others s | delta: pages | unchanged | "
        "wall s | CPU s | servers s | others s | delta/full wall | delta/full CPU |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        f, d = r["full"], r["delta"]
        lines.append(
            f"| {r['round']} | {DB_LABELS[r['db']]} | {f['pages']:,} | {f['wall']:.1f} | {f['cpu']:.1f} | "
            f"{f['servers']:.1f} | {others(f):.1f} | {d['pages']:,} | {d['unchanged']:,} | {d['wall']:.1f} | "
            f"{d['cpu']:.1f} | {d['servers']:.1f} | {others(d):.1f} | {d['wall'] / f['wall']:.3f} | "
            f"{d['cpu'] / f['cpu']:.3f} |")
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
    if floor:
        lines += render_floor(floor, results, kinds)
    if profile:
        lines += render_profile(profile, run["profile_top"])
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
    parser.add_argument("--floor", action="store_true",
                        help="then measure the delta audit's requests alone (benchmarks.fetch_floor)")
    parser.add_argument("--profile-out", default="/tmp/delta.prof",
                        help="the plain cProfile stats; the per-thread ones are written beside it")
    parser.add_argument("--profile-db", choices=list(DB_LABELS), help="database of the profile (default: the first)")
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--checkout", type=Path, default=REPO, help="the tree whose manage.py runs (default: this one)")
    parser.add_argument("--render-json", type=Path, metavar="FILE",
                        help="only render the section again from a --json dump (with --results/--title)")
    parser.add_argument("--snapshot", action="store_true",
                        help="copy --checkout's files (no .git, .venv, var) to the work directory first and run "
                             "the copy, so edits to the checkout during the run change nothing measured")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    if args.render_json:
        dump = json.loads(args.render_json.read_text())
        publish(args, render(dump["run"], dump["machine"], dump["results"], dump["failures"], dump["profile"],
                             dump.get("floor")), bool(dump["results"] or dump["profile"]))
        return
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    kinds = [k for k in args.databases.split(",") if k]
    if not kinds or (unknown := set(kinds) - set(DB_LABELS)):
        parser.error(f"unknown database {', '.join(sorted(unknown)) if kinds else '(none)'}")
    lock, holder = hold_lock()
    if lock is None:
        parser.error(f"another bench_delta run (pid {holder}) is measuring on this machine; wait for it ({LOCK})")
    # A TERM (timeout(1), kill) unwinds like an error: nginx stopped, the work directory and database removed.
    signal.signal(signal.SIGTERM, stop_on_term)
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
    run = {"argv": args.argv, "kinds": kinds, "seed": args.seed, "max_pages": args.max_pages,
           "concurrency": args.concurrency, "profile_top": args.profile_top, "server": "", "check": None,
           "corpus": {"pages": len(corpus.pages), "broken": len(corpus.broken), "assets": len(corpus.assets)}}
    print(f"corpus: {len(corpus.pages):,} pages, {len(corpus.broken):,} broken targets, "
          f"{len(corpus.assets):,} assets", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="siteward-bench-delta-"))
    try:
        info["tree"] = prepare_tree(args, workdir)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    print(f"measuring {args.tree} (from {info['tree']['source']}, HEAD {info['tree']['head'][:10] or 'unknown'}, "
          f"code digest {info['tree']['digest']})", flush=True)
    results: list[dict] = []
    failures: list[str] = []
    profile = floor = None
    try:
        with nginx_server(corpus) as (base, server):
            run["server"], run["check"] = server, (check := conditional_check(base))
            print(f"serving {base} with {server}; If-None-Match {check['etag']} -> {check['status']}", flush=True)
            for rnd in range(1, 0 if args.profile_only else args.rounds + 1):
                for kind in kinds if rnd % 2 else kinds[::-1]:
                    try:
                        record = one_round(rnd, kind, base, args.max_pages, args, workdir)
                    except Exception as exc:  # noqa: BLE001 - a failed round is recorded, the others still run
                        lines = str(exc).strip().splitlines() or [type(exc).__name__]
                        text = f"round {rnd} {DB_LABELS[kind]}: {lines[-1][:300]}"
                        print(text, flush=True)
                        failures.append(text)
                        continue
                    show(record)
                    results.append(record)
            if args.floor:
                floor = request_floor(corpus, base, args.concurrency, workdir, args.tree)
            if args.profile or args.profile_only:
                profile = profile_delta(base, args.max_pages, args, args.profile_db or kinds[0], workdir,
                                        args.profile_top)
    finally:
        info["load_after"] = os.getloadavg()
        if args.json:
            args.json.write_text(json.dumps({"run": run, "machine": info, "results": results,
                                             "failures": failures, "profile": profile, "floor": floor},
                                            indent=1, default=str))
        if os.environ.get("BENCH_KEEP_WORKDIR"):
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    publish(args, render(run, info, results, failures, profile, floor), bool(results or profile))
    if failures:
        sys.exit(1)


def publish(args, body: str, anything: bool) -> None:
    print()
    print(body)
    if args.results and anything:
        write_results(args.results, args.title, body)
        print(f"wrote section {args.title!r} of {args.results}")


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--profile-child" and sys.argv[3] == "--":
        profiled_child(sys.argv[2], sys.argv[4:])  # python -m benchmarks.bench_delta --profile-child PREFIX -- SCRIPT ...
    else:
        main()
