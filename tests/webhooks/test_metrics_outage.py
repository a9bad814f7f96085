"""Metrics never depend on the store (issue 34 item 2).

A scrape used to open a store connection and count the queue: with the database
unreachable ``/metrics`` answered 500 (on the metrics port the connection was dropped
after a traceback), so Prometheus saw the receiver down instead of not ready. Now a
scrape reads what the workers keep (health, the store watch's last counts), never the
store: these tests make PostgreSQL unreachable with a relay the test cuts (the machine's
server is shared and keeps running), and count the relay's connections.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools.webhooks import ReceiverAuth, WebhookReceiver, open_store
from gptools.webhooks._records import QueueDepth
from tests._support.proxy import TcpProxy
from tests.webhooks.conftest import (
    JSON,
    ReceiverProcess,
    accept,
    event,
    free_port,
    serve_in_thread,
    wire,
)
from tests.webhooks.test_health_gauges import (
    DEADLINE_S,
    HEALTHY,
    gauges,
    wait_for_gauges,
    wait_for_workers,
)

HEADERS = {"authorization": "Bearer test-key", **JSON}
STORE_UP = {**HEALTHY, "gptools_webhook_store_up": 1.0}
#: /readyz asked this many times in a row, each on a new connection, so every worker is asked.
READY_ASKS = 6
STORE_DOWN = {
    "gptools_webhook_live": 1.0,
    "gptools_webhook_ready": 0.0,
    "gptools_webhook_store_up": 0.0,
}


@pytest.fixture
def relay() -> Iterator[TcpProxy]:
    """A relay in front of the machine's PostgreSQL."""
    with TcpProxy(("127.0.0.1", 5432)) as relayed:
        yield relayed


def through(pg_url: str, relay: TcpProxy) -> str:
    """``pg_url`` reached through ``relay``."""
    assert "127.0.0.1:5432" in pg_url
    return pg_url.replace("127.0.0.1:5432", f"127.0.0.1:{relay.port}")


