"""The ``audit`` command's JSON Lines report, written as results arrive: one object a line, each with a "type".

A ``report`` record with the schema version first, then ``page`` and ``issue`` records, then ``change`` or
``validation`` records, and a closing ``summary``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os

from django.core.management.base import CommandError

from crawler.render_rules import DIFFERENCE_CODES

from .. import diff, validation
from ..crawl.rows import raw_facts
from ..models import Audit, GoneIssue, Issue
from ..summary import severity_counts

# The report's schema version, which its first record carries. Raised when a record a reader already knows
# changes shape or meaning (a field removed, renamed, or read otherwise); a new record type or field, which a
# reader skips, leaves it.
VERSION = 1
# Issue lines written between two flushes of the report.
FLUSH_EVERY = 2000
# The order change records and counts are written in.
CHANGES = ("new", "fixed", "persisting", "unknown")


def out_in_argv(args: list[str]) -> str | None:
    """The file ``--out`` names in a command line the command's own parser has not read yet, if any."""
    # argparse's own reading (both spellings, the last given wins) of the one option, spelt out as the
    # command's parser requires (Command.create_parser): "--o FILE" is refused there, and FILE no report.
    only_out = argparse.ArgumentParser(add_help=False, exit_on_error=False, allow_abbrev=False)
    only_out.add_argument("--out")
    try:
        return only_out.parse_known_args(args)[0].out
    except argparse.ArgumentError:
        return None  # --out given no value: the command's parser refuses it


def discard_earlier_report(path: str | None) -> None:
    """Remove the report an earlier run left at ``path``, before anything can refuse or end this run.

    A pipeline reads the file after the step whatever its exit code, and would read an earlier
    audit's results as this run's: after a run given ``--out FILE``, FILE is this run's report or
    absent. Only a regular file is an earlier report (``--out /dev/null`` is left alone); through a
    symbolic link, the file it names, which this run's report then replaces. A file whose directory
    forbids removing it is emptied instead, as writing the report would have. A path to this process's
    own output (``/dev/stdout`` redirected to a file) names the file the report goes to, not an earlier one.
    """
    if not path or path == "-":
        return
    target = os.path.realpath(path)
    if not os.path.isfile(target) or _is_own_output(target):
        return
    try:
        os.remove(target)
    except FileNotFoundError:
        pass
    except OSError:
        try:
            open(target, "w").close()  # noqa: SIM115 - emptied, not kept open
        except OSError as exc:
            raise CommandError(f"Cannot remove the earlier report {path}: {exc}", returncode=2) from None


def _is_own_output(path: str) -> bool:
    """Whether ``path`` is the file this process's standard output or error already writes to."""
    found = os.stat(path)
    for fd in (1, 2):
        try:
            if os.path.samestat(found, os.fstat(fd)):
                return True
        except OSError:
            continue  # that stream is closed
    return False


def change_totals(audit: Audit, include_ignored: bool) -> dict:
    """{change: n} since the baseline; the stored counts leave ignored issues out, --include-ignored counts them."""
    return diff.totals(diff.stored_counts(audit, include_ignored=True) if include_ignored else audit.change_counts)


