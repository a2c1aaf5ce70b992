"""Login required everywhere, with an answer htmx can act on when the session has ended."""

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.http import HttpResponse


class HtmxLoginRequiredMiddleware(LoginRequiredMiddleware):
    """Django's LoginRequiredMiddleware, except that an htmx request is told to reload the page.

    htmx follows the redirect to the login page and would swap that page into
    the one polling (the audit page every 2 s). An empty answer with HX-Refresh
    reloads the page instead, and that full request gets the ordinary redirect
    to the login page, with ``next`` set to the page the person was on.
    """

    def handle_no_permission(self, request, view_func):
        # A history restore (htmx's cache ran out) swaps in the whole page and ignores
        # HX-Refresh, so it gets the login page itself, like any full request.
        htmx = getattr(request, "htmx", None)
        if not htmx or htmx.history_restore_request:
            return super().handle_no_permission(request, view_func)
        # 204, not 200: should the header be lost on the way, htmx swaps nothing rather than an empty body.
        response = HttpResponse(status=204)
        response["HX-Refresh"] = "true"
        return response