def test_a_scrape_opens_no_connection_and_answers_through_an_outage(
    pg_url: str, relay: TcpProxy
) -> None:
    receiver = WebhookReceiver(through(pg_url, relay), auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv:
        metrics = f"{srv.base_url}/metrics"
        assert httpx.post(srv.url, content=wire(event()), headers=JSON).status_code == 200
        wait_for_gauges(metrics, STORE_UP)
        # Until the store watch's first count is in (the gauges are this process's, and
        # an earlier test's receiver may have set them).
        deadline = time.monotonic() + DEADLINE_S
        while receiver.watch.depth is None:
            assert time.monotonic() < deadline, "the store watch never counted"
            time.sleep(0.05)
        connections = relay.accepted
        for _ in range(5):
            assert gauges(metrics)["gptools_webhook_queue_actions"] == {
                (("state", "dead"),): 0.0,
                (("state", "pending"),): 0.0,
            }
        assert relay.accepted == connections, "a scrape opened a store connection"

        relay.cut()
        # No delivery arrives: the store watch notices by itself, within its 5 s.
        down = wait_for_gauges(metrics, STORE_DOWN)
        assert httpx.get(f"{srv.base_url}/healthz").status_code == 200
        ready = httpx.get(f"{srv.base_url}/readyz")
        assert ready.status_code == 503 and ready.json()["store"].startswith("unreachable")
        # The last known counts stay, they are not zeroed by the outage.
        assert down["gptools_webhook_dead_letters"] == {(): 0.0}

        relay.open()
        wait_for_gauges(metrics, STORE_UP)
        deadline = time.monotonic() + DEADLINE_S
        while httpx.post(srv.url, content=wire(event()), headers=JSON).status_code != 200:
            assert time.monotonic() < deadline, "no 200 after the store came back"


def test_an_outage_is_not_ready_in_every_worker_and_never_down(
    tmp_path: Path,
    pg_url: str,
    relay: TcpProxy,
    receiver_process: Callable[..., ReceiverProcess],
) -> None:
    """Two workers, the metrics port: the scrape answers through the outage with ready
    and store_up 0, and a worker killed while it was unready leaves no 0 behind."""
    port = free_port()
    rp = receiver_process(through(pg_url, relay), workers=2, args=("--metrics-port", str(port)))
    metrics = f"http://127.0.0.1:{port}/metrics"
    workers = wait_for_workers(rp, 2, other_than=set())
    wait_for_gauges(metrics, STORE_UP)

    relay.cut()
    wait_for_gauges(metrics, STORE_DOWN)
    # The gauge is the workers' minimum: one worker's store watch may notice a moment
    # before the other's, so readiness is polled until every worker asked says 503.
    deadline = time.monotonic() + DEADLINE_S
    while not all(httpx.get(f"{rp.base_url}/readyz").status_code == 503 for _ in range(READY_ASKS)):
        assert time.monotonic() < deadline, "a worker stayed ready through the outage"
        time.sleep(0.05)
    assert httpx.post(rp.url, content=wire(event()), headers=HEADERS).status_code == 503
    assert httpx.get(f"{rp.base_url}/healthz").status_code == 200

    # A worker dies while it reports "not ready"; uvicorn replaces it.
    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    wait_for_workers(rp, 2, other_than={victim})
    relay.open()
    wait_for_gauges(metrics, STORE_UP)
    deadline = time.monotonic() + DEADLINE_S
    while httpx.post(rp.url, content=wire(event()), headers=HEADERS).status_code != 200:
        assert time.monotonic() < deadline, "no 200 after the store came back"
    assert "Traceback" not in rp.log.read_text()


@pytest.mark.parametrize(
    ("workers", "separate_port"), [(1, False), (2, True)], ids=["listener", "metrics-port"]
)
def test_a_scrape_that_fails_is_one_log_line_and_a_500(
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
    workers: int,
    separate_port: bool,
) -> None:
    port = free_port()
    args = ("--log-format", "json", *(("--metrics-port", str(port)) if separate_port else ()))
    rp = receiver_process(f"sqlite:///{tmp_path / 's.db'}", workers=workers, args=args)
    metrics = f"http://127.0.0.1:{port}/metrics" if separate_port else f"{rp.base_url}/metrics"
    assert httpx.get(metrics).status_code == 200
    (directory,) = (tmp_path / "receiver-tmp").glob("gptools-metrics-*")
    broken = directory / "counter_1.db"  # what no process wrote: a folder, not a file
    broken.mkdir()
    answer = httpx.get(metrics)
    assert answer.status_code == 500
    broken.rmdir()
    assert httpx.get(metrics).status_code == 200

    lines = rp.log.read_text().splitlines()
    assert "Traceback" not in "\n".join(lines)
    records = [json.loads(line) for line in lines if line.startswith("{")]
    failed = [r for r in records if r["event"] == "metrics_scrape_failed"]
    assert len(failed) == 1, lines
    assert failed[0]["level"] == "error" and "IsADirectoryError" in failed[0]["message"]


def test_the_queue_counts_read_only_pending_and_dead_actions(store_url: str) -> None:
    """The store watch's counts use the partial indexes of the two states, so their cost
    follows those actions, never the processed ones (the query plan says so)."""
    ids = [f"00000000-0000-4000-8000-{i:012x}" for i in range(5000)]
    accept(store_url, ids)
    conn = open_store(store_url).connect()
    try:
        conn._execute("UPDATE webhook_actions SET state = 'done' WHERE action_id > ?", ids[4:5])
        conn._execute("UPDATE webhook_actions SET state = 'dead' WHERE action_id < ?", ids[3:4])
        conn.raw.execute("ANALYZE")
        sql = (
            "SELECT (SELECT COUNT(*) FROM webhook_actions WHERE state = 'pending'),"
            " (SELECT COUNT(*) FROM webhook_actions WHERE state = 'dead')"
        )
        plan: Any
        if store_url.startswith("sqlite"):
            plan = [row[3] for row in conn.raw.execute(f"EXPLAIN QUERY PLAN {sql}")]
            assert [step for step in plan if "webhook_actions" in step] == [
                "SCAN webhook_actions USING INDEX webhook_actions_pending",
                "SCAN webhook_actions USING INDEX webhook_actions_dead",
            ]
        else:
            plan = json.dumps(conn.raw.execute(f"EXPLAIN (FORMAT JSON) {sql}").fetchone()[0])
            assert "Seq Scan" not in plan
            assert '"Index Name": "webhook_actions_pending"' in plan
            assert '"Index Name": "webhook_actions_dead"' in plan
        assert conn.queue_depth() == QueueDepth(pending=2, dead=3)
    finally:
        conn.close()


def test_a_connection_reset_on_the_metrics_port_is_one_log_line(
    tmp_path: Path, receiver_process: Callable[..., ReceiverProcess]
) -> None:
    """A client that resets its connection half-way through a request: one warning line
    through the receiver's logger, never socketserver's traceback on stderr."""
    import socket
    import struct

    port = free_port()
    args = ("--log-format", "json", "--metrics-port", str(port))
    rp = receiver_process(f"sqlite:///{tmp_path / 's.db'}", args=args)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # the headers never end
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # The server reads the reset; poll its log for the line.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        lines = rp.log.read_text().splitlines()
        records = [json.loads(line) for line in lines if line.startswith("{")]
        failed = [r for r in records if r["event"] == "metrics_connection_failed"]
        if failed or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(failed) == 1, lines
    assert "ConnectionResetError" in failed[0]["message"]
    assert "Traceback" not in "\n".join(lines)
    assert httpx.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
