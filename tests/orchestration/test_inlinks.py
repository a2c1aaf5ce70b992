"""Link edges by target: built once after the crawl, rebuilt after a resume, and found
the same way whether built or not."""

import pytest

from audits import inlinks
from audits.models import Audit, Inlink
from crawler.urls import url_hash
from tests.dashboard.factories import SITE, make_audit, make_link

pytestmark = pytest.mark.django_db


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

    assert inlinks.build(audit)

    assert Audit.objects.get(pk=audit.pk).links_indexed
    assert linked(audit, f"{SITE}/gone") == scanned == [(f"{SITE}/", "first"), (f"{SITE}/about", "second")]
    assert Inlink.objects.filter(audit=audit).count() == 3
    assert not Inlink.objects.filter(audit=other).exists()


def test_a_second_build_does_nothing(owner):
    audit = make_audit(owner)
    make_link(audit, f"{SITE}/", f"{SITE}/gone")
    assert inlinks.build(audit)
    assert not inlinks.build(Audit.objects.get(pk=audit.pk))
    assert Inlink.objects.filter(audit=audit).count() == 1


def test_a_resumed_audit_scans_until_its_next_finalize_rebuilds_the_index(owner):
    audit = make_audit(owner)
    make_link(audit, f"{SITE}/", f"{SITE}/gone", anchor="before")
    assert inlinks.build(audit)
    Audit.objects.filter(pk=audit.pk).update(status=Audit.Status.FAILED)
    audit.refresh_from_db()
    assert audit.reopen_for_resume()
    assert not audit.links_indexed

    make_link(audit, f"{SITE}/new", f"{SITE}/gone", anchor="after")  # the resumed crawl's edge
    assert [a for _, a in linked(audit, f"{SITE}/gone")] == ["before", "after"]  # seen before the rebuild

    assert inlinks.build(audit)
    assert [a for _, a in linked(audit, f"{SITE}/gone")] == ["before", "after"]
    assert Inlink.objects.filter(audit=audit).count() == 2  # the earlier rows replaced, not added to


def test_deleting_an_audit_deletes_its_inlinks(owner):
    audit, other = make_audit(owner), make_audit(owner)
    for a in (audit, other):
        make_link(a, f"{SITE}/", f"{SITE}/gone")
        assert inlinks.build(a)
    audit.delete()
    assert not Inlink.objects.filter(audit_id=audit.pk).exists()
    assert Inlink.objects.filter(audit=other).count() == 1
