"""The check thresholds an audit may change (CHECKS.md: "defaults that an audit's settings can change").

An audit and a site store only the values that differ from the defaults, so a
default changed in a later release reaches every audit that never set it. Once
an audit's crawl begins it also keeps every value it judges by (``judged``,
``Audit.judged_by``): what it judged by stays so after an upgrade, and a
validation of it judges by the same.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from crawler.checks import CheckSettings

DEFAULTS = CheckSettings()


@dataclass(frozen=True, slots=True)
class Threshold:
    name: str  # a CheckSettings field
    label: str
    unit: str
    minimum: int
    maximum: int

    @property
    def default(self) -> int:
        return getattr(DEFAULTS, self.name)


THRESHOLDS = (
    Threshold("title_min", "Shortest title", "characters", 1, 500),
    Threshold("title_max", "Longest title", "characters", 1, 500),
    Threshold("description_min", "Shortest meta description", "characters", 1, 1000),
    Threshold("description_max", "Longest meta description", "characters", 1, 1000),
    Threshold("thin_words", "Fewest words of text", "words", 1, 100_000),
    Threshold("slow_ms", "Slowest first byte", "ms", 50, 60_000),
    Threshold("large_html_bytes", "Largest HTML page", "bytes", 10_000, 1_000_000_000),
    Threshold("deep_depth", "Deepest click depth", "clicks", 1, 100),
    Threshold("large_image_bytes", "Largest image", "bytes", 1_000, 1_000_000_000),
)
BY_NAME = {t.name: t for t in THRESHOLDS}
# (shorter, longer) pairs a form refuses the wrong way round.
RANGES = (("title_min", "title_max"), ("description_min", "description_max"))


def check_settings(overrides: dict | None) -> CheckSettings:
    """The defaults with ``overrides`` (a stored dict) applied; unknown names are ignored."""
    return dataclasses.replace(DEFAULTS, **{name: int(value) for name, value in (overrides or {}).items()
                                            if name in BY_NAME})


def overrides_of(values: dict) -> dict[str, int]:
    """What to store of ``values`` ({name: int or None}): the ones set and not the default."""
    return {t.name: values[t.name] for t in THRESHOLDS
            if values.get(t.name) is not None and values[t.name] != t.default}


def described(overrides: dict | None) -> list[str]:
    """Each changed threshold for people: "Longest title 70 characters (default 60)"."""
    return [f"{BY_NAME[name].label} {value:,} {BY_NAME[name].unit} (default {BY_NAME[name].default:,})"
            for name, value in (overrides or {}).items() if name in BY_NAME]


def judged(settings: CheckSettings) -> dict[str, int]:
    """Every value ``settings`` judges by, defaults included: what an audit keeps (``Audit.judged_by``)."""
    return dataclasses.asdict(settings)


def settings_of(overrides: dict | None, judged_by: dict | None) -> CheckSettings:
    """What an audit judges by: the values it kept (``judged``) once its crawl began, else the defaults with its
    ``overrides``. A value CheckSettings has gained since it was kept takes its default."""
    if not judged_by:
        return check_settings(overrides)
    names = {field.name for field in dataclasses.fields(CheckSettings)}
    return dataclasses.replace(DEFAULTS, **{name: int(value) for name, value in judged_by.items() if name in names})
