"""Link edges by target: built once after the crawl, rebuilt after a resume, and found
the same way whether built or not."""

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audits import finalize, inlinks
from audits.finalize import run_finalize
from audits.models import Audit, Inlink
from crawler.types import FetchError
from crawler.urls import url_hash
from tests.factories import SITE, make_audit, make_link, make_page

pytestmark = pytest.mark.django_db

ENDED = tuple(Audit.ENDED) + (Audit.Status.QUEUED,)  # the hand-made audits here stay queued


def make_links(audit, *pairs):
    for source, target, anchor in pairs:
        make_link(audit, f"{SITE}{source}", f"{SITE}{target}", anchor=anchor)


def linked(audit, target):
    return [(e.source_url, e.anchor_text) for e in inlinks.edges_to(audit, url_hash(target))]


def test_edges_to_a_target_are_the_same_scanned_or_through_the_built_index(owner):
    audit = make_audit(owner)
    other = make_audit(owner)
    make_link(audit, f"{SITE}/", f"{SITE}/gone", anchor="first")
    make_link(audit, f"{SITE}/a", f"{SITE}/b", anchor="elsewhere")
    make_link(audit, f"{SITE}/about", f"{SITE}/gone", anchor="second")
    make_link(other, f"{SITE}/", f"{SITE}/gone", anchor="other audit")
    scanned = linked(audit, f"{SITE}/gone")

    assert inlinks.build(audit, while_status=ENDED)

    assert Audit.objects.get(pk=audit.pk).links_indexed
    with CaptureQueriesContext(connection) as queries:
        assert linked(audit, f"{SITE}/gone") == scanned == [(f"{SITE}/", "first"), (f"{SITE}/about", "second")]
    assert "audits_inlink" in queries.captured_queries[-1]["sql"]  # the index, not a scan
    assert Inlink.objects.filter(audit=audit).count() == 3
    assert not Inlink.objects.filter(audit=other).exists()


def test_a_second_build_does_nothing(owner):
    audit = make_audit(owner)
    make_link(audit, f"{SITE}/", f"{SITE}/gone")
    assert inlinks.build(audit, while_status=ENDED)
    assert not inlinks.build(Audit.objects.get(pk=audit.pk), while_status=ENDED)
    assert Inlink.objects.filter(audit=audit).count() == 1


def test_a_resumed_audit_scans_until_its_index_is_built_again(owner):
    audit = make_audit(owner)
    make_link(audit, f"{SITE}/", f"{SITE}/gone", anchor="before")
    assert inlinks.build(audit, while_status=ENDED)
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.FAILED)
    audit.refresh_from_db()
    assert audit.reopen_for_resume()
    assert not audit.links_indexed

    make_link(audit, f"{SITE}/new", f"{SITE}/gone", anchor="after")  # the resumed crawl's edge
    assert [a for _, a in linked(audit, f"{SITE}/gone")] == ["before", "after"]  # seen before the rebuild

    assert inlinks.build(audit, while_status=ENDED)
    assert [a for _, a in linked(audit, f"{SITE}/gone")] == ["before", "after"]
    assert Inlink.objects.filter(audit=audit).count() == 2  # the earlier rows replaced, not added to


def test_a_build_is_undone_when_the_audit_was_resumed_and_ended_again_meanwhile(owner):
    audit = make_audit(owner, status=Audit.Status.FAILED, finished_at=timezone.now() - timedelta(minutes=5))
    make_link(audit, f"{SITE}/", f"{SITE}/gone")
    seen = Audit.objects.get(pk=audit.pk)  # what the build task read: failed, edges final
    # Meanwhile: resumed, crawled further and completed again.
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.COMPLETED, finished_at=timezone.now())
    make_link(audit, f"{SITE}/new", f"{SITE}/gone")

    assert not inlinks.build(seen, while_status=tuple(Audit.ENDED))
    assert not Audit.objects.get(pk=audit.pk).links_indexed
    assert not Inlink.objects.filter(audit=audit).exists()


def test_deleting_an_audit_deletes_its_inlinks(owner):
    audit, other = make_audit(owner), make_audit(owner)
    for a in (audit, other):
        make_link(a, f"{SITE}/", f"{SITE}/gone")
        assert inlinks.build(a, while_status=ENDED)
    audit.delete()
    assert not Inlink.objects.filter(audit_id=audit.pk).exists()
    assert Inlink.objects.filter(audit=other).count() == 1


def test_a_build_is_undone_when_the_audit_left_the_statuses_its_edges_are_final_in(owner):
    audit = make_audit(owner, status=Audit.Status.RUNNING)
    make_link(audit, f"{SITE}/", f"{SITE}/gone")
    assert not inlinks.build(audit, while_status=(Audit.Status.FAILED, Audit.Status.CANCELLED))
    assert not Audit.objects.get(pk=audit.pk).links_indexed
    assert not Inlink.objects.filter(audit=audit).exists()


