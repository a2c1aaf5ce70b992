"""Cookies set by a fetch's redirects: those of the credentials' own origin go on the next hops and
into the result; another origin's hop gives the crawl nothing."""

from __future__ import annotations

import asyncio

from werkzeug.wrappers import Request, Response

from crawler.credentials import Credentials
from crawler.fetch import Fetcher, FetchPolicy
from crawler.net import AddressGuard
from tests.loopback import Loopback

POLICY = FetchPolicy(connect_timeout=1.0, read_timeout=2.0, deadline=5.0)


class Hops(Loopback):
    """Answers ``/go?to=<url>`` with a redirect there that sets ``sid=<name>``; anything else with 200."""

    def __init__(self, name: str):
        self.name, self.cookies = name, []
        super().__init__(self.handle)

    def handle(self, request: Request) -> Response:
        self.cookies.append(request.headers.get("Cookie", ""))
        if request.path == "/go":
            response = Response("", status=302, headers={"Location": request.args["to"]})
            response.headers.add("Set-Cookie", f"sid={self.name}; Path=/")
            return response
        return Response("ok", content_type="text/html")


def fetch(url: str, credentials: Credentials, *sites: Hops):
    guard = AddressGuard(allowed_targets=[("127.0.0.1", site.server.port) for site in sites])

    async def go():
        async with Fetcher(POLICY, guard, credentials=credentials) as fetcher:
            return await fetcher.fetch(url)

    return asyncio.run(go())


def test_a_redirects_cookie_from_the_sites_origin_goes_on_the_next_hop_and_into_the_result():
    with Hops("renewed") as site:
        credentials = Credentials.for_site(site.url("/"), cookies={"sid": "old"})
        result = fetch(site.url(f"/go?to={site.url('/page/')}"), credentials, site)
        assert result.status == 200
        assert site.cookies == ["sid=old", "sid=renewed"]  # as a browser sends it after the redirect
        assert result.redirect_cookies == ((site.url(f"/go?to={site.url('/page/')}"), ("sid=renewed; Path=/",)),)


def test_a_cookie_set_by_another_origins_redirect_is_neither_sent_nor_kept():
    with Hops("home") as site, Hops("elsewhere") as other:
        credentials = Credentials.for_site(site.url("/"), cookies={"sid": "old"})
        back = site.url("/page/")
        result = fetch(other.url(f"/go?to={back}"), credentials, site, other)
        assert result.status == 200 and result.final_url == back
        assert other.cookies == [""]  # the site's cookies never went there
        assert site.cookies == ["sid=old"]  # nor came back from there
        assert result.redirect_cookies == ()
