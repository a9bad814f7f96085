"""The processing queue (at least once, retries, dead letter, restart), retention purge,
the exports and the CLI."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pyarrow.parquet as pq

from gptools.models import GameEventNotification
from gptools.webhooks import (
    LOG_COLUMNS,
    ProcessingQueue,
    ReceiverAuth,
    WebhookReceiver,
    export_log,
    open_store,
)
from tests._support.cli import run_gptools
from tests.webhooks.conftest import JSON, T0, ManualClock, accept, event, serve_in_thread, wire


def test_handler_runs_once_per_action_after_the_ack(tmp_path: Path) -> None:
    seen: list[str] = []
    done = threading.Event()

    def handler(ev: GameEventNotification) -> None:
        seen.append(str(ev.action_id))
        if len(seen) == 3:
            done.set()

    receiver = WebhookReceiver(
        f"sqlite:///{tmp_path / 's.db'}", auth=ReceiverAuth.none(), handler=handler
    )
    ids = [str(uuid.uuid4()) for _ in range(3)]
    with serve_in_thread(receiver) as srv:
        for a in [*ids, ids[0]]:  # a duplicate is not processed again
            assert httpx.post(srv.url, content=wire(event(a)), headers=JSON).status_code == 200
        assert done.wait(10)
    assert sorted(seen) == sorted(ids)
    conn = receiver.store.connect()
    assert conn.queue_counts().done == 3
    conn.close()


def test_failures_are_retried_with_backoff_then_dead_lettered(
    store_url: str,
) -> None:
    url = store_url
    ok, flaky, bad = (str(uuid.uuid4()) for _ in range(3))
    accept(url, [ok, flaky, bad])
    calls: dict[str, int] = {}

    def handler(ev: GameEventNotification) -> None:
        key = str(ev.action_id)
        calls[key] = calls.get(key, 0) + 1
        if key == bad or (key == flaky and calls[key] < 3):
            raise RuntimeError(f"boom {calls[key]}")

    clock = ManualClock()
    q = ProcessingQueue(
        open_store(url),
        handler,
        max_attempts=4,
        clock=clock,
        first_delay=timedelta(seconds=10),
        factor=2,
    )
    q.drain()
    assert calls == {ok: 1, flaky: 1, bad: 1}
    for step in (10, 20, 40):  # nothing runs before its backoff has passed
        clock.now += timedelta(seconds=step - 1)
        q.drain()
        before = dict(calls)
        clock.now += timedelta(seconds=1)
        q.drain()
        assert calls != before
    assert calls == {ok: 1, flaky: 3, bad: 4}
    conn = open_store(url).connect()
    counts = conn.queue_counts()
    last_error = conn.raw.execute(
        "SELECT last_error FROM webhook_actions WHERE action_id = "
        + ("?" if url.startswith("sqlite") else "%s"),
        (bad,),
    ).fetchone()[0]
    conn.close()
    assert (counts.pending, counts.done, counts.dead) == (0, 2, 1)
    assert last_error == "RuntimeError: boom 4"


def test_restart_resumes_pending_and_expired_claims(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    ids = [str(uuid.uuid4()) for _ in range(5)]
    accept(url, ids)
    clock = ManualClock()
    # A worker starts two runs and dies before finishing them.
    conn = open_store(url).connect()
    claimed = [
        conn.claim_next(clock(), lease=timedelta(minutes=5), max_attempts=5) for _ in range(2)
    ]
    conn.close()
    seen: list[str] = []
    q = ProcessingQueue(
        open_store(url),
        lambda ev: seen.append(str(ev.action_id)),
        clock=clock,
        lease=timedelta(minutes=5),
    )
    q.drain()
    assert len(seen) == 3  # the claimed ones wait for their lease to run out
    clock.now += timedelta(minutes=5)
    q.drain()
    assert sorted(seen) == sorted(ids)
    assert {c.action_id for c in claimed if c is not None} <= set(seen)


def test_purge_keeps_keys_for_the_retention_window(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    old, recent = str(uuid.uuid4()), str(uuid.uuid4())
    accept(url, [old], at=T0)
    accept(url, [recent], at=T0 + timedelta(days=5))
    conn = open_store(url).connect()
    conn.raw.execute("UPDATE webhook_actions SET state = 'done'")
    assert conn.purge(T0 + timedelta(days=7, hours=23)) == 0  # 8 days by default
    assert conn.purge(T0 + timedelta(days=8, seconds=1)) == 1
    assert conn.action_ids() == {recent}
    conn.close()


def test_exports_follow_the_log_contract(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    receiver = WebhookReceiver(url, auth=ReceiverAuth.none())
    good = event()
    with serve_in_thread(receiver) as srv:
        httpx.post(srv.url, content=wire(good), headers=JSON)
        httpx.post(srv.url, content=wire(good), headers=JSON)
        httpx.post(srv.url, content=b"not json", headers=JSON)
    out = tmp_path / "log.jsonl"
    result = export_log(open_store(url), out, format="jsonl")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert result.records == 3 == len(lines)
    assert lines[0]["payload"]["actionId"] == good["actionId"]
    assert '"bet":2.10' in out.read_text().splitlines()[0].replace(" ", "")
    assert lines[1]["duplicate"] is True
    assert lines[2]["body"] == "not json" and "payload" not in lines[2]
    assert all(ln["received_at"].endswith("Z") for ln in lines)
    pq_out = tmp_path / "log.parquet"
    export_log(open_store(url), pq_out, format="parquet")
    table = pq.read_table(pq_out)
    assert tuple(table.column_names) == LOG_COLUMNS
    assert table.num_rows == 3
    assert table.column("body").to_pylist()[2] == "not json"
    assert str(table.schema.field("received_at").type) == "timestamp[us, tz=UTC]"


def test_cli_serve_refuses_missing_secrets_and_bad_store(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    r = run_gptools("webhooks", "serve", "--auth", "bearer", env=env)
    assert r.returncode == 2 and "GP_WEBHOOK_API_KEY" in r.stderr and "Traceback" not in r.stderr
    r = run_gptools("webhooks", "serve", "--auth", "none", "--store", "mysql://x", env=env)
    assert r.returncode == 2 and "sqlite:///PATH" in r.stderr


def test_cli_deliver_then_export(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    receiver = WebhookReceiver(url, auth=ReceiverAuth.bearer("demo-key"))
    env = {"PATH": "/usr/bin:/bin", "GP_WEBHOOK_API_KEY": "demo-key"}
    with serve_in_thread(receiver) as srv:
        r = run_gptools(
            "sandbox",
            "deliver",
            "--url",
            srv.url,
            "-n",
            "50",
            "--auth",
            "bearer",
            "--json",
            env=env,
        )
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["delivered"] == 50 and report["attempts"] == 50
    assert "demo-key" not in r.stdout + r.stderr
    out = tmp_path / "out.parquet"
    r = run_gptools("webhooks", "export", "--store", url, "--format", "parquet", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["records"] == 50
    assert pq.read_table(out).num_rows == 50
    r = run_gptools("webhooks", "export", "--store", "nope://", "--format", "jsonl", str(out))
    assert r.returncode == 2 and "unknown store URL" in r.stderr
