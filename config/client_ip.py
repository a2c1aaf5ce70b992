"""The client's address for login throttling (django-axes) and the per-address audit limit,
through the trusted reverse proxies, and the network those limits count it as."""

import ipaddress

from django.conf import settings


def client_address(request) -> str | None:
    """The client's IP address for login throttling, seen through TRUSTED_PROXY_COUNT proxies.

    Each proxy appends the address it was connected from, so the one the nearest
    trusted proxy saw sits TRUSTED_PROXY_COUNT places from the end; anything before
    it is whatever the client chose to send. A hop that is no address (a port,
    "unknown") counts as the proxy's own. The address is spelt one way (an
    IPv4-mapped IPv6 address as IPv4), so counts and locks keyed by it agree.
    """
    proxies = settings.TRUSTED_PROXY_COUNT
    if proxies:
        hops = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
        if len(hops) >= proxies and (hop := _canonical(hops[-proxies])):
            return hop
    return _canonical(request.META.get("REMOTE_ADDR") or "")


def _canonical(text: str) -> str | None:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address)


def network_of(address: str) -> str:
    """What a per-address limit counts ``address`` as: itself (IPv4), or its /64 (IPv6),
    since one IPv6 client is routinely given a whole /64 to pick addresses from."""
    ip = ipaddress.ip_address(address)
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False).network_address)
    return str(ip)


def client_network(request) -> str | None:
    """The client's address as login throttling counts it: an IPv6 client by its /64, or it could
    take a fresh address for every five guesses."""
    address = client_address(request)
    return network_of(address) if address else None
