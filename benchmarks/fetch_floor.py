"""The requests of a delta audit alone: what a delta of the corpus costs before anything is parsed or stored.

``bench_delta --floor`` writes the URL list and runs this as a child process:

    python -m benchmarks.fetch_floor URLS.txt --concurrency 32

Each line of ``URLS.txt`` is ``GET URL`` (a page: asked with the validators
nginx gave it, as a delta audit asks a page its source audit stored with
them), ``GET! URL`` (a page without validators: a broken target, fetched in
full) or ``HEAD URL`` (a resource check). First, unmeasured, one HEAD a page
collects its ETag and Last-Modified; then every request goes through
``crawler.fetch.Fetcher`` on the crawl's event loop (``crawler.loop``), at
most ``--concurrency`` at once, exactly as a chunk sends them, and nothing
else happens: no parse, no database, no report. Prints one JSON object: the
CPU seconds (this process, user + system) and wall seconds of that part, and
how the answers came back (304s, other statuses, errors).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a file as well as with -m
    sys.path.insert(0, str(REPO))

from crawler import loop  # noqa: E402
from crawler.fetch import Fetcher, FetchPolicy  # noqa: E402
from crawler.net import AddressGuard  # noqa: E402


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run(lines: list[tuple[str, str]], concurrency: int) -> dict:
    guard = AddressGuard(allow_private=True)
    async with Fetcher(FetchPolicy(), guard, concurrency=concurrency) as fetcher:
        validators: dict[str, list[tuple[bytes, bytes]]] = {}
        pages = [url for method, url in lines if method == "GET"]

        async def collect() -> None:
            while pages:
                url = pages.pop()
                head = await fetcher.check(url)
                validators[url] = [(name.encode(), head.headers[key].encode()) for name, key in
                                   (("If-None-Match", "etag"), ("If-Modified-Since", "last-modified"))
                                   if key in head.headers]

        await asyncio.gather(*(collect() for _ in range(concurrency)))
        todo = list(reversed(lines))
        answers: Counter[str] = Counter()

        async def send() -> None:
            while todo:
                method, url = todo.pop()
                if method == "HEAD":
                    result = await fetcher.check(url)
                else:
                    result = await fetcher.fetch(url, headers=validators.get(url, []))
                answers[f"{method} {result.error.value if result.error else result.status}"] += 1

        cpu, wall = cpu_seconds(), time.monotonic()
        await asyncio.gather(*(send() for _ in range(concurrency)))
        return {"cpu": cpu_seconds() - cpu, "wall": time.monotonic() - wall, "requests": len(lines),
                "answers": dict(sorted(answers.items()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("urls", type=Path, help="lines of 'GET URL', 'GET! URL' or 'HEAD URL'")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    lines = [tuple(line.split(" ", 1)) for line in args.urls.read_text().splitlines() if line.strip()]
    print(json.dumps(loop.run(run(lines, args.concurrency))))


if __name__ == "__main__":
    main()
