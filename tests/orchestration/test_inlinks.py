"""Link edges by target: built once after the crawl, rebuilt after a resume, and found
the same way whether built or not."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audits import inlinks
from audits.finalize import run_finalize
from audits.models import Audit, Inlink
from crawler.urls import url_hash
from tests.dashboard.factories import SITE, make_audit, make_link, make_page

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


def test_a_resumed_audit_scans_until_its_next_finalize_rebuilds_the_index(owner):
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


def test_finalize_builds_the_index_and_reads_broken_links_and_inlink_counts_through_it(owner):
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE)
    for url, status in ((f"{SITE}/", 200), (f"{SITE}/about", 200), (f"{SITE}/gone", 404)):
        make_page(audit, url, status_code=status)
    make_links(audit, ("/", "/about", "About"), ("/", "/gone", "Gone"), ("/about", "/gone", "Old"))

    assert run_finalize(audit.pk)

    audit.refresh_from_db()
    assert audit.links_indexed and audit.status == Audit.Status.COMPLETED
    broken = audit.issues.filter(code="broken_link_internal")
    assert sorted(broken.values_list("url", "message")) == [
        (f"{SITE}/", "Link “Gone” answered 404"), (f"{SITE}/about", "Link “Old” answered 404")]
    assert dict(audit.pages.values_list("url", "inlinks")) == {f"{SITE}/": 0, f"{SITE}/about": 1, f"{SITE}/gone": 2}


def test_finalize_counts_each_pages_inlinks_from_links_alone_and_clears_stale_counts(owner):
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

    assert run_finalize(audit.pk)

    counts = {p.url: p.inlinks for p in audit.pages.all()}
    assert counts == {home.url: 1, about.url: 2, lonely.url: 0, logo.url: 0}
    assert {p.url: p.inlinks for p in other.pages.all()} == {about.url: 4, lonely.url: 9}
