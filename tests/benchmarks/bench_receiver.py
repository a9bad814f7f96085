"""Receiver throughput: ``gptools webhooks serve`` (SQLite store, 2 workers) against a bare
ASGI endpoint that only answers 200, both served by uvicorn (httptools + uvloop), loaded
in the same run by wrk (Debian package ``wrk``) with unique ``actionId``s.

Falls back to a multi-process httpx generator when wrk is not installed (it saturates
sooner, so the absolute figures are lower; the ratio stays meaningful).

Run: ``.venv/bin/python tests/benchmarks/bench_receiver.py``. Last line:
``RESULT receiver_rps=... p99_ms=... bare_rps=... ratio=...``.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

DURATION_S = 10
CONNECTIONS = 32
THREADS = 2
WORKERS = 2
HERE = Path(__file__).resolve().parent

BODY_TEMPLATE = (
    '{"roundId":"R-1","gameId":"golden-pharaoh","playerId":"player-00001",'
    '"timestamp":"2026-03-02T10:15:30.123456","bet":2.10,"currencyCode":"EUR",'
    '"events":["COIN"],"actionId":"%s"}'
)

WRK_LUA = r"""
counter = 0
tid = 0  -- a global: setup() overwrites it per thread with thread:set("tid", n)
local threads = {}
function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end
function init(args)
  math.randomseed(os.time() + tid)
  run = string.format("%08x", math.random(0, 0x7fffffff))
end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer bench-key"
function request()
  counter = counter + 1
  local id = string.format("%s-%04x-4000-8000-%012x", run, tid, counter)
  local body = string.format(BODY, id)
  return wrk.format(nil, nil, nil, body)
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


def _wrk(url: str, lua: Path) -> tuple[float, float, int, int]:
    out = subprocess.run(
        ["wrk", f"-t{THREADS}", f"-c{CONNECTIONS}", f"-d{DURATION_S}s", "--latency",
         "-s", str(lua), url], capture_output=True, text=True, check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    assert p99 is not None, out
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, float(p99.group(1)) * scale, total, int(bad.group(1)) if bad else 0


def _httpx_worker(url: str, seconds: float, queue: Any) -> None:
    latencies = []
    bad = 0
    with httpx.Client() as client:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            r = client.post(url, content=BODY_TEMPLATE % uuid.uuid4(), headers={
                "content-type": "application/json", "authorization": "Bearer bench-key"})
            latencies.append(time.perf_counter() - t)
            bad += r.status_code != 200
    queue.put((latencies, bad))


def _httpx_load(url: str) -> tuple[float, float, int, int]:
    queue: Any = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_httpx_worker, args=(url, DURATION_S, queue))
             for _ in range(8)]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    latencies = sorted(x for lat, _ in results for x in lat)
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    return len(latencies) / DURATION_S, p99, len(latencies), sum(b for _, b in results)


def main() -> None:
    """Run both servers under the same load and print the RESULT line."""
    have_wrk = shutil.which("wrk") is not None
    print(f"load generator: {'wrk' if have_wrk else 'httpx processes (wrk not installed)'}; "
          f"{CONNECTIONS} connections, {DURATION_S} s, {WORKERS} uvicorn workers")
    work = Path(tempfile.mkdtemp(prefix="bench-receiver-"))
    lua = work / "post.lua"
    lua.write_text(f"BODY = '{BODY_TEMPLATE}'\n" + WRK_LUA)
    env = {**os.environ, "GP_WEBHOOK_API_KEY": "bench-key"}

    def load(url: str) -> tuple[float, float, int, int]:
        return _wrk(url, lua) if have_wrk else _httpx_load(url)

    port = _free_port()
    bare = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "bench_receiver:bare_app", "--app-dir", str(HERE),
         "--port", str(port), "--workers", str(WORKERS), "--http", "httptools", "--loop",
         "uvloop", "--no-access-log", "--log-level", "warning"], start_new_session=True)
    try:
        _wait_ready(port, "/", bare)
        bare_rps, bare_p99, _, _ = load(f"http://127.0.0.1:{port}/v1/game-action-events")
    finally:
        _stop(bare)
    print(f"bare endpoint: {bare_rps:,.0f} req/s, p99 {bare_p99:.1f} ms")

    store = work / "store.sqlite3"
    port = _free_port()
    receiver = subprocess.Popen(
        [sys.executable, "-c", "from gptools.cli import main; main()", "webhooks", "serve",
         "--auth", "bearer", "--store", f"sqlite:///{store}", "--port", str(port),
         "--workers", str(WORKERS)], env=env, start_new_session=True,
        stderr=subprocess.DEVNULL)
    try:
        _wait_ready(port, "/healthz", receiver)
        rps, p99, total, bad = load(f"http://127.0.0.1:{port}/v1/game-action-events")
    finally:
        _stop(receiver)
    import sqlite3

    conn = sqlite3.connect(store)
    stored = conn.execute("SELECT COUNT(*) FROM webhook_actions").fetchone()[0]
    logged = conn.execute("SELECT COUNT(*) FROM delivery_log").fetchone()[0]
    conn.close()
    shutil.rmtree(work)
    print(f"receiver: {rps:,.0f} deliveries/s, p99 {p99:.1f} ms, {total} completed, "
          f"{bad} not 200, {stored} actions stored, {logged} log rows")
    if bad or stored < total:
        print("FAILED: some deliveries were not acknowledged or not stored")
    ratio = rps / bare_rps
    print(f"goals: >= 1500/s {'ok' if rps >= 1500 else 'MISSED'}, p99 < 100 ms "
          f"{'ok' if p99 < 100 else 'MISSED'}, >= 40% of bare "
          f"{'ok' if ratio >= 0.4 else 'MISSED'}")
    print(f"RESULT receiver_rps={rps:.0f} p99_ms={p99:.1f} bare_rps={bare_rps:.0f} "
          f"ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
