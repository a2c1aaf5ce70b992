"""A page's own view: its redirect chain, its issues, its outlinks and who links to it."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from audits.inlinks import build as build_inlinks
from audits.models import Audit, Page
from audits.page_views import LIVE_INLINKS_MAX_PAGES
from tests.factories import SITE, make_audit, make_finished_audit, make_link, make_page

pytestmark = pytest.mark.django_db


def detail(client, audit, url):
    page = audit.pages.get(url=url)
    return client.get(reverse("page-detail", args=[audit.pk, page.pk])).content.decode()


@pytest.mark.parametrize("indexed", [True, False], ids=["inlinks-built", "edges-scanned"])
def test_a_broken_page_shows_where_the_links_to_it_are(owner_client, owner, indexed):
    audit = make_finished_audit(owner)
    if indexed:  # as finalize leaves it; a failed or cancelled audit's edges are scanned instead
        assert build_inlinks(audit, while_status=(audit.status,))
    body = detail(owner_client, audit, f"{SITE}/gone")
    inlinks = body.split('id="inlinks"')[1].split("</section>")[0]
    home, about = audit.pages.get(url=f"{SITE}/"), audit.pages.get(url=f"{SITE}/about")
    assert reverse("page-detail", args=[audit.pk, home.pk]) in inlinks
    assert reverse("page-detail", args=[audit.pk, about.pk]) in inlinks
    assert "Gone away" in inlinks and "Old link" in inlinks
    assert "The page answered 404" in body.split('id="page-issues"')[1]
    assert ">404<" in body.replace(" ", "")


def test_a_page_lists_its_outlinks_with_their_status(owner_client, owner):
    audit = make_finished_audit(owner)
    body = detail(owner_client, audit, f"{SITE}/")
    outlinks = body.split('id="outlinks"')[1].split("</section>")[0]
    gone = audit.pages.get(url=f"{SITE}/gone")
    assert reverse("page-detail", args=[audit.pk, gone.pk]) in outlinks and "404" in outlinks
    assert "dns_failure" in outlinks and "external" in outlinks
    issues = body.split('id="page-issues"')[1].split("</section>")[0]
    assert "Broken internal link" in issues and f"{SITE}/gone" in issues


def test_a_redirected_url_shows_its_chain(owner_client, owner):
    audit = make_finished_audit(owner)
    body = detail(owner_client, audit, f"{SITE}/old")
    chain = body.split('id="redirect-chain"')[1].split("</section>")[0]
    assert "301" in chain and f"{SITE}/old" in chain and f"{SITE}/about" in chain


def test_a_redirected_url_shows_the_status_it_answered_and_its_target_apart(owner_client, owner):
    audit = make_finished_audit(owner)
    body = detail(owner_client, audit, f"{SITE}/old")
    status = body.split('id="page-status">')[1].split("</dd>")[0]
    assert status.startswith("301") and "200" not in status
    target = body.split('id="redirect-target">')[1].split("</dd>")[0]
    about = audit.pages.get(url=f"{SITE}/about")
    assert reverse("page-detail", args=[audit.pk, about.pk]) in target and "answered 200" in target
    assert "it redirects" in body.split('id="page-indexable">')[1].split("</dd>")[0]


def _linked_target(owner, status):
    """An audit in ``status`` whose /target has five links and one image reference, its stored count unset."""
    ended = status in Audit.ENDED
    audit = make_audit(owner, status=status, phase=Audit.Phase.CRAWLING, origin=SITE,
                       started_at=timezone.now(), finished_at=timezone.now() if ended else None)
    target = make_page(audit, f"{SITE}/target", title="Target")
    for n in range(5):
        source = make_page(audit, f"{SITE}/source/{n}")
        make_link(audit, source.url, target.url, anchor=f"to target {n}")
    make_link(audit, f"{SITE}/source/0", target.url, tag="img")
    return audit, target


def _table_inlinks(client, audit) -> str:
    body = client.get(reverse("page-list", args=[audit.pk]), {"q": "/target"}).content.decode()
    return re.search(r'<td class="inlinks">(\d+)</td>', body).group(1)


@pytest.mark.parametrize("status", [Audit.Status.RUNNING, Audit.Status.CANCELLED, Audit.Status.FAILED])
def test_the_pages_table_counts_the_inlinks_the_detail_lists_before_they_are_indexed(owner_client, owner, status):
    audit, target = _linked_target(owner, status)
    detail_body = detail(owner_client, audit, target.url)
    assert 'Linked from (<span id="inlink-count">5</span>)' in detail_body
    assert "Also referenced by (1)" in detail_body  # the image: a reference, not a link
    assert _table_inlinks(owner_client, audit) == "5"


def test_the_pages_table_of_a_big_running_audit_reads_no_link_edges(owner_client, owner):
    audit, _ = _linked_target(owner, Audit.Status.RUNNING)
    Audit.objects.filter(pk=audit.pk).update(pages_crawled=LIVE_INLINKS_MAX_PAGES + 1)
    with CaptureQueriesContext(connection) as ctx:
        body = owner_client.get(reverse("page-list", args=[audit.pk]), {"q": "/target"}).content.decode()
    # Counting them would scan every edge of the audit on each click: shown once the crawl ends.
    assert not [q for q in ctx.captured_queries if "audits_linkedge" in q["sql"]]
    assert '<td class="inlinks"><span class="muted" title="Counted when the crawl ends">—</span></td>' in body


@pytest.mark.parametrize("status", [Audit.Status.CANCELLED, Audit.Status.FAILED])
def test_indexing_the_links_of_an_audit_that_stopped_stores_its_inlink_counts(owner_client, owner, status):
    audit, target = _linked_target(owner, status)
    assert build_inlinks(audit, while_status=tuple(Audit.ENDED))
    assert Page.objects.get(pk=target.pk).inlinks == 5
    assert _table_inlinks(owner_client, audit) == "5"
    # Stored, so the column sorts: the target first, descending.
    body = owner_client.get(reverse("page-list", args=[audit.pk]), {"sort": "-inlinks"}).content.decode()
    assert body.index(f"{SITE}/target") < body.index(f"{SITE}/source/0")


def test_the_page_view_uses_a_fixed_number_of_queries(owner_client, owner, django_assert_max_num_queries):
    audit = make_finished_audit(owner)
    home = audit.pages.get(url=f"{SITE}/")
    for n in range(40):
        target = make_page(audit, f"{SITE}/many/{n}")
        make_link(audit, home.url, target.url, anchor=f"Item {n}")
        make_link(audit, target.url, home.url, anchor="Home")
    with django_assert_max_num_queries(8):
        response = owner_client.get(reverse("page-detail", args=[audit.pk, home.pk]))
    assert response.content.decode().count("Item ") >= 40


def test_an_hreflang_alternate_reads_as_one_in_both_link_lists(owner_client, owner):
    audit = make_finished_audit(owner)
    home, about = f"{SITE}/", f"{SITE}/about"
    make_link(audit, home, about, anchor="fr", tag="hreflang")
    outlinks = detail(owner_client, audit, home).split('id="outlinks"')[1].split("</section>")[0]
    assert "“fr”" in outlinks and "hreflang alternate" in outlinks
    inlinks = detail(owner_client, audit, about).split('id="inlinks"')[1].split("</section>")[0]
    assert "hreflang alternate" in inlinks and "&lt;hreflang&gt;" not in inlinks


def test_an_outlink_to_a_redirect_shows_the_status_it_answered(owner_client, owner):
    audit = make_finished_audit(owner)
    make_link(audit, f"{SITE}/", f"{SITE}/old", anchor="Old address")
    outlinks = detail(owner_client, audit, f"{SITE}/").split('id="outlinks"')[1].split("</section>")[0]
    old = audit.pages.get(url=f"{SITE}/old")
    row = next(line for line in outlinks.split("<li") if reverse("page-detail", args=[audit.pk, old.pk]) in line)
    # /old answered 301; the 200 is /about's, which it redirected to.
    assert '<span class="code code-3xx">301</span>' in row and ">200<" not in row
    assert "→" in row and "/about" in row


def test_a_reused_page_whose_source_audit_was_deleted_names_it_without_a_dead_link(owner_client, owner):
    source = make_finished_audit(owner)
    audit = make_finished_audit(owner)
    page = audit.pages.get(url=f"{SITE}/")
    Page.objects.filter(pk=page.pk).update(unchanged_since=source.pk)
    assert f'<a href="/audits/{source.pk}/">{source.pk}</a>' in detail(owner_client, audit, page.url)
    Audit.objects.filter(pk=source.pk).delete()
    body = detail(owner_client, audit, page.url)
    assert f"since audit {source.pk} <span class=\"muted\">(deleted)</span>" in body
    assert f'href="/audits/{source.pk}/"' not in body
