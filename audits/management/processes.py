"""The web server and the worker cluster that `runall` and `serve` start, watch and stop together."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def stop_all(children: dict[str, subprocess.Popen], stderr, seconds: float = 15) -> None:
    """SIGTERM each child's main process, wait, then kill whatever is left of its process group.

    The main process only: gunicorn's master then stops its workers, and
    qcluster's its sentinel, pusher, workers and monitor, in order; signalling
    the whole group at once leaves qcluster hanging.
    """
    for child in children.values():
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + seconds
    for name, child in children.items():
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            stderr.write(f"The {name} did not stop in {seconds:.0f}s; killing it.")
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.wait()


class StopSignal:
    """Set by SIGINT or SIGTERM. Made before any child starts, so a signal during start-up stops them too."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGINT, self._set)
        signal.signal(signal.SIGTERM, self._set)

    def _set(self, signum, frame) -> None:
        self.requested = True


def watch(children: dict[str, subprocess.Popen], stop: StopSignal) -> str | None:
    """Wait until a stop is asked for (None) or a child exits (what happened, in words)."""
    while not stop.requested:
        for name, child in children.items():
            if child.poll() is not None:
                return f"The {name} exited with code {child.returncode}"
        time.sleep(0.3)
    return None
