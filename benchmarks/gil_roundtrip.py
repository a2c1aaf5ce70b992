"""What a PostgreSQL round trip costs a thread while another Python thread is busy.

The audit's database thread talks to PostgreSQL while the crawl thread parses
pages. Each wait for the server releases the GIL, and getting it back from a
busy thread takes up to the interpreter's switch interval (5 ms) each time, so
a round trip costs far more than the server's answer: this is why the chunk
writer keeps round trips per sub-batch few (bulk.py's staging table).

    .venv/bin/python -m benchmarks.gil_roundtrip [--dsn postgresql://postgres@127.0.0.1:5432/postgres]

Prints milliseconds per SELECT + COMMIT: alone, beside a busy thread, and
beside a busy thread with a 0.5 ms switch interval.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import psycopg


def per_trip(conn: psycopg.Connection, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        conn.execute("SELECT 1").fetchone()
        conn.commit()
    return (time.perf_counter() - started) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--trips", type=int, default=200)
    args = parser.parse_args()
    conn = psycopg.connect(args.dsn, autocommit=False)
    print(f"alone: {per_trip(conn, args.trips):.2f} ms per SELECT + COMMIT")
    stop = threading.Event()

    def busy() -> None:
        total = 0
        while not stop.is_set():
            for i in range(1000):
                total += i

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    try:
        print(f"beside a busy thread: {per_trip(conn, args.trips):.2f} ms")
        default = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        print(f"beside a busy thread, switch interval 0.5 ms (default {default * 1000:.0f} ms): "
              f"{per_trip(conn, args.trips):.2f} ms")
        sys.setswitchinterval(default)
    finally:
        stop.set()
        thread.join()
        conn.close()


if __name__ == "__main__":
    main()
