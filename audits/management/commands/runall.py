"""Run the web server and the django-q2 worker cluster together, and stop both on Ctrl-C.

``make run`` ends here. Each child runs in its own process group so one signal
stops everything it started (qcluster's sentinel and workers included).
"""

import os
import subprocess
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from config.env import env_int

from ..processes import StopSignal, stop_all, watch


class Command(BaseCommand):
    help = "Start the web server and the worker cluster; Ctrl-C stops both."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("SITEWARD_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=env_int("SITEWARD_PORT", 8000, minimum=1, maximum=65535))
        parser.add_argument("--no-login", action="store_true", help="Skip creating the admin login")

    def handle(self, *args, host, port, no_login, **options):
        if not no_login:
            call_command("ensure_login", stdout=self.stdout)
        manage = [sys.executable, os.path.abspath(sys.argv[0])]
        stop = StopSignal()
        # runserver --insecure serves static files with DEBUG off: fine for the
        # local, single-user `make run`; the README says how to deploy behind a real server.
        children = {
            "web": subprocess.Popen(manage + ["runserver", "--noreload", "--insecure", f"{host}:{port}"],
                                    start_new_session=True),
            "worker cluster": subprocess.Popen(manage + ["qcluster"], start_new_session=True),
        }
        chromium = settings.SITEWARD["CHROMIUM"]
        if os.access(chromium, os.X_OK):
            # Rendered audits' steps run on their own queue, beside the crawl cluster.
            children["render cluster"] = subprocess.Popen(
                manage + ["qcluster"], start_new_session=True,
                env={**os.environ, "Q_CLUSTER_NAME": settings.RENDER_QUEUE})
        self.stdout.write(self.style.SUCCESS(f"Siteward is running at http://{host}:{port}/  (Ctrl-C stops it)"))
        if "render cluster" not in children:
            self.stdout.write(f"No Chromium at {chromium}: audits that render JavaScript wait for a render worker "
                              "(see the README); every other audit runs.")
        self.stdout.flush()

        try:
            failed = watch(children, stop)
            if failed:
                self.stderr.write(f"{failed}; stopping.")
        finally:
            stop_all(children, self.stderr)
            self.stdout.write("Stopped the web server and the worker clusters.")
