from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.utils import load_backend

from config.env import (
    SQLITE_CACHED_STATEMENTS,
    database_from_url,
    env_bool,
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


def test_sqlite_url_gets_wal_immediate_and_a_busy_timeout():
    db = database_from_url("sqlite:///var/x.sqlite3", base_dir=Path("/srv/app"))
    assert db["NAME"] == "/srv/app/var/x.sqlite3"
    assert db["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert db["OPTIONS"]["timeout"] >= 20
    assert "journal_mode=WAL" in db["OPTIONS"]["init_command"]


def test_sqlite_connections_are_opened_with_a_small_statement_cache(tmp_path):
    db = database_from_url(f"sqlite:///{tmp_path}/x.sqlite3", base_dir=tmp_path)
    wrapper = load_backend(db["ENGINE"]).DatabaseWrapper({
        **db, "TIME_ZONE": None, "CONN_HEALTH_CHECKS": False, "CONN_MAX_AGE": 0, "AUTOCOMMIT": True,
        "ATOMIC_REQUESTS": False})
    # What Django hands to sqlite3.connect: 32, not Python's default of 128.
    assert wrapper.get_connection_params()["cached_statements"] == SQLITE_CACHED_STATEMENTS == 32


def test_sqlite_connections_checkpoint_the_wal_every_10000_pages_not_1000(tmp_path):
    db = database_from_url(f"sqlite:///{tmp_path}/x.sqlite3", base_dir=tmp_path)
    wrapper = load_backend(db["ENGINE"]).DatabaseWrapper({
        **db, "TIME_ZONE": None, "CONN_HEALTH_CHECKS": False, "CONN_MAX_AGE": 0, "AUTOCOMMIT": True,
        "ATOMIC_REQUESTS": False})
    # The connection Django opens, with its init commands run (no test database needed).
    conn = wrapper.get_new_connection(wrapper.get_connection_params())
    try:
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 10000
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_postgres_url_is_split_with_health_checks():
    db = database_from_url("postgres://u:p%40ss@127.0.0.1:5433/site?sslmode=require", base_dir=Path("/"))
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == ("site", "u", "p@ss", "127.0.0.1", "5433")
    assert db["CONN_HEALTH_CHECKS"] is True
    assert db["OPTIONS"]["sslmode"] == "require"


@pytest.mark.parametrize("url, message", [
    ("mysql://x/y", "must start with sqlite:// or postgres://"),
    ("postgres://127.0.0.1:5432/", "must name a database"),
    ("sqlite://", "needs a file path"),
])
def test_bad_database_urls_fail_with_a_message(url, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        database_from_url(url, base_dir=Path("/"))


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
    assert "django.contrib.auth.middleware.LoginRequiredMiddleware" in real.MIDDLEWARE
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
