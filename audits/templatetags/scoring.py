"""Template helpers for the health score: its formula in words and the counts behind one audit's score."""

from __future__ import annotations

from django import template

from audits import score

register = template.Library()


@register.simple_tag
def score_formula() -> str:
    """The formula the page prints, the same text as ``audits.score.FORMULA``."""
    return score.FORMULA


@register.simple_tag
def score_breakdown(audit) -> dict:
    """{"pages", "critical", "warning"}: the counts the score was computed from (two aggregate queries)."""
    return score.breakdown(audit)
