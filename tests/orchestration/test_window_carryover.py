"""The adaptive window outlives a chunk: the next chunk starts where the last one left it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audits.crawl.chunk import claim, run_chunk
from audits.crawl.setup import crawl_setup
from audits.models import Audit, ChunkLease

from .starting import started

pytestmark = pytest.mark.django_db


def test_a_window_grown_on_a_healthy_site_keeps_growing_across_chunks(owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site, concurrency=16)
    windows = []
    while dispatcher.steps and dispatcher.steps[0][0] == "chunk":
        _, _, number = dispatcher.steps.pop(0)
        assert run_chunk(audit.pk, number, dispatcher) == "done"
        audit.refresh_from_db()
        windows.append(audit.current_window)
    # Every answer is clean, so the window only grows: +1 per four results.
    # Restarting at 4 each chunk, a 10-URL chunk could end no higher than 6.
    assert len(windows) >= 4, windows
    assert windows == sorted(windows), windows
    assert windows[-1] > 6, windows


def test_a_chunk_starts_from_the_stored_window_within_the_audit_cap(owner, grid_site, fast_settings):
    audit, _ = started(owner, grid_site, concurrency=8)
    assert crawl_setup(audit).window.start == 4  # nothing learnt yet
    audit.current_window = 3  # a site that throttled the last chunk down
    assert crawl_setup(audit).window.start == 3
    audit.current_window = 1  # down to one: the next chunk still probes with two
    assert crawl_setup(audit).window.start == 2
    audit.current_window = 12  # a cap lowered since (or a larger stored value)
    assert crawl_setup(audit).window.start == 8
    audit.concurrency = 1
    assert crawl_setup(audit).window.start == 1


def test_a_serial_retry_chunk_leaves_the_learnt_window_alone(owner, grid_site, fast_settings):
    audit, dispatcher = started(owner, grid_site, concurrency=16)
    run_chunk(audit.pk, 1, dispatcher)
    Audit.objects.filter(pk=audit.pk).update(current_window=9)
    dispatcher.steps.clear()
    claim(audit.pk, 2)  # attempt 1 dies; attempt 2 runs one URL at a time
    ChunkLease.objects.filter(audit=audit, number=2).update(leased_until=timezone.now() - timedelta(seconds=1))
    assert run_chunk(audit.pk, 2, dispatcher) == "done"
    assert ChunkLease.objects.get(audit=audit, number=2).attempts == 2
    audit.refresh_from_db()
    assert audit.current_window == 9
