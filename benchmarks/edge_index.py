"""What an index by target costs the crawl's link-edge writes on SQLite.

The crawl writes ~90 edges a page in commits of one sub-batch (50 pages), each
edge with a random target hash. This writes the same shape of rows (10,000
pages x 91 edges, one commit per 50 pages, WAL, synchronous=NORMAL, as
config/env.py sets) into three schemas:

- ``crawl-index``: an index on (audit, target_hash, tag) kept up during the writes
  (what LinkEdge had until migration 0005);
- ``no-index``: none (LinkEdge now);
- ``build-after``: none, then Inlink's sorted INSERT ... SELECT once at the end
  (what finalize does now).

    .venv/bin/python -m benchmarks.edge_index [--pages 10000] [--batch 4550]

Prints wall and CPU seconds for each; the database lives in a temporary directory.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import resource
import sqlite3
import tempfile
import time
from pathlib import Path

EDGES_PER_PAGE = 91


def measure(mode: str, pages: int, batch: int, workdir: Path) -> str:
    path = workdir / f"{mode}.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE edge (id INTEGER PRIMARY KEY, audit_id INT, source_hash TEXT, source_url TEXT, "
               "target_hash TEXT, target_url TEXT, tag TEXT, anchor_text TEXT, nofollow BOOL, internal BOOL)")
    db.execute("CREATE INDEX edge_audit ON edge (audit_id)")
    db.execute("CREATE INDEX edge_source ON edge (audit_id, source_hash)")
    if mode == "crawl-index":
        db.execute("CREATE INDEX edge_target ON edge (audit_id, target_hash, tag)")
    rng = random.Random(1)
    urls = [f"http://127.0.0.1:8080/p/{n}.html" for n in range(pages)]
    hashes = [hashlib.blake2b(u.encode(), digest_size=16).hexdigest() for u in urls]
    rows: list[tuple] = []

    def commit() -> None:
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT INTO edge (audit_id, source_hash, source_url, target_hash, target_url, tag, "
                       "anchor_text, nofollow, internal) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        db.execute("COMMIT")
        rows.clear()

    started, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    for page in range(pages):
        for _ in range(EDGES_PER_PAGE):
            target = rng.randrange(pages)
            rows.append((1, hashes[page], urls[page], hashes[target], urls[target], "a", "anchor text", 0, 1))
        if len(rows) >= batch:
            commit()
    if rows:
        commit()
    if mode == "build-after":
        # As migration 0005 creates it on SQLite: the composite key, no surrogate id.
        db.execute("CREATE TABLE inlink (audit_id bigint NOT NULL, target_hash varchar(32) NOT NULL, "
                   "tag varchar(10) NOT NULL, edge_id bigint NOT NULL, PRIMARY KEY (audit_id, target_hash, tag, edge_id))")
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO inlink (audit_id, target_hash, tag, edge_id) SELECT audit_id, target_hash, tag, id "
                   "FROM edge WHERE audit_id = 1 ORDER BY target_hash, tag, id")
        db.execute("COMMIT")
    after = resource.getrusage(resource.RUSAGE_SELF)
    db.close()
    wall = time.perf_counter() - started
    return (f"{mode:12} {pages * EDGES_PER_PAGE:,} edges: wall {wall:5.1f} s, user {after.ru_utime - before.ru_utime:5.1f} s,"
            f" system {after.ru_stime - before.ru_stime:5.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=50 * EDGES_PER_PAGE, help="edges per commit")
    args = parser.parse_args()
    print(f"SQLite {sqlite3.sqlite_version}, {args.batch} edges a commit")
    with tempfile.TemporaryDirectory() as workdir:
        for mode in ("crawl-index", "no-index", "build-after"):
            print(measure(mode, args.pages, args.batch, Path(workdir)), flush=True)


if __name__ == "__main__":
    main()
