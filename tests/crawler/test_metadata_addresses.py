"""Cloud metadata endpoints are refused whatever the guard was told to allow.

``allow_private`` opens private and loopback ranges for auditing one's own
staging site; it must never open the address a cloud VM fetches its
credentials from. Only pure functions and a stub resolver are used here:
nothing connects to any of these addresses.
"""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from crawler.errors import DnsFailure, UnsafeAddress
from crawler.net import AddressGuard, classify, is_metadata_address
from tests.crawler.hostile_server import StubResolver

# AWS, GCP, Azure and most others; AWS over IPv6; Alibaba Cloud; Azure's WireServer.
METADATA = ["169.254.169.254", "fd00:ec2::254", "100.100.100.200", "168.63.129.16"]

# The IPv4 ones again, wrapped in the IPv6 forms that carry an IPv4 address:
# IPv4-mapped, IPv4-compatible, 6to4 and NAT64 (well-known prefix).
EMBEDDED = [
    "::ffff:169.254.169.254",
    "::169.254.169.254",
    "2002:a9fe:a9fe::1",
    "64:ff9b::a9fe:a9fe",
    "::ffff:100.100.100.200",
    "::100.100.100.200",
    "2002:6464:64c8::",
    "64:ff9b::6464:64c8",
    "::ffff:168.63.129.16",
    "::168.63.129.16",
    "2002:a83f:8110::1",
    "2002:a83f:8110:ffff::42",
    "64:ff9b::a83f:8110",
]

ALL_FORMS = METADATA + EMBEDDED


def _never_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"DNS was asked about {host!r}")


@pytest.mark.parametrize("address", ALL_FORMS)
def test_every_metadata_form_is_recognised(address):
    assert is_metadata_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ALL_FORMS)
def test_classify_never_calls_a_metadata_address_public(address):
    # 168.63.129.16 lies in Microsoft's public block: a table of special-purpose
    # ranges alone lets it (and its wrapped forms) through.
    assert classify(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.253",  # link-local, but not the metadata address
        "168.63.129.17",
        "100.100.100.201",
        "fd00:ec2::253",
        "8.8.8.8",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "2002:808:808::1",
    ],
)
def test_neighbours_are_not_metadata(address):
    assert not is_metadata_address(ipaddress.ip_address(address))


def test_a_scope_id_does_not_hide_the_ipv6_metadata_address():
    assert is_metadata_address(ipaddress.ip_address("fd00:ec2::254%eth0"))


@pytest.mark.parametrize("address", ALL_FORMS)
@pytest.mark.parametrize("allow_private", [False, True])
def test_a_name_resolving_to_a_metadata_address_is_refused(address, allow_private):
    guard = AddressGuard(
        allow_private=allow_private, resolver=StubResolver({"meta.test": [[address]]})
    )
    with pytest.raises(UnsafeAddress) as caught:
        guard.resolve_sync("meta.test", 80)
    assert caught.value.address == str(ipaddress.ip_address(address))
    with pytest.raises(UnsafeAddress):
        asyncio.run(guard.resolve("meta.test", 80))


@pytest.mark.parametrize("address", ALL_FORMS)
def test_a_metadata_literal_is_refused_with_private_targets_allowed_without_dns(address):
    guard = AddressGuard(allow_private=True, resolver=_never_dns)
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(UnsafeAddress):
        guard.resolve_sync(host, 80)


@pytest.mark.parametrize("spelling", ["2852039166", "0xa9.0xfe.0xa9.0xfe", "0251.0376.0251.0376"])
def test_numeric_spellings_of_the_metadata_address_are_refused(spelling):
    guard = AddressGuard(allow_private=True, resolver=_never_dns)
    with pytest.raises(UnsafeAddress):
        guard.resolve_sync(spelling, 80)


@pytest.mark.parametrize("address", METADATA)
def test_allowed_targets_cannot_admit_a_metadata_address(address):
    # The per-(ip, port) escape hatch exists for tests' loopback servers; it
    # is no way to reach credentials either.
    guard = AddressGuard(allow_private=True, allowed_targets=[(address, 80)], resolver=_never_dns)
    with pytest.raises(UnsafeAddress):
        guard.check(ipaddress.ip_address(address), 80)


def test_the_ipv6_metadata_address_is_not_admitted_as_a_private_one():
    guard = AddressGuard(allow_private=True)
    with pytest.raises(UnsafeAddress) as caught:
        guard.check(ipaddress.ip_address("fd00:ec2::254"), 80)
    assert caught.value.reason == "cloud-metadata"
    assert "cloud-metadata" in caught.value.message
    # Its neighbours in fc00::/7 remain ordinary private addresses.
    guard.check(ipaddress.ip_address("fd00:ec2::253"), 80)


def test_a_mixed_answer_with_a_metadata_address_is_refused_whole():
    stub = StubResolver({"mixed.test": [["10.0.0.5", "168.63.129.16"]]})
    with pytest.raises(UnsafeAddress) as caught:
        AddressGuard(allow_private=True, resolver=stub).resolve_sync("mixed.test", 80)
    assert caught.value.address == "168.63.129.16"


def test_private_and_public_sites_still_resolve():
    stub = StubResolver({"staging.test": [["10.0.0.5"]], "site.test": [["93.184.216.34"]]})
    assert AddressGuard(allow_private=True, resolver=stub).resolve_sync("staging.test", 80) == (
        "10.0.0.5"
    )
    assert AddressGuard(resolver=stub).resolve_sync("site.test", 80) == "93.184.216.34"
    with pytest.raises((UnsafeAddress, DnsFailure)):
        AddressGuard(resolver=stub).resolve_sync("staging.test", 80)

