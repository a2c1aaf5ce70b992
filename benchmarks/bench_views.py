"""The dashboard's screens on one big audit: the audit page, the issues list and the pages list.

It builds, in a throwaway database, one completed audit with ``--pages`` page
rows and ``--issues`` issues (bulk_create, a seeded spread of the catalogue's
codes and severities, click depths and review states; see ``Plan``), then asks
for each screen with Django's test Client, logged in as the audit's owner, in
this process: nothing goes over a network, so the only connection is the
database's (a file, or PostgreSQL on 127.0.0.1). Each screen is asked once
untimed, then ``--repeats`` times; the table gives the median, fastest and
slowest wall time of the whole request (view, queries, template), the number of
queries, the time spent in executing them and the slowest statement of the last
repeat (on SQLite a statement's rows are computed as they are fetched, after
that time: the aggregates of the audit page are also timed alone, each call
fetching its rows, in a second table)::

    .venv/bin/python -m benchmarks.bench_views                                 # SQLite, temp file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m benchmarks.bench_views                             # PostgreSQL, own database

SQLite has no statistics (the product never runs ANALYZE there); on
PostgreSQL the database is vacuumed and analysed once after loading, as
autovacuum soon does after an audit this size is written. ``--explain``
prints the plans of the list queries. A script, never a timed test.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import random
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a file as well as with -m
    sys.path.insert(0, str(REPO))

from benchmarks.bench_diff import Database, StatementTimes, machine  # noqa: E402

PG_DATABASE = "siteward_bench_views"
ORIGIN = "https://big.example"
SEED = 20260301
BATCH = 2_000

# How often each code turns up on a big site, per 1,000 issues: a few criticals,
# many warnings and notices, as the crawls of real sites in RESULTS.md found them.
CODE_WEIGHTS = {
    "broken_link_internal": 50, "http_4xx": 10, "http_5xx": 3, "title_missing": 5, "canonical_bad_target": 4,
    "fetch_failed": 3,
    "img_alt_missing": 170, "meta_description_missing": 60, "meta_description_duplicate": 40,
    "title_duplicate": 40, "h1_missing": 30, "broken_resource": 25, "redirect_chain": 10, "slow_response": 20,
    "broken_link_external": 25, "viewport_missing": 10,
    "title_length": 120, "meta_description_length": 100, "redirect_internal_link": 90, "thin_content": 60,
    "security_headers_missing": 40, "heading_order": 45, "deep_page": 20, "dead_end": 20,
}
# Issues about a link name its target.
LINK_CODES = {"broken_link_internal", "broken_link_external", "broken_resource", "redirect_internal_link"}
STATEMENT_FLOOR = 0.005  # seconds: the statements listed under the table
SECTIONS = ("docs", "blog", "shop", "help", "news", "about", "api", "forum")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--issues", type=int, default=300_000)
    parser.add_argument("--pages", type=int, default=50_000, help="page rows (pages, resources, external links)")
    parser.add_argument("--repeats", type=int, default=5, help="timed requests per screen")
    parser.add_argument("--later-page", type=int, default=200, help="the later page of each list asked for")
    parser.add_argument("--explain", action="store_true", help="print the plans of the lists' queries")
    return parser.parse_args(argv)


class Plan:
    """The rows of the audit, drawn from one seeded generator.

    Page rows come in the order a crawl stores them: breadth first, so the
    click depth mostly grows with the id, chunks overlapping by a level; 80%
    pages, 15% internal resources, 5% external links. Issues are on the pages
    in the order the pages were written, several an HTML page, codes drawn by
    CODE_WEIGHTS (each with its catalogue severity); 2% ignored, 3% reviewed.
    """

    def __init__(self, pages: int, issues: int):
        self.pages, self.issues = pages, issues
        rng = random.Random(SEED)
        # Depth 0 is the start page, then levels of fewer and fewer pages down to 12; one row in
        # ten is a level deeper than its neighbours (a chunk that ran ahead).
        levels = sorted(min(12, 1 + int(rng.expovariate(0.45))) for _ in range(pages - 1))
        self.depths = [0] + [d + (rng.random() < 0.1) for d in levels]
        self.kinds = ["page" if i == 0 or rng.random() < 0.8 else "resource" if rng.random() < 0.75 else "external"
                      for i in range(pages)]

    def url(self, i: int) -> str:
        if self.kinds[i] == "external":
            return f"https://elsewhere{i % 40}.example/ref/{i}"
        if i == 0:
            return f"{ORIGIN}/"
        suffix = ".png" if self.kinds[i] == "resource" else "/"
        return f"{ORIGIN}/{SECTIONS[i % len(SECTIONS)]}/item-{i}{suffix}"

    def page(self, audit_id: int, i: int, rng: random.Random, now):
        from audits.models import Page
        from crawler.urls import url_hash

        kind, url = self.kinds[i], self.url(i)
        status = rng.choices([200, 404, 500, 301, None], [90, 5, 1, 3, 1])[0]
        redirect = status == 301
        return Page(
            audit_id=audit_id, url=url, url_hash=url_hash(url), kind=kind, depth=self.depths[i],
            status_code=200 if redirect else status, final_url=f"{url}moved/" if redirect else url,
            redirect_chain=[[url, 301, f"{url}moved/"]] if redirect else [], redirect_count=int(redirect),
            content_type={"page": "text/html", "resource": "image/png", "external": "text/html"}[kind],
            size_bytes=rng.randrange(2_000, 200_000), ttfb_ms=rng.randrange(20, 400),
            total_ms=int(rng.lognormvariate(5.5, 0.8)), title=f"Item {i} of the big site" if kind == "page" else "",
            fetch_error="timeout" if status is None else "", inlinks=rng.randrange(0, 60),
            outlinks=rng.randrange(20, 120) if kind == "page" else 0, crawled_at=now,
        )

    def issue_rows(self, audit_id: int, page_ids: list[int], rng: random.Random, now):
        """The issues, each on an HTML page, the pages in id order."""
        from audits.models import Issue
        from crawler.catalogue import CATALOGUE
        from crawler.urls import url_hash

        codes = list(CODE_WEIGHTS)
        weights = list(CODE_WEIGHTS.values())
        html = [i for i in range(self.pages) if self.kinds[i] == "page"]
        for k in range(self.issues):
            i = html[k * len(html) // self.issues]
            code = rng.choices(codes, weights)[0]
            url = self.url(i)
            target = self.url(rng.randrange(self.pages)) if code in LINK_CODES else ""
            review = rng.choices(["open", "ignored", "reviewed"], [95, 2, 3])[0]
            yield Issue(
                audit_id=audit_id, page_id=page_ids[i], url=url, url_hash=url_hash(url), code=code,
                severity=CATALOGUE[code].severity.value, message=f"{CATALOGUE[code].title} ({k})",
                target_url=target, key=f"{k:032x}", review=review, created_at=now,
            )


def batched(rows, size: int = BATCH):
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def build(plan: Plan):
    """The owner and their completed audit, its rows written with bulk_create."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.db.models import Count
    from django.utils import timezone

    from audits.models import Audit, Issue, Page, Severity
    from audits.services import new_audit

    started = time.perf_counter()
    owner = get_user_model().objects.create_user("bench", password="bench-pass-123")
    now = timezone.now()
    audit = new_audit(owner, start_url=f"{ORIGIN}/", origin=ORIGIN, check_external=True, max_pages=plan.pages)
    rng = random.Random(SEED + 1)
    with transaction.atomic():
        for batch in batched(plan.page(audit.pk, i, rng, now) for i in range(plan.pages)):
            Page.objects.bulk_create(batch)
        page_ids = list(Page.objects.filter(audit=audit).order_by("id").values_list("id", flat=True))
        for batch in batched(plan.issue_rows(audit.pk, page_ids, rng, now)):
            Issue.objects.bulk_create(batch)
    by_severity = dict(Issue.objects.filter(audit=audit).exclude(review="ignored").values_list("severity")
                       .annotate(n=Count("id")).order_by())
    Audit.objects.filter(pk=audit.pk).update(
        status=Audit.Status.COMPLETED, phase=Audit.Phase.DONE, started_at=now, finished_at=now,
        pages_crawled=plan.pages, pages_discovered=plan.pages, links_indexed=True,
        issues_critical=by_severity.get(Severity.CRITICAL, 0), issues_warning=by_severity.get(Severity.WARNING, 0),
        issues_notice=by_severity.get(Severity.NOTICE, 0))
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")  # what autovacuum does soon after an audit this size is written
    audit.refresh_from_db()
    print(f"audit {audit.pk}: {plan.pages:,} page rows, {plan.issues:,} issues "
          f"({time.perf_counter() - started:.1f} s to build)")
    return owner, audit


