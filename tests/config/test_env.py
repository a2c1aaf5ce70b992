import re
import sqlite3
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.utils import load_backend

from config.env import (
    database_from_url,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
)


def test_env_bool_reads_the_usual_spellings():
    assert env_bool("X", False, environ={"X": "yes"}) is True
    assert env_bool("X", True, environ={"X": "0"}) is False
    assert env_bool("X", True, environ={}) is True


def test_env_bool_refuses_a_typo_naming_the_variable():
    with pytest.raises(ImproperlyConfigured, match="DEBUG must be a boolean"):
        env_bool("DEBUG", False, environ={"DEBUG": "treu"})


def test_env_int_refuses_non_numbers_and_out_of_range_values():
    with pytest.raises(ImproperlyConfigured, match="Q_TIMEOUT must be a whole number"):
        env_int("Q_TIMEOUT", 300, environ={"Q_TIMEOUT": "5m"})
    with pytest.raises(ImproperlyConfigured, match="Q_WORKERS must be at least 1"):
        env_int("Q_WORKERS", 2, minimum=1, environ={"Q_WORKERS": "0"})
    assert env_int("Q_WORKERS", 2, environ={"Q_WORKERS": " 4 "}) == 4


def test_env_float_and_list():
    assert env_float("R", 1.0, environ={"R": "2.5"}) == 2.5
    with pytest.raises(ImproperlyConfigured, match="R must be a number"):
        env_float("R", 1.0, environ={"R": "fast"})
    assert env_list("H", ["a"], environ={"H": "x.com, y.com,,"}) == ["x.com", "y.com"]


def _wrapper(db: dict):
    return load_backend(db["ENGINE"]).DatabaseWrapper({
        "TIME_ZONE": None, "CONN_HEALTH_CHECKS": False, "CONN_MAX_AGE": 0, "AUTOCOMMIT": True,
        "ATOMIC_REQUESTS": False, **db})


def _connect(db: dict):
    """The connection Django itself opens for this DATABASES entry, its init commands run."""
    wrapper = _wrapper(db)
    return wrapper.get_new_connection(wrapper.get_connection_params())


def test_a_relative_sqlite_path_is_relative_to_the_project_not_the_working_directory():
    db = database_from_url("sqlite:///var/x.sqlite3", base_dir=Path("/srv/app"))
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["NAME"] == "/srv/app/var/x.sqlite3"
    # A file, not :memory:, so a qcluster subprocess can open the same test database.
    assert db["TEST"]["NAME"] == "/srv/app/var/x-test.sqlite3"


def test_sqlite_connections_use_wal_a_busy_timeout_and_a_large_checkpoint_interval(tmp_path):
    conn = _connect(database_from_url(f"sqlite:///{tmp_path}/x.sqlite3", base_dir=Path("/")))
    try:
        pragmas = {name: conn.execute(f"PRAGMA {name}").fetchone()[0]
                   for name in ("journal_mode", "busy_timeout", "wal_autocheckpoint", "foreign_keys")}
    finally:
        conn.close()
    assert pragmas == {"journal_mode": "wal", "busy_timeout": 20000, "wal_autocheckpoint": 10000,
                       "foreign_keys": 1}


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's transaction mode")
def test_sqlite_transactions_take_the_write_lock_when_they_begin():
    # IMMEDIATE: a transaction holds the write lock from BEGIN, so another writer
    # waits on the busy timeout instead of failing midway with "database is locked".
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT 1")  # a read only: a DEFERRED transaction would hold no lock yet
        other = sqlite3.connect(connection.settings_dict["NAME"], timeout=0)
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        finally:
            other.close()


def test_sqlite_connections_keep_a_small_prepared_statement_cache(tmp_path):
    # What Django hands to sqlite3.connect; tests/config/test_sqlite_memory.py measures the effect.
    wrapper = _wrapper(database_from_url(f"sqlite:///{tmp_path}/x.sqlite3", base_dir=Path("/")))
    assert wrapper.get_connection_params()["cached_statements"] == 32


