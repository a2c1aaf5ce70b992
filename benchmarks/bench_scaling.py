"""One audit on PostgreSQL crawled by one worker cluster, then by two: pages/s, CPU by process, where the time went.

For each configuration (``--clusters``, default one and two), on a fresh
throwaway PostgreSQL database each time:

1. ``manage.py migrate``, a user, then the clusters: ``manage.py qcluster``
   each in a session of its own, ``Q_WORKERS`` workers apiece, the scheduler
   on the first only, ``SITEWARD_CHUNKS_PER_AUDIT`` as given;
2. once every cluster has its workers, a CPU reading of every process
   (``/proc``), then one audit created as the web form does
   (``audits.services.create_audit`` in ``manage.py shell``), polled in the
   database until it ends, and a second CPU reading before the clusters stop;
3. the figures: pages/s from the database's own timestamps (``created_at`` to
   ``finished_at``), the phases (queue, start, crawl, finalize) from the audit's
   and the chunk leases' timestamps, the chunks each cluster ran and how many
   ran at once, the CPU of each cluster by role (main, sentinel, workers,
   monitor, pusher), of PostgreSQL by kind of process and of nginx, and
   ``benchmarks.bench_product.stored_rows``' check that every corpus page was
   stored.

The corpus is ``benchmarks.corpus``, served by nginx on 127.0.0.1; all traffic
stays on loopback. Every process started here is stopped, on failure too.

    .venv/bin/python -m benchmarks.bench_scaling --pages 10000 --rounds 1 --results benchmarks/RESULTS-product.md

It is a script, never a timed test.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a file as well as with -m
    sys.path.insert(0, str(REPO))

from benchmarks.bench_product import (  # noqa: E402
    CLOCK_TICKS,
    compile_bytecode,
    django_env,
    fresh_database,
    machine,
    machine_busy_seconds,
    migrate,
    postgres_available,
    proc_stats,
    stored_rows,
)
from benchmarks.corpus import Corpus, build_corpus  # noqa: E402
from benchmarks.static_server import NGINX, install_nginx, serve  # noqa: E402

TARGET_SPEEDUP = 1.5  # two clusters' pages/s over one cluster's
POLL_SECONDS = 0.5
ENDED = ("completed", "failed", "cancelled")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
# Tables whose size after the audit says what it wrote (the frontier's rows are
# deleted by finalize, but its heap and indexes keep their size until a vacuum).
TABLES = ("audits_page", "audits_linkedge", "audits_issue", "audits_frontierurl")
CLUSTER_ROLES = ("main", "sentinel", "workers", "monitor", "pusher", "reincarnated")

CREATE_AUDIT = """
from django.contrib.auth import get_user_model
from audits.services import create_audit
owner, _ = get_user_model().objects.get_or_create(username="bench-scaling")
audit = create_audit(owner, enforce_quota=False, start_url={url!r}, allow_private=True, concurrency={concurrency},
                     max_pages={max_pages}, max_depth=50, check_external=False)
print("AUDIT", audit.pk)
"""


# --- processes and their CPU -------------------------------------------------------


def proc_table() -> dict[int, dict]:
    """Every process: parent, command name, start time, own CPU and its reaped children's (seconds)."""
    table = {}
    for pid, name, fields in proc_stats():
        table[pid] = {
            "ppid": int(fields[1]),
            "comm": name,
            "start": int(fields[19]),
            "own": (int(fields[11]) + int(fields[12])) / CLOCK_TICKS,
            "reaped": (int(fields[13]) + int(fields[14])) / CLOCK_TICKS,
            "rss": int(fields[21]) * PAGE_BYTES,
        }
    return table


