"""Receiver throughput: ``gptools webhooks serve`` against three others, all loaded in the
same run by wrk (Debian package ``wrk``) with identical settings and the same Lua script:

- **receiver**: ``gptools webhooks serve`` on a SQLite store, 2 uvicorn workers;
- **pg**: two separate ``gptools webhooks serve`` processes (1 worker each, on two ports) on
  ONE PostgreSQL store (the machine's server, ``BENCH_PG`` =
  ``postgresql://postgres@127.0.0.1:5432/test`` by default, a fresh schema per run, dropped
  afterwards); wrk's two threads go one to each port, and 10 % of the ``actionId`` values are
  sent to both, so the cross-process dedupe is exercised;
- **peer**: a conventional receiver written here the way most integrators would: FastAPI, a
  pydantic model, one ``INSERT`` and commit per request into SQLite in WAL mode (full
  durability), 2 uvicorn workers (FastAPI is in the ``dev`` extra);
- **bare**: an ASGI endpoint that only answers 200;
- **unguarded** (issue 22): the receiver as before issue 22, ``gptools webhooks serve`` with
  uvicorn's plain httptools protocol instead of the guard that bounds headers, time-outs
  and connections (``gptools.webhooks._server``), on a SQLite store with 2 workers: the
  guard's cost is receiver / unguarded.

All are served by uvicorn with httptools + uvloop and no access log (the receiver's
httptools protocol behind its guard).

How it keeps the comparison honest:

- Every server gets the same wrk run (threads, connections, duration) and the same Lua
  script, so the load generator spends the same effort per request on each; each gets a
  warm-up run first that is not measured.
- Every request carries a new ``actionId`` (thread id + counter in the Lua script), so no
  receiver takes a cheaper duplicate path; the one exception is the pg pair's 10 % of ids
  sent to both processes (2 requests in 11 per wrk thread use an id from a sequence both
  threads share), which is the point of that run.
- The ``*_rps`` figures count only deliveries answered 200. The script records the
  ``actionId`` of every 200; afterwards every store must hold every acknowledged action,
  each exactly once (gptools' stores: with exactly one ``delivery_log`` 200 row not
  marked duplicate, and a 200 row for every acknowledgement), and nothing beyond the
  requests that were still in flight when wrk stopped or were answered with an error.
  Otherwise the benchmark fails.
- All five are measured ``BENCH_ROUNDS`` times (3 by default), alternating, and the RESULT
  line gives medians (the ratios: the medians of the per-round ratios) and the worst p99s:
  on this 2-core machine the bare endpoint alone has given anything from 32,000 to 53,000
  req/s from one run to the next.

Run: ``.venv/bin/python tests/benchmarks/bench_receiver.py`` (``BENCH_CONNECTIONS=N``
changes the connection count of every run; 32 by default). Last line:
``RESULT receiver_rps=... p99_ms=... pg_rps=... pg_p99_ms=... peer_rps=... peer_ratio=...
pg_peer_ratio=... bare_rps=... ratio=...`` (``peer_ratio`` = receiver / peer,
``pg_peer_ratio`` = pg / peer, ``ratio`` = receiver / bare).
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import os
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests._support.cli import stop_gptools  # noqa: E402

DURATION_S = 10
WARMUP_S = 2
#: Seconds a receiver has to stop after SIGTERM before its process group is killed.
STOP_GRACE_S = 30
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "32"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
THREADS = 2
WORKERS = 2
PG_URL = os.environ.get("BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
HERE = Path(__file__).resolve().parent
UVICORN_FLAGS = ["--http", "httptools", "--loop", "uvloop", "--no-access-log"]
PATH = "/v1/game-action-events"
PEER_DB_ENV = "BENCH_PEER_DB"

BODY_TEMPLATE = (
    '{"roundId":"R-1","gameId":"golden-pharaoh","playerId":"player-00001",'
    '"timestamp":"2026-03-02T10:15:30.123456","bet":2.10,"currencyCode":"EUR",'
    '"events":["COIN"],"actionId":"%s"}'
)

# Globals BODY, RUN (8 hex digits, unique per wrk run), OUT (where done() writes the
# acknowledged ids), PORTS (empty: every thread uses the URL's port; otherwise thread i
# sends to PORTS[i]) and SHARED (true: 2 requests in 11 of every thread carry an id from
# one sequence all threads share, so 10 % of the ids reach every port) are prepended per run.
WRK_LUA = r"""
tid = 0  -- set per thread by setup()
counter = 0
acked = {}
nacked = 0
local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
  if #PORTS > 0 then
    thread.addr = wrk.lookup("127.0.0.1", PORTS[(#threads - 1) % #PORTS + 1])[1]
  end
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer bench-key"
function request()
  counter = counter + 1
  local id
  local k = counter % 11
  if SHARED and k < 2 then
    id = string.format("%s-ffff-4000-8000-%012x", RUN, (counter - k) / 11 * 2 + k)
  else
    id = string.format("%s-%04x-4000-8000-%012x", RUN, tid, counter)
  end
  return wrk.format(nil, nil, nil, string.format(BODY, id))
end
function response(status, headers, body)
  if status == 200 then
    local id = string.match(body, '"actionId":"([^"]+)"')
    if id then
      nacked = nacked + 1
      acked[nacked] = id
    end
  end
end
function done(summary, latency, requests)
  local out = io.open(OUT, "w")
  for _, thread in ipairs(threads) do
    for _, id in ipairs(thread:get("acked")) do
      out:write(id, "\n")
    end
  end
  out:close()
end
"""


async def bare_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The baseline: read the body, answer 200 with a small JSON body."""
    if scope["type"] != "http":
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    payload = b'{"status":"accepted"}'
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"21")],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class Notification(BaseModel):
    """The peer's model of a game event notification, as an integrator would write it."""

    roundId: str
    gameId: str
    playerId: str
    timestamp: datetime.datetime
    bet: decimal.Decimal
    currencyCode: str
    events: list[str]
    actionId: uuid.UUID


def make_peer_app() -> Any:
    """The conventional receiver, as most integrators would write it: FastAPI, a pydantic
    model of the notification, a bearer-key check, and per request one ``INSERT`` (the
    ``actionId`` is the primary key, so a repeat is ignored) and one commit into SQLite in
    WAL mode with SQLite's default full durability. A plain ``def`` endpoint (FastAPI
    runs it in its thread pool) on one connection per thread."""
    import hmac
    import threading

    from fastapi import FastAPI, Header, HTTPException

    db = os.environ[PEER_DB_ENV]
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS events (action_id TEXT PRIMARY KEY,"
            " received_at TEXT NOT NULL, body TEXT NOT NULL)"
        )
    local = threading.local()
    app = FastAPI()

    @app.post(PATH)
    def receive(event: Notification, authorization: str = Header("")) -> dict[str, str]:
        if not hmac.compare_digest(authorization, "Bearer bench-key"):
            raise HTTPException(401)
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = sqlite3.connect(db, timeout=10, check_same_thread=False)
            conn.execute("PRAGMA synchronous=FULL")
        action_id = str(event.actionId)
        cur = conn.execute(
            "INSERT OR IGNORE INTO events VALUES (?, ?, ?)",
            (action_id, datetime.datetime.now(datetime.UTC).isoformat(), event.model_dump_json()),
        )
        conn.commit()
        return {"status": "accepted" if cur.rowcount == 1 else "duplicate", "actionId": action_id}

    @app.get("/healthz")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


class _NullTransport(asyncio.Transport):
    """A transport that takes every write and goes nowhere (for :func:`guard_cpu`)."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def write(self, data: Any) -> None:
        """Drop the answer."""

    def is_closing(self) -> bool:
        """Whether :meth:`close` was called."""
        return self.closing

    def close(self) -> None:
        """Mark closed."""
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """Loopback addresses."""
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        """Nothing to pause."""

    def resume_reading(self) -> None:
        """Nothing to resume."""


def guard_cpu(requests: int = 20000, repeats: int = 5) -> tuple[float, float]:
    """CPU microseconds a request costs uvicorn's httptools protocol alone and behind the
    receiver's guard (issue 22), feeding one connection the benchmark's request and
    answering with :func:`bare_app`, in this process, alternating ``repeats`` times; the
    medians. The guard's cost is the difference, free of the machine's load swings."""
    from uvicorn.config import Config
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.server import ServerState

    from gptools.webhooks._server import GuardedHttpToolsProtocol

    body = (BODY_TEMPLATE % uuid.uuid4()).encode()
    request = (
        f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer bench-key\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body

    async def one(cls: type[HttpToolsProtocol]) -> float:
        config = Config(bare_app, lifespan="off", access_log=False, log_level="warning")
        config.load()
        protocol = cls(config, ServerState(), {}, asyncio.get_running_loop())
        protocol.connection_made(_NullTransport())
        started = time.process_time()
        for _ in range(requests):
            protocol.data_received(request)
            await asyncio.sleep(0)  # the application's task runs
            await asyncio.sleep(0)
        return (time.process_time() - started) / requests * 1e6

    async def both() -> tuple[float, float]:
        plain, guarded = [], []
        for _ in range(repeats):
            plain.append(await one(HttpToolsProtocol))
            guarded.append(await one(GuardedHttpToolsProtocol))
        return statistics.median(plain), statistics.median(guarded)

    import uvloop

    return uvloop.run(both())


@dataclass(frozen=True)
class WrkRun:
    """What one wrk run measured."""

    requests: int
    seconds: float
    p99_ms: float
    not_2xx: int
    acked: list[str]

    @property
    def ok_per_s(self) -> float:
        """Requests answered 2xx per second."""
        return (self.requests - self.not_2xx) / self.seconds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_ready(port: int, path: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited during start-up")
        try:
            httpx.get(f"http://127.0.0.1:{port}{path}", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


def _wrk(ports: list[int], work: Path, name: str, seconds: int, *, shared: bool) -> WrkRun:
    out = work / f"{name}.acked"
    lua = work / f"{name}.lua"
    split = ", ".join(map(str, ports)) if len(ports) > 1 else ""
    lua.write_text(
        f"BODY = '{BODY_TEMPLATE}'\nRUN = '{os.urandom(4).hex()}'\n"
        f"OUT = '{out}'\nPORTS = {{{split}}}\n"
        f"SHARED = {'true' if shared else 'false'}\n" + WRK_LUA
    )
    text = subprocess.run(
        [
            "wrk",
            f"-t{THREADS}",
            f"-c{CONNECTIONS}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(lua),
            f"http://127.0.0.1:{ports[0]}{PATH}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    done = re.search(r"(\d+) requests in ([\d.]+)(ms|s|m)", text)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", text)
    if done is None or p99 is None:
        raise RuntimeError(f"unexpected wrk output:\n{text}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    elapsed = float(done.group(2)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[done.group(3)]
    p99_ms = float(p99.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
    return WrkRun(
        int(done.group(1)),
        elapsed,
        p99_ms,
        int(bad.group(1)) if bad else 0,
        out.read_text().split(),
    )


def _load(
    ports: list[int],
    work: Path,
    name: str,
    *,
    shared: bool = False,
) -> tuple[WrkRun, WrkRun]:
    warm = _wrk(ports, work, f"{name}-warmup", WARMUP_S, shared=shared)
    return warm, _wrk(ports, work, name, DURATION_S, shared=shared)


def _check(
    stored: list[str],
    ok_rows: list[tuple[str, bool]] | None,
    runs: tuple[WrkRun, ...],
    *,
    shared: bool = False,
) -> list[str]:
    """What is wrong with a store after its runs (empty: all is well). ``stored``: the
    action ids the store holds; ``ok_rows``: its ``delivery_log`` rows answered 200, as
    (action id, duplicate), or None for a store without a log (the peer)."""
    acked = Counter(a for run in runs for a in run.acked)
    problems = []
    if not acked:
        problems.append("nothing was acknowledged")
    if len(set(stored)) != len(stored):
        problems.append("an action is stored twice")
    # Only the ids both ports were sent may be acknowledged twice.
    twice = [a for a, n in acked.items() if n > (2 if shared and "-ffff-" in a else 1)]
    if twice:
        problems.append(f"{len(twice)} actionIds were acknowledged more often than sent")
    missing = set(acked) - set(stored)
    if missing:
        problems.append(f"{len(missing)} acknowledged actions are not in the store")
    # Stored but not seen acknowledged: answers still in flight when wrk stopped (one
    # per connection) and requests answered with an error after their commit.
    allowed = sum(CONNECTIONS + run.not_2xx for run in runs)
    extra = len(set(stored) - set(acked))
    if extra > allowed:
        problems.append(
            f"{extra} stored actions were never acknowledged (at most {allowed} can be explained)"
        )
    if ok_rows is not None:
        first = sorted(a for a, duplicate in ok_rows if not duplicate)
        logged = Counter(a for a, _ in ok_rows)
        if first != sorted(stored):
            problems.append(
                "delivery_log does not hold exactly one first 200 row per stored action"
            )
        if any(logged[a] < n for a, n in acked.items()):
            problems.append("an acknowledgement has no 200 row in delivery_log")
    return problems


def _sqlite_rows(store: Path, actions: str, log: bool) -> tuple[list[str], Any]:
    conn = sqlite3.connect(store)
    try:
        stored = [r[0] for r in conn.execute(f"SELECT action_id FROM {actions}")]
        ok_rows = (
            [
                (a, bool(d))
                for a, d in conn.execute(
                    "SELECT action_id, duplicate FROM delivery_log WHERE status = 200"
                )
            ]
            if log
            else None
        )
    finally:
        conn.close()
    return stored, ok_rows


def _pg_rows(schema: str) -> tuple[list[str], list[tuple[str, bool]]]:
    import psycopg

    with psycopg.connect(PG_URL) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        stored = [r[0] for r in conn.execute("SELECT action_id FROM webhook_actions")]
        ok_rows = [
            (a, bool(d))
            for a, d in conn.execute(
                "SELECT action_id, duplicate FROM delivery_log WHERE status = 200"
            )
        ]
    return stored, ok_rows


def _drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _serve(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, *args],
            env=env,
            start_new_session=True,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


#: `gptools webhooks serve` as before issue 22: uvicorn's own httptools protocol, unguarded.
_UNGUARDED = "import gptools.webhooks._server_limits as s; s.PROTOCOL = 'httptools'; "


def _gptools(
    store_url: str,
    port: int,
    workers: int,
    env: dict[str, str],
    log: Path,
    *,
    guarded: bool = True,
) -> subprocess.Popen[bytes]:
    # `gptools webhooks serve` runs uvicorn with the same flags as UVICORN_FLAGS.
    return _serve(
        [
            "-c",
            ("" if guarded else _UNGUARDED) + "from gptools.cli import main; main()",
            "webhooks",
            "serve",
            "--auth",
            "bearer",
            "--store",
            store_url,
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env,
        log,
    )


def _measure(
    procs: list[tuple[subprocess.Popen[bytes], int, str]],
    work: Path,
    name: str,
    *,
    shared: bool = False,
) -> tuple[WrkRun, WrkRun]:
    """Wait for every server, load them (wrk's threads split over their ports), stop them."""
    try:
        for proc, port, ready in procs:
            _wait_ready(port, ready, proc)
        return _load([port for _, port, _ in procs], work, name, shared=shared)
    finally:
        for proc, _, _ in procs:
            stop_gptools(proc, grace=STOP_GRACE_S)


@dataclass(frozen=True)
class Round:
    """One round's measured runs (after warm-up) and the stores' problems."""

    bare: WrkRun
    receiver: WrkRun
    pg: WrkRun
    peer: WrkRun
    unguarded: WrkRun
    problems: list[str]


def _describe(name: str, run: WrkRun, problems: list[str], runs: tuple[WrkRun, ...]) -> str:
    return (
        f"{name} {run.ok_per_s:,.0f}/s acknowledged (p99 {run.p99_ms:.1f} ms, "
        f"{run.not_2xx} not 200; store: "
        + (
            "; ".join(problems)
            if problems
            else f"all {len({a for r in runs for a in r.acked})} acknowledged actions stored once"
        )
        + ")"
    )


def _round(work: Path, env: dict[str, str], n: int) -> Round:
    """One round: the bare endpoint, the SQLite receiver, the PostgreSQL pair and the peer,
    each on a fresh store; every store is checked."""
    port = _free_port()
    bare = _serve(
        [
            "-m",
            "uvicorn",
            "bench_receiver:bare_app",
            "--app-dir",
            str(HERE),
            "--port",
            str(port),
            "--workers",
            str(WORKERS),
            *UVICORN_FLAGS,
            "--log-level",
            "warning",
        ],
        env,
        work / f"bare-{n}.log",
    )
    _, bare_run = _measure([(bare, port, "/")], work, f"bare-{n}")

    store = work / f"store-{n}.sqlite3"
    port = _free_port()
    receiver = _gptools(f"sqlite:///{store}", port, WORKERS, env, work / f"receiver-{n}.log")
    runs = _measure([(receiver, port, "/healthz")], work, f"receiver-{n}")
    receiver_problems = _check(*_sqlite_rows(store, "webhook_actions", True), runs)
    print(
        f"round {n}: bare {bare_run.ok_per_s:,.0f} req/s (p99 {bare_run.p99_ms:.1f} ms); "
        + _describe("receiver", runs[1], receiver_problems, runs)
    )
    receiver_run = runs[1]

    store = work / f"unguarded-{n}.sqlite3"
    port = _free_port()
    unguarded = _gptools(
        f"sqlite:///{store}", port, WORKERS, env, work / f"unguarded-{n}.log", guarded=False
    )
    runs = _measure([(unguarded, port, "/healthz")], work, f"unguarded-{n}")
    unguarded_problems = _check(*_sqlite_rows(store, "webhook_actions", True), runs)
    print(f"round {n}: " + _describe("unguarded receiver", runs[1], unguarded_problems, runs))
    unguarded_run = runs[1]

    schema = f"bench_receiver_{os.urandom(4).hex()}"
    pg_url = f"{PG_URL}?schema={schema}"
    try:
        pair = []
        for i in (1, 2):
            port = _free_port()
            pair.append(
                (_gptools(pg_url, port, 1, env, work / f"pg-{n}-{i}.log"), port, "/healthz")
            )
        runs = _measure(pair, work, f"pg-{n}", shared=True)
        stored, ok_rows = _pg_rows(schema)
    finally:
        _drop_schema(schema)
    pg_problems = _check(stored, ok_rows, runs, shared=True)
    duplicates = sum(1 for _, duplicate in ok_rows if duplicate)
    print(
        f"round {n}: "
        + _describe("pg pair", runs[1], pg_problems, runs)
        + f"; {duplicates} deliveries answered 200 as duplicates"
    )
    pg_run = runs[1]

    port = _free_port()
    peer_db = work / f"peer-{n}.sqlite3"
    peer = _serve(
        [
            "-m",
            "uvicorn",
            "bench_receiver:make_peer_app",
            "--factory",
            "--app-dir",
            str(HERE),
            "--port",
            str(port),
            "--workers",
            str(WORKERS),
            *UVICORN_FLAGS,
            "--log-level",
            "warning",
        ],
        {**env, PEER_DB_ENV: str(peer_db)},
        work / f"peer-{n}.log",
    )
    runs = _measure([(peer, port, "/healthz")], work, f"peer-{n}")
    peer_problems = _check(*_sqlite_rows(peer_db, "events", False), runs)
    print(f"round {n}: " + _describe("peer", runs[1], peer_problems, runs))
    return Round(
        bare_run,
        receiver_run,
        pg_run,
        runs[1],
        unguarded_run,
        receiver_problems + unguarded_problems + pg_problems + peer_problems,
    )


def main() -> int:
    """Alternate the five servers for ROUNDS rounds, check every store, print the RESULT
    line from the medians (the bare endpoint's rate swings by half between runs on a
    shared 2-core machine; a single run each would mostly measure that)."""
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian package wrk: apt-get install -y wrk)")
        return 2
    print(
        f"wrk: {THREADS} threads, {CONNECTIONS} connections, {WARMUP_S} s warm-up + "
        f"{DURATION_S} s measured, per server; {ROUNDS} rounds of: bare ({WORKERS} "
        f"workers), receiver on SQLite ({WORKERS} workers), two receivers on one "
        f"PostgreSQL store (1 worker each, one wrk thread each, 10 % of ids to both), "
        f"FastAPI peer ({WORKERS} workers), the receiver unguarded (as before issue 22, "
        f"{WORKERS} workers); load average {os.getloadavg()[0]:.2f}"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-receiver-"))
    env = {**os.environ, "GP_WEBHOOK_API_KEY": "bench-key"}
    rounds = [_round(work, env, n) for n in range(1, ROUNDS + 1)]
    problems = [p for r in rounds for p in r.problems]
    if problems:
        print(f"FAILED store check (kept {work} for inspection)")
    else:
        shutil.rmtree(work)

    def median(values: Any) -> float:
        return float(statistics.median(values))

    bare_rps = median(r.bare.ok_per_s for r in rounds)
    rps = median(r.receiver.ok_per_s for r in rounds)
    pg_rps = median(r.pg.ok_per_s for r in rounds)
    peer_rps = median(r.peer.ok_per_s for r in rounds)
    p99 = max(r.receiver.p99_ms for r in rounds)
    pg_p99 = max(r.pg.p99_ms for r in rounds)
    peer_p99 = max(r.peer.p99_ms for r in rounds)
    ratio = median(r.receiver.ok_per_s / r.bare.ok_per_s for r in rounds)
    peer_ratio = median(r.receiver.ok_per_s / r.peer.ok_per_s for r in rounds)
    pg_peer_ratio = median(r.pg.ok_per_s / r.peer.ok_per_s for r in rounds)
    print(
        f"medians: bare {bare_rps:,.0f} req/s, receiver {rps:,.0f}/s, pg pair "
        f"{pg_rps:,.0f}/s, peer {peer_rps:,.0f}/s; worst p99: receiver {p99:.1f} ms, "
        f"pg {pg_p99:.1f} ms, peer {peer_p99:.1f} ms; median per-round ratios: receiver/"
        f"bare {ratio:.2f}, receiver/peer {peer_ratio:.2f}, pg/peer {pg_peer_ratio:.2f}; "
        f"load average now {os.getloadavg()[0]:.2f}"
    )

    def goal(name: str, met: bool) -> str:
        return f"{name} {'ok' if met else 'MISSED'}"

    unguarded_rps = median(r.unguarded.ok_per_s for r in rounds)
    guard = median(r.receiver.ok_per_s / r.unguarded.ok_per_s for r in rounds)
    plain_us, guarded_us = guard_cpu()
    print(
        f"issue 22, the guard's cost: unguarded receiver {unguarded_rps:,.0f}/s (worst p99 "
        f"{max(r.unguarded.p99_ms for r in rounds):.1f} ms); median per-round receiver/"
        f"unguarded {guard:.2f}; CPU a request, bare app on one connection: httptools "
        f"{plain_us:.1f} us, behind the guard {guarded_us:.1f} us "
        f"(+{guarded_us - plain_us:.1f} us)"
    )
    print(
        "goals: "
        + ", ".join(
            [
                goal("peer_ratio >= 5", peer_ratio >= 5),
                goal("pg_peer_ratio >= 3", pg_peer_ratio >= 3),
                goal("p99 < 50 ms", p99 < 50),
                goal("pg p99 < 50 ms", pg_p99 < 50),
                goal("(issue 6) >= 1500/s", rps >= 1500),
                goal("(issue 6) >= 40% of bare", ratio >= 0.4),
            ]
        )
    )
    print(
        f"RESULT receiver_rps={rps:.0f} p99_ms={p99:.1f} pg_rps={pg_rps:.0f} "
        f"pg_p99_ms={pg_p99:.1f} peer_rps={peer_rps:.0f} peer_ratio={peer_ratio:.2f} "
        f"pg_peer_ratio={pg_peer_ratio:.2f} bare_rps={bare_rps:.0f} ratio={ratio:.2f}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
