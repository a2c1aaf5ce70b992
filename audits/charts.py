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


@dataclass(frozen=True)
class Line:
    label: str
    values: list[int]
    css: str = ""  # class on the polyline, e.g. "line-critical"


_LINE_WIDTH = 560
_LINE_LEFT = 44  # room for the axis values


def line_chart(labels: list[str], lines: list[Line], *, title: str, chart_id: str) -> SafeString:
    """An SVG line chart: one polyline per series over the same x labels, with a legend.

    Each series is scaled to the largest value of all of them, so lines compare;
    every point carries a <title> with its label and value. Empty when there
    are fewer than two points (one audit is no trend).
    """
    if len(labels) < 2 or not lines:
        return SafeString("")
    peak = max((max(line.values, default=0) for line in lines), default=0) or 1
    plot = _HEIGHT - _TOP - _BOTTOM
    step = (_LINE_WIDTH - _LINE_LEFT - _LEFT) / (len(labels) - 1)

    def x(index: int) -> float:
        return round(_LINE_LEFT + index * step, 1)

    def y(value: int) -> float:
        return round(_TOP + plot - plot * value / peak, 1)

    parts = [format_html(
        '<line x1="{}" y1="{}" x2="{}" y2="{}" class="axis"/><text x="{}" y="{}" text-anchor="end">{}</text>'
        '<text x="{}" y="{}" text-anchor="end">0</text>',
        _LINE_LEFT, _TOP + plot, _LINE_WIDTH - _LEFT, _TOP + plot, _LINE_LEFT - 4, _TOP + 4, peak,
        _LINE_LEFT - 4, _TOP + plot,
    )]
    for index in (0, len(labels) - 1):
        parts.append(format_html('<text x="{}" y="{}" text-anchor="middle">{}</text>', x(index), _HEIGHT - 6,
                                 labels[index]))
    for line in lines:
        points = " ".join(f"{x(i)},{y(v)}" for i, v in enumerate(line.values))
        dots = format_html_join(
            "", '<circle cx="{}" cy="{}" r="3" class="{}"><title>{}, {}: {}</title></circle>',
            ((x(i), y(v), f"dot {line.css}".strip(), labels[i], line.label, v) for i, v in enumerate(line.values)),
        )
        parts.append(format_html('<g class="series" data-series="{}"><polyline points="{}" class="{}" fill="none"/>{}</g>',
                                 line.label, points, f"line {line.css}".strip(), dots))
    legend = format_html_join(
        "", '<span class="legend-item {}">{}</span>', ((line.css, line.label) for line in lines))
    svg = format_html(
        '<svg class="chart line-chart" id="{}" role="img" aria-label="{}" viewBox="0 0 {} {}" '
        'width="{}" height="{}" xmlns="http://www.w3.org/2000/svg"><title>{}</title>{}</svg>',
        chart_id, title, _LINE_WIDTH, _HEIGHT, _LINE_WIDTH, _HEIGHT, title, SafeString("".join(parts)),
    )
    return format_html('<figure class="trend">{}<figcaption class="legend">{}</figcaption></figure>', svg, legend)
