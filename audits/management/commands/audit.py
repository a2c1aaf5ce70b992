"""Audit a site from the command line, in-process, for CI pipelines and scripts.

It runs the same start / chunk / finalize code as the worker cluster (only the
scheduling differs), stores the audit like any other, streams a JSON Lines report
as results arrive, prints a short summary and exits with the codes below. Issues
marked ignored (by hand, carried forward from an earlier audit of the site, or by the
site's ignore rules) are left out of the summary's counts and of both gates unless
--include-ignored; reviewed issues always count.

    0  no issue at the --fail-on level (and no new one at the --fail-on-new level)
    1  issues at that level, or new issues at the --fail-on-new level; in a validation, also issues at
       that level whose re-check could not run (unknown verdicts), unless --allow-unknown
    2  usage or configuration error: a bad option, an unusable --from, a start URL the
       form refuses, a failed system check (fix the job's definition)
    3  the audit was created, then failed or could not start (the site unreachable, the
       login failed, the database lost, an internal error), or was cancelled from the dashboard
    130 interrupted (Ctrl-C, or SIGTERM as a CI job's timeout or cancel sends): partial results
        written, audit marked cancelled
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from collections import Counter

from django.core.management.base import BaseCommand, CommandError, SystemCheckError
from django.db import DatabaseError, connection, transaction
from django.db.models import Max
from psycopg.pq import TransactionStatus

from ... import validation
from ...finalize import ESCALATED_CODE, run_finalize
from ...forms import MAX_CONCURRENCY, MAX_DEPTH, MAX_PAGES, AuditForm
from ...inline import run_audit_inline
from ...models import Audit, Issue, Page, Severity
from ...services import command_owner, create_audit, new_audit
from ...summary import severity_counts
from ...system_checks import CLUSTER_CHECKS
from ...thresholds import BY_NAME, THRESHOLDS
from ..access_args import access_from_options, add_access_arguments, save_access
from ..jsonl_report import CHANGES, Report, change_totals, discard_earlier_report, out_in_argv
from ..mode_args import (
    add_mode_arguments,
    apply_mode,
    earlier_audit,
    first_delta,
    source_from_options,
)
from ..refusals import refused_as_command_error

SEVERITY_RANK = {"critical": 0, "warning": 1, "notice": 2}
log = logging.getLogger(__name__)

PREVIOUS = "previous"

# An audit that was created and then failed: apart from the 2 of a usage or configuration error, so a
# pipeline can tell "fix the job" from "the site or the run broke, retry".
FAILED = 3


def at_or_above(severity: str) -> list[str]:
    return [s for s, rank in SEVERITY_RANK.items() if rank <= SEVERITY_RANK[severity]]


def _drop_interrupted_connection() -> None:
    """Close this thread's connection if Ctrl-C left it inside a transaction or a command.

    The command ends the audit outside any transaction, so one still open was
    cut short: an interrupt in an atomic block's exit, before it restored
    autocommit, leaves Django in a transaction nobody commits, and the cancel
    written there would be rolled back as the process exits, the audit left running.
    psycopg cancels a query it is waiting on when interrupted, but an interrupt
    inside its protocol code leaves the command in progress ("another command is
    already in progress"). Either way the next query reconnects, in autocommit.
    """
    if connection.connection is None:
        return
    if not connection.in_atomic_block and not connection.get_autocommit():
        connection.close()
    elif connection.vendor == "postgresql" and connection.connection.info.transaction_status != TransactionStatus.IDLE:
        connection.close()


class Interrupts:
    """Ctrl-C and SIGTERM end the crawl, each as a KeyboardInterrupt, and are remembered.

    SIGTERM too: CI runners and ``docker stop`` send it, and by default it kills
    the process at once, leaving the audit running and the report without its
    summary. Remembered, because an interrupt that lands inside a SQLite
    function call reaches the command as that call's OperationalError.

    Only the first signal, and only inside ``crawling()``, interrupts; the
    handlers stay until ``handled()`` ends, and ignore the rest. A second Ctrl-C
    is a habit and CI follows its SIGINT with SIGTERM: either would otherwise
    cut short the wind-down, which cancels the audit and writes the summary.
    """

    def __init__(self):
        self.seen = False
        self.interrupting = False
        self.ignored = 0

    def _signalled(self, signum, frame):
        if self.seen or not self.interrupting:
            self.ignored += 1
            return
        self.seen, self.interrupting = True, False
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def handled(self):
        if threading.current_thread() is not threading.main_thread():
            yield  # only the main thread may set a handler (call_command from another thread)
            return
        previous = {sig: signal.signal(sig, self._signalled) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    @contextlib.contextmanager
    def crawling(self):
        """The stretch a signal interrupts; outside it, within ``handled()``, signals are ignored."""
        self.interrupting = True
        try:
            yield
        finally:
            self.interrupting = False


class Command(BaseCommand):
    help = ("Crawl and audit a site in-process; exit 1 when issues at the --fail-on level are found "
            "(or, with --fail-on-new, new issues at that level since an earlier audit; in a validation, "
            "also issues at that level it could not re-check), 2 on a usage or "
            "configuration error, 3 when the audit failed or could not start, 130 when interrupted.")
    # How the run waits out a Retry-After: the site's pause, or once only rate-limited URLs are left.
    sleep = staticmethod(time.sleep)

    def add_arguments(self, parser):
        parser.add_argument("url", help="Start URL (http or https)")
        # Crawl settings default to None, "not given": a delta takes its source's for those (CRAWL_DEFAULTS else).
        parser.add_argument("--max-pages", type=int, help=f"Pages to crawl at most (1-{MAX_PAGES:,}; default 500)")
        parser.add_argument("--max-depth", type=int, help=f"Clicks from the start URL (0-{MAX_DEPTH}; default 10)")
        parser.add_argument("--concurrency", type=int, help=f"Requests at once (1-{MAX_CONCURRENCY}; default 8)")
        parser.add_argument("--rate", type=float, default=None, help="Requests per second (default: no limit)")
        parser.add_argument("--include", action="append", help="Regex a URL must match (repeatable)")
        parser.add_argument("--exclude", action="append", help="Regex that excludes a URL (repeatable)")
        parser.add_argument("--user-agent", help="The User-Agent sent (default: SITEWARD_USER_AGENT's, SitewardBot/0.1)")
        parser.add_argument("--ignore-robots", action="store_true", help="Ignore robots.txt (sites you own)")
        parser.add_argument("--no-external", action="store_true", help="Do not check external links")
        parser.add_argument("--allow-private", action="store_true",
                            help="Allow private and loopback addresses (your own local or staging sites)")
        parser.add_argument("--render", choices=["none", "all", "auto"],
                            help="Render pages in headless Chromium (SITEWARD_CHROMIUM, default /usr/bin/chromium): "
                                 "all of them, or auto: those whose HTML looks like an app shell (default none)")
        parser.add_argument(
            "--threshold", action="append", default=[], metavar="NAME=VALUE",
            help="Change a check's threshold (repeatable): " + ", ".join(
                f"{t.name} ({t.unit}, default {t.default})" for t in THRESHOLDS))
        parser.add_argument("--out", help="Write a JSON Lines report here ('-' for standard output); a file "
                                          "already there is removed first, even if this run is refused")
        parser.add_argument(
            "--fail-on", choices=list(SEVERITY_RANK), default=None,
            help="Exit 1 when any issue at or above this severity is found (default: critical, "
                 "unless --fail-on-new is given; given with it, exit 1 when either one triggers)")
        parser.add_argument(
            "--compare-to", metavar="AUDIT_ID|previous",
            help="Compare with this completed audit of the same site (same owner and start URL), or with "
                 "'previous', the site's last completed audit before this one: the report gains 'change' "
                 "records (new, fixed, persisting, unknown) and the summary their counts. With 'previous' "
                 "and no earlier completed audit the run goes on, says there is nothing to compare with, "
                 "and the summary's \"changes\" is null (nothing counts as new)")
        parser.add_argument(
            "--fail-on-new", choices=list(SEVERITY_RANK), default=None,
            help="Exit 1 only when NEW issues at or above this severity appear, not ones the compared "
                 "audit already had; replaces --fail-on's default. Without --compare-to, compares with "
                 "'previous' (so the first audit of a site passes: it becomes the baseline)")
        parser.add_argument(
            "--include-ignored", action="store_true",
            help="Count issues marked ignored (by hand, carried forward from an earlier audit, or by the "
                 "site's ignore rules) in the summary and in --fail-on / --fail-on-new, as before triage "
                 "existed. Without it only the others count; \"reviewed\" issues always count: they are "
                 "acknowledged, not dismissed")
        parser.add_argument("--enqueue", action="store_true",
                            help="Hand the audit to the worker cluster, print its id and return "
                                 "(not with --fail-on, --fail-on-new, --out or --allow-unknown: nothing waits for "
                                 "the audit)")
        parser.add_argument("--owner", help="Username that owns the audit (default: admin, else a 'cli' user)")
        add_access_arguments(parser)
        add_mode_arguments(parser)

    def create_parser(self, prog_name, subcommand, **kwargs):
        # Options spelt out only: an abbreviation a pipeline relies on turns ambiguous, or into another
        # option, when an option is added ("--o" was --out until --owner came), and the run would quietly
        # differ, or leave the earlier report (out_in_argv reads "--out" as spelt).
        return super().create_parser(prog_name, subcommand, allow_abbrev=False, **kwargs)

    def run_from_argv(self, argv):
        # A bad option is refused while the arguments are parsed, before execute(): the earlier report goes first.
        try:
            discard_earlier_report(out_in_argv(argv[2:]))
        except CommandError as exc:
            self.stderr.write(f"CommandError: {exc}")
            sys.exit(exc.returncode)
        super().run_from_argv(argv)

    def execute(self, *args, **options):
        # Before the system checks and every refusal of handle(): a run that ends without writing its report
        # must not leave an earlier run's in its place.
        discard_earlier_report(options.get("out"))
        return super().execute(*args, **options)

    def check(self, *args, **kwargs):
        # A misconfigured deployment means the audit could not run: exit 2, not
        # the 1 that tells a CI pipeline issues were found.
        try:
            super().check(*args, **kwargs)
        except SystemCheckError as exc:
            raise CommandError(str(exc), returncode=2) from None

    def handle(self, *args, **opts):
        self.created = None  # the audit this run crawls, once it exists
        self.unsettled = 0  # a validation's unknown verdicts that failed the gate
        try:
            return self._handle(**opts)
        except CommandError:
            raise
        except Exception as exc:
            # Never the 1 that tells CI issues were found. Before the audit exists (a value the database
            # refuses) nothing ran: 2; after (the database down, a full disk) the run failed: 3.
            log.error("the audit command failed", exc_info=exc)
            if self.created is not None:
                # Outside the crawl's own handling (pinning the baseline, say): no step will end this audit.
                with contextlib.suppress(DatabaseError):
                    self.created.fail(Audit.ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
            raise CommandError(f"{type(exc).__name__}: {exc}"[:1000],
                               returncode=2 if self.created is None else FAILED) from exc

    def _handle(self, **opts):
        limits = self._limits(opts)
        owner = self._owner(opts.get("owner"))
        fail_on_new = opts["fail_on_new"]
        include_ignored = opts["include_ignored"]
        # --fail-on-new gates on new issues only; --fail-on's default would fail on old debt too.
        fail_on = opts["fail_on"] or (None if fail_on_new else "critical")
        compare_to = opts["compare_to"] or (PREVIOUS if fail_on_new else None)
        # A gate or report nothing waits for would pass CI with exit 0 whatever the audit finds.
        unwaited = [name for name, given in (("--fail-on-new", fail_on_new), ("--fail-on", opts["fail_on"]),
                                             ("--out", opts.get("out")),
                                             ("--allow-unknown", opts.get("allow_unknown"))) if given]
        if unwaited and opts["enqueue"]:
            raise CommandError(f"{unwaited[0]} has no effect with --enqueue: nothing waits for the audit "
                               "to end", returncode=2)
        # Checked before anything is stored or fetched.
        baseline = self._baseline(compare_to, owner, limits["start_url"])
        if opts["mode"] == Audit.Mode.VALIDATE and compare_to:
            raise CommandError("--mode validate compares with its --from audit; --compare-to and "
                               "--fail-on-new do not apply", returncode=2)
        source = source_from_options(opts, owner, limits["start_url"])
        if source is not None:
            # A follow-up crawls and judges as its source did but for what the command line says (a
            # validation takes nothing from it): a delta then reuses its pages, and keeps its reach.
            limits = self._limits(opts, base=source.settings_copy())
            if opts["mode"] == Audit.Mode.VALIDATE:
                _same_crawl(limits, source)
        access = access_from_options(opts, limits["start_url"])
        if opts["enqueue"]:
            # call_command skips the system checks; the cluster's timing must be
            # right before it is handed the audit, however the command was run.
            self.check(tags=[CLUSTER_CHECKS])
            if first_delta(opts, source):
                self.stderr.write("Nothing to start a delta from: no earlier completed audit of this site; "
                                  "this one crawls it in full.")
            # One transaction: the start is enqueued on commit, with the baseline already set.
            with transaction.atomic(), refused_as_command_error():
                audit = create_audit(owner, enforce_quota=False, trigger=Audit.Trigger.COMMAND, **limits)
                apply_mode(audit, opts, source)
                if access:
                    save_access(audit.site, access)
                if compare_to:
                    self._set_baseline(audit, compare_to, baseline, self.stderr)
            self.stdout.write(str(audit.pk))
            return
        console = self.stderr if opts.get("out") == "-" else self.stdout
        with transaction.atomic(), refused_as_command_error():  # access the site cannot take leaves no audit behind
            audit = new_audit(owner, trigger=Audit.Trigger.COMMAND, **limits)
            apply_mode(audit, opts, source)
            if access:
                save_access(audit.site, access)
            # Last: a run that cannot write its report leaves no audit (execute() removed any earlier one).
            out = self._open_out(opts.get("out"))
        self.created = audit
        console.write(f"Audit {audit.pk}: crawling {audit.start_url}" + (
            f" ({audit.get_mode_display().lower()}, from audit {source.pk})" if source else ""))
        if first_delta(opts, source):
            console.write("Nothing to start a delta from: no earlier completed audit of this site, so this "
                          "one crawls it in full (the next delta starts from it).")
        if compare_to:
            self._set_baseline(audit, compare_to, baseline, console)
        report = Report(out, audit.mode)
        interrupts = Interrupts()
        # Our handlers until the summary is printed: a signal after the crawl must not cut it short.
        with interrupts.handled():
            try:
                try:
                    with interrupts.crawling():
                        report.header()  # in here: a report it cannot write fails the audit, as the crawl's
                        code = self._crawl(audit, report, fail_on, fail_on_new, bool(compare_to), console,
                                           include_ignored=include_ignored, allow_unknown=opts["allow_unknown"])
                except KeyboardInterrupt:
                    code = self._interrupted(audit)
                except Exception as exc:
                    # The inline steps have no task wrapper to record this (a bug, the database
                    # gone): the audit failed, so exit 3, never the 1 that tells CI issues were found.
                    code = self._interrupted(audit) if interrupts.seen else self._stopped(audit, exc)
                audit.refresh_from_db()
                report.summary(audit, code, compared=bool(compare_to), include_ignored=include_ignored,
                               unknown_gated=self.unsettled)
            finally:
                # Lines are flushed a batch at a time: whatever ends the run, none stays in the buffer.
                if out is not None:
                    out.flush()
                if out not in (None, sys.stdout):
                    out.close()
            self._print_summary(console, audit, code, compared=bool(compare_to), include_ignored=include_ignored)
            if audit.error_code and console is not self.stderr:  # a CI log's error stream names why, too
                self.stderr.write(f"error: audit {audit.pk} {audit.status}: {audit.error_code}: "
                                  f"{audit.error_detail}")
        if interrupts.ignored:  # a person pressing Ctrl-C again learns why the run went on
            self.stderr.write(f"Ignored {interrupts.ignored} interrupt(s) that came while the run was winding down.")
        if code:
            raise SystemExit(code)

    # --- running --------------------------------------------------------------

    def _crawl(self, audit: Audit, report: Report, fail_on: str | None, fail_on_new: str | None,
               compared: bool, console, *, include_ignored: bool = False, allow_unknown: bool = False) -> int:
        def finalize_and_report(audit_id: int) -> None:
            # Cross-page issues are found at the end; stream the ones finalize added.
            before = Issue.objects.filter(audit_id=audit_id).aggregate(n=Max("id"))["n"] or 0
            warned = Issue.objects.filter(audit_id=audit_id, code=ESCALATED_CODE, severity=Severity.WARNING)
            warned = list(warned.values_list("id", flat=True))
            run_finalize(audit_id)
            issues = Issue.objects.filter(audit_id=audit_id)
            report.issues_of(issues.filter(id__gt=before))
            # Written again as finalize left them (severity raised, ignored by the site's
            # triage): the last record of an issue holds.
            raised = list(issues.filter(id__in=warned).exclude(severity=Severity.WARNING).values_list("id", flat=True))
            report.issues_of(issues.filter(id__in=raised), escalated=True)
            earlier = issues.filter(id__lte=before).exclude(id__in=raised)
            report.issues_of(earlier.filter(review=Issue.Review.IGNORED))
            # No sub-batch carried the issues that name no page: the start's site-wide ones, blocked_by_robots.
            report.issues_of(earlier.filter(page__isnull=True).exclude(review=Issue.Review.IGNORED))

        def waiting(seconds: float) -> None:
            # Otherwise a run that waits out a Retry-After looks hung.
            console.write(f"Waiting {seconds:.0f} s: the site asked us to come back later (Retry-After)")

        run_audit_inline(audit.pk, on_batch=report.batch, finalize=finalize_and_report, sleep=self.sleep,
                         on_wait=waiting)
        audit.refresh_from_db()
        if audit.is_active:
            # The steps ran out with the audit unfinished: a chunk gave up on the database, or lost its
            # lease to a cluster's worker. This run is over, and says so, rather than leave it running.
            audit.fail(Audit.ErrorCode.DB_UNAVAILABLE, "The command's crawl stopped before the audit was finished "
                       "(the database was unavailable, or another worker took the audit over).")
            audit.refresh_from_db()
        if audit.status != Audit.Status.COMPLETED:
            return FAILED
        if compared:
            report.changes(audit, include_ignored=include_ignored)
        report.validation(audit)
        gated = audit.issues.all() if include_ignored else audit.issues.exclude(review=Issue.Review.IGNORED)
        failed = bool(fail_on) and gated.filter(severity__in=at_or_above(fail_on)).exists()
        # Issue.change is "new" only when finalize had a baseline: no baseline, nothing new.
        failed = failed or (bool(fail_on_new) and gated.filter(
            change=Issue.Change.NEW, severity__in=at_or_above(fail_on_new)).exists())
        if audit.mode == Audit.Mode.VALIDATE and fail_on and not allow_unknown:
            # An issue whose re-check could not run is not shown fixed: passing it would pass a validation
            # that re-checked nothing (the site now redirecting or refusing every URL it carried).
            self.unsettled = validation.unsettled(audit, at_or_above(fail_on))
            failed = failed or self.unsettled > 0
        return 1 if failed else 0

    def _interrupted(self, audit: Audit) -> int:
        """Ctrl-C or SIGTERM: the audit cancelled, what was crawled kept; exit code 130."""
        _drop_interrupted_connection()
        audit.refresh_from_db()
        audit.cancel("Interrupted from the command line.")
        return 130

    def _stopped(self, audit: Audit, exc: Exception) -> int:
        """Record an error no step handled as the audit's failure, with its traceback on stderr; exit code 3."""
        log.error("audit %s stopped", audit.pk, exc_info=exc)
        try:  # the atomic blocks it left have rolled back: the connection is idle, or broken and fails here
            audit.fail(Audit.ErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        except DatabaseError:
            raise CommandError(f"Audit {audit.pk} stopped and could not be marked failed: "
                               f"{type(exc).__name__}: {exc}", returncode=FAILED) from exc
        return FAILED

    def _set_baseline(self, audit: Audit, compare_to: str, baseline: Audit | None, console) -> None:
        """Pin the audit finalize's diff compares with (audits.diff.baseline_for reads it)."""
        if compare_to == PREVIOUS:
            baseline = audit.previous_completed()
            if baseline is None:
                console.write("Nothing to compare with: no earlier completed audit of this site "
                              "(no change records; no issue counts as new).")
                return
        audit.compare_with(baseline)
        console.write(f"Comparing with audit {baseline.pk}")

    # --- input ------------------------------------------------------------------

    def _limits(self, opts, base: dict | None = None) -> dict:
        """The audit's fields, validated by the new-audit form, whose rules and bounds they share.

        A setting the command line does not give is ``base``'s (a delta's source's), else the form's default.
        """
        base = {**CRAWL_DEFAULTS, **(base or {})}

        def given(option: str, field: str):
            return opts[option] if opts[option] is not None else base[field]

        def patterns(option: str, field: str) -> str:
            return "\n".join(opts[option]) if opts[option] is not None else base[field]

        form = AuditForm({
            "start_url": opts["url"], "max_pages": given("max_pages", "max_pages"),
            "max_depth": given("max_depth", "max_depth"), "concurrency": given("concurrency", "concurrency"),
            "rate": given("rate", "rate"), "include_patterns": patterns("include", "include_patterns"),
            "exclude_patterns": patterns("exclude", "exclude_patterns"),
            "user_agent": given("user_agent", "user_agent"),
            "respect_robots": base["respect_robots"] and not opts["ignore_robots"],
            "check_external": base["check_external"] and not opts["no_external"],
            "render": given("render", "render"),
            **(base["thresholds"] or {}), **_thresholds(opts["threshold"]),
        }, allow_private=opts["allow_private"])
        if form.is_valid():
            return form.audit_fields()
        lines = [f"{OPTION_NAMES.get(field, field)}: {message}"
                 for field, messages in form.errors.items() for message in messages]
        if form.has_error("start_url", code="ssrf"):
            lines.append("(use --allow-private for your own local or staging sites)")
        raise CommandError("Cannot audit with these options:\n  " + "\n  ".join(lines), returncode=2)

    def _baseline(self, compare_to: str | None, owner, start_url: str) -> Audit | None:
        """The audit --compare-to names, checked; None for 'previous' (resolved once the audit exists)."""
        if compare_to in (None, PREVIOUS):
            return None
        # Issues are matched by a key that includes their URL: another site's would all differ.
        return earlier_audit("--compare-to", compare_to, owner, start_url, "compared with")

    def _owner(self, username: str | None):
        user = command_owner(username)
        if user is None:
            raise CommandError(f"No user named {username!r}", returncode=2)
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

    def _print_summary(self, console, audit: Audit, code: int, *, compared: bool = False,
                       include_ignored: bool = False) -> None:
        pages = Page.objects.filter(audit=audit, kind=Page.Kind.PAGE)
        classes = Counter(p.status_class for p in pages.only("status_code", "fetch_error", "redirect_count").iterator())
        console.write("")
        console.write(f"Audit {audit.pk} {audit.get_status_display().lower()}: {audit.pages_crawled} pages")
        if audit.error_code:
            console.write(f"  stopped: {audit.get_error_code_display()} — {audit.error_detail}")
        console.write("  pages by status: " + (", ".join(f"{k}: {v}" for k, v in sorted(classes.items())) or "none"))
        counts = severity_counts(audit, include_ignored=include_ignored)
        ignored = audit.issues.filter(review=Issue.Review.IGNORED).count()
        note = "" if not ignored else f" ({ignored} ignored {'included' if include_ignored else 'not counted'})"
        console.write(f"  issues: {counts['critical']} critical, {counts['warning']} warnings, "
                      f"{counts['notice']} notices{note}")
        verdicts = validation.counts(audit)
        if verdicts is not None:
            console.write(f"  validation of audit {audit.source_id}: " + ", ".join(
                f"{verdicts[result]} {validation.RESULT_LABELS[result].lower()}" for result in validation.RESULTS))
            shown = 0
            for verdict in validation.checklist(audit, limit=CHECKLIST_LINES):
                if verdict.result != "fixed":
                    shown += 1
                    console.write(f"    [{verdict.result}] {verdict.code} on {verdict.url}"
                                  + (f" -> {verdict.target_url}" if verdict.target_url else ""))
            if (more := verdicts["still"] + verdicts["unknown"] - shown) > 0:
                console.write(f"    ... and {more} more still there or unknown (--out writes every verdict)")
            if self.unsettled:
                console.write(f"  {self.unsettled} unknown at the --fail-on level fail the gate: their re-check could "
                              "not run (--allow-unknown passes them)")
        elif audit.baseline_id and audit.change_counts:
            totals = change_totals(audit, include_ignored)
            console.write(f"  changes since audit {audit.baseline_id}: "
                          + ", ".join(f"{totals[change]} {change}" for change in CHANGES))
        elif compared and audit.status == Audit.Status.COMPLETED:
            console.write("  changes: nothing to compare with (no earlier completed audit of this site)")
        slow = pages.filter(fetch_error="").order_by("-ttfb_ms")[:5]
        if slow:
            console.write("  slowest pages:")
            for page in slow:
                console.write(f"    {page.ttfb_ms:>6} ms  {page.url}")
        broken = Issue.objects.filter(audit=audit, code__in=["broken_link_internal", "broken_link_external"])
        if not include_ignored:
            broken = broken.exclude(review=Issue.Review.IGNORED)
        total = broken.count()
        if total:
            console.write(f"  broken links ({total}):")
            for issue in broken.order_by("id")[:10]:
                console.write(f"    {issue.url} -> {issue.target_url}: {issue.message}")
        console.write(f"  exit code {code}")


# A setting's value when neither the command line nor a delta's source gives one: the form's defaults.
CRAWL_DEFAULTS = {
    "max_pages": 500, "max_depth": 10, "concurrency": 8, "rate": None, "include_patterns": "",
    "exclude_patterns": "", "user_agent": "", "respect_robots": True, "check_external": True, "render": "none",
    "thresholds": {},
}

# How the form's fields are spelled on the command line, for its error messages.
OPTION_NAMES = {
    "start_url": "url", "max_pages": "--max-pages", "max_depth": "--max-depth", "concurrency": "--concurrency",
    "rate": "--rate", "include_patterns": "--include", "exclude_patterns": "--exclude",
    "user_agent": "--user-agent", "__all__": "options",
    **{t.name: f"--threshold {t.name}" for t in THRESHOLDS},
}


# The crawl's settings that a validation takes from its source, as the command line spells them.
VALIDATION_TAKES = {
    "max_depth": "--max-depth", "concurrency": "--concurrency", "rate": "--rate", "include_patterns": "--include",
    "exclude_patterns": "--exclude", "user_agent": "--user-agent", "respect_robots": "--ignore-robots",
    "check_external": "--no-external", "render": "--render",
}


def _same_crawl(limits: dict, source: Audit) -> None:
    """A validation crawls as its source did: a setting given otherwise would be dropped unsaid, so it exits 2.
    (Its page budget is its own: it fetches what carried the source's issues.)"""
    for field, flag in VALIDATION_TAKES.items():
        if limits[field] != getattr(source, field):
            raise CommandError(f"{flag} cannot change a validation's crawl: it crawls as audit {source.pk} did "
                               f"({field.replace('_', ' ')} {getattr(source, field)!r})", returncode=2)


def _thresholds(given: list[str]) -> dict[str, str]:
    """--threshold NAME=VALUE options as form data; the form checks the values and their bounds."""
    data = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in BY_NAME:
            raise CommandError(f"--threshold {item!r}: expected NAME=VALUE with NAME one of "
                               f"{', '.join(BY_NAME)}", returncode=2)
        data[name.strip()] = value.strip()
    return data

# Issues the console lists of a validation's checklist (the report has them all).
CHECKLIST_LINES = 40
