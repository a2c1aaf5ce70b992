"""What `make run` starts (runall: web server, worker cluster, render cluster) comes up and stops cleanly."""

import os
import signal
import subprocess
import time
import urllib.request

import pytest

from .conftest import MANAGE, ROOT, free_port, subprocess_env


@pytest.mark.django_db(transaction=True)
@pytest.mark.cluster
def test_runall_serves_the_login_page_runs_the_worker_cluster_and_stops_on_ctrl_c():
    from django_q.models import Success
    from django_q.tasks import async_task

    port = free_port()
    proc = subprocess.Popen(
        MANAGE + ["runall", "--port", str(port), "--no-login"], cwd=ROOT, env=subprocess_env(Q_POLL=0.2),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        body = None
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and body is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2) as resp:
                    body = resp.read().decode()
            except OSError:
                time.sleep(0.3)
        assert body is not None and 'name="password"' in body

        # The cluster is alive when it picks a task off the ORM broker and saves its result.
        async_task("math.floor", 2.5, task_name="smoke-ping")
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not Success.objects.filter(name="smoke-ping").exists():
            time.sleep(0.3)
        assert Success.objects.get(name="smoke-ping").result == 2
        # With Chromium on the machine (as CI installs it), a render cluster serves the render queue.
        async_task("math.floor", 3.5, task_name="smoke-render-ping", cluster="render")
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not Success.objects.filter(name="smoke-render-ping").exists():
            time.sleep(0.3)
        assert Success.objects.get(name="smoke-render-ping").result == 3
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert f"running at http://127.0.0.1:{port}/" in out
    assert "Stopped the web server and the worker clusters." in out


@pytest.mark.parametrize(("env", "args", "listens"), [
    ({}, [], "--host 127.0.0.1 --port 8000"),
    ({"SITEWARD_HOST": "0.0.0.0", "SITEWARD_PORT": "9123"}, [], "--host 0.0.0.0 --port 9123"),
    ({"SITEWARD_PORT": "9123"}, ["PORT=9124"], "--host 127.0.0.1 --port 9124"),
    ({"HOST": "workstation", "PORT": "3000"}, [], "--host 127.0.0.1 --port 8000"),  # tcsh's HOST is not ours
])
@pytest.mark.parametrize("target", ["run", "serve"])
def test_make_run_and_serve_listen_where_siteward_host_and_port_say_unless_make_is_told(target, env, args, listens):
    clean = {k: v for k, v in os.environ.items() if k not in ("SITEWARD_HOST", "SITEWARD_PORT", "HOST", "PORT")}
    # -n prints the commands without running them (the venv's steps are already done).
    shown = subprocess.run(["make", "-n", target, *args], cwd=ROOT, env={**clean, **env},
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    command_name = "serve" if target == "serve" else "runall"
    (command,) = [line for line in shown.stdout.splitlines() if f"manage.py {command_name}" in line]
    assert command.endswith(listens)
