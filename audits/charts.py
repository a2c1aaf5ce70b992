"""Small bar charts drawn on the server as inline SVG.

A picture reads faster than a table for status classes, click depth and
response times, and a few rectangles need no JavaScript library. Every label
and value is escaped by ``format_html``; the labels are ours (status classes,
depths, time buckets), never crawled text, but escaping costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

# Geometry of every chart, in SVG user units; the SVG scales to its container.
_BAR_WIDTH = 46
_GAP = 14
_HEIGHT = 150
_TOP = 18  # room for the value printed above the tallest bar
_BOTTOM = 22  # room for the label under each bar
_LEFT = 8


@dataclass(frozen=True)
class Bar:
    label: str
    value: int
    css: str = ""  # extra class on the rectangle, e.g. "bar-4xx"


def bar_chart(bars: list[Bar], *, title: str, chart_id: str) -> SafeString:
    """An SVG bar chart with one labelled bar per item, scaled to the largest value.

    Returns an empty string when every bar is zero, so the template can show
    "nothing yet" instead of a flat line.
    """
    if not bars or not any(bar.value for bar in bars):
        return SafeString("")
    peak = max(bar.value for bar in bars)
    plot = _HEIGHT - _TOP - _BOTTOM
    width = _LEFT * 2 + len(bars) * (_BAR_WIDTH + _GAP) - _GAP
    rows = []
    for index, bar in enumerate(bars):
        x = _LEFT + index * (_BAR_WIDTH + _GAP)
        # A non-zero bar is at least 2 units tall so a single 404 among thousands is visible.
        height = 0 if not bar.value else max(2, round(plot * bar.value / peak))
        y = _TOP + plot - height
        rows.append((
            x, y, _BAR_WIDTH, height, f"bar {bar.css}".strip(), bar.label, bar.value,
            x + _BAR_WIDTH / 2, y - 4, bar.value,
            x + _BAR_WIDTH / 2, _HEIGHT - 6, bar.label,
        ))
    body = format_html_join(
        "",
        '<g><rect x="{}" y="{}" width="{}" height="{}" class="{}"><title>{}: {}</title></rect>'
        '<text x="{}" y="{}" text-anchor="middle" class="value">{}</text>'
        '<text x="{}" y="{}" text-anchor="middle">{}</text></g>',
        rows,
    )
    return format_html(
        '<svg class="chart" id="{}" role="img" aria-label="{}" viewBox="0 0 {} {}" '
        'width="{}" height="{}" xmlns="http://www.w3.org/2000/svg"><title>{}</title>{}</svg>',
        chart_id, title, width, _HEIGHT, width, _HEIGHT, title, body,
    )