def descendants(table: dict[int, dict], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, row in table.items():
        children.setdefault(row["ppid"], []).append(pid)
    found, todo = [], [root] if root in table else []
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as raw:
            return raw.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def cpu_by_role(before: dict[int, dict], after: dict[int, dict], roles: dict[int, str]) -> dict[str, float]:
    """CPU seconds between two readings of the processes in ``roles`` (pid -> role), summed per role.

    A process counts its own CPU and that of the children it reaped in between
    (a worker that died is in its sentinel's figure); a pid whose start time
    changed is a new process, counted from zero.
    """
    totals: dict[str, float] = {}
    for pid, role in roles.items():
        now = after.get(pid)
        if now is None:
            continue
        then = before.get(pid)
        if then is None or then["start"] != now["start"]:
            then = {"own": 0.0, "reaped": 0.0}
        totals[role] = totals.get(role, 0.0) + now["own"] - then["own"] + now["reaped"] - then["reaped"]
    return totals


def postgres_roles(table: dict[int, dict], database: str) -> dict[int, str]:
    """PostgreSQL's processes by kind; the postmaster's figure holds the backends that exited."""
    roles = {}
    for pid, row in table.items():
        if row["comm"] != "postgres":
            continue
        line = cmdline(pid)
        if not line.startswith("postgres:"):
            roles[pid] = "postmaster (and backends that exited)"
        elif f" {database} " in line:
            roles[pid] = "backends of the audit's database"
        elif "autovacuum" in line:
            roles[pid] = "autovacuum"
        elif any(kind in line for kind in ("checkpointer", "background writer", "walwriter", "wal writer")):
            roles[pid] = "checkpointer, writers"
        else:
            roles[pid] = "other (other databases, stats, launcher)"
    return roles


# --- clusters ----------------------------------------------------------------------


class ClusterProcess:
    """One ``manage.py qcluster`` in a session of its own, so one signal reaches all of it."""

    def __init__(self, label: str, env: dict, log: Path, workers: int):
        self.label, self.env, self.log_path, self.workers = label, env, log, workers
        self.proc: subprocess.Popen | None = None
        self.roles: dict[int, str] = {}

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, str(REPO / "manage.py"), "qcluster"], cwd=REPO,
                                         env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until the sentinel has forked its workers, monitor and pusher; then record each one's role.

        django-q2 forks the workers first, then the monitor, then the pusher.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited {self.proc.returncode}: {self.log()}")
            table = proc_table()
            sentinels = [pid for pid, row in table.items() if row["ppid"] == self.proc.pid]
            if len(sentinels) == 1:
                forked = sorted((row["start"], pid) for pid, row in table.items() if row["ppid"] == sentinels[0])
                if len(forked) >= self.workers + 2:
                    pids = [pid for _, pid in forked]
                    self.roles = {self.proc.pid: "main", sentinels[0]: "sentinel"}
                    self.roles.update(dict.fromkeys(pids[:self.workers], "workers"))
                    self.roles[pids[self.workers]] = "monitor"
                    self.roles[pids[self.workers + 1]] = "pusher"
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{self.label} did not fork its workers within {timeout:.0f} s: {self.log()}")

    def roles_now(self, table: dict[int, dict]) -> dict[int, str]:
        """The roles recorded at start, plus any process forked since (a reincarnated worker)."""
        return {pid: self.roles.get(pid, "reincarnated") for pid in descendants(table, self.proc.pid)}

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):  # stragglers of the group (workers)
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


# --- one configuration -------------------------------------------------------------


