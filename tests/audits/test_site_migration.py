"""The migration that gives existing audits their sites and existing issues their URL hashes."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from crawler.urls import url_hash

BEFORE = [("audits", "0001_initial")]
AFTER = [("audits", "0004_audit_site_required")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_existing_audits_get_one_site_per_owner_and_normalised_start_url():
    old = migrate(BEFORE)
    try:
        User, Audit = old.get_model("auth", "User"), old.get_model("audits", "Audit")
        Page, Issue = old.get_model("audits", "Page"), old.get_model("audits", "Issue")
        ann, bob = User.objects.create(username="ann"), User.objects.create(username="bob")
        first = Audit.objects.create(owner=ann, start_url="https://shop.example/", max_pages=10)
        again = Audit.objects.create(owner=ann, start_url="HTTPS://Shop.Example:443/", max_pages=20)
        other = Audit.objects.create(owner=ann, start_url="https://other.example/")
        bobs = Audit.objects.create(owner=bob, start_url="https://shop.example/")
        page = Page.objects.create(audit=first, url="https://shop.example/a", url_hash=url_hash("https://shop.example/a"))
        on_page = Issue.objects.create(audit=first, page=page, url=page.url, code="h1_missing", severity="warning",
                                       message="m", key="k1")
        no_page = Issue.objects.create(audit=first, url="https://shop.example/blocked", code="blocked_by_robots",
                                       severity="notice", message="m", key="k2")

        new = migrate(AFTER)
        Audit, Site, Issue = new.get_model("audits", "Audit"), new.get_model("audits", "Site"), new.get_model(
            "audits", "Issue")
        site_of = dict(Audit.objects.values_list("pk", "site_id"))
        assert site_of[first.pk] == site_of[again.pk]
        assert len({site_of[first.pk], site_of[other.pk], site_of[bobs.pk]}) == 3
        shop = Site.objects.get(pk=site_of[first.pk])
        assert shop.start_url == "https://shop.example/" and shop.owner_id == ann.pk
        assert shop.max_pages == 20  # the newest audit's settings
        assert Issue.objects.get(pk=on_page.pk).url_hash == page.url_hash
        assert Issue.objects.get(pk=no_page.pk).url_hash == url_hash("https://shop.example/blocked")
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
