"""The receiver under attack (issue 22, item 10): ``gptools webhooks serve`` (SQLite store,
2 workers, every bound at its default) takes a steady stream of valid deliveries from wrk
while a second process runs the hostile suite's attacks together, for ``ATTACK_S`` (30 s):

- a 401 flood: ``FLOOD_CONNECTIONS`` kept-alive connections POST 60 KB bodies with a wrong
  key, ``FLOOD_RATE`` requests a second in all (the issue saw 840/s of 64 KB);
- header bombs: ``BOMBS`` connections at a time, each sending a 64 MB header that never ends
  (a new one as soon as the server closes one);
- slow clients: a wave of 300 connections with an unfinished head and 300 with a head and
  an unfinished body at the start and again halfway;
- deep nesting: 2 KB bodies nested 990 levels deep, ``DEEP_RATE`` a second, half of them
  with the right key (they reach the parser) and half without.

The same wrk stream runs first against a quiet receiver (a fresh store, same settings) in
the same run. Measured: valid deliveries acknowledged per second under attack over quiet
(``attack_ratio``), the stream's p99 under attack, what the attack added to the store (the
store compacted with ``VACUUM INTO``, less the same with every row not answered 200
deleted: the refusals' rows and their summary rows, whatever the file's free pages), the
receiver's resident memory (all processes) at its peak during the attack over before it,
and the longest a slow connection stayed open. Every store must hold every acknowledged
action exactly once (``bench_receiver._check``), or the benchmark fails.

Run: ``.venv/bin/python tests/benchmarks/bench_under_attack.py``. Last line:
``RESULT attack_ratio=... attack_p99_ms=... store_growth_mb=... rss_growth_mb=...
slow_conns_closed_s=...``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests._support.cli import stop_gptools  # noqa: E402
from tests.benchmarks import bench_receiver as br  # noqa: E402
from tests.hostile.connection_attacks import rss_bytes  # noqa: E402

ATTACK_S = 30
STREAM_CONNECTIONS = 16
FLOOD_CONNECTIONS = 8
FLOOD_RATE = 840
FLOOD_BODY = 60 * 1024
BOMBS = 10
BOMB_BYTES = 64 * 1024 * 1024
SLOW_PER_KIND = 300
DEEP_RATE = 20
DEEP_LEVELS = 990
MB = 1024 * 1024
#: The receiver's default header time-out (the slow connections' bound is this + 2 s).
HEADER_TIMEOUT_S = 10.0
WRONG_KEY = "not-the-key"


# -- the attacker (a process of its own: python bench_under_attack.py attack PORT OUT) ----


async def _flood(port: int, end: float, counts: dict[str, int]) -> None:
    body = json.dumps({"actionId": "00000000-0000-4000-8000-000000000000", "x": "a" * FLOOD_BODY})
    request = (
        f"POST {br.PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {WRONG_KEY}\r\nContent-Length: {len(body)}\r\n\r\n{body}"
    ).encode()
    interval = FLOOD_CONNECTIONS / FLOOD_RATE
    while time.monotonic() < end:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            next_at = time.monotonic()
            while time.monotonic() < end:
                writer.write(request)
                await writer.drain()
                status = await _answer(reader)
                counts[str(status)] = counts.get(str(status), 0) + 1
                if status == 0:
                    break
                next_at += interval
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            writer.close()
        except OSError:
            counts["error"] = counts.get("error", 0) + 1
            await asyncio.sleep(0.01)


async def _answer(reader: asyncio.StreamReader) -> int:
    """Read one answer (headers and a Content-Length body); its status, 0 if closed."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
        return 0
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    try:
        await reader.readexactly(length)
    except (asyncio.IncompleteReadError, OSError):
        return 0
    return int(head.split(b" ", 2)[1])


async def _bomb(port: int, end: float, sent: list[int]) -> None:
    filler = b"a" * MB
    while time.monotonic() < end:
        total = 0
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bomb: ")
            while total < BOMB_BYTES and time.monotonic() < end:
                writer.write(filler)
                await writer.drain()
                total += len(filler)
            writer.close()
        except OSError:
            pass  # closed by the server: the bound at work
        sent.append(total)
        await asyncio.sleep(0.1)


