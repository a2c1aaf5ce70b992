"""Serve Siteward for real: gunicorn and the django-q2 worker cluster, started and stopped together.

``make serve`` ends here (after ``migrate``), and so can a systemd unit (docs/deploy.md).
It refuses to run with DEBUG on, gathers the static files (``collectstatic``) for
WhiteNoise to serve under hashed, compressed names, then starts gunicorn on
``config.wsgi`` and ``manage.py qcluster``. Both children get
``SITEWARD_SERVE_STATIC=1`` (settings: the manifest storage and WhiteNoise's
middleware). Each child runs in its own session, so a terminal's Ctrl-C reaches only
this command, which then stops both in order, as SIGTERM does. If either
child dies, the other is stopped too and this command exits non-zero, so a supervisor
(systemd's Restart=on-failure) restarts the pair.
"""

import os
import subprocess
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from gunicorn.config import KNOWN_SETTINGS as gunicorn_settings

from config.env import env_int

from ..processes import StopSignal, stop_all, watch

STOP_SECONDS = 30  # then whatever is left is killed (a crawl chunk cut short is leased again later)


class Command(BaseCommand):
    help = "Run gunicorn (static files by WhiteNoise) and the worker cluster; SIGTERM or Ctrl-C stops both."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("SITEWARD_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=env_int("SITEWARD_PORT", 8000, minimum=1, maximum=65535))
        parser.add_argument("--workers", type=int, default=env_int("WEB_CONCURRENCY", 2, minimum=1, maximum=64),
                            help="gunicorn worker processes (default: WEB_CONCURRENCY or 2)")
        parser.add_argument("--threads", type=int, default=env_int("WEB_THREADS", 4, minimum=1, maximum=64),
                            help="threads per gunicorn worker (default: WEB_THREADS or 4)")
        parser.add_argument("--no-cluster", action="store_true",
                            help="Only the web server: the worker clusters run elsewhere")
        parser.add_argument("--no-collectstatic", action="store_true",
                            help="Skip collectstatic (the files are already gathered in STATIC_ROOT)")

    def handle(self, *args, host, port, workers, threads, no_cluster, no_collectstatic, **options):
        if settings.DEBUG:
            raise CommandError(
                "Refusing to serve with DEBUG on: it shows tracebacks and settings to anyone who "
                "triggers an error. Unset DEBUG (or set DEBUG=0) and give a SECRET_KEY; "
                "`make run` is the development server."
            )
        manage = [sys.executable, os.path.abspath(sys.argv[0])]
        env = {**os.environ, "SITEWARD_SERVE_STATIC": "1"}
        if not no_collectstatic:
            result = subprocess.run(manage + ["collectstatic", "--noinput", "-v", "0"], env=env)
            if result.returncode:
                raise CommandError(f"collectstatic failed (exit code {result.returncode}); not starting.")

        # Before any child exists, so a signal arriving during start-up still stops them.
        stop = StopSignal()

        bind = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
        gunicorn = [
            sys.executable, "-m", "gunicorn", "config.wsgi:application",
            "--chdir", str(settings.BASE_DIR), "--bind", bind,
            # Threads, so a long CSV export or a slow client does not hold a whole
            # worker, and the worker's heartbeat goes on while a request streams.
            "--worker-class", "gthread", "--workers", str(workers), "--threads", str(threads),
            "--graceful-timeout", "15", "--access-logfile", "-",
        ]
        if any(setting.name == "control_socket_disable" for setting in gunicorn_settings):
            # Recent gunicorn (27 here) opens a control socket at ~/.gunicorn/gunicorn.ctl,
            # one path for every gunicorn its user runs; nothing here uses it.
            gunicorn.append("--no-control-socket")
        children = {"web server": subprocess.Popen(gunicorn, env=env, start_new_session=True)}
        if not no_cluster:
            children["worker cluster"] = subprocess.Popen(manage + ["qcluster"], env=env, start_new_session=True)
        what = "gunicorn" + ("" if no_cluster else " and the worker cluster")
        self.stdout.write(self.style.SUCCESS(
            f"Siteward is serving at http://{bind}/ ({what}; Ctrl-C or SIGTERM stops it)"))
        self.stdout.flush()

        try:
            failed = watch(children, stop)
        finally:
            stop_all(children, self.stderr, STOP_SECONDS)
            self.stdout.write("Stopped the web server" + (" and the worker cluster." if len(children) > 1 else "."))
        if failed:
            raise CommandError(f"{failed}; stopped everything.")
