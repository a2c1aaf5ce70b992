"""The client's address for login throttling (django-axes) and the per-address audit limit,
through the trusted reverse proxies."""

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
