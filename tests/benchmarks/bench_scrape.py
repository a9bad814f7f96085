"""What a scrape and a purge cost as the store grows (issue 34 item 8): a store of 10,000
rows against one of 10,000,000 (``delivery_log`` and ``webhook_actions`` each), in one run.

Both stores are PostgreSQL schemas on the machine's server (``BENCH_PG`` =
``postgresql://postgres@127.0.0.1:5432/test`` by default; dropped afterwards):
PostgreSQL is what a production receiver with several workers or hosts runs on, and the
one engine whose planner could choose a sequential scan of a large table where a small
one would not show it. The large store is built with set-based SQL (``generate_series``,
indexes built after the load), then ``VACUUM ANALYZE``d as autovacuum would have.

Each store holds the same queue: 10 pending and 5 dead actions, the rest processed
(``done``, as a receiver without a handler writes them), and log rows of the last day.

- **scrape**: ``gptools webhooks serve --workers 2 --metrics-port`` on each store (the
  production topology), ``GET /metrics`` ``SCRAPES`` times on each, alternating, after
  the workers' first purge has finished; ``scrape_ms_*`` are the medians. A scrape reads
  only what the workers keep (``gptools/webhooks/_metrics.py``), so the store's size
  should not show. The store watch's own count (what moved off the scrape path) is
  timed too, and the count a scrape used to run (``GROUP BY state`` over every action)
  for comparison; both are printed, not in the RESULT line.
- **purge**: ``PURGE_ROUNDS`` rounds, alternating stores: ``PURGED`` log rows past the
  log retention and ``PURGED`` expired processed actions are added (set-based), and the
  two purges of a maintenance round (what one worker runs every hour) delete exactly
  them: the log's retention purge (``StoreConnection.purge_log``, through the index
  ``delivery_log_received_at``) and the dedupe-key purge (``StoreConnection.purge``,
  through ``webhook_actions_done``). ``purge_growth`` is the ratio of the medians of the
  two together; each is printed apart too.

Goals: ``scrape_growth`` ≤ 1.5 and ``purge_growth`` ≤ 3.

Run: ``.venv/bin/python tests/benchmarks/bench_scrape.py`` (``BENCH_LARGE_ROWS=N``
changes the large store's rows). Last line:
``RESULT scrape_ms_small=... scrape_ms_large=... scrape_growth=... purge_growth=...``.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg

from gptools.webhooks import Store, StoreError, open_store

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests._support.cli import stop_gptools  # noqa: E402

PG_URL = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
SMALL = 10_000
LARGE = int(os.environ.get("BENCH_LARGE_ROWS", "10000000"))
#: Expired rows each purge round deletes, in both stores.
PURGED = 1_000
PURGE_ROUNDS = 5
SCRAPES = 200
WORKERS = 2
COUNTS = 20
PENDING, DEAD = 10, 5
#: One notification as SQL text, its actionId from the row's own (``format``'s %s).
BODY_SQL = (
    'format(\'{"roundId":"R-1","gameId":"golden-pharaoh","playerId":"player-00001",'
    '"timestamp":"2026-03-02T10:15:30.123456","bet":2.10,"currencyCode":"EUR",'
    '"events":["COIN"],"actionId":"%s"}\', a)'
)
#: The same, in a statement with parameters (where psycopg reads ``%s`` as one).
_ESCAPED_BODY_SQL = BODY_SQL.replace("%s", "%%s")


def _fill(schema: str, rows: int) -> float:
    """``rows`` log rows and actions in ``schema`` (created by the receiver's own schema
    code first), set-based; the indexes built after the load. Returns seconds."""
    started = time.perf_counter()
    store = open_store(f"{PG_URL}?schema={schema}")
    store.connect().close()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("SET synchronous_commit = off")
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute("ALTER TABLE webhook_actions DROP CONSTRAINT webhook_actions_pkey")
        conn.execute("DROP INDEX delivery_log_received_at")
        ids = f"SELECT i, md5(i::text)::uuid::text AS a FROM generate_series(1, {rows}) AS i"
        # The log's last day, newest last, as the receiver appends it.
        at = f"now() - make_interval(secs => 86400.0 * ({rows} - i) / {rows})"
        conn.execute(
            "INSERT INTO delivery_log (received_at, status, latency_ms, body, action_id,"
            " duplicate, auth_ok, error, remote_addr)"
            f" SELECT {at}, 200, 1.5, {BODY_SQL}, a, false, true, NULL, '127.0.0.1' FROM ({ids}) s"
        )
        state = f"CASE WHEN i <= {PENDING} THEN 'pending' WHEN i <= {PENDING + DEAD} THEN 'dead'"
        conn.execute(
            "INSERT INTO webhook_actions (action_id, first_received_at, body, state,"
            " attempts, next_attempt_at, last_error)"
            f" SELECT a, {at}, CASE WHEN i <= {PENDING + DEAD} THEN {BODY_SQL} ELSE '' END,"
            f" {state} ELSE 'done' END, 0, now() + interval '1 day', NULL FROM ({ids}) s"
        )
        conn.execute("ALTER TABLE webhook_actions ADD PRIMARY KEY (action_id)")
        conn.execute("CREATE INDEX delivery_log_received_at ON delivery_log (received_at)")
        conn.execute("VACUUM ANALYZE delivery_log")
        conn.execute("VACUUM ANALYZE webhook_actions")
    return time.perf_counter() - started


def _expire(schema: str, store: Store, now: datetime) -> None:
    """``PURGED`` log rows and processed actions just past their retentions."""
    log_at = now - store.log_retention - timedelta(days=1)
    key_at = now - store.retention - timedelta(days=1)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute(
            "INSERT INTO delivery_log (received_at, status, latency_ms, body, action_id,"
            " duplicate, auth_ok, error, remote_addr)"
            f" SELECT %s - make_interval(secs => i), 200, 1.5, {_ESCAPED_BODY_SQL}, a, false, true,"
            " NULL, '127.0.0.1'"
            " FROM (SELECT i, gen_random_uuid()::text AS a FROM generate_series(1, %s) i) s",
            (log_at, PURGED),
        )
        conn.execute(
            "INSERT INTO webhook_actions (action_id, first_received_at, body, state,"
            " next_attempt_at) SELECT gen_random_uuid()::text, %s, '', 'done', %s"
            " FROM generate_series(1, %s)",
            (key_at, key_at, PURGED),
        )


def _median_ms(run: Callable[[], object], times: int) -> float:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        spent.append(time.perf_counter() - started)
    return statistics.median(spent) * 1000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serve(store_url: str, work: Path, name: str) -> tuple[subprocess.Popen[bytes], str]:
    port, metrics = _free_port(), _free_port()
    env = {**os.environ, "GP_WEBHOOK_API_KEY": "bench-key", "TMPDIR": str(work)}
    gptools = str(Path(sys.executable).parent / "gptools")
    log = work / f"{name}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                *(gptools, "webhooks", "serve", "--auth", "bearer", "--store", store_url),
                *("--port", str(port), "--workers", str(WORKERS), "--metrics-port", str(metrics)),
            ],
            env=env,
            start_new_session=True,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{metrics}/metrics"
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise SystemExit(
                f"FAILED: the {name} receiver exited: {(work / f'{name}.log').read_text()}"
            )
        try:
            text = httpx.get(url, timeout=5).text
            # Both workers serve and their store watches have counted the queue.
            if f'gptools_webhook_queue_actions{{state="dead"}} {DEAD}.0' in text:
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"FAILED: the {name} receiver never reported its queue")
        time.sleep(0.2)


def _wait_for_first_purges(names: list[str]) -> None:
    """Until each of these receivers has run its start-up purge (one worker of each, the
    one holding the store's purge lease: its maintenance connection idle after the log
    purge's query), so that timed scrapes do not share the machine with it. The receivers'
    connections carry ``application_name`` ``bench-scrape-NAME`` (the machine's server is
    shared: other sessions run the same statements)."""
    deadline = time.monotonic() + 600
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        while True:
            done = conn.execute(
                "SELECT application_name, count(*) FROM pg_stat_activity"
                " WHERE application_name = ANY(%s) AND state = 'idle'"
                " AND query LIKE 'SELECT ctid FROM delivery_log WHERE received_at%%'"
                " GROUP BY application_name",
                ([f"bench-scrape-{name}" for name in names],),
            ).fetchall()
            if len(done) == len(names):
                return
            if time.monotonic() > deadline:
                raise SystemExit("FAILED: the receivers' first purges did not end in 10 minutes")
            time.sleep(0.5)


def main() -> None:
    run = uuid.uuid4().hex[:8]
    schemas = {"small": f"bench_scrape_small_{run}", "large": f"bench_scrape_large_{run}"}
    sizes = {"small": SMALL, "large": LARGE}
    work = Path(tempfile.mkdtemp(prefix="bench-scrape-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, schema in schemas.items():
            seconds = _fill(schema, sizes[name])
            print(f"{name}: {sizes[name]:,} log rows and actions in {seconds:.1f} s")
        stores = {name: open_store(f"{PG_URL}?schema={schema}") for name, schema in schemas.items()}
        conns = {name: store.connect() for name, store in stores.items()}

        watch = {name: _median_ms(conn.queue_depth, COUNTS) for name, conn in conns.items()}
        before = _median_ms(conns["large"].queue_counts, 3)
        print(
            f"store watch's count (pending, dead): median {watch['small']:.2f} ms small, "
            f"{watch['large']:.2f} ms large; the count every scrape ran before issue 34 "
            f"(every action by state): {before:.0f} ms on the large store"
        )

        log_ms: dict[str, list[float]] = {"small": [], "large": []}
        key_ms: dict[str, list[float]] = {"small": [], "large": []}
        for _ in range(PURGE_ROUNDS):
            for name, conn in conns.items():
                now = datetime.now(UTC)
                _expire(schemas[name], stores[name], now)
                started = time.perf_counter()
                purged = conn.purge_log(now)
                log_ms[name].append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                keys = conn.purge(now)
                key_ms[name].append((time.perf_counter() - started) * 1000)
                if purged.rows != PURGED or keys != PURGED:
                    raise SystemExit(
                        f"FAILED: the {name} store's purges deleted {purged.rows} log rows and"
                        f" {keys} dedupe keys, not {PURGED} of each"
                    )
        log_purge = {name: statistics.median(values) for name, values in log_ms.items()}
        purge = {
            name: statistics.median(a + b for a, b in zip(log_ms[name], key_ms[name], strict=True))
            for name in log_ms
        }
        keys_purge = {name: statistics.median(values) for name, values in key_ms.items()}
        print(
            f"log purge of {PURGED:,} rows: median {log_purge['small']:.1f} ms small, "
            f"{log_purge['large']:.1f} ms large (rounds, ms: "
            f"{', '.join(f'{v:.1f}' for v in log_ms['small'])} small; "
            f"{', '.join(f'{v:.1f}' for v in log_ms['large'])} large)"
        )
        print(
            f"dedupe-key purge of {PURGED:,} actions: median {keys_purge['small']:.1f} ms "
            f"small, {keys_purge['large']:.1f} ms large, growth "
            f"{keys_purge['large'] / keys_purge['small']:.1f}; the round (both): median "
            f"{purge['small']:.1f} ms small, {purge['large']:.1f} ms large"
        )
        for conn in conns.values():
            conn.close()

        urls = {}
        for name, schema in schemas.items():
            url = f"{PG_URL}?schema={schema}&application_name=bench-scrape-{name}"
            proc, urls[name] = _serve(url, work, name)
            procs.append(proc)
        _wait_for_first_purges(list(schemas))
        with httpx.Client(timeout=10) as http:
            spent: dict[str, list[float]] = {"small": [], "large": []}
            for i in range(SCRAPES + 10):
                for name, url in urls.items():
                    started = time.perf_counter()
                    answer = http.get(url)
                    if answer.status_code != 200:
                        raise SystemExit(f"FAILED: the {name} scrape answered {answer.status_code}")
                    if i >= 10:  # the first ten warm up
                        spent[name].append((time.perf_counter() - started) * 1000)
        scrape = {name: statistics.median(values) for name, values in spent.items()}
        p90 = {name: statistics.quantiles(values, n=10)[-1] for name, values in spent.items()}
        print(
            f"scrape (2 workers, metrics port): median {scrape['small']:.2f} ms small, "
            f"{scrape['large']:.2f} ms large; p90 {p90['small']:.2f} / {p90['large']:.2f} ms"
        )
        print(
            f"RESULT scrape_ms_small={scrape['small']:.2f} scrape_ms_large={scrape['large']:.2f}"
            f" scrape_growth={scrape['large'] / scrape['small']:.2f}"
            f" purge_growth={purge['large'] / purge['small']:.2f}"
        )
    except StoreError as exc:
        raise SystemExit(f"FAILED: {exc}") from exc
    finally:
        for proc in procs:
            stop_gptools(proc, grace=60)
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for schema in schemas.values():
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
