#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import secrets
import sys
from pathlib import Path


def ensure_secret_key():
    """Give command-line use the same generated key `make run` uses (var/secret_key).

    Settings still refuse to start without SECRET_KEY when DEBUG is off (a web
    server started some other way must be given one); this only spares a person
    running `manage.py` in a checkout from inventing one.
    """
    if os.environ.get("SECRET_KEY") or os.environ.get("DEBUG", "").lower() in ("1", "true", "yes", "on"):
        return
    var = Path(os.environ.get("SITEWARD_VAR_DIR") or Path(__file__).resolve().parent / "var")
    key_file = var / "secret_key"
    if not key_file.exists():
        var.mkdir(parents=True, exist_ok=True)
        old_umask = os.umask(0o077)
        try:
            key_file.write_text(secrets.token_urlsafe(50) + "\n")
        finally:
            os.umask(old_umask)
    os.environ["SECRET_KEY"] = key_file.read_text().strip()


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    ensure_secret_key()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
