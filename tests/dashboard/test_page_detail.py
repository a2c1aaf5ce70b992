"""A page's own view: its redirect chain, its issues, its outlinks and who links to it."""

import pytest
from django.urls import reverse

from audits.inlinks import build as build_inlinks
from tests.factories import SITE, make_finished_audit, make_link, make_page

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
