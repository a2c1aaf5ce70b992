from django.core import checks

from audits.system_checks import check_q_cluster_timing


def _ids(settings):
    return [error.id for error in check_q_cluster_timing()]


def test_default_config_passes(settings):
    assert _ids(settings) == []


def test_retry_equal_to_timeout_is_refused(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 300, "retry": 300}
    assert _ids(settings) == ["siteward.E002"]


def test_missing_timeout_is_refused(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": None}
    assert _ids(settings) == ["siteward.E001"]


def test_soft_deadline_above_timeout_is_refused(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 60, "retry": 90}
    settings.SITEWARD = {**settings.SITEWARD, "CHUNK_SOFT_DEADLINE": 120}
    assert _ids(settings) == ["siteward.E003"]


def test_a_timeout_that_leaves_no_room_for_the_last_requests_is_warned_of(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 150, "retry": 200}
    settings.SITEWARD = {**settings.SITEWARD, "CHUNK_SOFT_DEADLINE": 120}
    (warning,) = check_q_cluster_timing()
    assert warning.id == "siteward.W005" and warning.level == checks.WARNING


def test_manage_py_check_fails_on_a_bad_config(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=root, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "SECRET_KEY": "x" * 50, "Q_TIMEOUT": "300", "Q_RETRY": "200",
             "SITEWARD_VAR_DIR": str(tmp_path)},
    )
    assert result.returncode != 0
    assert "siteward.E002" in result.stderr


def test_a_cluster_named_for_a_queue_no_task_goes_to_is_refused(monkeypatch):
    from audits.system_checks import check_queue_name

    monkeypatch.setenv("Q_CLUSTER_NAME", "mysite")
    assert [error.id for error in check_queue_name()] == ["siteward.E004"]
    monkeypatch.setenv("Q_CLUSTER_NAME", "render")
    assert check_queue_name() == []
    monkeypatch.delenv("Q_CLUSTER_NAME")
    assert check_queue_name() == []
