"""What every owned screen shares: the owner-only view decorator, pagination and sorting.

Tables stay fast on an audit of 100,000 pages: filters hit the (audit, …)
indexes, sorting is limited to a whitelist, and pagination counts the filtered
table only as far as the deepest page it would show (MAX_PAGE_NUMBER pages):
one COUNT over a LIMITed subquery, so the total and the page numbers cost at
most that many index entries whatever the table's size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import wraps

from django.http import HttpResponseNotAllowed
from django.utils.cache import patch_vary_headers

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
            response = view(request, owned, *args, **kwargs)
            # One URL answers the whole page or its partial (wants_partial): a
            # browser or proxy cache must not hand one out for the other.
            patch_vary_headers(response, ["HX-Request", "HX-History-Restore-Request"])
            return response
        return wrapper
    return decorate


def wants_partial(request) -> bool:
    """Whether to answer with the partial: an htmx swap, but not htmx restoring a page
    from history (after its cache runs out), which needs the whole page."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def audit_view(*methods):
    return owned_view(audit_for_user, "audit_id", *methods)


@dataclass
class Window:
    """One page of a table, with the table's row count (up to ``cap``) when it was counted."""

    object_list: list
    number: int
    has_next: bool
    per_page: int
    # Rows in the filtered table, counted up to cap + 1; None for a table that was not counted.
    count: int | None = None
    cap: int | None = None

    # Numbered links either side of the current page, besides the first and the last.
    AROUND = 2

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

    @property
    def count_capped(self) -> bool:
        """More rows than the table pages through: the count reads "100,000+"."""
        return self.count is not None and self.cap is not None and self.count > self.cap

    @property
    def shown_count(self) -> int | None:
        return min(self.count, self.cap) if self.count_capped else self.count

    @property
    def num_pages(self) -> int | None:
        if self.count is None:
            return None
        return max(1, min(math.ceil(self.count / self.per_page), MAX_PAGE_NUMBER))

    @property
    def page_links(self) -> list[int | None]:
        """Page numbers to link: the first, a few around the current one, the last; None marks a gap."""
        last = self.num_pages
        if last is None or last <= 1:
            return []
        wanted = {1, last, *range(max(1, self.number - self.AROUND), min(last, self.number + self.AROUND) + 1)}
        links: list[int | None] = []
        for n in sorted(wanted):
            if links and n - links[-1] > 1:
                links.append(None)
            links.append(n)
        return links


def window(queryset, request, per_page: int = PER_PAGE) -> Window:
    """The requested page of ``queryset`` and the table's row count, counted no further than it can be paged."""
    try:
        number = int(request.GET.get("page", 1))
    except (TypeError, ValueError):
        number = 1
    cap = per_page * MAX_PAGE_NUMBER
    count = queryset.order_by()[:cap + 1].count()
    # A page past the end (a bookmark on a table that shrank) shows the last one.
    last = max(1, min(math.ceil(count / per_page), MAX_PAGE_NUMBER))
    number = min(max(number, 1), last)
    start = (number - 1) * per_page
    rows = list(queryset[start:start + per_page])
    return Window(rows, number, number < last, per_page, count=count, cap=cap)


def query_text(query, name: str, limit: int | None = 500) -> str:
    """A free-text parameter of ``query`` as the filters use it: NUL dropped, stripped, at most ``limit`` long.

    PostgreSQL refuses a NUL in text (psycopg raises before the query runs),
    and no URL, content type or section has one, so dropping it changes no match.
    """
    return query.get(name, "").replace("\x00", "").strip()[:limit]


def sort_choice(request, options: dict, default: str) -> tuple[str, list]:
    """The requested sort key if it is whitelisted, else the default; never raw user input."""
    key = request.GET.get("sort", default)
    if key not in options:
        key = default
    return key, options[key]
