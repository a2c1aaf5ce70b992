"""The client's address for login throttling (django-axes), through the trusted reverse proxies."""

from django.conf import settings


def client_address(request) -> str | None:
    """The client's IP address for login throttling, seen through TRUSTED_PROXY_COUNT proxies.

    Each proxy appends the address it was connected from, so the one the nearest
    trusted proxy saw sits TRUSTED_PROXY_COUNT places from the end; anything before
    it is whatever the client chose to send.
    """
    proxies = settings.TRUSTED_PROXY_COUNT
    if proxies:
        hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
        if len(hops) >= proxies and hops[-proxies]:
            return hops[-proxies]
    return request.META.get("REMOTE_ADDR")
