"""Audit a site from the command line, in-process, for CI pipelines and scripts.

It runs the same start / chunk / finalize code as the worker cluster (only the
scheduling differs), stores the audit like any other, streams a JSON Lines report
as results arrive, prints a short summary and exits with:

    0  no issue at the --fail-on level
    1  issues at that level
    2  usage error, or the audit could not start or failed
    130 interrupted (Ctrl-C): partial results written, audit marked cancelled
"""

from __future__ import annotations

import gc
import itertools
import json
import sys
import time
from collections import Counter
from json.encoder import encode_basestring

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, SystemCheckError
from django.db import connection, transaction
from django.db.models import Max

from crawler.errors import CrawlError
from crawler.net import AddressGuard
from crawler.urls import InvalidURL, compile_patterns, normalize

from ...finalize import run_finalize
from ...inline import run_audit_inline
from ...models import Audit, Issue, Page
from ...services import create_audit
from ...system_checks import CLUSTER_CHECKS

SEVERITY_RANK = {"critical": 0, "warning": 1, "notice": 2}


def _drop_interrupted_connection() -> None:
    """Close this thread's PostgreSQL connection if Ctrl-C left a command in progress on it.

    psycopg cancels a query it is waiting on when interrupted, but an interrupt
    that lands inside its protocol code leaves the command in progress: every
    later query then fails with "another command is already in progress", and
    the audit could not be marked cancelled. The next query reconnects.
    (SQLite finishes a statement before Python sees the signal.)
    """
    if connection.vendor != "postgresql" or connection.connection is None:
        return
    from psycopg.pq import TransactionStatus

    if connection.connection.info.transaction_status != TransactionStatus.IDLE:
        connection.close()


