"""A receiver starts while its store is down (issue 34, item 2): ``webhooks serve`` comes
up, answers deliveries 503 with Retry-After, is live but not ready, and serves as soon as
the store is reachable (creating it if it is new); a worker that then finds the store at
an older schema version says so once, stays not ready without a crash loop, and serves
once the store is migrated. PostgreSQL is made unreachable by a proxy in front of it,
never stopped (other tests share it)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools.webhooks import migrate
from gptools.webhooks._migrations import MIGRATIONS, SCHEMA_VERSION
from tests._support.proxy import TcpProxy
from tests.webhooks.conftest import JSON, ReceiverProcess, event, wire
from tests.webhooks.legacy_store import legacy_store
from tests.webhooks.test_migrations import _versions

HEADERS = {**JSON, "authorization": "Bearer test-key"}


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    """A proxy to the shared PostgreSQL server, closed (nothing answers) until opened."""
    with TcpProxy(("127.0.0.1", 5432), closed=True) as made:
        yield made


def _behind(proxy: TcpProxy, pg_url: str) -> str:
    return pg_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def _ready_everywhere(rp: ReceiverProcess, times: int = 12) -> Callable[[], bool]:
    """Whether /readyz answers 200 ``times`` times in a row, each on a new connection (so
    that every worker is asked)."""

    def check() -> bool:
        return all(
            httpx.get(f"{rp.base_url}/readyz", timeout=5).status_code == 200 for _ in range(times)
        )

    return check


def _events(log: Path) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def test_a_receiver_started_while_the_store_is_down_serves_once_it_is_back(
    pg_url: str, proxy: TcpProxy, receiver_process: Callable[..., ReceiverProcess]
) -> None:
    rp = receiver_process(
        _behind(proxy, pg_url), workers=2, args=("--log-format", "json")
    )  # /healthz answered 200: it started
    ready = httpx.get(f"{rp.base_url}/readyz", timeout=5)
    assert ready.status_code == 503
    assert ready.json()["store"].startswith("unreachable: ")
    assert httpx.get(f"{rp.base_url}/healthz", timeout=5).status_code == 200
    action_id = str(uuid.uuid4())
    refused = httpx.post(rp.url, content=wire(event(action_id)), headers=HEADERS, timeout=5)
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"] == "store_unavailable"
    starts = [e for e in _events(rp.log) if e.get("event") == "store_unreachable_at_start"]
    assert len(starts) == 1 and "starting all the same" in starts[0]["message"], starts

    proxy.open()
    _until(_ready_everywhere(rp), 30, "every worker ready once the store is reachable")
    stored = httpx.post(rp.url, content=wire(event(action_id)), headers=HEADERS, timeout=5)
    assert (stored.status_code, stored.json()["status"]) == (200, "accepted")
    again = httpx.post(rp.url, content=wire(event(action_id)), headers=HEADERS, timeout=5)
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    # A worker created the new store when it connected: every migration, in order.
    assert _versions(pg_url) == [(m.version, m.compatible_from) for m in MIGRATIONS]


def test_a_worker_that_finds_an_older_store_says_so_once_and_waits_for_the_migration(
    pg_url: str, proxy: TcpProxy, receiver_process: Callable[..., ReceiverProcess]
) -> None:
    kept = str(uuid.uuid4())
    legacy_store(pg_url, [kept])
    rp = receiver_process(_behind(proxy, pg_url), args=("--log-format", "json"))
    proxy.open()

    def says_version() -> bool:
        store = httpx.get(f"{rp.base_url}/readyz", timeout=5).json()["store"]
        return "schema version 0" in store

    _until(says_version, 30, "readiness names the store's schema version")
    assert httpx.get(f"{rp.base_url}/readyz", timeout=5).status_code == 503
    refused = httpx.post(rp.url, content=wire(event(kept)), headers=HEADERS, timeout=5)
    assert refused.status_code == 503
    _until(lambda: rp.proc.poll() is None and _mismatches(rp.log) >= 1, 10, "the line")
    migrate(pg_url)
    _until(_ready_everywhere(rp, 3), 30, "ready once the store is migrated")
    answer = httpx.post(rp.url, content=wire(event(kept)), headers=HEADERS, timeout=5)
    assert (answer.status_code, answer.json()["status"]) == (200, "duplicate")
    assert rp.proc.poll() is None  # no crash loop: the one process served throughout
    assert _mismatches(rp.log) == 1
    _until(  # the gauges are handed over every half second
        lambda: (
            f"\ngptools_webhook_schema_version {float(SCHEMA_VERSION)}\n"
            in httpx.get(f"{rp.base_url}/metrics", timeout=5).text
        ),
        10,
        "the gauge says the version the worker found",
    )
    line = next(e for e in _events(rp.log) if e.get("event") == "schema_version_mismatch")
    assert "run `gptools webhooks migrate --store" in line["message"]


def _mismatches(log: Path) -> int:
    return sum(1 for e in _events(log) if e.get("event") == "schema_version_mismatch")
