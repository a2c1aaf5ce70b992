"""The run-to-run diff benchmark: ``audits.diff.record`` on two big synthetic audits of one site.

It builds, in a throwaway database, a completed baseline audit and a finalizing
audit of the same site, each with ``--issues`` issues (``--shared`` of the keys
in both) and ``--pages`` page rows, plus what finalize leaves for the diff to
read: the new audit's frontier (with URLs found but not crawled) and its link
edges. Then it times ``diff.record(audit)`` inside ``transaction.atomic`` for
``--rounds`` rounds, each rolled back so every round starts from the same rows,
and prints the median, the stored counts and the counts the generator expects.

SQLite by default (a temporary file under a temporary SITEWARD_VAR_DIR); with
``DATABASE_URL=postgres://user@host:port/...`` a database of its own on that
server (``siteward_bench_diff``), created and dropped around the run::

    .venv/bin/python -m benchmarks.bench_diff
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python -m benchmarks.bench_diff

Statistics on PostgreSQL are as finalize leaves them: the baseline's rows
analysed (an earlier audit's), then finalize's own ANALYZE of pages, edges and
frontier; autovacuum is off on the throwaway tables so they stay that way.
``--explain`` prints the plans of the diff's statements. A script, never a timed test.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a file as well as with -m
    sys.path.insert(0, str(REPO))

PG_DATABASE = "siteward_bench_diff"
ORIGIN = "https://bench.example"
BATCH = 10_000
SEVERITIES = ("critical", "warning", "notice")
CODES = ("broken_link_internal", "title_length", "meta_description_missing", "img_alt_missing", "thin_content")
CHANGE_TABLES = ("audits_issue", "audits_page", "audits_linkedge", "audits_frontierurl", "audits_goneissue",
                 "audits_pagechange")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--issues", type=int, default=100_000, help="issues per audit")
    parser.add_argument("--shared", type=float, default=0.7, help="share of issue keys in both audits")
    parser.add_argument("--pages", type=int, default=20_000, help="page rows per audit")
    parser.add_argument("--links", type=int, default=30, help="link edges per page of the new audit")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--explain", action="store_true", help="print the plans of the diff's statements")
    return parser.parse_args(argv)


# --- the throwaway database ----------------------------------------------------------


class Database:
    """Points Django at an empty database before ``django.setup()``, and removes it afterwards."""

    def __init__(self, name: str = PG_DATABASE):
        self.name = name  # the PostgreSQL database's, and the SQLite directory's prefix
        self.url = os.environ.get("DATABASE_URL", "")
        self.postgres = self.url.startswith(("postgres://", "postgresql://"))
        self.tmp: str | None = None

    def __enter__(self) -> Database:
        os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-production-use-0123456789")
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
        if self.postgres:
            parts = urlsplit(self.url)
            self.server = {"host": parts.hostname or "127.0.0.1", "port": parts.port or 5432,
                           "user": parts.username or "postgres", "password": parts.password}
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)', f'CREATE DATABASE "{self.name}"')
            os.environ["DATABASE_URL"] = parts._replace(path=f"/{self.name}").geturl()
        else:
            self.tmp = tempfile.mkdtemp(prefix=f"{self.name}-")
            os.environ.pop("DATABASE_URL", None)
            os.environ["SITEWARD_VAR_DIR"] = self.tmp  # settings put the SQLite file there
        return self

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(dbname="postgres", autocommit=True, **self.server) as admin:
            for statement in statements:
                admin.execute(statement)

    def __exit__(self, *exc) -> None:
        from django.db import connections

        connections.close_all()
        if self.postgres:
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        elif self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)


# --- the synthetic audits --------------------------------------------------------------


def url(i: int) -> str:
    return f"{ORIGIN}/section-{i % 50}/page-{i}"


def digest(text: str) -> str:
    from crawler.urls import url_hash

    return url_hash(text)


class Plan:
    """Which rows each audit gets, and the counts the diff should store for them.

    Page URLs are numbered: the baseline has 0..P-1, the new audit R..P+R-1
    (R = 5% of P). Of the R baseline-only ones, the first third is still in the
    new audit's frontier (found, not crawled), the second third only linked to
    (past its depth limit), the rest gone. Every tenth URL is a resource. Issue
    keys: the baseline 0..N-1, the new audit S..N+S-1 (N - S shared); issue k is on URL k mod (P+R).
    """

    def __init__(self, pages: int, issues: int, shared: float, links: int):
        self.pages, self.issues, self.links = pages, issues, links
        self.removed = max(pages // 20, 3)
        self.offset = issues - int(issues * shared)
        self.base_urls = range(0, pages)
        self.new_urls = range(self.removed, pages + self.removed)
        third = self.removed // 3
        self.in_frontier = range(0, third)
        self.only_linked = range(third, 2 * third)

    @staticmethod
    def kind(i: int) -> str:
        return "resource" if i % 10 == 9 else "page"

    @staticmethod
    def failed(i: int) -> bool:
        return i % 53 == 0

    def page(self, audit_id: int, i: int, *, new: bool, now) -> tuple:
        kind = self.kind(i)
        status = 404 if new and i % 97 == 0 else 200
        title = f"Page {i} of the benchmark site" + (" (edited)" if new and i % 7 == 0 else "")
        content = digest(f"content {i}" + (" edited" if new and i % 11 == 0 else ""))
        error = ""
        if new and self.failed(i):
            status, error = None, "timeout"
        html = kind == "page" and not error
        return (audit_id, digest(url(i)), url(i), kind, url(i), status, "[]", 0,
                "text/html" if kind == "page" else "image/png", 20_000, 40, 90, 1 + i % 6,
                title if html else "", "", "", url(i) if html else "", digest(url(i)) if html else "", 1, 400, "",
                html and status == 200, False, content if html else "", 3, self.links, error, "", now,
                "", "", "", False)

    def issue(self, audit_id: int, k: int, *, new: bool, now) -> tuple:
        i = k % (self.pages + self.removed)
        target = url((i + 1) % self.pages) if k % 5 == 0 else ""
        review = "open"
        if not new:
            review = {0: "ignored", 1: "reviewed"}.get(k % 50, "open")
        return (audit_id, None, url(i), digest(url(i)), CODES[k % 5], SEVERITIES[k % 3],
                f"Synthetic issue {k}", target, f"{k:032x}", review, "", now)

    def frontier(self, audit_id: int) -> list[tuple]:
        done = [(audit_id, digest(url(i)), url(i), self.kind(i), 1, "", "", False, True, "done", None, "", 0, None, 0)
                for i in self.new_urls]
        pending = [(audit_id, digest(url(i)), url(i), "page", 2, "", "", False, True, "pending", None, "", 0, None, 0)
                   for i in self.in_frontier]
        return done + pending

    def edges(self, audit_id: int):
        """Links of the new audit's crawled pages, among its own URLs; the only-linked ones get one each."""
        linked = iter(self.only_linked)
        for i in self.new_urls:
            if self.kind(i) != "page" or self.failed(i):
                continue
            targets = [self.new_urls.start + (i * 31 + j * 997) % self.pages for j in range(self.links)]
            targets[0] = next(linked, targets[0])
            for target in targets:
                yield (audit_id, digest(url(i)), url(i), digest(url(target)), url(target), "a",
                       f"to {target}", False, True, "")

    def expected(self) -> dict:
        """The counts ``record`` should store, from the same rules the generator used."""
        base_keys = range(0, self.issues)
        new_keys = range(self.offset, self.issues + self.offset)
        crawled = {i for i in self.new_urls if not self.failed(i)}
        issues = {change: {s: 0 for s in SEVERITIES} for change in ("new", "persisting", "fixed", "unknown")}
        # A broken link (every fifth key) is the same issue as one on the same page to the same target
        # (audits.diff.same_issue); an issue ignored in the baseline stays ignored, and ignored ones are
        # left out of every count.
        span = self.pages + self.removed

        def links(keys) -> dict[int, list[int]]:
            found: dict[int, list[int]] = {}
            for k in keys:
                if CODES[k % 5] == "broken_link_internal":
                    found.setdefault(k % span, []).append(k)
            return found

        def ignored(k: int) -> bool:
            return k % 50 == 0  # the generator's baseline review

        base_links, new_links = links(base_keys), links(new_keys)
        for k in new_keys:
            if k in base_keys:
                change, was_ignored = "persisting", ignored(k)
            elif k % 5 == 0 and k % span in base_links:
                change, was_ignored = "persisting", any(ignored(b) for b in base_links[k % span])
            else:
                change, was_ignored = "new", False
            if not was_ignored:
                issues[change][SEVERITIES[k % 3]] += 1
        for k in base_keys:
            if k in new_keys or (k % 5 == 0 and k % span in new_links) or ignored(k):
                continue
            # A page's own issue is fixed only on a page that answered 2xx this time (every 97th is a 404 now).
            answered = k % span in crawled and (k % 5 == 0 or (k % span) % 97 != 0)
            issues["fixed" if answered else "unknown"][SEVERITIES[k % 3]] += 1
        base_pages = {i for i in self.base_urls if self.kind(i) == "page"}
        new_pages = {i for i in self.new_urls if self.kind(i) == "page"}
        found = set(self.in_frontier) | set(self.only_linked)
        changed = sum(1 for i in new_pages & base_pages
                      if i % 7 == 0 or i % 11 == 0 or i % 97 == 0 or self.failed(i))
        pages = {"added": len(new_pages - set(self.base_urls)),
                 "removed": len(base_pages - set(self.new_urls) - found), "changed": changed}
        return {"issues": issues, "pages": pages}


