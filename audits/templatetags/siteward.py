"""Template helpers for the dashboard.

Crawled text reaches the page only through autoescaping: these helpers build
markup with ``format_html``, which escapes every argument, and never mark
crawled text safe.
"""

from __future__ import annotations

from datetime import timedelta

from django import template
from django.utils.html import format_html

from audits.diff import totals

register = template.Library()


@register.filter
def is_web_url(value) -> bool:
    """Only http(s) URLs become anchors; javascript:, data: and friends stay text."""
    return isinstance(value, str) and value[:8].lower().startswith(("http://", "https://"))


@register.simple_tag
def external_link(url, text=None, limit=120):
    """An anchor to a crawled URL when it is http(s), otherwise the URL as plain text."""
    label = text if text else url
    if label and len(label) > limit:
        label = label[: limit - 1] + "…"
    if is_web_url(url):
        return format_html('<a href="{}" rel="noopener noreferrer nofollow" target="_blank">{}</a>', url, label)
    return format_html('<span class="not-a-link">{}</span>', label or "")


@register.filter
def duration(value) -> str:
    """A timedelta as "2 h 05 min", "3 min 07 s" or "12 s"."""
    if not isinstance(value, timedelta):
        return ""
    seconds = max(int(value.total_seconds()), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


@register.simple_tag(takes_context=True)
def sort_link(context, key, label, target):
    """A column heading that sorts by ``key`` (toggling direction), keeping the filters.

    It works as a plain link, and with htmx it swaps only the table ``target``.
    """
    request = context["request"]
    current = context.get("sort", "")
    query = request.GET.copy()
    query.pop("page", None)
    if current == key:
        query["sort"], arrow = f"-{key}", " ▲"
    elif current == f"-{key}":
        query["sort"], arrow = key, " ▼"
    else:
        query["sort"], arrow = key, ""
    href = f"{request.path}?{query.urlencode()}"
    return format_html(
        '<a href="{}" hx-get="{}" hx-target="{}" hx-swap="outerHTML" hx-push-url="true">{}{}</a>',
        href, href, target, label, arrow,
    )


@register.simple_tag(takes_context=True)
def page_href(context, number):
    """The current URL with only the page number changed."""
    request = context["request"]
    query = request.GET.copy()
    query["page"] = number
    return f"{request.path}?{query.urlencode()}"


@register.filter
def get_item(mapping, key):
    """``mapping[key]`` in a template (a dict keyed by a loop variable); None when absent."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def split(value: str) -> list[str]:
    return value.split()


@register.filter
def issues_of(audit, severity: str) -> int:
    """An audit's issue counter for one severity (issues_critical, ...)."""
    return getattr(audit, f"issues_{severity}", 0)


@register.filter
def change_totals(counts) -> dict:
    """{"new": n, "fixed": n, ...} from an audit's change_counts (empty without a baseline)."""
    return totals(counts)


@register.filter
def issue_types(rows) -> list:
    """The catalogue types of ``rows`` (dicts with a "type"), each once, in the order they first appear."""
    seen = {}
    for row in rows:
        kind = row.get("type")
        if kind is not None:
            seen.setdefault(kind.code, kind)
    return list(seen.values())
