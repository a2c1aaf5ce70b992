"""CPU per request of httpx for one big connection pool against several small ones.

httpcore scans every pooled connection for every queued request, so the cost
of a request grows with the pool size; the Fetcher therefore spreads its
concurrency over several pools of ``FetchPolicy.pool_connections``. This probe
shows the difference on the benchmark corpus, and the cost of running without
the ``sniffio`` package (httpcore then retries a failing ``import sniffio`` on
every lock it creates). Run in a fresh process per shape by ``bench_library``:

    python -m benchmarks.httpx_pools http://127.0.0.1:8080 --pools 4 --per-pool 8 --requests 4000

``--hide-sniffio`` emulates the package being absent: a meta-path finder runs
the same sys.path scan a missing module costs and then fails the import.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.machinery
import json
import sys
import time


class _HideSniffio:
    """Make ``import sniffio`` fail after the path scan a missing package costs."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "sniffio" or name.startswith("sniffio."):
            importlib.machinery.PathFinder.find_spec(name, path)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


async def _run(base: str, paths: list[str], pools: int, per_pool: int, requests: int) -> dict:
    import httpx

    clients = [
        httpx.AsyncClient(
            limits=httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool),
            trust_env=False,
        )
        for _ in range(pools)
    ]
    counter = iter(range(requests))
    statuses: dict[int, int] = {}

    async def worker(client: httpx.AsyncClient) -> None:
        for i in counter:
            response = await client.get(base + paths[i % len(paths)])
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    # Warm every connection first so both shapes are measured in steady state.
    await asyncio.gather(*(c.get(base + paths[0]) for c in clients for _ in range(per_pool)))
    cpu, wall = time.process_time(), time.monotonic()
    await asyncio.gather(*(worker(c) for c in clients for _ in range(per_pool)))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    for client in clients:
        await client.aclose()
    return {
        "pools": pools,
        "per_pool": per_pool,
        "requests": requests,
        "cpu_ms_per_request": 1000 * cpu / requests,
        "requests_per_second": requests / wall,
        "statuses": statuses,
        "sniffio": "sniffio" in sys.modules,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--pools", type=int, required=True)
    parser.add_argument("--per-pool", type=int, required=True)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--pages", type=int, default=200, help="corpus pages to cycle through")
    parser.add_argument("--hide-sniffio", action="store_true")
    args = parser.parse_args()
    if args.hide_sniffio:
        sys.meta_path.insert(0, _HideSniffio)
    from benchmarks.corpus import page_path
    from benchmarks.netguard import refuse_non_loopback

    refuse_non_loopback()
    paths = [page_path(i) for i in range(args.pages)]
    print(json.dumps(asyncio.run(_run(args.base, paths, args.pools, args.per_pool, args.requests))))


if __name__ == "__main__":
    main()