class Report:
    """The JSON Lines report, written as results arrive: one object a line, each with a "type".

    Lines are flushed once per batch (and every FLUSH_EVERY issue lines), not
    per line, so a reader sees each batch as soon as it is stored without a
    write call for every record.
    """

    # "key" is the issue's stable key (audits.diff matches issues across audits by it): the field a reader
    # joins an issue's records on, and this run's on a later run's.
    ISSUE_FIELDS = ("code", "severity", "url", "target_url", "message", "key")
    CHANGE_FIELDS = ("code", "severity", "url", "target_url", "key")

    def __init__(self, out, mode: str = Audit.Mode.FULL):
        self.out = out
        self.delta = mode == Audit.Mode.DELTA

    def _write(self, records) -> None:
        self.out.write("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))

    def header(self) -> None:
        """The first record: the schema version, read before any other record, so a reader knows their shapes."""
        if self.out is None:
            return
        self._write([{"type": "report", "version": VERSION}])
        self.out.flush()

    def batch(self, outcomes, issues, kinds) -> None:
        """A stored sub-batch: a page record per outcome (``kinds``: page, resource or external), then its issues."""
        if self.out is None:
            return
        codes_by_url: dict[str, list[str]] = {}
        for issue in issues:
            codes_by_url.setdefault(issue.url, []).append(issue.code)
        self._write(
            {"type": "page", "kind": kind, "url": outcome.url, "final_url": outcome.result.final_url,
             "status": outcome.result.status, "depth": outcome.depth,
             "title": outcome.facts.title if outcome.facts else None,
             "error": outcome.result.error.value if outcome.result.error else None,
             "issues": codes_by_url.get(outcome.url, []),
             **({"unchanged": outcome.unchanged} if self.delta else {}),
             **(self._rendered(outcome) if outcome.rendered else {})}
            for outcome, kind in zip(outcomes, kinds, strict=True)
        )
        self.issue_values((i.code, i.severity, i.url, i.target_url, i.message, i.key) for i in issues)

    @staticmethod
    def _rendered(outcome) -> dict:
        """A rendered page's record: what its HTML said, and what JavaScript changed."""
        return {"rendered": True, "raw": raw_facts(outcome.raw_facts),
                "differences": [{"code": f.code, "message": f.message} for f in outcome.findings
                                if f.code in DIFFERENCE_CODES]}

    def issues_of(self, chosen, *, escalated: bool = False) -> None:
        self.issue_values(chosen.order_by("id").values_list(*self.ISSUE_FIELDS, "review").iterator(2000),
                          escalated=escalated)

    def issue_values(self, rows, *, escalated: bool = False) -> None:
        """Issue records from (code, severity, url, target_url, message[, key[, review]]) tuples.

        ``escalated``: records of issues written before, whose severity finalize
        raised (they carry ``"escalated": true``). An issue whose review is
        ignored carries ``"ignored": true``.
        """
        if self.out is None:
            return
        self._stream(self._issue_records(rows, escalated))

    @staticmethod
    def _issue_records(rows, escalated: bool):
        for code, severity, url, target, message, *rest in rows:
            record = {"type": "issue", "code": code, "severity": severity, "url": url, "target": target or None,
                      "message": message}
            if rest and rest[0]:
                record["key"] = rest[0]
            if escalated:
                record["escalated"] = True
            if rest[1:] and rest[1] == Issue.Review.IGNORED:
                record["ignored"] = True
            yield record

    def change_values(self, change: str, rows) -> None:
        """Change records from (code, severity, url, target_url[, key]) tuples."""
        if self.out is None:
            return
        self._stream(
            {"type": "change", "change": change, "code": code, "severity": severity, "url": url,
             "target": target or None, **({"key": key[0]} if key else {})}
            for code, severity, url, target, *key in rows
        )

    def changes(self, audit: Audit, *, include_ignored: bool = False) -> None:
        """The diff finalize stored, one record per issue: new, fixed, persisting, then unknown.

        Ignored issues are left out, as from the summary's counts, unless ``include_ignored``.
        """
        if self.out is None:
            return
        issues = Issue.objects.filter(audit=audit)
        if not include_ignored:
            issues = issues.exclude(review=Issue.Review.IGNORED)
        sources = {"new": issues.filter(change=Issue.Change.NEW),
                   "fixed": GoneIssue.objects.filter(audit=audit, change=GoneIssue.Change.FIXED),
                   "persisting": issues.filter(change=Issue.Change.PERSISTING),
                   "unknown": GoneIssue.objects.filter(audit=audit, change=GoneIssue.Change.UNKNOWN)}
        for change in CHANGES:
            # A server-side cursor on PostgreSQL: 100,000 rows never sit in memory at once.
            self.change_values(change, sources[change].order_by("id").values_list(*self.CHANGE_FIELDS)
                               .iterator(FLUSH_EVERY))

    def validation(self, audit: Audit) -> None:
        """A validation's verdict on each issue it re-checked: still there, unknown, then fixed."""
        if self.out is None or validation.counts(audit) is None:
            return
        self._stream(
            {"type": "validation", "result": v.result, "code": v.code, "severity": v.severity, "url": v.url,
             "target": v.target_url or None, "message": v.message, **({"why": v.why} if v.why else {})}
            for v in validation.verdicts(audit)
        )

    def _stream(self, records) -> None:
        records = iter(records)
        while chunk := list(itertools.islice(records, FLUSH_EVERY)):
            self._write(chunk)
            if len(chunk) == FLUSH_EVERY:  # a long run of records (finalize's) shows as it comes
                self.out.flush()
        self.out.flush()

    def summary(self, audit: Audit, code: int, *, compared: bool = False, include_ignored: bool = False,
                unknown_gated: int = 0) -> None:
        """The closing record; with ``compared``, also the baseline and the counts of each change.

        "issues" counts by severity without ignored issues (with them under
        ``include_ignored``); "ignored" says how many were left out or included.

        "changes" is null, not zeros, when there was nothing to compare with (or
        the audit did not complete): zeros would claim nothing changed. A validation's
        "unknown_gated" is how many unknown verdicts the gate counted (``validation.unsettled``).
        """
        if self.out is None:
            return
        record = {
            "type": "summary", "audit_id": audit.pk, "status": audit.status, "error_code": audit.error_code or None,
            "error_detail": audit.error_detail or None, "pages": audit.pages_crawled,
            "issues": severity_counts(audit, include_ignored=include_ignored),
            "ignored": audit.issues.filter(review=Issue.Review.IGNORED).count(),
        }
        if compared:
            totals = change_totals(audit, include_ignored) if audit.baseline_id and audit.change_counts else {}
            record["baseline_id"] = audit.baseline_id if totals else None
            record["changes"] = {change: totals[change] for change in CHANGES} if totals else None
        record["mode"] = audit.mode
        record["thresholds"] = dataclasses.asdict(audit.check_settings())  # what the checks judged by
        record["from_audit_id"] = audit.source_id
        verdicts = validation.counts(audit)
        if verdicts is not None:
            record["validation"] = verdicts
            record["unknown_gated"] = unknown_gated
        record["exit_code"] = code
        self._write([record])
        self.out.flush()