def load(model, columns: list[str], rows) -> int:
    """Insert ``rows`` (tuples in ``columns`` order): COPY on PostgreSQL, ``insert_rows`` in batches elsewhere."""
    from django.db import connection

    from audits.sql import insert_rows

    n = 0
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor, cursor.cursor.copy(
                f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                n += 1
        return n
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH:
            insert_rows(model, columns, batch)
            n, batch = n + len(batch), []
    insert_rows(model, columns, batch)
    return n + len(batch)


PAGE_COLUMNS = ["audit_id", "url_hash", "url", "kind", "final_url", "status_code", "redirect_chain",
                "redirect_count", "content_type", "size_bytes", "ttfb_ms", "total_ms", "depth", "title",
                "description", "description_hash", "canonical", "canonical_hash", "h1_count", "word_count", "robots", "indexable",
                "in_sitemap", "content_hash", "inlinks", "outlinks", "fetch_error", "fetch_error_detail",
                "crawled_at", "etag", "last_modified", "body_hash", "rendered"]


# Finalize's own statistics pass (audits.finalize.run_finalize), run before it calls diff.record.
FINALIZE_ANALYZE = (
    "ANALYZE audits_page,"
    " audits_linkedge (audit_id, source_hash, target_hash, tag, internal),"
    " audits_frontierurl (audit_id, url_hash, in_sitemap, linked, skip_reason),"
    " audits_issue (audit_id, key, code, url_hash)"
)


def build(plan: Plan):
    """A site's completed baseline audit and its finalizing audit to diff, loaded in bulk."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.utils import timezone

    from audits.crawl.admission import FRONTIER_COLUMNS
    from audits.crawl.writer import EDGE_COLUMNS
    from audits.issue_rows import ISSUE_COLUMNS
    from audits.models import Audit, FrontierURL, Issue, LinkEdge, Page
    from audits.services import new_audit
    from audits.sql import db_datetime

    postgres = connection.vendor == "postgresql"
    if postgres:
        with connection.cursor() as cursor:
            for table in CHANGE_TABLES:  # statistics stay as finalize leaves them
                cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    owner = get_user_model().objects.create_user("bench", password="bench-pass-123")
    now = db_datetime(timezone.now())
    audits = []
    for new in (False, True):
        started = time.perf_counter()
        status = Audit.Status.FINALIZING if new else Audit.Status.COMPLETED
        audit = new_audit(owner, start_url=f"{ORIGIN}/", status=status, origin=ORIGIN,
                          phase=Audit.Phase.FINALIZING if new else Audit.Phase.DONE, check_external=False)
        urls = plan.new_urls if new else plan.base_urls
        keys = range(plan.offset, plan.issues + plan.offset) if new else range(plan.issues)
        with transaction.atomic():
            n = {"pages": load(Page, PAGE_COLUMNS, (plan.page(audit.pk, i, new=new, now=now) for i in urls)),
                 "issues": load(Issue, ISSUE_COLUMNS, (plan.issue(audit.pk, k, new=new, now=now) for k in keys))}
            if new:
                n["frontier"] = load(FrontierURL, FRONTIER_COLUMNS, plan.frontier(audit.pk))
                n["edges"] = load(LinkEdge, EDGE_COLUMNS, plan.edges(audit.pk))
        if postgres:
            with connection.cursor() as cursor:
                cursor.execute(FINALIZE_ANALYZE if new else "ANALYZE")
        rows = ", ".join(f"{count:,} {name}" for name, count in n.items())
        print(f"{'new' if new else 'baseline'} audit {audit.pk}: {rows} ({time.perf_counter() - started:.1f} s)")
        audits.append(audit)
    return audits


def explain(audit, base) -> None:
    """The plans of record()'s statements, as the database chooses them now."""
    from django.db import connection
    from django.db.models import Case, Exists, Value, When

    from audits import diff
    from audits.models import Issue

    same_key = diff.in_audit(base.pk)
    issues = Issue.objects.filter(audit=audit)
    print("\n-- change of every issue (UPDATE ... CASE WHEN EXISTS)")
    print(issues.annotate(c=Case(When(Exists(same_key), then=Value("persisting")), default=Value("new")))
          .values("c").explain())
    print("\n-- review carried forward")
    print(issues.filter(review="open").filter(Exists(same_key.filter(review="ignored"))).explain())
    prefix = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
    params = diff._params(audit, base)
    for name, sql in (("gone issues", diff.GONE_ISSUES_SQL), ("page changes", diff.PAGE_CHANGES_SQL)):
        print(f"\n-- {name}")
        with connection.cursor() as cursor:
            cursor.execute(prefix + sql, params)
            for row in cursor.fetchall():
                print(" ".join(str(part) for part in row))


class StatementTimes:
    """Wall time of each statement record() runs, through Django's execute wrapper."""

    def __init__(self):
        self.times: list[tuple[float, str]] = []

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.times.append((time.perf_counter() - started, " ".join(sql.split())[:90]))


def time_record(audit_id: int, rounds: int):
    """record() ``rounds`` times, each in its own rolled-back transaction; (seconds, counts, statement times)."""
    from django.db import connection, transaction

    from audits import diff
    from audits.models import Audit

    seconds, counts, statements = [], None, None
    for _ in range(rounds):
        audit = Audit.objects.get(pk=audit_id)
        times = StatementTimes()
        with transaction.atomic(), connection.execute_wrapper(times):
            started = time.perf_counter()
            counts = diff.record(audit)
            seconds.append(time.perf_counter() - started)
            transaction.set_rollback(True)  # the next round starts from the same rows
        statements = times.times
    return seconds, counts, statements


def machine(vendor_version: str) -> str:
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.platform()}, "
            f"{vendor_version}, load {os.getloadavg()[0]:.2f}")


