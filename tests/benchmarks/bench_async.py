"""Benchmark of the async client's transport against the sandbox on loopback (issue 13).

3,000 ``GET /game`` of one game, 32 in flight, through
(a) a raw ``httpx.AsyncClient`` (httpx's own connection pool): the baseline;
(b) ``AsyncClient`` with its default transport (aiohttp through ``httpx-aiohttp``);
(c) ``Client`` shared by 8 threads (what the sync fan-out uses).

The sandbox runs in a subprocess with its rate limits off, and the clients' own limiters are
off too (``rate_tiers=()``): this measures the wire path, not the provider's tiers. The
three run in interleaved rounds (the order rotates each round, so a busy machine weighs on
all alike), each round with fresh clients warmed up by a few requests; the figures are the
medians over the rounds. ``async_speedup = async_rps / httpx_async_rps`` (goal >= 3) and
``async_vs_sync = async_rps / sync_threads_rps`` (goal >= 1).

Run: ``flock /tmp/bench.lock .venv/bin/python tests/benchmarks/bench_async.py [ROUNDS]``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_client import ACCOUNT, BRAND, GAME, served

from gptools import spec
from gptools.client import AsyncClient, Client

REQUESTS = 3_000
IN_FLIGHT = 32
THREADS = 8
WARM_UP = 2 * IN_FLIGHT
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
PATH = spec.BRAND_PREFIX_TEMPLATE.format(brand_id=BRAND) + "/" + spec.ENDPOINT_GAME
PARAMS = {spec.QUERY_GAME_ID: GAME.game_id}


async def _fan_out(get: Callable[[], Awaitable[None]], n: int) -> None:
    """``n`` calls of ``get`` with ``IN_FLIGHT`` of them running at any time."""
    left = n

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await get()

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))


async def _timed(get: Callable[[], Awaitable[None]]) -> float:
    await _fan_out(get, WARM_UP)
    start = time.perf_counter()
    await _fan_out(get, REQUESTS)
    return REQUESTS / (time.perf_counter() - start)


def raw_httpx_rps(base_url: str) -> float:
    async def main() -> float:
        auth = httpx.BasicAuth(ACCOUNT.username, ACCOUNT.password)
        async with httpx.AsyncClient(base_url=base_url, auth=auth) as raw:

            async def get() -> None:
                r = await raw.get(PATH, params=PARAMS)
                r.raise_for_status()
                r.json()

            return await _timed(get)

    return asyncio.run(main())


def async_client_rps(base_url: str) -> float:
    async def main() -> float:
        async with AsyncClient(
            base_url, ACCOUNT.username, ACCOUNT.password, env_file=None, rate_tiers=()
        ) as client:
            await client.self()

            async def get() -> None:
                await client.game(GAME.game_id, brand=BRAND)

            return await _timed(get)

    return asyncio.run(main())


def sync_threads_rps(base_url: str) -> float:
    with Client(
        base_url, ACCOUNT.username, ACCOUNT.password, env_file=None, rate_tiers=()
    ) as client:
        client.self()
        lock = threading.Lock()

        def run(n: int) -> None:
            left = [n]

            def worker() -> None:
                while True:
                    with lock:
                        if left[0] <= 0:
                            return
                        left[0] -= 1
                    client.game(GAME.game_id, brand=BRAND)

            with ThreadPoolExecutor(max_workers=THREADS) as pool:
                for f in [pool.submit(worker) for _ in range(THREADS)]:
                    f.result()

        run(WARM_UP)
        start = time.perf_counter()
        run(REQUESTS)
        return REQUESTS / (time.perf_counter() - start)


def main() -> None:
    variants: dict[str, Callable[[str], float]] = {
        "httpx_async_rps": raw_httpx_rps,
        "async_rps": async_client_rps,
        "sync_threads_rps": sync_threads_rps,
    }
    figures: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    with served("--no-rate-limits") as url:
        for round_no in range(ROUNDS):
            order = names[round_no % len(names) :] + names[: round_no % len(names)]
            for name in order:
                figures[name].append(variants[name](url))
            print(
                f"round {round_no + 1}: "
                + ", ".join(f"{name}={figures[name][-1]:.0f}" for name in names),
                flush=True,
            )
    med = {name: statistics.median(values) for name, values in figures.items()}
    print(
        f"RESULT async_rps={med['async_rps']:.0f} "
        f"httpx_async_rps={med['httpx_async_rps']:.0f} "
        f"sync_threads_rps={med['sync_threads_rps']:.0f} "
        f"async_speedup={med['async_rps'] / med['httpx_async_rps']:.2f} "
        f"async_vs_sync={med['async_rps'] / med['sync_threads_rps']:.2f}"
    )


if __name__ == "__main__":
    main()