class Command(BaseCommand):
    help = "Crawl and audit a site in-process; exit 1 when issues at --fail-on level are found."
    # Django's system checks look over the web app (models, admin, the URLconf,
    # whose import alone is 20-40 ms of a CI run's start-up, measured); an
    # in-process audit uses none of it, and `manage.py check`, `migrate`,
    # `runserver` and `qcluster` still run them. The one check that bears on
    # this command, that the worker cluster's timeout and retry cannot run a
    # chunk twice at once, runs for --enqueue, which hands the audit to it.
    requires_system_checks = []
    # How the run waits out a Retry-After once only rate-limited URLs are left.
    sleep = staticmethod(time.sleep)

    def run_from_argv(self, argv):
        # Only the command line comes here (call_command goes to execute), and
        # the interpreter exits right after. Its finalization runs full cyclic
        # collections over everything still alive (the crawl's URL caches, the
        # ORM's state): 0.13-0.2 s of a 1,000-page audit's ~5.5 s, measured,
        # to free memory the process is about to hand back anyway. Frozen
        # objects are skipped; reference counting still closes files and
        # connections as modules are torn down.
        try:
            super().run_from_argv(argv)
        finally:
            gc.freeze()

    def add_arguments(self, parser):
        parser.add_argument("url", help="Start URL (http or https)")
        parser.add_argument("--max-pages", type=int, default=500)
        parser.add_argument("--max-depth", type=int, default=10)
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--rate", type=float, default=None, help="Requests per second (default: no limit)")
        parser.add_argument("--include", action="append", default=[], help="Regex a URL must match (repeatable)")
        parser.add_argument("--exclude", action="append", default=[], help="Regex that excludes a URL (repeatable)")
        parser.add_argument("--user-agent", default="")
        parser.add_argument("--ignore-robots", action="store_true", help="Ignore robots.txt (sites you own)")
        parser.add_argument("--no-external", action="store_true", help="Do not check external links")
        parser.add_argument("--allow-private", action="store_true",
                            help="Allow private and loopback addresses (your own local or staging sites)")
        parser.add_argument("--out", help="Write a JSON Lines report here ('-' for standard output)")
        parser.add_argument("--fail-on", choices=["critical", "warning", "notice"], default="critical")
        parser.add_argument("--enqueue", action="store_true",
                            help="Hand the audit to the worker cluster, print its id and return")
        parser.add_argument("--owner", help="Username that owns the audit (default: admin, else a 'cli' user)")

    def handle(self, *args, **opts):
        limits = self._limits(opts)
        owner = self._owner(opts.get("owner"))
        if opts["enqueue"]:
            self._check_cluster_settings()
            audit = create_audit(owner, enforce_quota=False, **limits)
            self.stdout.write(str(audit.pk))
            return
        out = self._open_out(opts.get("out"))
        console = self.stderr if out is sys.stdout else self.stdout
        audit = Audit.objects.create(owner=owner, **limits)
        console.write(f"Audit {audit.pk}: crawling {audit.start_url}")
        report = Report(out)
        try:
            try:
                code = self._crawl(audit, report, opts["fail_on"], console)
            except KeyboardInterrupt:
                _drop_interrupted_connection()
                audit.refresh_from_db()
                audit.cancel("Interrupted from the command line.")
                code = 130
            audit.refresh_from_db()
            report.summary(audit, code)
        finally:
            # Lines are flushed a batch at a time: whatever ends the run, none stays in the buffer.
            if out is not None:
                out.flush()
            if out not in (None, sys.stdout):
                out.close()
        self._print_summary(console, audit, code)
        if code:
            raise SystemExit(code)

    def _check_cluster_settings(self) -> None:
        try:
            self.check(tags=[CLUSTER_CHECKS])
        except SystemCheckError as exc:
            detail = str(exc).removeprefix("SystemCheckError: ")
            raise CommandError(f"The worker cluster is misconfigured. {detail}", returncode=2) from None

    # --- running --------------------------------------------------------------

    def _crawl(self, audit: Audit, report: Report, fail_on: str, console) -> int:
        def finalize_and_report(audit_id: int) -> None:
            # Cross-page issues are found at the end; stream the ones finalize added.
            before = Issue.objects.filter(audit_id=audit_id).aggregate(n=Max("id"))["n"] or 0
            run_finalize(audit_id)
            report.issue_values(Issue.objects.filter(audit_id=audit_id, id__gt=before).order_by("id")
                                .values_list(*Report.ISSUE_FIELDS).iterator(2000))

        def waiting(seconds: float) -> None:
            # Otherwise a run that waits out a Retry-After looks hung.
            console.write(f"Waiting {seconds:.0f} s: the site asked us to come back later (Retry-After)")

        run_audit_inline(audit.pk, on_batch=report.batch, finalize=finalize_and_report, sleep=self.sleep,
                         on_wait=waiting)
        audit.refresh_from_db()
        if audit.status != Audit.Status.COMPLETED:
            return 2
        worst = SEVERITY_RANK[fail_on]
        levels = [s for s, rank in SEVERITY_RANK.items() if rank <= worst]
        return 1 if audit.issues.filter(severity__in=levels).exists() else 0

    # --- input ------------------------------------------------------------------

    def _limits(self, opts) -> dict:
        try:
            url = normalize(opts["url"])
        except InvalidURL as exc:
            raise CommandError(f"Not a usable start URL: {exc}", returncode=2) from None
        for name, low, high in (("max_pages", 1, 1_000_000), ("max_depth", 0, 1000), ("concurrency", 1, 64)):
            if not low <= opts[name] <= high:
                raise CommandError(f"--{name.replace('_', '-')} must be between {low} and {high}", returncode=2)
        if opts["rate"] is not None and opts["rate"] <= 0:
            raise CommandError("--rate must be positive", returncode=2)
        try:
            compile_patterns(opts["include"] + opts["exclude"])
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            AddressGuard(allow_private=opts["allow_private"]).resolve_sync(parts.hostname, port)
        except CrawlError as exc:
            hint = " (use --allow-private for your own local or staging sites)" if "private" in str(
                exc).lower() or "loopback" in str(exc).lower() or "refused" in str(exc).lower() else ""
            raise CommandError(f"Cannot audit {url}: {exc}{hint}", returncode=2) from None
        return {
            "start_url": url, "max_pages": opts["max_pages"], "max_depth": opts["max_depth"],
            "concurrency": opts["concurrency"], "rate": opts["rate"],
            "include_patterns": "\n".join(opts["include"]), "exclude_patterns": "\n".join(opts["exclude"]),
            "user_agent": opts["user_agent"], "respect_robots": not opts["ignore_robots"],
            "check_external": not opts["no_external"], "allow_private": opts["allow_private"],
        }

    def _owner(self, username: str | None):
        User = get_user_model()
        if username:
            user = User.objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"No user named {username!r}", returncode=2)
            return user
        with transaction.atomic():
            user = User.objects.filter(username="admin").first()
            if user is None:
                user, created = User.objects.get_or_create(username="cli")
                if created:
                    user.set_unusable_password()
                    user.save(update_fields=["password"])
        return user

    def _open_out(self, path: str | None):
        if not path:
            return None
        if path == "-":
            return sys.stdout
        try:
            return open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in handle()
        except OSError as exc:
            raise CommandError(f"Cannot write {path}: {exc}", returncode=2) from None

    # --- output -------------------------------------------------------------------

    def _print_summary(self, console, audit: Audit, code: int) -> None:
        pages = Page.objects.filter(audit=audit, kind=Page.Kind.PAGE)
        classes = Counter(p.status_class for p in pages.only("status_code", "fetch_error", "redirect_count").iterator())
        console.write("")
        console.write(f"Audit {audit.pk} {audit.get_status_display().lower()}: {audit.pages_crawled} pages")
        if audit.error_code:
            console.write(f"  stopped: {audit.get_error_code_display()} — {audit.error_detail}")
        console.write("  pages by status: " + (", ".join(f"{k}: {v}" for k, v in sorted(classes.items())) or "none"))
        console.write(f"  issues: {audit.issues_critical} critical, {audit.issues_warning} warnings, "
                      f"{audit.issues_notice} notices")
        slow = pages.filter(fetch_error="").order_by("-ttfb_ms")[:5]
        if slow:
            console.write("  slowest pages:")
            for page in slow:
                console.write(f"    {page.ttfb_ms:>6} ms  {page.url}")
        broken = Issue.objects.filter(audit=audit, code__in=["broken_link_internal", "broken_link_external"])
        total = broken.count()
        if total:
            console.write(f"  broken links ({total}):")
            for issue in broken.order_by("id")[:10]:
                console.write(f"    {issue.url} -> {issue.target_url}: {issue.message}")
        console.write(f"  exit code {code}")


