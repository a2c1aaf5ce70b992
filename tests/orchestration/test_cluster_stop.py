"""A cluster told to stop (SIGTERM, as a service manager sends it) hands its running chunk back at once."""

import os
import signal
import time

import pytest

from audits.models import Audit, ChunkLease, FrontierURL
from audits.services import create_audit
from tests.conftest import wait_for

from .grid_site import GridSite

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

# A chunk that would run for 30 s if nothing stopped it, well inside the task timeout;
# one at a time, so the chunk after it is the one the hand-back queues.
LONG_CHUNKS = {"SITEWARD_CHUNK_SECONDS": 30, "SITEWARD_CHUNK_SIZE": 200, "Q_TIMEOUT": 45, "Q_RETRY": 60,
               "SITEWARD_CHUNKS_PER_AUDIT": 1}


def test_sigterm_hands_the_running_chunk_back_and_another_cluster_continues_at_once(owner, cluster_factory):
    with GridSite(pages=80, delay=0.15) as site:
        first = cluster_factory(**LONG_CHUNKS).start()
        audit = create_audit(owner, enforce_quota=False, start_url=site.url("/"), allow_private=True,
                             concurrency=2, max_pages=200)

        def mid_chunk():
            # The lease itself, read once (a second read could fall between two
            # chunks), with URLs left: a stop then finds its window asking for more.
            audit.refresh_from_db()
            lease = ChunkLease.objects.filter(audit=audit, state="leased").first()
            if audit.pages_crawled < 6 or lease is None:
                return None
            left = FrontierURL.objects.filter(audit=audit, chunk=lease.number, state=FrontierURL.State.LEASED)
            return lease if left.count() >= 10 else None

        running = wait_for(mid_chunk, 60, interval=0.05, message=lambda: f"a chunk in flight:\n{first.log()}")
        os.kill(first.proc.pid, signal.SIGTERM)  # the main process only, as systemd's KillMode=mixed does
        stopped_at = time.monotonic()
        first.proc.wait(timeout=30)
        took = time.monotonic() - stopped_at
        assert took < 10, f"the cluster took {took:.1f} s to stop:\n{first.log()}"

        running.refresh_from_db()
        assert running.state == ChunkLease.State.DONE and running.attempts == 1, first.log()
        assert not FrontierURL.objects.filter(audit=audit, state=FrontierURL.State.LEASED).exists()
        following = ChunkLease.objects.get(audit=audit, number=running.number + 1)
        assert following.state == ChunkLease.State.QUEUED  # queued for whoever is not stopping

        second = cluster_factory(**LONG_CHUNKS).start()
        wait_for(lambda: ChunkLease.objects.filter(pk=following.pk, state="leased").exists(), 20, interval=0.1,
                 message=lambda: f"the next chunk to start on the other cluster:\n{second.log()}")
        wait_for(lambda: Audit.objects.get(pk=audit.pk).status in Audit.ENDED, 120, interval=0.5,
                 message=lambda: f"the audit to end:\n{second.log()}")
    audit.refresh_from_db()
    assert audit.status == Audit.Status.COMPLETED, (audit.error_code, audit.error_detail)
    assert not ChunkLease.objects.filter(audit=audit, attempts__gte=2).exists()  # nothing waited out a lease
    assert set(site.page_paths()) <= {url.removeprefix(site.url("")) for url in
                                      audit.pages.values_list("url", flat=True)}