def test_finalize_reads_broken_links_and_inlink_counts_from_the_edges_without_building_the_index(owner):
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    for url, status in ((f"{SITE}/", 200), (f"{SITE}/about", 200), (f"{SITE}/gone", 404)):
        make_page(audit, url, status_code=status)
    make_links(audit, ("/", "/about", "About"), ("/", "/gone", "Gone"), ("/about", "/gone", "Old"))

    with CaptureQueriesContext(connection) as queries:
        assert run_finalize(audit.pk)

    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED and not audit.links_indexed
    assert not any("audits_inlink" in q["sql"] for q in queries.captured_queries)
    broken = audit.issues.filter(code="broken_link_internal")
    assert sorted(broken.values_list("url", "message")) == [
        (f"{SITE}/", "Link “Gone” answered 404"), (f"{SITE}/about", "Link “Old” answered 404")]
    assert dict(audit.pages.values_list("url", "inlinks")) == {f"{SITE}/": 0, f"{SITE}/about": 1, f"{SITE}/gone": 2}
    # Until the build task runs, a page's "linked from" list scans the edges.
    assert [a for _, a in linked(audit, f"{SITE}/gone")] == ["Gone", "Old"]


def test_the_finalize_task_hands_the_index_to_a_task_of_its_own(owner, django_capture_on_commit_callbacks):
    from django_q.models import OrmQ

    from audits import tasks

    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    make_page(audit, f"{SITE}/")
    make_page(audit, f"{SITE}/gone", status_code=404)
    make_links(audit, ("/", "/gone", "Gone"))

    with django_capture_on_commit_callbacks(execute=True):
        tasks.finalize(audit.pk)

    assert [row.name() for row in OrmQ.objects.all()] == [f"audit-{audit.pk}-index-links"]
    assert tasks.index_links(audit.pk) == "indexed"
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED and audit.links_indexed
    assert Inlink.objects.filter(audit=audit).count() == 1
    assert [a for _, a in linked(audit, f"{SITE}/gone")] == ["Gone"]
    assert tasks.index_links(audit.pk) == "nothing to do"  # a second delivery


def test_an_index_task_that_cannot_be_enqueued_leaves_the_audit_complete(owner, monkeypatch, caplog):
    from audits import tasks

    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    make_page(audit, f"{SITE}/")

    def locked(*args, **kwargs):
        raise DatabaseError("database is locked")

    monkeypatch.setattr(tasks, "enqueue", locked)
    tasks.finalize(audit.pk)

    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED and not audit.error_code
    assert "the watchdog will" in caplog.text  # ended_unindexed() finds it
    assert inlinks.ended_unindexed().filter(pk=audit.pk).exists()


def test_a_link_to_a_redirect_is_one_issue_per_source_however_often_it_appears(owner, monkeypatch):
    monkeypatch.setattr(finalize, "BATCH", 1)  # duplicates land in different insert batches
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    make_page(audit, f"{SITE}/")
    make_page(audit, f"{SITE}/old", redirect_count=1, final_url=f"{SITE}/new")
    make_page(audit, f"{SITE}/gone", status_code=404)
    for anchor, tag in (("Old", "a"), ("Old page", "a"), ("", "area")):
        make_link(audit, f"{SITE}/", f"{SITE}/old", anchor=anchor, tag=tag)
    for anchor in ("Gone", "Gone"):  # the same anchor twice: one issue
        make_link(audit, f"{SITE}/", f"{SITE}/gone", anchor=anchor)
    make_link(audit, f"{SITE}/", f"{SITE}/gone", anchor="Also gone")

    assert run_finalize(audit.pk)

    redirects = audit.issues.filter(code="redirect_internal_link")
    assert list(redirects.values_list("url", "target_url")) == [(f"{SITE}/", f"{SITE}/old")]
    broken = audit.issues.filter(code="broken_link_internal").order_by("message")
    assert list(broken.values_list("message", flat=True)) == ["Link “Also gone” answered 404", "Link “Gone” answered 404"]


