"""Benchmark: GET /api/v1/game on the sandbox next to a bare Starlette "hello" endpoint.

Both servers run in their own process (one uvicorn worker, httptools + uvloop), so the
load generator does not share their GIL. Load comes from ``wrk`` when it is installed
(Debian package ``wrk``), else from a few processes of sequential httpx clients. Each
server is measured twice, alternating, and the better run counts (the machine is shared).

Goal (issue 2): at least 1,000 requests/s and at least 50% of the bare endpoint.
Ends with ``RESULT sandbox_rps=... bare_rps=... ratio=...``.

Run: ``.venv/bin/python tests/benchmarks/bench_sandbox.py [--seconds 5] [--connections 16]``
"""

from __future__ import annotations

import argparse
import base64
import multiprocessing
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from gptools.sandbox import DEMO_ACCOUNTS

BARE_SERVER = """
import socket, sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

async def hello(request):
    return JSONResponse({"hello": "world"})

app = Starlette(routes=[Route("/hello", hello)])
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
print(f"serving at http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
config = uvicorn.Config(app, loop="uvloop", http="httptools", log_level="warning",
                        access_log=False)
uvicorn.Server(config).run(sockets=[sock])
"""

SANDBOX_SERVER = "from gptools.cli import main; main()"
GAME_PATH = "/api/v1/game?gameId=neon-fruits"


@contextmanager
def server(code: str, *args: str) -> Iterator[str]:
    """Run a server process; yield its base URL once it prints it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for _ in range(50):
            line = proc.stderr.readline()
            match = re.search(r"(?:serving at) (http://127\.0\.0\.1:\d+)", line)
            if match:
                break
            if not line:
                raise RuntimeError(f"server exited early: {proc.wait()}")
        else:
            raise RuntimeError("server never printed its URL")
        url = match.group(1)
        deadline = time.monotonic() + 10
        while True:  # readiness poll with a deadline
            try:
                httpx.get(url + "/_sandbox/accounts", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def wrk(url: str, headers: dict[str, str], seconds: float, connections: int) -> float:
    """Requests per second measured by wrk; every answer must be a 2xx."""
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
    for name, value in headers.items():
        cmd += ["-H", f"{name}: {value}"]
    out = subprocess.run([*cmd, url], capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"errors under load:\n{out}")
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    assert match, out
    return float(match.group(1))


def _client_loop(args: tuple[str, dict[str, str], float]) -> int:
    url, headers, seconds = args
    done = 0
    with httpx.Client(headers=headers) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            client.get(url).raise_for_status()
            done += 1
    return done


def httpx_load(url: str, headers: dict[str, str], seconds: float, connections: int) -> float:
    """Requests per second from ``connections`` processes of sequential httpx clients."""
    processes = min(connections, 4)
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        started = time.monotonic()
        done = sum(pool.map(_client_loop, [(url, headers, seconds)] * processes))
        return done / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    load = wrk if shutil.which("wrk") else httpx_load
    print(f"load generator: {'wrk' if load is wrk else 'httpx processes (wrk not found)'}")
    account = DEMO_ACCOUNTS["individual"]
    token = base64.b64encode(f"{account.username}:{account.password}".encode()).decode()
    auth = {"Authorization": f"Basic {token}"}

    sandbox_runs: list[float] = []
    bare_runs: list[float] = []
    with (
        server(SANDBOX_SERVER, "sandbox", "serve", "--port", "0", "--no-rate-limits") as sb,
        server(BARE_SERVER) as bare,
    ):
        check = httpx.get(sb + GAME_PATH, headers=auth)
        check.raise_for_status()
        assert check.json()["gameId"] == "neon-fruits"
        # Warm both up (imports, caches, connection set-up) before measuring.
        load(sb + GAME_PATH, auth, 1, args.connections)
        load(bare + "/hello", {}, 1, args.connections)
        for _ in range(args.rounds):
            bare_runs.append(load(bare + "/hello", {}, args.seconds, args.connections))
            sandbox_runs.append(load(sb + GAME_PATH, auth, args.seconds, args.connections))
            print(f"  bare {bare_runs[-1]:9.0f} req/s   sandbox {sandbox_runs[-1]:9.0f} req/s")

    sandbox_rps, bare_rps = max(sandbox_runs), max(bare_runs)
    ratio = sandbox_rps / bare_rps
    print(
        f"goal: sandbox >= 1000 req/s ({'met' if sandbox_rps >= 1000 else 'MISSED'}), "
        f"ratio >= 0.50 ({'met' if ratio >= 0.5 else 'MISSED'})"
    )
    print(f"RESULT sandbox_rps={sandbox_rps:.0f} bare_rps={bare_rps:.0f} ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
