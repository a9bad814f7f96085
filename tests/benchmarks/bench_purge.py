"""Log retention: purging 1,000,000 expired ``delivery_log`` rows from a SQLite store
while a group-commit writer keeps writing (issue 17 item 4).

The purge runs in steps of ``StoreConnection.purge_step`` rows, each one short write
transaction; the receiver's writers wait for one step at most. The benchmark measures:

- ``longest_lock_ms``: the longest time one purge step held the store's write lock (from
  taking the lock to releasing it after COMMIT);
- ``writer_max_ms``: the longest write transaction of a concurrent writer (batches of 50
  new deliveries, back to back) during the purge, lock wait included: what a delivery
  waits at worst; the receiver answers 503 past 800 ms;
- ``purge_s``: the whole purge.

Afterwards the store must hold exactly the writer's rows and none of the expired ones.

Run: ``.venv/bin/python tests/benchmarks/bench_purge.py`` (``BENCH_ROWS=N`` changes the
row count, ``BENCH_STEP=N`` the rows per step). Last line:
``RESULT rows=... longest_lock_ms=... writer_max_ms=... purge_s=...``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gptools.webhooks import LOG_COLUMNS, SQLiteStore
from gptools.webhooks._records import LogEntry, WriteItem, format_utc

ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))
STEP = os.environ.get("BENCH_STEP")  # to compare step sizes
BODY = (
    '{"roundId":"R-1","gameId":"golden-pharaoh","playerId":"player-00001",'
    '"timestamp":"2026-03-02T10:15:30.123456","bet":2.10,"currencyCode":"EUR",'
    '"events":["COIN"],"actionId":"%s"}'
)


def _fill(db: Path, old: datetime) -> None:
    raw = sqlite3.connect(db, isolation_level=None)
    raw.execute("BEGIN")
    placeholders = ", ".join("?" for _ in LOG_COLUMNS)
    chunk = 50_000
    for start in range(0, ROWS, chunk):
        rows = []
        for i in range(start, min(start + chunk, ROWS)):
            action_id = str(uuid.UUID(int=i, version=4))
            at = format_utc(old + timedelta(microseconds=i))
            rows.append((at, 200, 1.5, BODY % action_id, action_id, 0, 1, None, "127.0.0.1"))
        raw.executemany(f"INSERT INTO delivery_log VALUES ({placeholders})", rows)
    raw.execute("COMMIT")
    raw.close()


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-purge-"))
    try:
        store = SQLiteStore(work / "store.sqlite3")
        store.connect().close()
        now = datetime.now(UTC)
        t = time.perf_counter()
        _fill(store.path, now - store.log_retention - timedelta(days=1))
        print(
            f"filled {ROWS:,} expired log rows in {time.perf_counter() - t:.1f} s "
            f"({store.path.stat().st_size / 1e6:.0f} MB)"
        )

        stop = threading.Event()
        waits: list[float] = []
        written = 0

        def write_load() -> None:
            nonlocal written
            conn = store.connect()
            while not stop.is_set():
                batch = [
                    WriteItem(LogEntry(datetime.now(UTC), 200, BODY % uuid.uuid4(), latency_ms=1.0))
                    for _ in range(50)
                ]
                started = time.perf_counter()
                conn.write_batch(batch)
                waits.append(time.perf_counter() - started)
                written += len(batch)
            conn.close()

        writer = threading.Thread(target=write_load)
        writer.start()
        conn = store.connect()
        if STEP:
            conn.purge_step = int(STEP)
        t = time.perf_counter()
        result = conn.purge_log(now)
        purge_s = time.perf_counter() - t
        stop.set()
        writer.join()
        left = conn.log_count()
        conn.close()
        print(
            f"purged {result.rows:,} rows in {result.steps} steps of up to "
            f"{conn.purge_step} in {purge_s:.1f} s; longest write-lock hold "
            f"{result.longest_hold * 1000:.1f} ms"
        )
        waits.sort()
        print(
            f"concurrent writer: {len(waits)} batches of 50, median "
            f"{waits[len(waits) // 2] * 1000:.1f} ms, max {waits[-1] * 1000:.1f} ms"
        )
        if result.rows != ROWS or left != written:
            raise SystemExit(
                f"FAILED: purged {result.rows} of {ROWS}; {left} rows left, "
                f"the writer wrote {written}"
            )
        print(
            f"RESULT rows={result.rows} longest_lock_ms={result.longest_hold * 1000:.1f} "
            f"writer_max_ms={waits[-1] * 1000:.1f} purge_s={purge_s:.1f}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
