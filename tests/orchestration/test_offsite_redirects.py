"""A redirect off the audited site: followed only when the audit checks other sites at all.

With "check external links" off the person asked that no other site be
contacted, so a link that redirects elsewhere (an /out?url= tracker, a moved
page) is stored as the redirect it is, and the other site sees nothing.
"""

import pytest
from pytest_httpserver import HTTPServer

from audits.inline import run_audit_inline
from tests.factories import make_audit

pytestmark = pytest.mark.django_db


@pytest.fixture
def elsewhere():
    server = HTTPServer(host="127.0.0.1")
    server.start()
    server.expect_request("/landing").respond_with_data("<title>Elsewhere</title><p>hi</p>",
                                                        content_type="text/html")
    yield server
    server.clear()
    if server.is_running():
        server.stop()


def audited(owner, httpserver, elsewhere, *, check_external: bool):
    """A site whose /go redirects to ``elsewhere``, audited to the end."""
    httpserver.expect_request("/robots.txt").respond_with_data("", status=404)
    httpserver.expect_request("/").respond_with_data("<a href='/go'>go</a><a href='/about'>about</a>",
                                                     content_type="text/html")
    httpserver.expect_request("/about").respond_with_data("<p>about</p>", content_type="text/html")
    httpserver.expect_request("/go").respond_with_data(
        "", status=302, headers={"Location": elsewhere.url_for("/landing")})
    audit = make_audit(owner, start_url=httpserver.url_for("/"), allow_private=True, check_external=check_external)
    run_audit_inline(audit.pk)
    audit.refresh_from_db()
    assert audit.status == "completed", audit.error_detail
    return audit


def test_with_external_links_unchecked_a_redirect_off_the_site_is_stored_and_not_followed(
        owner, fast_settings, httpserver, elsewhere):
    audit = audited(owner, httpserver, elsewhere, check_external=False)
    assert elsewhere.log == []  # the other site saw no request
    go = audit.pages.get(url=httpserver.url_for("/go"))
    assert (go.status_code, go.final_url) == (302, elsewhere.url_for("/landing"))
    # Its one edge still says where it points, for the page screen and links.csv.
    assert list(audit.links.filter(source_url=go.url).values_list("tag", "target_url")) == [
        ("redirect", elsewhere.url_for("/landing"))]
    assert audit.pages.filter(url=httpserver.url_for("/about"), status_code=200).exists()


def test_with_external_links_checked_the_redirect_is_followed_to_check_where_it_lands(
        owner, fast_settings, httpserver, elsewhere):
    audited(owner, httpserver, elsewhere, check_external=True)
    assert [request.path for request, _ in elsewhere.log] == ["/landing"]
