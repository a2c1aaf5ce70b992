"""What the services refuse to start, as the ``audit`` command's error exit."""

from __future__ import annotations

import contextlib

from django.core.management.base import CommandError

from ..services import SiteBusy


@contextlib.contextmanager
def refused_as_command_error():
    """A site being deleted (``SiteBusy`` from ``new_audit``) ends the command with its reason, exit 2."""
    try:
        yield
    except SiteBusy as exc:
        raise CommandError(str(exc), returncode=2) from None
