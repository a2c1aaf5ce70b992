import threading
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from audits.models import Audit, Page
from tests.factories import make_audit, make_issue, make_page

pytestmark = pytest.mark.django_db


def test_an_audit_starts_once(owner):
    audit = make_audit(owner)
    assert audit.start() is True
    assert audit.status == Audit.Status.RUNNING and audit.started_at is not None
    assert audit.start() is False  # a second delivery of `start` changes nothing


def test_full_happy_path(owner):
    audit = make_audit(owner)
    assert audit.start() and audit.begin_crawl("https://example.com") and audit.begin_finalize()
    assert audit.finish() is True
    assert (audit.status, audit.phase, audit.origin) == ("completed", "done", "https://example.com")
    assert audit.finished_at is not None


def test_a_completed_audit_cannot_fail_or_be_cancelled(owner):
    audit = make_audit(owner)
    audit.start(), audit.begin_finalize(), audit.finish()
    assert audit.fail(Audit.ErrorCode.STALLED, "late watchdog") is False
    assert audit.cancel() is False
    assert audit.status == Audit.Status.COMPLETED and audit.error_code == ""


def test_fail_records_code_detail_and_the_phase_it_died_in(owner):
    audit = make_audit(owner)
    audit.start(), audit.begin_crawl("https://example.com")
    assert audit.fail(Audit.ErrorCode.WORKER_LOST, "chunk 3 killed its worker 3 times") is True
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "worker_lost", "crawling")
    assert "chunk 3" in audit.error_detail


def test_an_unknown_error_code_is_stored_as_unknown(owner):
    audit = make_audit(owner)
    audit.fail("made_up_code", "x")
    assert audit.error_code == Audit.ErrorCode.UNKNOWN


def test_cancel_then_resume_goes_back_to_the_queue_keeping_results(owner):
    audit = make_audit(owner)
    audit.start()
    make_page(audit)
    assert audit.cancel() is True
    assert audit.error_code == "cancelled"
    assert audit.reopen_for_resume() is True
    assert (audit.status, audit.error_code, audit.failed_phase) == ("queued", "", "")
    assert audit.pages.count() == 1
    assert audit.reopen_for_resume() is False  # only failed or cancelled audits resume


def test_beat_adds_counters_atomically(owner):
    audit = make_audit(owner)
    audit.beat(pages_crawled=3, issues_warning=2)
    audit.beat(pages_crawled=4)
    audit.refresh_from_db()
    assert (audit.pages_crawled, audit.issues_warning) == (7, 2)
    assert audit.heartbeat_at is not None


def test_beat_refuses_a_name_that_is_not_a_progress_counter(owner):
    audit = make_audit(owner)
    with pytest.raises(ValueError, match="status"):
        audit.beat(status=1)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.QUEUED


def test_recount_sets_the_counters_from_the_rows(owner):
    audit = make_audit(owner)
    audit.beat(pages_crawled=50, issues_warning=7)  # a retried chunk counted twice
    make_page(audit, "https://example.com/")
    make_page(audit, "https://example.com/gone", status_code=404, fetch_error="")
    make_issue(audit, "http_4xx", "https://example.com/gone")
    audit.recount()
    audit.refresh_from_db()
    assert (audit.pages_crawled, audit.issues_warning) == (2, 0)
    assert audit.issues_critical + audit.issues_notice == 1


def test_the_same_url_is_stored_once_per_audit(owner):
    audit = make_audit(owner)
    make_page(audit, "https://example.com/a")
    with pytest.raises(IntegrityError), transaction.atomic():
        make_page(audit, "https://example.com/a")
    make_page(make_audit(owner), "https://example.com/a")  # another audit may have it
    assert Page.objects.count() == 2


def test_reinserting_an_issue_with_the_same_key_is_ignored(owner):
    audit = make_audit(owner)
    page = make_page(audit)
    first = make_issue(audit, "title_missing", page.url, page=page, key="k1")
    from audits.models import Issue

    Issue.objects.bulk_create([Issue(audit=audit, page=page, url=page.url, code="h1_missing",
                                     severity="warning", message="m", key="k1")], ignore_conflicts=True)
    assert list(audit.issues.values_list("pk", flat=True)) == [first.pk]


def test_max_pages_must_be_positive(owner):
    with pytest.raises(IntegrityError), transaction.atomic():
        make_audit(owner, max_pages=0)


@pytest.mark.django_db(transaction=True)
def test_two_processes_racing_to_fail_an_audit_make_one_transition(owner):
    audit = make_audit(owner)
    audit.start()
    results, barrier = [], threading.Barrier(2)

    def racer(code):
        try:
            barrier.wait()
            results.append(Audit.objects.get(pk=audit.pk).fail(code, "race"))
        finally:
            connection.close()

    threads = [threading.Thread(target=racer, args=(c,)) for c in ("stalled", "worker_lost")]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(results) == [False, True]
    audit.refresh_from_db()
    assert audit.status == "failed" and audit.error_code in ("stalled", "worker_lost")


def test_a_stalled_verdict_loses_to_a_beat_that_came_after_the_watchdog_read_the_audit(owner):
    audit = make_audit(owner, status=Audit.Status.RUNNING, phase=Audit.Phase.CRAWLING,
                       heartbeat_at=timezone.now() - timedelta(minutes=10))
    seen = Audit.objects.get(pk=audit.pk)  # what the watchdog read
    Audit.objects.get(pk=audit.pk).beat()  # a chunk wrote a batch meanwhile
    assert not seen.fail(Audit.ErrorCode.STALLED, "No progress", quiet=True)
    assert Audit.objects.get(pk=audit.pk).status == Audit.Status.RUNNING
    assert Audit.objects.get(pk=audit.pk).fail(Audit.ErrorCode.STALLED, "No progress", quiet=True)
