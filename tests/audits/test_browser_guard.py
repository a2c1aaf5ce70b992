"""A rendered private site's browser: its own origin's private addresses by name, nothing else private.

Pure: scripted DNS answers, no connection is made.
"""

import asyncio

import pytest

from audits.crawl.rendering import browser_guard
from crawler.errors import UnsafeAddress
from crawler.net import AddressGuard
from tests.crawler.hostile_server import StubResolver

DNS = StubResolver({
    "staging.corp": [["10.0.0.5", "10.0.0.6"]],  # a load balancer's two addresses
    "jenkins.corp": [["10.0.0.5"]],  # a neighbour on the same ingress
    "x.rebind.example": [["10.0.0.5"]],  # a public name an attacker points at it
    "meta.corp": [["169.254.169.254"]],
    "www.example.com": [["93.184.216.34"]],
})


def resolve_all(guard: AddressGuard, host: str, port: int = 80) -> list[str]:
    return asyncio.run(guard.resolve_all(host, port))


def test_the_browser_reaches_every_address_of_the_audited_origin_and_public_hosts():
    guard = browser_guard(AddressGuard(allow_private=True, resolver=DNS), "http://staging.corp")
    assert resolve_all(guard, "staging.corp") == ["10.0.0.5", "10.0.0.6"]
    assert resolve_all(guard, "www.example.com") == ["93.184.216.34"]


@pytest.mark.parametrize(("host", "port"), [("jenkins.corp", 80), ("x.rebind.example", 80), ("staging.corp", 8080),
                                            ("10.0.0.5", 80)])
def test_another_name_or_port_for_the_same_private_address_is_refused(host, port):
    guard = browser_guard(AddressGuard(allow_private=True, resolver=DNS), "http://staging.corp")
    with pytest.raises(UnsafeAddress):
        resolve_all(guard, host, port)


def test_the_metadata_address_stays_refused_even_as_the_audited_origin():
    guard = browser_guard(AddressGuard(allow_private=True, resolver=DNS), "http://meta.corp")
    with pytest.raises(UnsafeAddress):
        resolve_all(guard, "meta.corp")
