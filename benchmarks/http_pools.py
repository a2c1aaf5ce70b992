"""CPU per request through ``Fetcher`` for several httpcore pool layouts.

httpcore's ``AsyncConnectionPool`` looks at every connection it holds for
every request it assigns, so its cost per request grows with its size. The
fetcher splits its ``concurrency`` connections into pools of
``crawler.fetch.POOL_CONNECTIONS`` each and sends every request through the
least busy pool; this probe measures that CPU cost for a few pool sizes at one
concurrency, so the size can be chosen from numbers (record them in
``benchmarks/RESULTS-http.md``).

It serves a small benchmark corpus on 127.0.0.1 (nginx when installed, else
the pre-forked Python server, in other processes, so only the client's CPU is
counted), refuses any connection off loopback, and runs the layouts
interleaved for a few rounds, reporting each one's median::

    python -m benchmarks.http_pools --concurrency 32 --requests 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import time

from benchmarks.corpus import build_corpus, page_path
from benchmarks.netguard import refuse_non_loopback
from benchmarks.static_server import serve
from crawler import fetch as fetch_module
from crawler.fetch import Fetcher, FetchPolicy
from crawler.loop import run
from crawler.net import AddressGuard

POOL_SIZES = (32, 16, 8, 4, 2, 1)


async def _measure(base: str, paths: list[str], method: str, per_pool: int, requests: int,
                   concurrency: int) -> dict:
    """CPU per request for ``requests`` requests through one fresh, warmed Fetcher."""
    fetch_module.POOL_CONNECTIONS = per_pool
    statuses: dict[int, int] = {}
    async with Fetcher(FetchPolicy(), AddressGuard(allow_private=True),
                       concurrency=concurrency) as fetcher:

        async def burst(count: int) -> None:
            counter = iter(range(count))

            async def worker() -> None:
                for i in counter:
                    url = base + paths[i % len(paths)]
                    result = await (fetcher.check(url) if method == "HEAD" else fetcher.fetch(url))
                    statuses[result.status or 0] = statuses.get(result.status or 0, 0) + 1

            await asyncio.gather(*(worker() for _ in range(concurrency)))

        await burst(4 * concurrency)  # dial and warm every connection first
        statuses.clear()
        cpu, wall = time.process_time(), time.monotonic()
        await burst(requests)
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    if set(statuses) != {200}:
        raise SystemExit(f"pools of {per_pool}: unexpected statuses {statuses}")
    return {"cpu_ms": 1000 * cpu / requests, "per_second": requests / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=2000, help="per layout, method and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=200, help="corpus pages to cycle through")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(POOL_SIZES),
                        help="connections per pool to compare")
    args = parser.parse_args()
    refuse_non_loopback()
    corpus = build_corpus(args.pages)
    paths = [page_path(i) for i in range(args.pages)]
    samples: dict[tuple[str, int], list[dict]] = {}
    with serve(corpus) as (base, server):
        for _ in range(args.rounds):
            for method in ("HEAD", "GET"):
                for size in args.sizes:
                    measured = _measure(base, paths, method, size, args.requests, args.concurrency)
                    samples.setdefault((method, size), []).append(run(measured))
    print(f"server: {server}; concurrency {args.concurrency}; {args.requests} requests x "
          f"{args.rounds} rounds per row; medians")
    print("| method | connections per pool | pools | CPU ms per request | requests/s |")
    print("|---|---:|---:|---:|---:|")
    for (method, size), rows in samples.items():
        pools = math.ceil(args.concurrency / min(size, args.concurrency))
        cpu = statistics.median(r["cpu_ms"] for r in rows)
        rate = statistics.median(r["per_second"] for r in rows)
        print(f"| {method} | {size} | {pools} | {cpu:.3f} | {rate:.0f} |")
    print(json.dumps({f"{m} {s}": rows for (m, s), rows in samples.items()}))


if __name__ == "__main__":
    main()
