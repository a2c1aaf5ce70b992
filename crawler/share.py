"""A chunk's part of its audit's politeness budget, set from outside the event loop.

Several chunks of one audit may crawl the same site at once, from several
machines. The audit's concurrency and rate are the site's, so the database
thread splits them between the chunks at every heartbeat and the window reads
its part before each start. Plain attributes: each is written by one thread.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Share:
    """What the window may use: ``limit`` requests in flight, and a rate split ``parts`` ways."""

    limit: int
    parts: int = 1
    # Written by the window: what it has in flight now, for the next rebalance.
    in_flight: int = 0
