"""Migration 0005 moves the target index off the link edges: an audit that ended before
it keeps its "linked from" lists, now through Inlink."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("audits", "0004_link_target_index_covers_tag")]
AFTER = [("audits", "0005_link_edges_indexed_by_target_after_the_crawl")]


@pytest.fixture
def back_to_latest():
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # the schema the other tests expect


@pytest.mark.django_db(transaction=True)
def test_audits_completed_before_the_migration_get_their_inlinks_built(back_to_latest):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    User = apps.get_model("auth", "User")
    Audit, LinkEdge = apps.get_model("audits", "Audit"), apps.get_model("audits", "LinkEdge")
    owner = User.objects.create(username="before-0005")
    done = Audit.objects.create(owner=owner, start_url="https://a.example/", status="completed")
    failed = Audit.objects.create(owner=owner, start_url="https://b.example/", status="failed")
    running = Audit.objects.create(owner=owner, start_url="https://c.example/", status="running")
    for audit in (done, failed, running):
        for source in ("s1", "s2"):
            LinkEdge.objects.create(audit=audit, source_hash=source, source_url=source, target_hash="t",
                                    target_url="t", tag="a")

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(AFTER)
    apps = executor.loader.project_state(AFTER).apps
    Audit, Inlink = apps.get_model("audits", "Audit"), apps.get_model("audits", "Inlink")
    LinkEdge = apps.get_model("audits", "LinkEdge")

    assert Audit.objects.get(pk=done.pk).links_indexed
    assert sorted(Inlink.objects.filter(audit_id=done.pk).values_list("edge_id", flat=True)) == sorted(
        LinkEdge.objects.filter(audit_id=done.pk).values_list("id", flat=True))
    # Failed: its edges are final too (a resume clears the flag; its finalize rebuilds).
    assert Audit.objects.get(pk=failed.pk).links_indexed
    assert Inlink.objects.filter(audit_id=failed.pk).count() == 2
    assert not Audit.objects.get(pk=running.pk).links_indexed
    assert not Inlink.objects.filter(audit_id=running.pk).exists()