# One encoder for the summary: json.dumps with any non-default argument builds
# a new JSONEncoder per call.
_JSON = json.JSONEncoder(ensure_ascii=False)


def _text(value: str | None) -> str:
    """A JSON string (or null), quoted by the C function JSONEncoder(ensure_ascii=False) uses."""
    return "null" if value is None else encode_basestring(value)


def _number(value: int | None) -> str:
    # int.__repr__ is what the encoder writes an int with, and it refuses
    # anything else (a float or a string here would be a bug upstream).
    return "null" if value is None else int.__repr__(value)


# Issue lines written between two flushes of the report.
FLUSH_EVERY = 2000


class Report:
    """The JSON Lines report, written as results arrive (one object per line, each with a type).

    Page and issue lines, one per stored URL and issue, are composed from
    their quoted fields (``_text``) rather than built as dicts and encoded:
    0.6 against 2.6 us a line, on the database thread, whose Python holds the
    interpreter lock the crawl thread needs. The text is the one
    ``_JSON.encode`` gives for the same record (tests/audits/test_report.py).
    """

    def __init__(self, out):
        self.out = out

    ISSUE_FIELDS = ("code", "severity", "url", "target_url", "message")

    def _write(self, record: dict) -> None:
        if self.out is not None:
            self.out.write(_JSON.encode(record) + "\n")

    @staticmethod
    def page_line(url, final_url, status, depth, title, error, codes) -> str:
        return (f'{{"type": "page", "url": {_text(url)}, "final_url": {_text(final_url)}, '
                f'"status": {_number(status)}, "depth": {_number(depth)}, "title": {_text(title)}, '
                f'"error": {_text(error)}, "issues": [{", ".join(map(encode_basestring, codes))}]}}\n')

    @staticmethod
    def issue_line(code, severity, url, target, message) -> str:
        return (f'{{"type": "issue", "code": {_text(code)}, "severity": {_text(severity)}, "url": {_text(url)}, '
                f'"target": {_text(target or None)}, "message": {_text(message)}}}\n')

    def _flush(self) -> None:
        # Once per sub-batch (at least every second while crawling), not per
        # line: a line-by-line flush was a write call for each record (tens of
        # thousands in a 10,000-page audit), and a reader still sees each
        # batch as soon as it is stored.
        if self.out is not None:
            self.out.flush()

    def batch(self, outcomes, issues) -> None:
        if self.out is None:
            return
        by_url: dict[str, list[str]] = {}
        for issue in issues:
            by_url.setdefault(issue.url, []).append(issue.code)
        page_line = self.page_line
        lines = [
            page_line(outcome.url, outcome.result.final_url, outcome.result.status, outcome.depth,
                      outcome.facts.title if outcome.facts else None,
                      outcome.result.error.value if outcome.result.error else None, by_url.get(outcome.url, ()))
            for outcome in outcomes
        ]
        self.out.write("".join(lines))
        self.issue_values((i.code, i.severity, i.url, i.target_url, i.message) for i in issues)

    def issue_values(self, rows) -> None:
        """Issue records from (code, severity, url, target_url, message) tuples, flushed every FLUSH_EVERY."""
        if self.out is None:
            return
        issue_line = self.issue_line
        rows = iter(rows)
        while lines := [issue_line(*row) for row in itertools.islice(rows, FLUSH_EVERY)]:
            self.out.write("".join(lines))
            if len(lines) == FLUSH_EVERY:  # a long run of issues (finalize's) shows as it comes
                self._flush()
        self._flush()

    def summary(self, audit: Audit, code: int) -> None:
        self._write({
            "type": "summary", "audit_id": audit.pk, "status": audit.status, "error_code": audit.error_code or None,
            "error_detail": audit.error_detail or None, "pages": audit.pages_crawled,
            "issues": {"critical": audit.issues_critical, "warning": audit.issues_warning,
                       "notice": audit.issues_notice},
            "exit_code": code,
        })
        self._flush()
