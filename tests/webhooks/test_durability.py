"""Receiver subprocesses under load: exactly-once storage with duplicates, SIGKILL and
restart, two processes on one PostgreSQL store."""

from __future__ import annotations

import random
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from gptools.webhooks import open_store
from tests.webhooks.conftest import JSON, ReceiverProcess, event, wire

AUTH = {"authorization": "Bearer test-key", **JSON}


class _Clients:
    """One httpx client per thread, all closed at the end."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._all: list[httpx.Client] = []
        self._lock = threading.Lock()

    def get(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = httpx.Client(timeout=30)
            with self._lock:
                self._all.append(client)
        return client

    def close(self) -> None:
        for client in self._all:
            client.close()


def _send_all(url: str, bodies: Sequence[bytes], *, threads: int = 16) -> list[tuple[int, str]]:
    """POST every body concurrently (``threads`` clients); (status, answer status) each."""
    clients = _Clients()

    def one(body: bytes) -> tuple[int, str]:
        r = clients.get().post(url, content=body, headers=AUTH)
        return r.status_code, r.json().get("status", r.json().get("error", ""))

    try:
        with ThreadPoolExecutor(threads) as pool:
            return list(pool.map(one, bodies))
    finally:
        clients.close()


@pytest.mark.slow
def test_10000_concurrent_deliveries_with_30_percent_duplicates_store_each_once(
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
    rng: random.Random,
) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    proc = receiver_process(store_url, workers=2)
    unique = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(7000)]
    deliveries = unique + [rng.choice(unique) for _ in range(3000)]
    rng.shuffle(deliveries)
    bodies = [wire(event(a)) for a in deliveries]

    answers = _send_all(proc.url, bodies)

    assert Counter(status for status, _ in answers) == {200: 10_000}
    assert Counter(kind for _, kind in answers) == {"accepted": 7000, "duplicate": 3000}
    conn = open_store(store_url).connect()
    try:
        assert conn.action_ids() == set(unique)
        rows = list(conn.iter_log())
        assert len(rows) == 10_000
        assert sum(r["duplicate"] for r in rows) == 3000
        firsts = Counter(r["action_id"] for r in rows if not r["duplicate"])
        assert set(firsts) == set(unique) and set(firsts.values()) == {1}
    finally:
        conn.close()


@pytest.mark.slow
def test_sigkill_under_load_loses_no_acknowledged_action(
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    proc = receiver_process(store_url, workers=1)
    acked: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()
    enough = threading.Event()

    def sender() -> None:
        with httpx.Client(timeout=5) as client:
            while not stop.is_set():
                action = str(uuid.uuid4())
                try:
                    r = client.post(proc.url, content=wire(event(action)), headers=AUTH)
                except httpx.TransportError:
                    continue  # the process died mid-request: not acknowledged
                if r.status_code == 200:
                    with lock:
                        acked.add(action)
                        if len(acked) >= 1500:
                            enough.set()

    threads = [threading.Thread(target=sender) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        assert enough.wait(120), "the receiver did not acknowledge 1500 deliveries in time"
        proc.kill()  # SIGKILL while the senders are still sending
    finally:
        stop.set()
        for t in threads:
            t.join()

    restarted = receiver_process(store_url, workers=1)
    conn = open_store(store_url).connect()
    try:
        stored = conn.action_ids()
    finally:
        conn.close()
    assert len(acked) >= 1500
    assert acked <= stored, f"{len(acked - stored)} acknowledged actions were lost"
    # And the restarted receiver still knows them: a retry is a duplicate.
    sample = sorted(acked)[:20]
    answers = _send_all(restarted.url, [wire(event(a)) for a in sample], threads=4)
    assert answers == [(200, "duplicate")] * len(sample)


@pytest.mark.postgres
@pytest.mark.slow
def test_two_receiver_processes_on_one_postgres_store_dedupe_across_each_other(
    pg_url: str,
    receiver_process: Callable[..., ReceiverProcess],
    rng: random.Random,
) -> None:
    first = receiver_process(pg_url)
    second = receiver_process(pg_url)
    actions = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(600)]
    # Every action goes to both processes at about the same time.
    jobs = [(url, a) for a in actions for url in (first.url, second.url)]
    rng.shuffle(jobs)
    clients = _Clients()

    def one(job: tuple[str, str]) -> tuple[str, int, str]:
        r = clients.get().post(job[0], content=wire(event(job[1])), headers=AUTH)
        return job[1], r.status_code, r.json()["status"]

    try:
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(one, jobs))
    finally:
        clients.close()

    assert {status for _, status, _ in answers} == {200}
    accepted = Counter(a for a, _, kind in answers if kind == "accepted")
    assert set(accepted) == set(actions) and set(accepted.values()) == {1}
    conn = open_store(pg_url).connect()
    try:
        assert conn.action_ids() == set(actions)
        rows = list(conn.iter_log())
        assert len(rows) == 1200 and sum(r["duplicate"] for r in rows) == 600
        assert all(r["received_at"].tzinfo is not None for r in rows)
    finally:
        conn.close()


def test_graceful_shutdown_drains_in_flight_requests(
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    proc = receiver_process(store_url, workers=1)
    results: list[int] = []
    started = threading.Event()

    def send() -> None:
        with httpx.Client(timeout=10) as client:
            for i in range(200):
                if i == 20:
                    started.set()
                try:
                    results.append(
                        client.post(proc.url, content=wire(event()), headers=AUTH).status_code
                    )
                except httpx.TransportError:
                    return

    t = threading.Thread(target=send)
    t.start()
    assert started.wait(30)
    began = time.monotonic()
    proc.terminate()
    t.join()
    # Stopped by SIGTERM, the process ends by SIGTERM once it has shut down cleanly.
    assert proc.proc.returncode == -signal.SIGTERM, proc.log.read_text()
    assert "Application shutdown complete" in proc.log.read_text()
    assert time.monotonic() - began < 15
    conn = open_store(store_url).connect()
    try:
        # Every 200 the sender got was stored before the process exited.
        assert conn.log_count() >= results.count(200) >= 20
        assert len(conn.action_ids()) == results.count(200)
    finally:
        conn.close()


def test_a_postgres_batch_marks_repeats_and_stored_keys_as_duplicates(pg_url: str) -> None:
    """The PostgreSQL store writes a batch's actions in one statement: the first
    occurrence of a new key is new; a key stored before, or repeated later in the batch,
    is a duplicate; refused items store no action; the body is kept only for pending."""
    from datetime import UTC, datetime

    from gptools.webhooks._records import LogEntry, WriteItem

    at = datetime(2026, 3, 2, 10, 15, tzinfo=UTC)
    old, a, b = (str(uuid.UUID(int=i, version=4)) for i in (1, 2, 3))

    def item(action_id: str, *, accept: bool = True) -> WriteItem:
        status = 200 if accept else 401
        return WriteItem(
            LogEntry(
                at,
                status,
                wire(event(action_id)).decode(),
                action_id,
                latency_ms=1.0,
                auth_ok=accept,
            ),
            accept=accept,
        )

    conn = open_store(pg_url).connect()
    try:
        assert conn.write_batch([item(old)]) == [True]
        # b before a: the statement sorts by key, the answers keep the batch's order.
        batch = [item(b), item(a), item(old), item(b), item(a, accept=False)]
        assert conn.write_batch(batch, state="done") == [True, True, False, False, False]
        assert conn.write_batch([item(b, accept=False)]) == [False]  # nothing accepted
        assert conn.action_ids() == {old, a, b}
        rows = list(conn.iter_log())
        assert Counter((r["action_id"], r["status"], r["duplicate"]) for r in rows) == Counter(
            [
                (old, 200, False),
                (b, 200, False),
                (a, 200, False),
                (old, 200, True),
                (b, 200, True),
                (a, 401, False),
                (b, 401, False),
            ]
        )
        bodies = dict(conn.raw.execute("SELECT action_id, body FROM webhook_actions"))
        assert bodies[old].startswith("{") and bodies[a] == bodies[b] == ""
    finally:
        conn.close()