def run_config(clusters: int, base: str, corpus: Corpus, args, workdir: Path) -> dict:
    """One audit of the corpus by ``clusters`` clusters on a fresh database."""
    with fresh_database("postgres", workdir) as (url, query, what):
        database = url.rsplit("/", 1)[1]
        env = django_env(url, workdir) | {
            "SITEWARD_ALLOW_PRIVATE": "1", "SITEWARD_CHUNKS_PER_AUDIT": str(args.chunks_per_audit),
            "Q_WORKERS": str(args.workers), "PYTHONUNBUFFERED": "1",
        }
        migrate(sys.executable, REPO, env)
        tag = f"{clusters}c-{time.monotonic_ns()}"
        running = [ClusterProcess(f"cluster {n + 1}", env | ({} if n == 0 else {"Q_SCHEDULER": "0"}),
                                  workdir / f"qcluster-{tag}-{n + 1}.log", args.workers)
                   for n in range(clusters)]
        try:
            for cluster in running:
                cluster.start()
            for cluster in running:
                cluster.wait_ready()
            time.sleep(1.0)  # let start-up settle: its CPU is not the audit's
            before, busy_before, began = proc_table(), machine_busy_seconds(), time.monotonic()
            pg_before = postgres_roles(before, database)
            (wal_before,) = query("SELECT pg_current_wal_lsn()")[0]
            audit_id = create_audit(base, corpus, args, env, workdir / f"create-{tag}.log")
            peak_rss: dict[str, float] = {}
            status = wait_for_end(query, audit_id, args.timeout, running, peak_rss)
            (wal,) = query(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{wal_before}')")[0]
            after, busy_after, span = proc_table(), machine_busy_seconds(), time.monotonic() - began
            pg_after = postgres_roles(after, database)
            cpu = {cluster.label: cpu_by_role(before, after, cluster.roles_now(after)) for cluster in running}
            cluster_of = {pid: cluster.label for cluster in running for pid in cluster.roles_now(after)}
            logs = {cluster.label: cluster.log() for cluster in running}
        finally:
            for cluster in running:
                cluster.stop()
        nginx_roles = {pid: "nginx" for pid, row in after.items() if row["comm"] == "nginx"}
        run = {
            "clusters": clusters, "database": what, "status": status, "span": span,
            "machine_busy": busy_after - busy_before,
            "cpu_clusters": cpu,
            "cpu_postgres": cpu_by_role(before, after, pg_before | pg_after),
            "wal_bytes": float(wal), "peak_worker_mb": peak_rss,
            "tables": {table: query(f"SELECT COUNT(*), pg_total_relation_size('{table}') FROM {table}")[0]
                       for table in TABLES},
            "cpu_nginx": cpu_by_role(before, after, nginx_roles).get("nginx", 0.0),
            "log_problems": {label: problems(text) for label, text in logs.items()},
        }
        run.update(stored_rows(query, corpus))
        run.update(timeline(query, cluster_of))
    return run


def create_audit(base: str, corpus: Corpus, args, env: dict, log: Path) -> int:
    code = CREATE_AUDIT.format(url=base + "/", concurrency=args.concurrency, max_pages=corpus.reachable + 100)
    done = subprocess.run([sys.executable, str(REPO / "manage.py"), "shell", "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    log.write_text(done.stdout + done.stderr)
    ids = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("AUDIT ")]
    if done.returncode or not ids:
        raise RuntimeError(f"creating the audit failed: {done.stderr[-2000:]}")
    return int(ids[0])


def wait_for_end(query, audit_id: int, timeout: float, running: list[ClusterProcess],
                 peak_rss: dict[str, float]) -> str:
    """Poll the audit until it ends; meanwhile the highest RSS of any worker of each cluster (MB)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (status,) = query(f"SELECT status FROM audits_audit WHERE id = {audit_id}")[0]
        if status in ENDED:
            return status
        table = proc_table()
        for cluster in running:
            workers = [pid for pid, role in cluster.roles_now(table).items() if role in ("workers", "reincarnated")]
            peak = max((table[pid]["rss"] for pid in workers), default=0) / 2**20
            peak_rss[cluster.label] = max(peak_rss.get(cluster.label, 0.0), peak)
            if cluster.proc.poll() is not None:
                raise RuntimeError(f"{cluster.label} exited {cluster.proc.returncode}: {cluster.log()}")
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"audit {audit_id} still {status} after {timeout:.0f} s")


def problems(log: str) -> list[str]:
    """Lines of a cluster's log worth a reader's eye (errors, tracebacks, reincarnations)."""
    marks = ("ERROR", "CRITICAL", "Traceback", "reincarnated", "WARNING")
    return [line.strip()[:200] for line in log.splitlines() if any(mark in line for mark in marks)][:10]


def timeline(query, cluster_of: dict[int, str]) -> dict:
    """Phases from the database's timestamps, and how the chunks ran side by side."""
    created, started, finished = query("SELECT created_at, started_at, finished_at FROM audits_audit")[0]
    chunks = query("SELECT number, started_at, finished_at, url_count, worker_pid, attempts, state "
                   "FROM audits_chunklease WHERE number > 0 AND started_at IS NOT NULL ORDER BY number")
    spans = [(s.timestamp(), f.timestamp()) for _, s, f, *_ in chunks if f is not None]
    first = min((s for s, _ in spans), default=None)
    last = max((f for _, f in spans), default=None)
    crawl = (last - first) if spans else None
    # Chunks running at once: the most, and the mean over the crawl span.
    events = sorted([(s, 1) for s, _ in spans] + [(f, -1) for _, f in spans])
    live = most = 0
    for _, step in events:
        live += step
        most = max(most, live)
    overlapped = sum(1 for i, (s, f) in enumerate(spans)
                     if any(s < f2 and s2 < f for j, (s2, f2) in enumerate(spans) if j != i))
    per_cluster: dict[str, dict] = {}
    for _, s, f, urls, pid, _, _ in chunks:
        entry = per_cluster.setdefault(cluster_of.get(pid, "unknown pid"), {"chunks": 0, "urls": 0, "seconds": 0.0})
        entry["chunks"] += 1
        entry["urls"] += urls
        entry["seconds"] += (f - s).total_seconds() if f else 0.0
    tasks = query("SELECT func, COUNT(*), SUM(EXTRACT(EPOCH FROM stopped - started)), BOOL_AND(success) "
                  "FROM django_q_task GROUP BY func ORDER BY func")
    return {
        "queue_seconds": (started - created).total_seconds() if started else None,
        "start_seconds": (first - started.timestamp()) if started and first else None,
        "crawl_seconds": crawl,
        "finalize_seconds": (finished.timestamp() - last) if finished and last else None,
        "total_seconds": (finished - created).total_seconds() if finished else None,
        "chunks_run": len(chunks),
        "chunk_attempts": sum(row[5] for row in chunks),
        "chunks_not_done": sum(1 for row in chunks if row[6] != "done"),
        "most_at_once": most,
        "mean_at_once": sum(f - s for s, f in spans) / crawl if crawl else None,
        "overlapped": overlapped,
        "per_cluster": per_cluster,
        "tasks": [(func, n, float(seconds or 0), ok) for func, n, seconds, ok in tasks],
    }


# --- report ------------------------------------------------------------------------


def _f(value, spec: str = ".1f") -> str:
    return "n/a" if value is None else format(value, spec)


def pages_per_second(run: dict) -> float | None:
    return run["pages"] / run["total_seconds"] if run.get("total_seconds") else None


def render(args, info: dict, runs: list[dict], server: str, nproc: int) -> str:
    lines = [
        f"## Scaling: one {args.pages:,}-page audit, one worker cluster against two ({info['date']})",
        "",
        f"Machine: {nproc} CPU(s) ({info['cpu']}), Python {info['python']}, {info['platform']}; "
        f"{runs[0]['database'] if runs else 'PostgreSQL'}; {server} on 127.0.0.1. Both configurations share "
        f"these {nproc} cores with PostgreSQL and nginx. Load average {', '.join(f'{x:.2f}' for x in info['load_before'])} "
        f"before and {', '.join(f'{x:.2f}' for x in info['load_after'])} after.",
        "",
        "```",
        f".venv/bin/python -m benchmarks.bench_scaling {' '.join(args.argv)}",
        "```",
        "",
        f"Each configuration: a fresh PostgreSQL database, `manage.py qcluster` x N with Q_WORKERS={args.workers} "
        f"each (the scheduler on the first only), SITEWARD_CHUNKS_PER_AUDIT={args.chunks_per_audit}, then one audit "
        f"created as the web form does (`create_audit`, concurrency {args.concurrency}, max_pages = corpus + 100, "
        "max_depth 50, no external checks). *pages/s* = page rows / (`finished_at` - `created_at`), both from the "
        "database; *crawl* = first chunk's `started_at` to the last chunk's `finished_at`; *finalize* = from there "
        "to `finished_at`. CPU is user + system from `/proc` between a reading taken once the clusters were up "
        "and one when the audit had ended (children a process reaped count with it); *busy* is the whole "
        "machine's busy CPU over that span as a share of all cores.",
        "",
        "| config | pages | wall s | pages/s | queue+start s | crawl s | finalize s | chunks | most at once | "
        "mean at once | overlapped | clusters CPU s | PostgreSQL CPU s | nginx CPU s | busy | all stored |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| --- |",
    ]
    for run in runs:
        clusters_cpu = sum(sum(roles.values()) for roles in run["cpu_clusters"].values())
        queue_start = (run["queue_seconds"] or 0) + (run["start_seconds"] or 0)
        lines.append(
            f"| {label(run)} | {run['pages']:,} | {_f(run['total_seconds'])} | {_f(pages_per_second(run), '.0f')} | "
            f"{queue_start:.1f} | {_f(run['crawl_seconds'])} | {_f(run['finalize_seconds'])} | {run['chunks_run']} | "
            f"{run['most_at_once']} | {_f(run['mean_at_once'], '.2f')} | {run['overlapped']} | {clusters_cpu:.1f} | "
            f"{sum(run['cpu_postgres'].values()):.1f} | {run['cpu_nginx']:.1f} | "
            f"{100 * run['machine_busy'] / (run['span'] * nproc):.0f}% | {'yes' if run['complete'] else 'NO'} |"
        )
    lines += ["", "CPU seconds by process:", "", "| config | process | " + " | ".join(CLUSTER_ROLES) + " | total |",
              "| --- | --- |" + " ---: |" * (len(CLUSTER_ROLES) + 1)]
    for run in runs:
        for name, roles in run["cpu_clusters"].items():
            lines.append(f"| {label(run)} | {name} | " + " | ".join(_f(roles.get(role, 0.0), ".1f")
                                                               for role in CLUSTER_ROLES)
                         + f" | {sum(roles.values()):.1f} |")
    lines += ["", "| config | PostgreSQL process | CPU s |", "| --- | --- | ---: |"]
    for run in runs:
        for kind, seconds in sorted(run["cpu_postgres"].items(), key=lambda item: -item[1]):
            lines.append(f"| {label(run)} | {kind} | {seconds:.1f} |")
    lines.append("")
    for run in runs:
        per = "; ".join(f"{name}: {c['chunks']} chunks, {c['urls']:,} URLs, {c['seconds']:.1f} chunk-seconds"
                        for name, c in sorted(run["per_cluster"].items()))
        tasks = ", ".join(f"{func.rsplit('.', 1)[-1]} x{n} {seconds:.1f} s{'' if ok else ' (a failure)'}"
                          for func, n, seconds, ok in run["tasks"])
        issues = "; ".join(f"{name}: {len(found)} line(s), first: {found[0]}"
                           for name, found in run["log_problems"].items() if found) or "none"
        sizes = ", ".join(f"{table.removeprefix('audits_')} {rows:,} rows {size / 2**20:.1f} MB"
                          for table, (rows, size) in run["tables"].items())
        rss = ", ".join(f"{name} {mb:.0f} MB" for name, mb in sorted(run["peak_worker_mb"].items()))
        lines.append(
            f"- {label(run)}: audit {run['status']}, {run['pages']:,} pages + {run['resources']:,} resources, "
            f"{run['missing_count']} corpus pages missing, edges {run['edges']:,} for {run['outlinks_sum']:,} "
            f"outlinks; queue {_f(run['queue_seconds'])} s, start {_f(run['start_seconds'])} s; {per}; "
            f"{run['chunk_attempts']} claims for {run['chunks_run']} chunks; django-q2 tasks, enqueue to end (queue waits included; the last 100 kept): {tasks}; "
            f"tables after the audit (heap + indexes; the frontier's rows deleted, its space not yet vacuumed): "
            f"{sizes}; WAL written by the whole server over the span {run['wal_bytes'] / 2**20:.0f} MB "
            f"({run['wal_bytes'] / max(run['pages'], 1) / 1024:.0f} KB a page); highest worker RSS: {rss}; "
            f"log warnings/errors: {issues}."
        )
    one = [pages_per_second(r) for r in runs if r["clusters"] == 1 and r["complete"]]
    two = [pages_per_second(r) for r in runs if r["clusters"] == 2 and r["complete"]]
    if one and two and all(one) and all(two):
        speedup = max(two) / max(one)
        lines += ["", f"Two clusters / one cluster, fastest complete run each: {speedup:.2f}x "
                      f"(target >= {TARGET_SPEEDUP}: {'met' if speedup >= TARGET_SPEEDUP else 'MISSED'})."]
    return "\n".join(lines) + "\n"


def label(run: dict) -> str:
    name = "1 cluster" if run["clusters"] == 1 else f"{run['clusters']} clusters"
    return name + (f" (round {run['round']})" if run.get("rounds", 1) > 1 else "")


# --- main --------------------------------------------------------------------------


def ensure_postgres(cluster: str) -> None:
    """Start the local PostgreSQL cluster (``VERSION/NAME``) when nothing answers on 127.0.0.1:5432."""
    if not postgres_available():
        return
    version, name = cluster.split("/")
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "start"], check=False)
    for _ in range(50):
        if not (why := postgres_available()):
            return
        time.sleep(0.2)
    raise SystemExit(f"PostgreSQL: {why}")


