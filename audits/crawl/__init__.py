"""Turning the crawl library into an audit: start, chunks, and what comes next.

The django-q2 tasks (``audits.tasks``) and the ``audit`` command run the same
steps; only the way the next one is scheduled differs (``audits.dispatch``).
Every step is safe to run twice: django-q2 delivers at least once and the
watchdog may re-enqueue.

The lease protocol, in short:

1. ``ChunkLease.objects.claim`` takes chunk *n* with one conditional UPDATE that
   counts the attempt, sets a fresh owner token and an expiry from the database
   clock. A finished chunk, a live lease or a spent attempt budget refuses it.
2. The chunk leases up to CHUNK_SIZE pending URLs by marking them with its
   number (``FrontierURL.objects.lease_next``); a retry of *n* re-receives
   exactly the URLs still marked. While its last URLs run it tops up with more
   at no greater click depth (``ChunkWriter.top_up``), so fetching does not
   pause between chunks.
3. Every write of the chunk happens in a transaction that first extends the
   lease by token (``lease.fence``); when the token no longer matches, nothing
   is written and the chunk stops.
4. At its soft deadline the chunk hands back what it did not start
   (``lease.finish``) and schedules chunk *n+1* or finalize (``progress.advance``).

No network I/O happens inside a transaction and no lock is held across a fetch:
fetching runs in an event loop on a helper thread, writes on the task's thread
(``bridge``).

Modules: ``setup`` (an audit's settings as crawler objects), ``start``,
``chunk``, ``bridge``, ``writer`` (one sub-batch's rows), ``admission`` (new
link targets into the frontier), ``rows`` (page rows), ``progress`` (what
runs next, page budget, lost URLs), ``resume``.
"""