async def _slow_wave(port: int, closed_after: list[float]) -> None:
    head = (
        f"POST {br.PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    ).encode()
    partial = [head] * SLOW_PER_KIND + [
        head + b"Authorization: Bearer bench-key\r\nContent-Length: 500\r\n\r\n" + b'{"actionId"'
    ] * SLOW_PER_KIND

    async def one(data: bytes) -> None:
        opened = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(data)
            await writer.drain()
            await asyncio.wait_for(reader.read(), HEADER_TIMEOUT_S + 30)
            writer.close()
        except (OSError, TimeoutError):
            pass
        closed_after.append(time.monotonic() - opened)

    await asyncio.gather(*(one(data) for data in partial))


async def _deep(port: int, end: float, counts: dict[str, int]) -> None:
    body = "[" * DEEP_LEVELS + "]" * DEEP_LEVELS
    async with _Poster(port) as post:
        n = 0
        while time.monotonic() < end:
            key = "bench-key" if n % 2 == 0 else WRONG_KEY
            n += 1
            status = await post(body, key)
            counts[str(status)] = counts.get(str(status), 0) + 1
            await asyncio.sleep(1 / DEEP_RATE)


class _Poster:
    """One kept-alive connection posting bodies (reconnects when the server closes)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __aenter__(self) -> Any:
        return self.post

    async def __aexit__(self, *exc: object) -> None:
        if self.conn:
            self.conn[1].close()

    async def post(self, body: str, key: str) -> int:
        data = body.encode()
        request = (
            f"POST {br.PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {key}\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode() + data
        try:
            if self.conn is None:
                self.conn = await asyncio.open_connection("127.0.0.1", self.port)
            self.conn[1].write(request)
            await self.conn[1].drain()
            status = await _answer(self.conn[0])
        except OSError:
            status = 0
        if status == 0 and self.conn is not None:
            self.conn[1].close()
            self.conn = None
        return status


async def _attack(port: int) -> dict[str, Any]:
    end = time.monotonic() + ATTACK_S
    flood: dict[str, int] = {}
    deep: dict[str, int] = {}
    bombs: list[int] = []
    slow: list[float] = []

    async def waves() -> None:
        await _slow_wave(port, slow)  # closes within the time-out: about 10 s
        await asyncio.sleep(max(0.0, ATTACK_S / 2 - HEADER_TIMEOUT_S - 2))
        await _slow_wave(port, slow)

    await asyncio.gather(
        *(_flood(port, end, flood) for _ in range(FLOOD_CONNECTIONS)),
        *(_bomb(port, end, bombs) for _ in range(BOMBS)),
        _deep(port, end, deep),
        waves(),
    )
    return {
        "flood": flood,
        "deep": deep,
        "bombs": len(bombs),
        "bomb_max_sent": max(bombs, default=0),
        "slow": len(slow),
        "slow_closed_s": max(slow, default=0.0),
    }


def attacker(port: int, out: Path) -> int:
    """The attacker process: every attack at once, the findings as JSON in ``out``."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    out.write_text(json.dumps(asyncio.run(_attack(port))))
    return 0


# -- the measurement ---------------------------------------------------------------------


def _store_bytes(store: Path) -> int:
    return sum(
        p.stat().st_size for p in (store, Path(f"{store}-wal"), Path(f"{store}-shm")) if p.exists()
    )


def _not_200_bytes(store: Path) -> int:
    """The bytes the log rows not answered 200 take in the stopped receiver's store."""
    whole, rest = Path(f"{store}.whole"), Path(f"{store}.rest")
    conn = sqlite3.connect(store)
    try:
        conn.execute("VACUUM INTO ?", (str(whole),))
    finally:
        conn.close()
    conn = sqlite3.connect(whole)
    try:
        conn.execute("DELETE FROM delivery_log WHERE status <> 200")
        conn.commit()
        conn.execute("VACUUM INTO ?", (str(rest),))
    finally:
        conn.close()
    share = whole.stat().st_size - rest.stat().st_size
    whole.unlink()
    rest.unlink()
    return share


@dataclass(frozen=True)
class Phase:
    """One receiver's run: the stream's figures, the store's size, memory, attack data."""

    run: br.WrkRun
    store_growth: int
    refusals_bytes: int
    rss_before: int
    rss_peak: int
    attack: dict[str, Any]
    problems: list[str]


def _phase(work: Path, env: dict[str, str], name: str, attacked: bool) -> Phase:
    store = work / f"{name}.sqlite3"
    port = br._free_port()
    proc = br._gptools(f"sqlite:///{store}", port, br.WORKERS, env, work / f"{name}.log")
    attack: dict[str, Any] = {}
    try:
        br._wait_ready(port, "/healthz", proc)
        warm = br._wrk([port], work, f"{name}-warmup", br.WARMUP_S, shared=False)
        start_size = _store_bytes(store)
        rss_before = rss_bytes(proc.pid)
        peak = [rss_before]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak[0] = max(peak[0], rss_bytes(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        attacker_proc = None
        out = work / f"{name}-attack.json"
        if attacked:
            attacker_proc = subprocess.Popen(
                [sys.executable, __file__, "attack", str(port), str(out)],
                env=env,
                cwd=ROOT,
            )
        try:
            run = br._wrk([port], work, name, ATTACK_S, shared=False)
        finally:
            if attacker_proc is not None:
                attacker_proc.wait(ATTACK_S + HEADER_TIMEOUT_S + 60)
                attack = json.loads(out.read_text())
            done.set()
            sampler.join()
    finally:
        stop_gptools(proc, grace=br.STOP_GRACE_S)
    problems = br._check(*br._sqlite_rows(store, "webhook_actions", True), (warm, run))
    conn = sqlite3.connect(store)
    try:
        rows, body = conn.execute(
            "SELECT count(*), coalesce(sum(length(body)), 0) FROM delivery_log WHERE status <> 200"
        ).fetchone()
    finally:
        conn.close()
    attack["log_rows_not_200"] = rows
    attack["their_body_bytes"] = body
    return Phase(
        run,
        _store_bytes(store) - start_size,
        _not_200_bytes(store),
        rss_before,
        peak[0],
        attack,
        problems,
    )


def main() -> int:
    """A quiet receiver, then an attacked one, each under the same wrk stream."""
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian package wrk: apt-get install -y wrk)")
        return 2
    br.CONNECTIONS = STREAM_CONNECTIONS  # the stream: wrk, 2 threads, 16 connections
    print(
        f"stream: wrk {br.THREADS} threads, {STREAM_CONNECTIONS} connections, {ATTACK_S} s, "
        f"receiver on SQLite, {br.WORKERS} workers; attacks for {ATTACK_S} s: 401 flood "
        f"{FLOOD_RATE}/s of {FLOOD_BODY // 1024} KB, {BOMBS} header bombs of "
        f"{BOMB_BYTES // MB} MB at a time, 2 waves of {SLOW_PER_KIND} slow-header + "
        f"{SLOW_PER_KIND} slow-body connections, {DEEP_RATE}/s bodies {DEEP_LEVELS} levels "
        f"deep; load average {os.getloadavg()[0]:.2f}"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-attack-"))
    env = {**os.environ, "GP_WEBHOOK_API_KEY": "bench-key"}
    quiet = _phase(work, env, "quiet", attacked=False)
    attacked = _phase(work, env, "attacked", attacked=True)
    problems = quiet.problems + attacked.problems
    if problems:
        print(f"FAILED store check: {problems} (kept {work} for inspection)")
    else:
        shutil.rmtree(work)
    store_growth = attacked.refusals_bytes / MB
    ratio = attacked.run.ok_per_s / quiet.run.ok_per_s
    rss_growth = (attacked.rss_peak - attacked.rss_before) / MB
    slow_closed = float(attacked.attack.get("slow_closed_s", float("inf")))
    print(
        f"quiet: {quiet.run.ok_per_s:,.0f}/s acknowledged, p99 {quiet.run.p99_ms:.1f} ms, "
        f"store file +{quiet.store_growth / MB:.1f} MB (rows not 200: "
        f"{quiet.refusals_bytes / MB:.2f} MB), "
        f"memory {quiet.rss_before / MB:.0f} -> peak {quiet.rss_peak / MB:.0f} MB"
    )
    print(
        f"attacked: {attacked.run.ok_per_s:,.0f}/s acknowledged, p99 "
        f"{attacked.run.p99_ms:.1f} ms, {attacked.run.not_2xx} not 200, store file "
        f"+{attacked.store_growth / MB:.1f} MB (rows not 200: {store_growth:.2f} MB), "
        f"memory {attacked.rss_before / MB:.0f} -> peak "
        f"{attacked.rss_peak / MB:.0f} MB; attacker: {json.dumps(attacked.attack)}; "
        f"load average now {os.getloadavg()[0]:.2f}"
    )
    print(
        "stores: " + ("; ".join(problems) if problems else "every acknowledged action stored once")
    )
    goals = [
        ("attack_ratio >= 0.5", ratio >= 0.5),
        ("attack_p99_ms < 100", attacked.run.p99_ms < 100),
        ("store_growth_mb <= 5", store_growth <= 5),
        ("rss_growth_mb <= 100", rss_growth <= 100),
        (f"slow_conns_closed_s <= {HEADER_TIMEOUT_S + 2:g}", slow_closed <= HEADER_TIMEOUT_S + 2),
    ]
    print("goals: " + ", ".join(f"{g} {'ok' if met else 'MISSED'}" for g, met in goals))
    print(
        f"RESULT attack_ratio={ratio:.2f} attack_p99_ms={attacked.run.p99_ms:.1f} "
        f"store_growth_mb={store_growth:.2f} rss_growth_mb={rss_growth:.1f} "
        f"slow_conns_closed_s={slow_closed:.1f}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "attack":
        sys.exit(attacker(int(sys.argv[2]), Path(sys.argv[3])))
    sys.exit(main())