def main() -> None:
    parser = argparse.ArgumentParser(description="One audit by one worker cluster against two (PostgreSQL)")
    parser.add_argument("--pages", type=int, default=10000, help="corpus size")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each configuration, the order alternating")
    parser.add_argument("--clusters", default="1,2", help="configurations: clusters per run, comma-separated")
    parser.add_argument("--workers", type=int, default=2, help="Q_WORKERS of each cluster")
    parser.add_argument("--chunks-per-audit", type=int, default=4, help="SITEWARD_CHUNKS_PER_AUDIT")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed for each audit")
    parser.add_argument("--pg-cluster", default="15/main", help="pg_ctlcluster VERSION/NAME to start if stopped")
    parser.add_argument("--install", action="store_true", help="apt-get install nginx when missing")
    parser.add_argument("--results", type=Path, help="append the section to this markdown file")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
    configs = [int(n) for n in args.clusters.split(",")]
    if args.install:
        install_nginx()
    if not os.path.exists(NGINX):
        raise SystemExit(f"{NGINX} is missing (--install apt-installs it)")
    ensure_postgres(args.pg_cluster)
    info = machine()
    info["bytecode"] = compile_bytecode()
    nproc = os.cpu_count() or 1
    corpus = build_corpus(args.pages, args.seed)
    print(f"corpus: {len(corpus.pages)} pages, {len(corpus.broken)} broken targets", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="siteward-bench-scaling-"))
    runs: list[dict] = []
    failed = False
    try:
        with serve(corpus, prefer_nginx=True) as (base, server):
            print(f"server: {server} at {base}", flush=True)
            for round_no in range(1, args.rounds + 1):
                for clusters in (configs if round_no % 2 else configs[::-1]):
                    run = run_config(clusters, base, corpus, args, workdir)
                    run.update(round=round_no, rounds=args.rounds)
                    runs.append(run)
                    print(f"  {label(run)}: {run['pages']:,} pages in {_f(run['total_seconds'])} s = "
                          f"{_f(pages_per_second(run), '.0f')} pages/s, crawl {_f(run['crawl_seconds'])} s, finalize "
                          f"{_f(run['finalize_seconds'])} s, {run['chunks_run']} chunks (at most {run['most_at_once']} "
                          f"at once), complete={run['complete']}", flush=True)
    except BaseException:
        failed = True
        raise
    finally:
        info["load_after"] = os.getloadavg()
        if failed or os.environ.get("BENCH_KEEP_WORKDIR"):
            print(f"logs kept in {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    text = render(args, info, runs, server, nproc)
    print("\n" + text)
    if args.results:
        with open(args.results, "a") as out:
            out.write("\n" + text)
        print(f"appended to {args.results}")


if __name__ == "__main__":
    main()
