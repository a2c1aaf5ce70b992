"""The `audit` command as `manage.py audit` runs it, for tests that need its exit code."""

import io
import sys

from django.core.management import CommandError, call_command


def run_audit(*args) -> int:
    """Run the command with ``args``; its exit code (0 when it returns)."""
    try:
        call_command("audit", *args)
    except SystemExit as exc:
        return exc.code
    except CommandError as exc:  # run_from_argv prints these and exits with returncode
        sys.stderr.write(f"CommandError: {exc}\n")
        return exc.returncode
    return 0


class CountingFlushes(io.StringIO):
    """A report file that records how many lines it held at each flush."""

    def __init__(self):
        super().__init__()
        self.lines_at_flush = []

    def flush(self):
        self.lines_at_flush.append(self.getvalue().count("\n"))
        super().flush()
