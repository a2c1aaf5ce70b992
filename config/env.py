"""Strict readers for settings that come from the environment.

Every helper fails at start-up with a message naming the variable, so a typo in
a deployment shows up at once instead of as odd behaviour later.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, unquote, urlsplit

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


def env_list(name: str, default: list[str], *, environ=os.environ) -> list[str]:
    """A comma-separated list; blank items are dropped."""
    value = environ.get(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def database_from_url(url: str, *, base_dir, name: str = "DATABASE_URL") -> dict:
    """Turn ``sqlite:///path`` or ``postgres://user:pass@host:port/db`` into a DATABASES entry.

    SQLite gets the options that let a web server and a worker cluster share one
    file: WAL, IMMEDIATE transactions (so a read-then-write transaction waits on
    the busy timeout instead of failing at once with "database is locked") and a
    20 s busy timeout.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        # sqlite:///relative/path or sqlite:////absolute/path, as dj-database-url reads them.
        path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
        if not path:
            raise ImproperlyConfigured(f"{name} needs a file path, e.g. sqlite:///var/siteward.sqlite3")
        return sqlite_database(path if path.startswith("/") else str(base_dir / path))
    if scheme in ("postgres", "postgresql", "pgsql"):
        if not parts.path.strip("/"):
            raise ImproperlyConfigured(f"{name} must name a database, e.g. postgres://user@127.0.0.1:5432/siteward")
        query = dict(parse_qsl(parts.query))
        options = {
            # Server-side guards so a stuck statement or an abandoned transaction
            # cannot hold locks forever; tasks treat the resulting error as retryable.
            "options": query.pop("options", "-c statement_timeout=60000 -c idle_in_transaction_session_timeout=120000"),
        }
        options.update(query)  # e.g. sslmode=require
        try:
            port = parts.port
        except ValueError:
            raise ImproperlyConfigured(f"{name} has an invalid port") from None
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.strip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": options,
        }
    raise ImproperlyConfigured(f"{name} must start with sqlite:// or postgres://, got {scheme or 'no scheme'!r}")


SQLITE_CACHED_STATEMENTS = 32


def sqlite_database(path: str) -> dict:
    return {
        # Django's backend with two costs of bulk writes taken out (its module says which).
        "ENGINE": "config.sqlite_backend",
        "NAME": path,
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            # Python keeps 128 prepared statements per connection by default.
            # The crawl's IN (...) lookups take a list per sub-batch, and each
            # length is a new statement of up to a few hundred KB inside
            # SQLite: 128 of them held ~20 MB that a 32-entry cache does not
            # (measured with sqlite3_memory_used on a 3,000-page audit; the
            # 1,000-page benchmark's time moved less than its run-to-run noise).
            "cached_statements": SQLITE_CACHED_STATEMENTS,
            # wal_autocheckpoint: SQLite copies the WAL back into the database in
            # the commit that takes it past this many pages. At its default of
            # 1,000 (4 MB) the crawl's writer paid that every few sub-batches,
            # copying the same index pages again each time; at 10,000 a
            # 1,000-page audit ran 10.6 -> 9.0 s (mean of 4 runs each, whole
            # process). The WAL file may reach ~40 MB between checkpoints.
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;"
                " PRAGMA foreign_keys=ON; PRAGMA wal_autocheckpoint=10000;"
            ),
        },
        # A file (not :memory:) so the qcluster subprocess in the orchestration
        # tests can open the same test database.
        "TEST": {"NAME": path.removesuffix(".sqlite3") + "-test.sqlite3"},
    }