def screens(audit, later: int) -> list[tuple[str, str, dict]]:
    """(label, path, query) of each screen timed: the lists as the audit page links to them."""
    from django.urls import reverse

    issues, pages = reverse("issue-list", args=[audit.pk]), reverse("page-list", args=[audit.pk])
    return [
        ("audit page", reverse("audit-detail", args=[audit.pk]), {}),
        ("issues, page 1", issues, {"review": "active"}),
        (f"issues, page {later}", issues, {"review": "active", "page": later}),
        ("issues of one type, page 1", issues, {"code": "img_alt_missing", "severity": "warning",
                                                "review": "active"}),
        # A search or a section keeps part of the audit: few issues, most of them, or one section in eight.
        ("issues found by a search, few", issues, {"q": "/item-4242", "review": "active"}),
        ("issues found by a search, most", issues, {"q": "item-", "review": "active"}),
        ("issues of a section, page 1", issues, {"section": f"/{SECTIONS[0]}/", "review": "active"}),
        ("pages, page 1", pages, {}),
        (f"pages, page {later}", pages, {"page": later}),
    ]


def explain(captured) -> None:
    """The plans of the captured list queries (SELECTs with an ORDER BY and a LIMIT)."""
    from django.db import connection

    prefix = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
    for sql, params in captured:
        if sql.startswith("SELECT") and "ORDER BY" in sql and "LIMIT" in sql:
            print(f"\n-- {' '.join(sql.split())[:160]}")
            with connection.cursor() as cursor:
                cursor.execute(prefix + sql, params)
                for row in cursor.fetchall():
                    print("  ", row[-1] if connection.vendor == "sqlite" else row[0])


