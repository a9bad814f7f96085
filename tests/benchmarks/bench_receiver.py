"""Receiver throughput: ``gptools webhooks serve`` (SQLite store, 2 workers) against a bare
ASGI endpoint that only answers 200, both served by uvicorn (httptools + uvloop, no access
log), loaded in the same run by wrk (Debian package ``wrk``) with identical settings.

How it keeps the comparison honest:

- Both servers get the same wrk run (threads, connections, duration) and the same Lua
  script, so the load generator spends the same effort per request on both; each gets a
  warm-up run first that is not measured.
- Every request carries a new ``actionId`` (thread id + counter in the Lua script), so
  the receiver never takes its cheaper duplicate path.
- ``receiver_rps`` counts only deliveries answered 200. The script records the
  ``actionId`` of every 200; afterwards the store must hold every acknowledged action,
  each exactly once with one ``delivery_log`` row, and nothing beyond the requests that
  were still in flight when wrk stopped or were answered with an error. Otherwise the
  benchmark fails.

- The pair is measured ``BENCH_ROUNDS`` times (3 by default), alternating, and the RESULT
  line gives medians (the ratio: the median of the per-round ratios) and the worst p99:
  on this 2-core machine the bare endpoint alone has given anything from 32,000 to 53,000
  req/s from one run to the next.

Run: ``.venv/bin/python tests/benchmarks/bench_receiver.py`` (``BENCH_CONNECTIONS=N``
changes the connection count of both runs; 32 by default). Last line:
``RESULT receiver_rps=... p99_ms=... bare_rps=... ratio=...``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

DURATION_S = 10
WARMUP_S = 2
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "32"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
THREADS = 2
WORKERS = 2
HERE = Path(__file__).resolve().parent
UVICORN_FLAGS = ["--http", "httptools", "--loop", "uvloop", "--no-access-log"]

BODY_TEMPLATE = (
    '{"roundId":"R-1","gameId":"golden-pharaoh","playerId":"player-00001",'
    '"timestamp":"2026-03-02T10:15:30.123456","bet":2.10,"currencyCode":"EUR",'
    '"events":["COIN"],"actionId":"%s"}'
)

# Globals BODY, RUN (8 hex digits, unique per wrk run) and OUT (where done() writes the
# acknowledged ids) are prepended per run.
WRK_LUA = r"""
tid = 0  -- set per thread by setup()
counter = 0
acked = {}
nacked = 0
local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer bench-key"
function request()
  counter = counter + 1
  local id = string.format("%s-%04x-4000-8000-%012x", RUN, tid, counter)
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
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", b"21")]})
    await send({"type": "http.response.body", "body": payload})


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


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wrk(url: str, work: Path, name: str, seconds: int) -> WrkRun:
    out = work / f"{name}.acked"
    lua = work / f"{name}.lua"
    lua.write_text(f"BODY = '{BODY_TEMPLATE}'\nRUN = '{os.urandom(4).hex()}'\n"
                   f"OUT = '{out}'\n" + WRK_LUA)
    text = subprocess.run(
        ["wrk", f"-t{THREADS}", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency",
         "-s", str(lua), url], capture_output=True, text=True, check=True,
    ).stdout
    done = re.search(r"(\d+) requests in ([\d.]+)(ms|s|m)", text)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", text)
    if done is None or p99 is None:
        raise RuntimeError(f"unexpected wrk output:\n{text}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    elapsed = float(done.group(2)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[done.group(3)]
    p99_ms = float(p99.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
    return WrkRun(int(done.group(1)), elapsed, p99_ms, int(bad.group(1)) if bad else 0,
                  out.read_text().split())


def _load(url: str, work: Path, name: str) -> tuple[WrkRun, WrkRun]:
    warm = _wrk(url, work, f"{name}-warmup", WARMUP_S)
    return warm, _wrk(url, work, name, DURATION_S)


def _check_store(store: Path, runs: tuple[WrkRun, ...]) -> list[str]:
    """What is wrong with the store after the receiver runs (empty: all is well)."""
    conn = sqlite3.connect(store)
    stored = [r[0] for r in conn.execute("SELECT action_id FROM webhook_actions")]
    ok_rows = conn.execute(
        "SELECT action_id, duplicate FROM delivery_log WHERE status = 200").fetchall()
    conn.close()
    acked = [a for run in runs for a in run.acked]
    problems = []
    if len(set(acked)) != len(acked):
        problems.append("an actionId was acknowledged twice (the ids were not unique)")
    missing = set(acked) - set(stored)
    if missing:
        problems.append(f"{len(missing)} acknowledged actions are not in the store")
    # Stored but not seen acknowledged: answers still in flight when wrk stopped (one
    # per connection) and requests answered with an error after their commit.
    allowed = sum(CONNECTIONS + run.not_2xx for run in runs)
    extra = len(set(stored) - set(acked))
    if extra > allowed:
        problems.append(f"{extra} stored actions were never acknowledged (at most "
                        f"{allowed} can be explained)")
    if sorted(a for a, _ in ok_rows) != sorted(stored) or any(d for _, d in ok_rows):
        problems.append("delivery_log does not hold exactly one 200 row per stored action")
    return problems


def _serve(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen([sys.executable, *args], env=env, start_new_session=True,
                                stdout=sink, stderr=subprocess.STDOUT)


def _round(work: Path, env: dict[str, str], n: int) -> tuple[WrkRun, WrkRun, list[str]]:
    """One round: the bare endpoint, then the receiver on a fresh store; the receiver's
    store is checked. Returns both measured runs and the store's problems."""
    url = "http://127.0.0.1:{port}/v1/game-action-events"
    port = _free_port()
    bare = _serve(["-m", "uvicorn", "bench_receiver:bare_app", "--app-dir", str(HERE),
                   "--port", str(port), "--workers", str(WORKERS), *UVICORN_FLAGS,
                   "--log-level", "warning"], env, work / f"bare-{n}.log")
    try:
        _wait_ready(port, "/", bare)
        _, bare_run = _load(url.format(port=port), work, f"bare-{n}")
    finally:
        _stop(bare)

    store = work / f"store-{n}.sqlite3"
    port = _free_port()
    # `gptools webhooks serve` runs uvicorn with the same flags as UVICORN_FLAGS.
    receiver = _serve(["-c", "from gptools.cli import main; main()", "webhooks", "serve",
                       "--auth", "bearer", "--store", f"sqlite:///{store}", "--port",
                       str(port), "--workers", str(WORKERS)], env, work / f"receiver-{n}.log")
    try:
        _wait_ready(port, "/healthz", receiver)
        runs = _load(url.format(port=port), work, f"receiver-{n}")
    finally:
        _stop(receiver)
    problems = _check_store(store, runs)
    run = runs[1]
    print(f"round {n}: bare {bare_run.ok_per_s:,.0f} req/s (p99 {bare_run.p99_ms:.1f} ms); "
          f"receiver {run.ok_per_s:,.0f} deliveries/s acknowledged (p99 {run.p99_ms:.1f} ms, "
          f"{run.not_2xx} not 200); store check: "
          + ("; ".join(problems) if problems else
             f"all {sum(len(r.acked) for r in runs)} acknowledged actions stored once, "
             "each with one 200 log row"))
    return bare_run, run, problems


def main() -> int:
    """Alternate both servers for ROUNDS rounds, check every store, print the RESULT line
    from the medians (the bare endpoint's rate swings by half between runs on a shared
    2-core machine; a single pair would mostly measure that)."""
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian package wrk: apt-get install -y wrk)")
        return 2
    print(f"wrk: {THREADS} threads, {CONNECTIONS} connections, {WARMUP_S} s warm-up + "
          f"{DURATION_S} s measured, per server; {WORKERS} uvicorn workers each; "
          f"{ROUNDS} rounds, bare then receiver")
    work = Path(tempfile.mkdtemp(prefix="bench-receiver-"))
    env = {**os.environ, "GP_WEBHOOK_API_KEY": "bench-key"}
    rounds = [_round(work, env, n) for n in range(1, ROUNDS + 1)]
    problems = [p for _, _, ps in rounds for p in ps]
    if problems:
        print(f"FAILED store check (kept {work} for inspection)")
    else:
        shutil.rmtree(work)
    bare_rps = statistics.median(b.ok_per_s for b, _, _ in rounds)
    rps = statistics.median(r.ok_per_s for _, r, _ in rounds)
    p99 = max(r.p99_ms for _, r, _ in rounds)
    ratio = statistics.median(r.ok_per_s / b.ok_per_s for b, r, _ in rounds)
    print(f"medians: bare {bare_rps:,.0f} req/s, receiver {rps:,.0f} deliveries/s; "
          f"worst receiver p99 {p99:.1f} ms; median per-round ratio {ratio:.2f}")
    print(f"goals: >= 1500/s {'ok' if rps >= 1500 else 'MISSED'}, p99 < 100 ms "
          f"{'ok' if p99 < 100 else 'MISSED'}, >= 40% of bare "
          f"{'ok' if ratio >= 0.4 else 'MISSED'}")
    print(f"RESULT receiver_rps={rps:.0f} p99_ms={p99:.1f} bare_rps={bare_rps:.0f} "
          f"ratio={ratio:.2f}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
