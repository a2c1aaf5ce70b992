"""Siteward's own settings (``settings.SITEWARD``), read when used: never at import time, so a test's
or a cluster's override is what every step sees."""

from django.conf import settings


def knob(name: str):
    """A SITEWARD setting, read when used."""
    return settings.SITEWARD[name]
