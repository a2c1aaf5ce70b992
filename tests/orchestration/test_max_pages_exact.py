"""max_pages is exact: a crawl stores exactly that many pages, counting the URLs that redirect.

"Pages crawled" on screen is the audit's page rows (kind page), a URL that
redirected included: it was fetched and has its own row and status. So the
budget counts those rows, the typed start URL that redirects to the site's real
home page among them. (With max_pages=1 such a start stores both rows: the page
it lands on is what the crawl is anchored on, so it cannot be left out.)
"""

from __future__ import annotations

import pytest
from pytest_httpserver import HTTPServer
from werkzeug.wrappers import Request, Response

from audits.inline import run_audit_inline
from audits.models import Audit, Page
from tests.factories import make_audit

pytestmark = pytest.mark.django_db

PAGES = 200


def _body(i: int) -> bytes:
    # Page i links to 2i and 2i+1 (a binary tree), home, and a moved URL per page.
    links = [f"/p/{j}" for j in (2 * i, 2 * i + 1) if j <= PAGES] + ["/home/", f"/moved/{i}"]
    anchors = "".join(f'<a href="{href}">{href}</a> ' for href in links)
    return (f"<!doctype html><html lang=en><head><title>Page {i} of a redirecting site</title></head>"
            f"<body><h1>Page {i}</h1>{anchors}</body></html>").encode()


def _answer(request: Request) -> Response:
    path = request.path
    if path == "/":
        return Response("", status=301, headers={"Location": "/home/"})
    if path.startswith("/moved/"):
        return Response("", status=301, headers={"Location": f"/p/{path[7:]}"})
    if path == "/home/":
        return Response(_body(1), content_type="text/html; charset=utf-8")
    if path.startswith("/p/") and path[3:].isdigit() and 1 < int(path[3:]) <= PAGES:
        return Response(_body(int(path[3:])), content_type="text/html; charset=utf-8")
    return Response("<html><head><title>Not found</title></head></html>", status=404, content_type="text/html")


@pytest.fixture
def redirecting_site():
    with HTTPServer(host="127.0.0.1", port=0) as server:
        server.expect_request("").respond_with_handler(_answer)
        yield f"http://127.0.0.1:{server.port}"


@pytest.mark.parametrize("max_pages", [2, 20, 31])
def test_it_stores_exactly_max_pages_pages_when_the_start_url_redirects(owner, redirecting_site, fast_settings,
                                                                         max_pages):
    audit = make_audit(owner, start_url=f"{redirecting_site}/", allow_private=True, max_pages=max_pages,
                       max_depth=10, check_external=False)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    pages = Page.objects.filter(audit=audit, kind=Page.Kind.PAGE)
    assert pages.count() == max_pages
    assert audit.pages_crawled == max_pages
    # The typed start URL is one of them, with its own answer.
    assert pages.filter(url=f"{redirecting_site}/", redirect_count=1).exists()