class Capture:
    """The statements of a request with their parameters, for --explain."""

    def __init__(self):
        self.statements = []

    def __call__(self, execute, sql, params, many, context):
        self.statements.append((sql, params))
        return execute(sql, params, many, context)


def time_screens(owner, audit, args) -> list[dict]:
    from django.db import connection
    from django.test import Client

    client = Client(HTTP_HOST="localhost")
    client.force_login(owner)
    results = []
    for label, path, query in screens(audit, args.later_page):
        capture = Capture()
        with connection.execute_wrapper(capture):
            response = client.get(path, query)  # untimed: templates and caches warm
        if response.status_code != 200:
            raise SystemExit(f"{label}: {path} answered {response.status_code}")
        if args.explain:
            print(f"\n== {label}")
            explain(capture.statements)
        seconds, times = [], None
        for _ in range(args.repeats):
            times = StatementTimes()
            with connection.execute_wrapper(times):
                started = time.perf_counter()
                client.get(path, query)
                seconds.append(time.perf_counter() - started)
        results.append({"screen": label, "median": statistics.median(seconds), "min": min(seconds),
                        "max": max(seconds), "queries": len(times.times), "db": sum(t for t, _ in times.times),
                        "slowest": max(times.times), "statements": times.times})
    return results


def statements(results: list[dict], floor: float) -> str:
    """Each screen's statements of its last repeat that took ``floor`` seconds or more, slowest first."""
    lines = []
    for r in results:
        lines.append(f"{r['screen']}:")
        lines += [f"  {spent:7.3f} s  {sql}" for spent, sql in sorted(r["statements"], reverse=True) if spent >= floor]
    return "\n".join(lines)


def time_parts(audit, repeats: int) -> list[dict]:
    """The audit page's aggregates called alone, rows fetched and all: SQLite computes a statement's
    rows as they are fetched, after the execute that the statement times above measure."""
    from audits import views
    from audits.summary import issue_summary

    parts = [("issue totals by severity and type (summary.issue_summary)", lambda: issue_summary(audit)),
             ("issues by section (views._sections)", lambda: views._sections(audit)),
             ("the three charts (views._charts)", lambda: views._charts(audit))]
    results = []
    for label, call in parts:
        call()
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            call()
            seconds.append(time.perf_counter() - started)
        results.append({"part": label, "median": statistics.median(seconds), "min": min(seconds)})
    return results


def table(results: list[dict]) -> str:
    lines = ["| screen | median s | fastest s | slowest s | queries | in the database s | slowest statement (s) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        spent, sql = r["slowest"]
        lines.append(f"| {r['screen']} | {r['median']:.3f} | {r['min']:.3f} | {r['max']:.3f} | {r['queries']} "
                     f"| {r['db']:.3f} | {spent:.3f} `{sql[:70]}` |")
    return "\n".join(lines)


def loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def main(argv=None) -> int:
    args = parse_args(argv)
    from benchmarks.netguard import refuse_non_loopback

    refuse_non_loopback()  # the test Client needs no socket
    host = urlsplit(os.environ.get("DATABASE_URL", "")).hostname
    if host and not loopback(host):  # psycopg's libpq dials past the guard above
        raise SystemExit(f"DATABASE_URL must name a server on 127.0.0.0/8 or ::1, not {host}")
    plan = Plan(args.pages, args.issues)
    os.environ.setdefault("LOG_LEVEL", "WARNING")  # not a line per login
    with Database(PG_DATABASE):
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("SELECT sqlite_version()" if connection.vendor == "sqlite" else "SHOW server_version")
            version = f"{'SQLite' if connection.vendor == 'sqlite' else 'PostgreSQL'} {cursor.fetchone()[0]}"
        print(f"machine: {machine(version)}")
        print(f"plan: {args.pages:,} page rows, {args.issues:,} issues, {args.repeats} timed requests a screen")
        owner, audit = build(plan)
        results = time_screens(owner, audit, args)
        print(f"\nstatements of {STATEMENT_FLOOR * 1000:.0f} ms or more in the last repeat:")
        print(statements(results, STATEMENT_FLOOR))
        print()
        print(table(results))
        print("\n| part of the audit page | median s | fastest s |\n| --- | ---: | ---: |")
        for part in time_parts(audit, args.repeats):
            print(f"| {part['part']} | {part['median']:.3f} | {part['min']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
