"""Benchmark: a per-currency cost preview, sequential vs concurrent vs cached.

Workload: the configurations endpoint for every sandbox game x currency (one request each,
under the 60/s per-user tier so the limiter does not dominate), fetched with one worker
(the baseline), with eight, and again from the session cache; the sandbox adds 30 ms to
each answer, a network round trip to a real service, which is what concurrency hides (on
loopback without latency the work is CPU-bound and threads do not help). Also the table build: exact
feature costs for the whole catalogue, compared with bare Decimal multiplication.
Prints one ``RESULT`` line.
"""

from __future__ import annotations

import time
from decimal import Decimal

from gptools.client import Client
from gptools.costs import CostBook, combine, cross_check, table_from_game
from gptools.models import Game
from gptools.sandbox import CATALOGUE, CURRENCIES, FaultRule, SandboxConfig, run_sandbox

LATENCY_S = 0.03


def _timed_table(sb_url: str, user: str, password: str, workers: int) -> tuple[float, float, int]:
    """Seconds for the first table, seconds for the cached repeat, requests made."""
    with Client(sb_url, user, password) as client:
        book = CostBook(client, brand=201, max_workers=workers)
        games = [g.game_id for g in CATALOGUE]
        began = time.perf_counter()
        book.table(games, CURRENCIES, source="configurations")
        elapsed = time.perf_counter() - began
        began = time.perf_counter()
        book.table(games, CURRENCIES, source="configurations")
        return elapsed, time.perf_counter() - began, book.requests


def main() -> None:
    """Run the workload and print the figures."""
    with run_sandbox(SandboxConfig(seed=0)) as sb:
        acct = sb.accounts["partner"]
        _timed_table(sb.base_url, acct.username, acct.password, 4)  # warm-up
        sb.reset()
        sb.faults.add(
            FaultRule(endpoint="GET /awarded-feature-configurations", latency_s=LATENCY_S)
        )
        seq, _, requests_seq = _timed_table(sb.base_url, acct.username, acct.password, 1)
        sb.reset()
        sb.faults.add(
            FaultRule(endpoint="GET /awarded-feature-configurations", latency_s=LATENCY_S)
        )
        con, cached, requests = _timed_table(sb.base_url, acct.username, acct.password, 8)
        assert requests_seq == requests

    games = [Game.model_validate(g.to_json()) for g in CATALOGUE]
    began = time.perf_counter()
    for _ in range(20):
        table = combine((table_from_game(g) for g in games), source="game")
    build = (time.perf_counter() - began) / 20
    began = time.perf_counter()
    for _ in range(20):
        bare = [
            b * f.price_multiplier
            for g in games
            for bets in g.bet_sizes.values()
            for f in g.buy_features
            for b in bets
        ]
    bare_s = (time.perf_counter() - began) / 20
    assert len(bare) == len(table) and cross_check(table, table).ok
    assert all(isinstance(v, Decimal) for v in table["feature_cost"])

    print(
        f"preview of {requests} (game, currency) pairs, {LATENCY_S * 1000:.0f} ms each: "
        f"1 worker {seq:.3f} s, 8 workers {con:.3f} s, from cache {cached * 1000:.2f} ms"
    )
    print(
        f"cost table of {len(table)} rows: {build * 1000:.2f} ms "
        f"(bare Decimal products {bare_s * 1000:.3f} ms)"
    )
    print(
        f"RESULT requests={requests} sequential_s={seq:.3f} concurrent_s={con:.3f} "
        f"speedup={seq / con:.2f} cached_ms={cached * 1000:.2f} "
        f"table_rows={len(table)} table_ms={build * 1000:.2f} "
        f"table_vs_bare={build / bare_s:.1f}"
    )


if __name__ == "__main__":
    main()
