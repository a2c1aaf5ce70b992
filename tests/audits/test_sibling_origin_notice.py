"""A crawl of a few pages whose links go to the same site under another host or scheme says so once,
instead of ending as a silent one-page audit (the audit is scoped to one origin)."""

import pytest

from audits.finalize import run_finalize
from audits.models import Audit, Page
from audits.notices import sibling_origins
from tests.factories import SITE, make_audit, make_link, make_page

pytestmark = pytest.mark.django_db

WWW = "https://www.shop.example"


def finalizing(owner, *, pages: int, sibling_links: int, own_links: int) -> Audit:
    audit = make_audit(owner, status=Audit.Status.FINALIZING, phase=Audit.Phase.FINALIZING, origin=SITE,
                       pages_crawled=pages)
    make_page(audit, f"{SITE}/")
    for n in range(1, pages):
        make_page(audit, f"{SITE}/p/{n}")
    for n in range(sibling_links):
        make_page(audit, f"{WWW}/item/{n}", kind=Page.Kind.EXTERNAL)
        make_link(audit, f"{SITE}/", f"{WWW}/item/{n}", internal=False)
    for n in range(own_links):
        make_link(audit, f"{SITE}/", f"{SITE}/p/{n}")
    return audit


def test_a_one_page_audit_whose_links_go_to_www_gets_one_notice_naming_it(owner):
    audit = finalizing(owner, pages=1, sibling_links=12, own_links=1)
    assert run_finalize(audit.pk)
    notice = audit.issues.get(code="links_to_sibling_origin")
    assert (notice.severity, notice.page_id, notice.url) == ("notice", None, audit.start_url)
    assert notice.message == (f"12 links on the crawled pages point at {WWW}, against 1 to {SITE}: this audit "
                              f"treats {WWW} as another site and did not crawl it. To audit those pages, "
                              f"start from {WWW}/.")


@pytest.mark.parametrize(("pages", "sibling_links", "own_links"), [
    (30, 12, 1),  # the crawl found its way around: a few stray links to www
    (1, 2, 0),  # too few links to say
    (2, 5, 5),  # as many links stay on the site
])
def test_no_notice_when_the_crawl_is_not_stuck_on_one_version(owner, pages, sibling_links, own_links):
    audit = finalizing(owner, pages=pages, sibling_links=sibling_links, own_links=own_links)
    assert run_finalize(audit.pk)
    assert not audit.issues.filter(code="links_to_sibling_origin").exists()


@pytest.mark.parametrize(("origin", "siblings"), [
    ("https://www.shop.example", ["https://shop.example", "http://shop.example", "http://www.shop.example"]),
    ("http://shop.example:8080", ["https://shop.example:8080", "https://www.shop.example:8080",
                                  "http://www.shop.example:8080"]),
    ("", []),
])
def test_the_other_versions_of_a_site_are_its_www_and_scheme_twins(origin, siblings):
    assert sibling_origins(origin) == siblings
