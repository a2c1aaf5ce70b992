"""What every owned screen shares: the owner-only view decorator, pagination and sorting.

Tables stay fast on an audit of 100,000 pages: filters hit the (audit, …)
indexes, sorting is limited to a whitelist, and pagination fetches one row
more than it shows to know whether there is a next page instead of counting
the filtered table.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import wraps

from django.http import HttpResponseNotAllowed

from .access import audit_for_user

PER_PAGE = 50
# Offsets deeper than this are refused: nobody pages 2,000 screens deep, and a
# huge OFFSET makes the database walk every skipped row.
MAX_PAGE_NUMBER = 2000


def owned_view(load, id_name: str, *methods):
    """Load the object for its owner (404 for anyone else), then check the HTTP method.

    Ownership comes first so a stranger gets the same 404 from every URL of an
    object, whatever the method, and learns nothing about which ids exist.
    """
    allowed = set(methods) | ({"HEAD"} if "GET" in methods else set())

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            owned = load(request, kwargs.pop(id_name))
            if request.method not in allowed:
                return HttpResponseNotAllowed(sorted(allowed))
            return view(request, owned, *args, **kwargs)
        return wrapper
    return decorate


def audit_view(*methods):
    return owned_view(audit_for_user, "audit_id", *methods)


@dataclass
class Window:
    """One page of a table, known to have a next page without counting the table."""

    object_list: list
    number: int
    has_next: bool
    per_page: int

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def previous_page_number(self) -> int:
        return self.number - 1

    @property
    def next_page_number(self) -> int:
        return self.number + 1

    @property
    def start_index(self) -> int:
        return (self.number - 1) * self.per_page + 1 if self.object_list else 0

    @property
    def end_index(self) -> int:
        return (self.number - 1) * self.per_page + len(self.object_list)


def window(queryset, request, per_page: int = PER_PAGE) -> Window:
    try:
        number = int(request.GET.get("page", 1))
    except (TypeError, ValueError):
        number = 1
    number = min(max(number, 1), MAX_PAGE_NUMBER)
    start = (number - 1) * per_page
    rows = list(queryset[start:start + per_page + 1])
    return Window(rows[:per_page], number, len(rows) > per_page, per_page)


def sort_choice(request, options: dict, default: str) -> tuple[str, list]:
    """The requested sort key if it is whitelisted, else the default; never raw user input."""
    key = request.GET.get("sort", default)
    if key not in options:
        key = default
    return key, options[key]
