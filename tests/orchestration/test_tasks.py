"""The django-q2 entry points: a bug is recorded on the audit; a database outage is retried."""

import pytest
from django.db import OperationalError

from audits import tasks
from tests import driver_errors
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


def test_a_bug_in_a_chunk_fails_the_audit_with_internal_error_and_the_phase(owner, monkeypatch):
    audit = make_audit(owner, start_url="http://127.0.0.1/", status="running", phase="crawling")

    def broken(audit_id, number):
        raise KeyError("missing-column")

    monkeypatch.setattr(tasks, "run_chunk", broken)
    assert tasks.crawl_chunk(audit.pk, 3) == "failed"
    audit.refresh_from_db()
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "internal_error", "crawling")
    assert "KeyError" in audit.error_detail and "missing-column" in audit.error_detail


def test_a_database_outage_is_raised_for_a_retry_not_recorded_as_a_failure(owner, monkeypatch):
    audit = make_audit(owner, start_url="http://127.0.0.1/", status="running", phase="crawling")

    def database_down(audit_id, number):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(tasks, "run_chunk", database_down)
    with pytest.raises(OperationalError):
        tasks.crawl_chunk(audit.pk, 1)
    audit.refresh_from_db()
    assert audit.status == "running" and audit.error_code == ""


@pytest.mark.parametrize("full", [driver_errors.sqlite_full, driver_errors.postgres_disk_full])
def test_a_full_database_fails_the_audit_as_storage_full_instead_of_retrying(owner, monkeypatch, full):
    audit = make_audit(owner, start_url="http://127.0.0.1/", status="running", phase="crawling")

    def disk_full(audit_id, number):
        raise full()

    monkeypatch.setattr(tasks, "run_chunk", disk_full)
    assert tasks.crawl_chunk(audit.pk, 1) == "failed"
    audit.refresh_from_db()
    assert (audit.status, audit.error_code, audit.failed_phase) == ("failed", "storage_full", "crawling")