def test_postgres_url_is_split_with_persistent_checked_connections_and_server_side_timeouts():
    db = database_from_url("postgres://u:p%40ss@127.0.0.1:5433/site?sslmode=require", base_dir=Path("/"))
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], str(db["PORT"])) == (
        "site", "u", "p@ss", "127.0.0.1", "5433")
    assert db["CONN_MAX_AGE"] == 60 and db["CONN_HEALTH_CHECKS"] is True
    assert db["OPTIONS"]["sslmode"] == "require"
    assert "statement_timeout" in db["OPTIONS"]["options"]


def test_postgres_options_in_the_url_replace_the_default_server_side_timeouts():
    db = database_from_url("postgresql://u@h/site?options=-c%20statement_timeout%3D5000", base_dir=Path("/"))
    assert db["OPTIONS"]["options"] == "-c statement_timeout=5000"


@pytest.mark.parametrize("url, message", [
    ("mysql://x/y", "DATABASE_URL must start with sqlite:// or postgres://, got 'mysql'"),
    ("nonsense", "DATABASE_URL is not a usable database URL"),
    ("postgres://h:port/x", "DATABASE_URL is not a usable database URL"),
    ("postgres://127.0.0.1:5432/", "DATABASE_URL must name a database"),
    ("sqlite://", "DATABASE_URL needs a file path"),
])
def test_bad_database_urls_fail_with_a_message_naming_the_variable(url, message):
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        database_from_url(url, base_dir=Path("/"))


def test_settings_switch_to_postgres_when_database_url_is_set_and_default_to_sqlite(tmp_path):
    import subprocess
    import sys

    code = "from django.conf import settings; print(settings.DATABASES['default']['ENGINE'])"
    root = Path(__file__).resolve().parents[2]
    base = {"PATH": "/usr/bin:/bin", "SECRET_KEY": "x" * 50, "SITEWARD_VAR_DIR": str(tmp_path),
            "DJANGO_SETTINGS_MODULE": "config.settings"}
    engines = [
        subprocess.run([sys.executable, "-c", f"import django; django.setup(); {code}"], cwd=root,
                       env={**base, **extra}, capture_output=True, text=True, check=True).stdout.strip()
        for extra in ({}, {"DATABASE_URL": "postgres://u@127.0.0.1:5432/siteward"})
    ]
    assert engines == ["django.db.backends.sqlite3", "django.db.backends.postgresql"]


def test_settings_refuse_to_start_without_secret_key_when_debug_is_off(tmp_path):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "DEBUG": "0", "SITEWARD_VAR_DIR": str(tmp_path)},
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_settings_default_to_safe_values(settings):
    from config import settings as real

    assert real.DEBUG is False
    assert real.SITEWARD["ALLOW_PRIVATE_TARGETS"] is False
    assert "config.login_required.HtmxLoginRequiredMiddleware" in real.MIDDLEWARE
    assert real.Q_CLUSTER["retry"] > real.Q_CLUSTER["timeout"]
    assert real.Q_CLUSTER["catch_up"] is False and real.Q_CLUSTER["bulk"] == 1


def test_manage_py_generates_and_reuses_a_private_secret_key_when_none_is_set(tmp_path):
    import stat
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {"PATH": "/usr/bin:/bin", "SITEWARD_VAR_DIR": str(tmp_path)}
    for _ in range(2):
        result = subprocess.run([sys.executable, "manage.py", "check"], cwd=root, env=env,
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    key_file = tmp_path / "secret_key"
    assert len(key_file.read_text().strip()) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_env_choice_takes_any_case_and_refuses_a_typo_naming_the_variable():
    levels = ("DEBUG", "INFO", "WARNING")
    assert env_choice("LOG_LEVEL", "INFO", levels, environ={"LOG_LEVEL": " warning "}) == "WARNING"
    assert env_choice("LOG_LEVEL", "INFO", levels, environ={}) == "INFO"
    with pytest.raises(ImproperlyConfigured, match="LOG_LEVEL must be one of DEBUG, INFO, WARNING, got 'verbose'"):
        env_choice("LOG_LEVEL", "INFO", levels, environ={"LOG_LEVEL": "verbose"})
