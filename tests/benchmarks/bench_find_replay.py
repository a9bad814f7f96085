"""``webhooks find`` and ``webhooks replay`` at scale (issue 38, item 5).

For each store (SQLite, then PostgreSQL): a store of ``BENCH_DELIVERIES`` deliveries
(default 10,000,000; stored as a receiver with a handler stores them, bodies kept;
one action in five answered 503 once before its 200) built in bulk
(one transaction of ``executemany`` on SQLite, ``COPY`` on PostgreSQL, the indexes built
afterwards); then ``BENCH_LOOKUPS`` lookups each by playerId, by roundId and by a
one-hour range (``--limit`` 100), timed one by one; then a replay of ``BENCH_REPLAY``
actions (default 1,000,000) to a no-op handler, and, as the baseline measured in the same
run, the live processing queue running as many freshly stored actions with the same
handler.

- ``find_p99_ms``: the 99th percentile of all lookups, the worse of the two stores
  (goal < 100);
- ``replay_rate``: actions replayed a second (queued and run), the worse store's;
- ``replay_vs_live``: replay's rate over the live queue's, the worse store's (goal ≥ 0.8).

Run: ``.venv/bin/python tests/benchmarks/bench_find_replay.py`` (``BENCH_DELIVERIES``,
``BENCH_REPLAY``, ``BENCH_LOOKUPS``, ``BENCH_STORES=sqlite,postgres`` change the sizes and
stores). Last line: ``RESULT find_p99_ms=... replay_rate=... replay_vs_live=...``.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import sqlite3
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from gptools.models import GameEventNotification
from gptools.webhooks import FindFilter, ProcessingQueue, open_store, replay
from gptools.webhooks._find_schema import PG_FIND_DDL, SQLITE_FIND_DDL
from gptools.webhooks._records import format_utc

DELIVERIES = int(os.environ.get("BENCH_DELIVERIES", "10000000"))
REPLAY = int(os.environ.get("BENCH_REPLAY", "1000000"))
LOOKUPS = int(os.environ.get("BENCH_LOOKUPS", "200"))
STORES = os.environ.get("BENCH_STORES", "sqlite,postgres").split(",")
PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
PLAYERS = 100_000
T0 = datetime(2026, 3, 2, tzinfo=UTC)
SPAN = timedelta(days=30)
BODY = (
    '{"roundId":"R-%d","gameId":"game-%d","playerId":"player-%d",'
    '"timestamp":"2026-03-02T10:15:30.123456","bet":2.10,"currencyCode":"EUR",'
    '"events":["COIN"],"actionId":"%s"}'
)
_INDEXES = [s for s in SQLITE_FIND_DDL if s.startswith("CREATE INDEX")]


def _rows(n_actions: int) -> Any:
    """(action_id, received_at, body, retried) per action, oldest first."""
    step = SPAN / n_actions
    for i in range(n_actions):
        action_id = str(uuid.UUID(int=i + 1, version=4))
        body = BODY % (i, i % 500, i % PLAYERS, action_id)
        yield action_id, T0 + step * i, body, i % 5 == 0


def _actions_for(deliveries: int) -> int:
    return deliveries * 5 // 6  # one in five actions has two deliveries


def _index_names(ddl: tuple[str, ...]) -> list[str]:
    return [s.split()[5] for s in ddl if s.startswith("CREATE INDEX")]


def build_sqlite(path: Path, n_actions: int) -> str:
    url = f"sqlite:///{path}"
    open_store(url).connect().close()  # laid out by the migrations
    raw = sqlite3.connect(path, isolation_level=None)
    for name in [*_index_names(SQLITE_FIND_DDL), "delivery_log_received_at"]:
        raw.execute(f"DROP INDEX IF EXISTS {name}")
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=OFF")
    raw.execute("BEGIN")
    log: list[tuple[Any, ...]] = []
    acts: list[tuple[Any, ...]] = []
    for action_id, at, body, retried in _rows(n_actions):
        ts = format_utc(at)
        if retried:
            log.append((format_utc(at - timedelta(seconds=1)), 503, 3.0, body, action_id, 0, 1))
        log.append((ts, 200, 1.5, body, action_id, 0, 1))
        acts.append((action_id, ts, body, "done", ts))
        if len(log) >= 100_000:
            _flush_sqlite(raw, log, acts)
    _flush_sqlite(raw, log, acts)
    raw.execute("COMMIT")
    for statement in [*SQLITE_FIND_DDL, "CREATE INDEX IF NOT EXISTS delivery_log_received_at"
                      " ON delivery_log (received_at)"]:  # fmt: skip
        raw.execute(statement)
    raw.execute("ANALYZE")
    raw.close()
    return url


def _flush_sqlite(raw: sqlite3.Connection, log: list[Any], acts: list[Any]) -> None:
    raw.executemany(
        "INSERT INTO delivery_log (received_at, status, latency_ms, body, action_id, duplicate,"
        " auth_ok) VALUES (?, ?, ?, ?, ?, ?, ?)",
        log,
    )
    raw.executemany(
        "INSERT INTO webhook_actions (action_id, first_received_at, body, state,"
        " next_attempt_at) VALUES (?, ?, ?, ?, ?)",
        acts,
    )
    log.clear()
    acts.clear()


def build_postgres(schema: str, n_actions: int) -> str:
    url = f"{PG_DSN}?schema={schema}"
    open_store(url).connect().close()
    with psycopg.connect(PG_DSN, autocommit=True) as raw:
        raw.execute(f'SET search_path TO "{schema}"')
        for name in [*_index_names(PG_FIND_DDL), "delivery_log_received_at"]:
            raw.execute(f"DROP INDEX IF EXISTS {name}")
        log = io.StringIO()
        acts = io.StringIO()
        for action_id, at, body, retried in _rows(n_actions):
            ts = at.isoformat()
            if retried:
                earlier = (at - timedelta(seconds=1)).isoformat()
                log.write(f"{earlier}\t503\t3.0\t{_copy(body)}\t{action_id}\tf\tt\n")
            log.write(f"{ts}\t200\t1.5\t{_copy(body)}\t{action_id}\tf\tt\n")
            acts.write(f"{action_id}\t{ts}\t{_copy(body)}\tdone\t{ts}\n")
        with raw.cursor() as cur:
            with cur.copy(
                "COPY delivery_log (received_at, status, latency_ms, body, action_id, duplicate,"
                " auth_ok) FROM STDIN"
            ) as copy:
                copy.write(log.getvalue())
            with cur.copy(
                "COPY webhook_actions (action_id, first_received_at, body, state,"
                " next_attempt_at) FROM STDIN"
            ) as copy:
                copy.write(acts.getvalue())
        for statement in [*PG_FIND_DDL, "CREATE INDEX IF NOT EXISTS delivery_log_received_at"
                          " ON delivery_log (received_at)"]:  # fmt: skip
            raw.execute(statement)
        raw.execute("ANALYZE")
    return url


def _copy(text: str) -> str:
    return text.replace("\\", "\\\\")


def lookups(url: str, n_actions: int) -> list[float]:
    rng = random.Random(38)
    store = open_store(url, create=False)
    hours = max(1, int(SPAN / timedelta(hours=1)) - 1)
    filters = []
    for _ in range(LOOKUPS):
        filters.append(FindFilter(player_id=f"player-{rng.randrange(min(PLAYERS, n_actions))}"))
        filters.append(FindFilter(round_id=f"R-{rng.randrange(n_actions)}"))
        start = T0 + timedelta(hours=rng.randrange(hours))
        filters.append(FindFilter(since=start, until=start + timedelta(hours=1)))
    times = []
    conn = store.connect()
    try:
        from gptools.webhooks._find import find_in_store

        for wanted in filters:
            began = time.perf_counter()
            result = find_in_store(conn, wanted, limit=100)
            times.append((time.perf_counter() - began) * 1000)
            assert result.actions, wanted
    finally:
        conn.close()
    return times


def _noop(event: GameEventNotification) -> None:
    """The no-op handler."""


def replay_rate(url: str, n_actions: int) -> tuple[float, float]:
    """(replay's actions a second, the live queue's) over the same number of actions."""
    store = open_store(url, create=False)
    count = min(REPLAY, n_actions // 2)
    step = SPAN / n_actions
    until = T0 + step * count
    began = time.perf_counter()
    result = replay(store, FindFilter(since=T0, until=until), handler=_noop, show_progress=False,
                    batch=1000)  # fmt: skip
    replay_s = time.perf_counter() - began
    assert result.actions == count and result.done, result
    # The live baseline: as many stored actions made pending (as new deliveries leave
    # them) and run by the processing queue alone.
    conn = store.connect()
    try:
        with conn._transaction():
            conn._execute(
                "UPDATE webhook_actions SET state = 'pending', attempts = 0, next_attempt_at = ?"
                " WHERE first_received_at >= ?",
                (conn._ts(T0), conn._ts(T0 + step * (n_actions - count))),
            )
    finally:
        conn.close()
    began = time.perf_counter()
    ProcessingQueue(store, _noop, batch=1000).drain(timeout=timedelta(hours=2))
    live_s = time.perf_counter() - began
    return count / replay_s, count / live_s


def main() -> None:
    n_actions = _actions_for(DELIVERIES)
    worst_p99 = 0.0
    worst_rate = float("inf")
    worst_ratio = float("inf")
    folder = Path(tempfile.mkdtemp(prefix="bench_find_replay_"))
    try:
        for engine in STORES:
            began = time.perf_counter()
            if engine == "sqlite":
                url = build_sqlite(folder / "s.db", n_actions)
                schema = None
            else:
                schema = f"bench_{uuid.uuid4().hex[:10]}"
                url = build_postgres(schema, n_actions)
            print(f"{engine}: built {DELIVERIES} deliveries in {time.perf_counter() - began:.0f} s",
                  flush=True)  # fmt: skip
            try:
                times = sorted(lookups(url, n_actions))
                p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
                print(f"{engine}: find p50={times[len(times) // 2]:.1f} ms p99={p99:.1f} ms",
                      flush=True)  # fmt: skip
                rate, live = replay_rate(url, n_actions)
                print(f"{engine}: replay {rate:.0f}/s, live queue {live:.0f}/s", flush=True)
                worst_p99 = max(worst_p99, p99)
                worst_rate = min(worst_rate, rate)
                worst_ratio = min(worst_ratio, rate / live)
            finally:
                if schema is not None:
                    with psycopg.connect(PG_DSN, autocommit=True) as raw:
                        raw.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"RESULT find_p99_ms={worst_p99:.1f} replay_rate={worst_rate:.0f} "
        f"replay_vs_live={worst_ratio:.2f}"
    )


if __name__ == "__main__":
    main()
