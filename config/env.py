"""Strict readers for settings that come from the environment.

Every helper fails at start-up with a message naming the variable, so a typo in
a deployment shows up at once instead of as odd behaviour later.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None, *, environ=os.environ) -> str | None:
    value = environ.get(name)
    return default if value is None else value.strip()


def env_bool(name: str, default: bool, *, environ=os.environ) -> bool:
    value = environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None,
            environ=os.environ) -> int:
    value = environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {number}")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None, environ=os.environ) -> float:
    value = environ.get(name)
    if value is None or not value.strip():
        return default
    try:
        number = float(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    return number


def env_choice(name: str, default: str, choices: tuple[str, ...], *, environ=os.environ) -> str:
    """One of ``choices``, matched without regard to case and given back as ``choices`` spells it."""
    value = environ.get(name)
    if value is None or not value.strip():
        return default
    for choice in choices:
        if value.strip().lower() == choice.lower():
            return choice
    raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")


def env_list(name: str, default: list[str], *, environ=os.environ) -> list[str]:
    """A comma-separated list; blank items are dropped."""
    value = environ.get(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def database_from_url(url: str, *, base_dir: Path, name: str = "DATABASE_URL") -> dict:
    """A DATABASES entry for ``sqlite:///path`` or ``postgres://user:pass@host:port/db``.

    dj-database-url does the parsing; this adds what Siteward needs on top and
    refuses, with a message naming the variable, any database it does not run on.
    """
    try:
        db = dj_database_url.parse(url)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not a usable database URL: {exc}") from None
    if db["ENGINE"] == "django.db.backends.sqlite3":
        if db["NAME"] in ("", ":memory:"):
            raise ImproperlyConfigured(f"{name} needs a file path, e.g. sqlite:///var/siteward.sqlite3")
        return sqlite_database(base_dir / db["NAME"])  # a relative path is relative to the project
    if db["ENGINE"] == "django.db.backends.postgresql":
        if not db["NAME"]:
            raise ImproperlyConfigured(f"{name} must name a database, e.g. postgres://user@127.0.0.1:5432/siteward")
        db.update(CONN_MAX_AGE=60, CONN_HEALTH_CHECKS=True)
        # Server-side guards so a stuck statement or an abandoned transaction
        # cannot hold locks forever; tasks treat the resulting error as retryable.
        db.setdefault("OPTIONS", {}).setdefault(
            "options", "-c statement_timeout=60000 -c idle_in_transaction_session_timeout=120000")
        return db
    scheme = url.split("://", 1)[0] if "://" in url else "no scheme"
    raise ImproperlyConfigured(f"{name} must start with sqlite:// or postgres://, got {scheme!r}")


def sqlite_database(path: Path) -> dict:
    """Django's own SQLite backend, set up so a web server and a worker cluster share one file.

    WAL lets readers run beside the writer; IMMEDIATE transactions take the write
    lock at BEGIN, so a read-then-write transaction waits out the 20 s busy
    timeout instead of failing at once with "database is locked".
    """
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            # The crawl's IN (...) lookups prepare a statement per list length; a
            # 32-statement cache (Python's default is 128) keeps SQLite's memory small.
            "cached_statements": 32,
            # Checkpointing every 10,000 WAL pages instead of 1,000 spares the crawl's
            # writer recopying the same index pages; the WAL may reach ~40 MB.
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=10000;"
            ),
        },
        # A file (not :memory:) so the qcluster subprocess in the orchestration
        # tests can open the same test database.
        "TEST": {"NAME": str(path).removesuffix(".sqlite3") + "-test.sqlite3"},
    }