def test_link_checks_report_each_kind_of_bad_target_once_per_link(owner):
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    ext = "https://other.example"
    make_page(audit, f"{SITE}/")
    make_page(audit, f"{SITE}/gone", status_code=404)
    make_page(audit, f"{SITE}/old", status_code=200, redirect_count=1, final_url=f"{SITE}/new")
    make_page(audit, f"{SITE}/moved-away", status_code=410, redirect_count=1, final_url=f"{SITE}/dead")
    make_page(audit, f"{SITE}/lost", status_code=None, fetch_error="worker_lost")  # our fault, not the site's
    make_page(audit, f"{SITE}/hangs", status_code=None, fetch_error="read_timeout")
    make_page(audit, f"{SITE}/logo.png", status_code=404, kind="resource")
    make_page(audit, f"{ext}/down", status_code=500, kind="external")
    make_page(audit, f"{ext}/private", status_code=403, kind="external")  # unverified, not broken
    make_page(audit, f"{ext}/moved", status_code=200, redirect_count=1, final_url=f"{ext}/new", kind="external")
    for target, tag, anchor in (
        ("/gone", "a", "Gone"), ("/gone", "hreflang", ""), ("/gone", "form", ""), ("/old", "a", "Old"),
        ("/old", "img", ""), ("/moved-away", "a", "Away"), ("/lost", "a", "Lost"), ("/hangs", "a", "Slow"),
        ("/logo.png", "img", ""),
    ):
        make_link(audit, f"{SITE}/", f"{SITE}{target}", anchor=anchor, tag=tag)
    for target in ("/down", "/private", "/moved"):
        make_link(audit, f"{SITE}/", f"{ext}{target}", anchor=target[1:], internal=False)

    assert run_finalize(audit.pk)

    link_codes = ["broken_link_internal", "broken_link_external", "broken_resource", "redirect_internal_link"]
    found = sorted(audit.issues.filter(url=f"{SITE}/", code__in=link_codes)
                   .values_list("code", "target_url", "message"))
    assert found == [
        ("broken_link_external", f"{ext}/down", "External link “down” answered 500"),
        ("broken_link_internal", f"{SITE}/gone", "Link “Gone” answered 404"),
        ("broken_link_internal", f"{SITE}/hangs", "Link “Slow” failed: " + FetchError.READ_TIMEOUT.label),
        ("broken_link_internal", f"{SITE}/moved-away", "Link “Away” answered 410"),
        ("broken_resource", f"{SITE}/logo.png", "img resource answered 404"),
        ("redirect_internal_link", f"{SITE}/old", f"Links to {SITE}/old, which redirects to {SITE}/new"),
    ]
    source = audit.pages.get(url=f"{SITE}/")
    assert set(audit.issues.filter(code__in=link_codes).values_list("page_id", flat=True)) == {source.pk}
    # The broken hreflang alternate is hreflang_targets' to report, as what it is.
    assert audit.issues.filter(code="hreflang_error", target_url=f"{SITE}/gone").count() == 1


@pytest.mark.parametrize("sqlite_before_3_33", [False, True], ids=["update-from", "sqlite-before-3.33"])
def test_finalize_counts_each_pages_inlinks_from_links_alone_and_clears_stale_counts(
        owner, sqlite_before_3_33, monkeypatch):
    if sqlite_before_3_33:
        # Django supports SQLite from 3.31; UPDATE ... FROM came in 3.33. The
        # fallback is plain SQL and Python, so it runs on either database here.
        monkeypatch.setattr(finalize, "has_update_from", lambda: False)
    audit = make_audit(owner, status=Audit.Status.FINALIZING)
    other = make_audit(owner)  # the same URLs in another audit keep their own counts
    make_page(other, f"{SITE}/about", inlinks=4)
    make_page(other, f"{SITE}/lonely", inlinks=9)
    make_link(other, f"{SITE}/", f"{SITE}/lonely")
    home = make_page(audit, f"{SITE}/")
    about = make_page(audit, f"{SITE}/about", inlinks=7)  # a stale count from an earlier finalize
    lonely = make_page(audit, f"{SITE}/lonely", inlinks=3)  # nothing links here any more
    logo = make_page(audit, f"{SITE}/logo.png", kind="resource")
    make_link(audit, f"{SITE}/", f"{SITE}/about")
    make_link(audit, f"{SITE}/blog", f"{SITE}/about")
    make_link(audit, f"{SITE}/about", f"{SITE}/")
    make_link(audit, f"{SITE}/", f"{SITE}/logo.png", tag="img")  # a resource use, not a link
    make_link(audit, f"{SITE}/about", f"{SITE}/logo.png", tag="img")

    with CaptureQueriesContext(connection) as queries:
        assert run_finalize(audit.pk)

    update_from = any("UPDATE audits_page AS p" in q["sql"] for q in queries.captured_queries)
    assert update_from is not sqlite_before_3_33
    counts = {p.url: p.inlinks for p in audit.pages.all()}
    assert counts == {home.url: 1, about.url: 2, lonely.url: 0, logo.url: 0}
    assert {p.url: p.inlinks for p in other.pages.all()} == {about.url: 4, lonely.url: 9}
