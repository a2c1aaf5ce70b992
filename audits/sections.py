"""Sections of a site: path prefixes, for filtering tables and counting issues by part of the site.

A section is a path prefix on the audit's origin, written as it appears after
the host: ``/docs/``. The section of one URL is its first path segment with a
slash on both sides (``/docs/`` for ``/docs/intro/``); a URL with no second
slash (``/``, ``/about``, ``/search?q=a``) belongs to the root section ``/``.

Both the filter and the grouping compare with SUBSTR rather than LIKE: SQLite's
LIKE ignores case, and paths are case-sensitive, so ``/Docs/`` and ``/docs/``
are different sections on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from django.db.models import Case, CharField, Count, Q, QuerySet, Value, When
from django.db.models.functions import Concat, StrIndex, Substr
from django.db.models.lookups import Exact, GreaterThan, LessThan

ROOT = "/"
# The audit page lists the busiest sections and folds the rest into one row, so
# a site with thousands of top-level folders still costs one bounded result.
TOP_SECTIONS = 20
MAX_SECTION_LENGTH = 500


def clean_section(text: str | None) -> str:
    """A section as given in a query string, as a path prefix ("docs/" -> "/docs/"); "" for none.

    Whitespace, a query or fragment part, and anything past MAX_SECTION_LENGTH
    characters are not a path, so they are dropped rather than matched.
    """
    text = (text or "").strip()
    text = text.split("?", 1)[0].split("#", 1)[0]
    if not text or any(c.isspace() for c in text):
        return ""
    if not text.startswith("/"):
        text = "/" + text
    return text[:MAX_SECTION_LENGTH]


def section_of(url: str, origin: str) -> str | None:
    """The top-level section of ``url`` on ``origin``; None for a URL elsewhere. Same rule as ``with_section``."""
    if not origin or not url.startswith(origin + "/"):
        return None
    rest = url[len(origin) + 1:]
    slash, query = rest.find("/"), rest.find("?")
    if slash < 0 or 0 <= query < slash:
        return ROOT
    return f"/{rest[:slash]}/"


def under_section(queryset: QuerySet, audit, section: str, field: str = "url") -> QuerySet:
    """``queryset`` narrowed to rows whose ``field`` is a URL of ``audit``'s origin under ``section``.

    ``section`` should come through ``clean_section``; an empty one leaves the
    queryset as it is. The root section "/" is the URLs that belong to it
    (``section_of``), not every URL, so its link on the audit page lists what it counts.
    """
    section = clean_section(section)
    if not section:
        return queryset
    origin = audit.origin or ""
    if section == ROOT:
        return queryset.filter(_starts_with(field, origin + ROOT) & _in_root(field, origin))
    return queryset.filter(_starts_with(field, origin + section))


def with_section(queryset: QuerySet, origin: str, field: str = "url") -> QuerySet:
    """``queryset`` annotated with ``section``: the top-level section of ``field``, NULL off ``origin``.

    The rule of ``section_of``, in SQL: the path after the origin's slash up to
    its next slash, unless a "?" comes first (then the root section).
    """
    slash = StrIndex(_rest(field, origin), Value("/"))
    return queryset.annotate(section=Case(
        When(~_starts_with(field, origin + "/"), then=Value(None)),
        When(_in_root(field, origin), then=Value(ROOT)),
        default=Concat(Value("/"), Substr(field, len(origin) + 2, slash - 1), Value("/")),
        output_field=CharField(),
    ))


def section_counts(queryset: QuerySet, origin: str, field: str = "url", limit: int = TOP_SECTIONS) -> dict:
    """Rows of ``queryset`` per top-level section, in one GROUP BY: the ``limit`` largest, then the rest.

    Returns ``{"sections": [{"section": "/docs/", "count": 12}, …], "other": n,
    "total": n}``; ``other`` counts rows in smaller sections and rows whose URL
    is not on the origin. Only ``limit`` rows come back from the GROUP BY.
    """
    total = queryset.count()
    if not origin or not total:
        return {"sections": [], "other": total, "total": total}
    # Rows off the origin filtered by their prefix, not by the section being NULL,
    # so the section's expression is worked out once a row, not twice.
    grouped = (
        with_section(queryset.filter(_starts_with(field, origin + "/")), origin, field)
        .values("section").annotate(count=Count("*")).order_by("-count", "section")[:limit]
    )
    sections = [{"section": row["section"], "count": row["count"]} for row in grouped]
    return {"sections": sections, "other": total - sum(s["count"] for s in sections), "total": total}


def _rest(field: str, origin: str):
    # The path after its leading slash (SUBSTR is 1-based).
    return Substr(field, len(origin) + 2)


def _in_root(field: str, origin: str) -> Q:
    """No slash after the path's first, or a "?" before it: a URL of the root section."""
    rest = _rest(field, origin)
    slash, query = StrIndex(rest, Value("/")), StrIndex(rest, Value("?"))
    return Q(Exact(slash, 0)) | (Q(GreaterThan(query, 0)) & Q(LessThan(query, slash)))


def _starts_with(field: str, prefix: str) -> Q:
    # The leading characters compared exactly (see the module docstring for why not LIKE).
    return Q(Exact(Substr(field, 1, len(prefix)), Value(prefix)))


__all__ = ["ROOT", "TOP_SECTIONS", "clean_section", "section_counts", "section_of", "under_section", "with_section"]