def main(argv=None) -> int:
    args = parse_args(argv)
    plan = Plan(args.pages, args.issues, args.shared, args.links)
    with Database():
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("SELECT sqlite_version()" if connection.vendor == "sqlite" else "SHOW server_version")
            version = f"{'SQLite' if connection.vendor == 'sqlite' else 'PostgreSQL'} {cursor.fetchone()[0]}"
        print(f"machine: {machine(version)}")
        print(f"plan: {args.issues:,} issues per audit ({args.shared:.0%} of keys shared), "
              f"{args.pages:,} pages per audit, {args.links} links a page, {args.rounds} rounds")
        base, audit = build(plan)
        if args.explain:
            explain(audit, base)
        seconds, counts, statements = time_record(audit.pk, args.rounds)
        print(f"\ndiff.record: median {statistics.median(seconds):.3f} s, min {min(seconds):.3f} s, "
              f"max {max(seconds):.3f} s over {len(seconds)} rounds ({', '.join(f'{s:.3f}' for s in seconds)})")
        print("statements of the last round:")
        for spent, sql in sorted(statements, reverse=True)[:8]:
            print(f"  {spent:7.3f} s  {sql}")
        expected = plan.expected()
        totals = {change: sum(by.values()) for change, by in counts["issues"].items()}
        print(f"stored issues: {totals}; pages: {counts['pages']}")
        ok = counts == expected
        print("stored counts match the plan" if ok else f"MISMATCH: the plan expects {expected}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
