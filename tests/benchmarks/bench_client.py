"""Benchmark of the API client against the sandbox on loopback (one run, ratios only).

(a) Participant additions pushed as fast as possible (4 threads) through one sync client
    against a sandbox enforcing the documented tiers: the achieved steady rate over the
    130/s per-user limit (goal >= 0.95) and the rate-limit responses the server gave
    (goal 0). The rate is (n - 1) / (last completion - first completion) with
    n = 8 × 130 + 1, which is exactly the limit for an ideal client, bursty or smooth.
(a, async) The same through one ``AsyncClient`` (default transport, aiohttp) from 8 tasks:
    ``async_participant_rate_ratio`` (goal >= 0.95) and ``async_rate_limited`` (goal 0).
(b) The same GET through the client and through raw httpx (rate limits off in the
    sandbox; the client's limiter still runs, with figures too high to bind), interleaved
    request by request; the median per-round time ratio client / raw (goal <= 1.3).

The sandbox runs in a subprocess (``gptools sandbox serve``) so that its CPU time is not
charged to the client's interpreter. Run: ``.venv/bin/python tests/benchmarks/bench_client.py``.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import httpx

from gptools import spec
from gptools.client import AsyncClient, Client
from gptools.models import CampaignRequest
from gptools.sandbox import CATALOGUE, DEMO_ACCOUNTS

GPTOOLS = str(Path(sys.executable).with_name("gptools"))
LIMIT = next(t for t in spec.RATE_TIERS if t.name == "user_participant").per_second
N_PARTICIPANT = 8 * LIMIT + 1
ROUNDS, PER_ROUND = 7, 500
ASYNC_TASKS = 8
ACCOUNT = DEMO_ACCOUNTS["partner"]
BRAND = 201
GAME = CATALOGUE[0]


@contextmanager
def served(*extra: str) -> Iterator[str]:
    """``gptools sandbox serve`` on a free loopback port; yields its base URL."""
    proc = subprocess.Popen(
        [GPTOOLS, "sandbox", "serve", "--port", "0", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("the sandbox exited before serving")
            found = re.search(r"(http://127\.0\.0\.1:\d+)", line)
            url = found.group(1) if found else None
        if url is None:
            raise RuntimeError("the sandbox did not announce its URL within 60 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _campaign_request() -> CampaignRequest:
    return CampaignRequest(
        type=spec.FREE_ROUNDS_CAMPAIGN_TYPE,
        name="bench",
        bet_number=1,
        game_ids=[GAME.game_id],
        bet=GAME.bet_sizes["EUR"][0],
        currency_code="EUR",
        start_date=datetime(2026, 3, 1),
        end_date=datetime(2026, 3, 8),
        time_zone="Europe/Malta",
    )


def _refused(base_url: str) -> int:
    """Rate-limit answers the sandbox gave to participant additions (all of them recorded)."""
    records = httpx.get(f"{base_url}/_sandbox/requests", timeout=30).json()
    posted = [r for r in records if r["path"].endswith("/participant")]
    if len(posted) < N_PARTICIPANT:
        raise RuntimeError(
            f"the sandbox recorded {len(posted)} participant requests, "
            f"expected at least {N_PARTICIPANT}"
        )
    return sum(1 for r in posted if r["status"] == spec.RATE_LIMIT_STATUS)


def participant_rate(base_url: str) -> tuple[float, int]:
    with Client(base_url, ACCOUNT.username, ACCOUNT.password, env_file=None) as client:
        campaign = client.create_campaign(_campaign_request(), brand=BRAND).campaign_id

        def add(i: int) -> float:
            client.add_participants(campaign, [f"bench-{i:05d}"], brand=BRAND)
            return time.monotonic()

        with ThreadPoolExecutor(max_workers=4) as pool:
            done = sorted(pool.map(add, range(N_PARTICIPANT)))
        rate = (N_PARTICIPANT - 1) / (done[-1] - done[0])
        print(
            f"(a) {N_PARTICIPANT} participant requests: {rate:.1f}/s against {LIMIT}/s; "
            f"client stats {client.stats}"
        )
    return rate / LIMIT, _refused(base_url)


def async_participant_rate(base_url: str) -> tuple[float, int]:
    """(a) again through ``AsyncClient`` (default transport) with ``ASYNC_TASKS`` tasks."""

    async def main() -> list[float]:
        async with AsyncClient(
            base_url, ACCOUNT.username, ACCOUNT.password, env_file=None
        ) as client:
            campaign = (await client.create_campaign(_campaign_request(), brand=BRAND)).campaign_id
            left = iter(range(N_PARTICIPANT))
            done: list[float] = []

            async def task() -> None:
                for i in left:
                    await client.add_participants(campaign, [f"bench-{i:05d}"], brand=BRAND)
                    done.append(time.monotonic())

            await asyncio.gather(*(task() for _ in range(ASYNC_TASKS)))
            print(f"(a, async) client stats {client.stats}")
            return sorted(done)

    done = asyncio.run(main())
    rate = (N_PARTICIPANT - 1) / (done[-1] - done[0])
    print(
        f"(a, async) {N_PARTICIPANT} participant requests from {ASYNC_TASKS} tasks: "
        f"{rate:.1f}/s against {LIMIT}/s"
    )
    return rate / LIMIT, _refused(base_url)


def overhead(base_url: str) -> float:
    # The limiter runs with every figure far above what one process can send.
    roomy = tuple(replace(t, per_second=t.per_second * 10_000) for t in spec.RATE_TIERS)
    path = spec.BRAND_PREFIX_TEMPLATE.format(brand_id=BRAND) + "/" + spec.ENDPOINT_GAME
    params = {spec.QUERY_GAME_ID: GAME.game_id}
    auth = httpx.BasicAuth(ACCOUNT.username, ACCOUNT.password)
    with (
        Client(
            base_url, ACCOUNT.username, ACCOUNT.password, env_file=None, rate_tiers=roomy
        ) as client,
        httpx.Client(base_url=base_url, auth=auth) as raw,
    ):
        client.self()

        def via_client() -> None:
            client.game(GAME.game_id, brand=BRAND)

        def via_raw() -> None:
            r = raw.get(path, params=params)
            r.raise_for_status()
            r.json()

        for fn in (via_client, via_raw):  # warm up connections and caches
            for _ in range(50):
                fn()
        # Interleaved one by one (order flipped each time), so the load of a busy machine
        # falls on both sides alike; a ratio per round, the median reported.
        ratios = []
        clock = time.perf_counter
        for _ in range(ROUNDS):
            spent = {via_client: 0.0, via_raw: 0.0}
            for i in range(PER_ROUND):
                for fn in (via_client, via_raw) if i % 2 else (via_raw, via_client):
                    start = clock()
                    fn()
                    spent[fn] += clock() - start
            ratios.append(spent[via_client] / spent[via_raw])
            print(
                f"(b) round: client {spent[via_client] / PER_ROUND * 1e3:.3f} ms, raw httpx "
                f"{spent[via_raw] / PER_ROUND * 1e3:.3f} ms, ratio {ratios[-1]:.3f}"
            )
    return statistics.median(ratios)


def main() -> None:
    with served() as url:
        rate_ratio, refused = participant_rate(url)
    with served() as url:
        async_ratio, async_refused = async_participant_rate(url)
    with served("--no-rate-limits") as url:
        overhead_ratio = overhead(url)
    print(
        f"RESULT participant_rate_ratio={rate_ratio:.3f} rate_limited={refused} "
        f"overhead_ratio={overhead_ratio:.3f} async_participant_rate_ratio={async_ratio:.3f} "
        f"async_rate_limited={async_refused}"
    )


if __name__ == "__main__":
    main()
