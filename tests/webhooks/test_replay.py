"""``webhooks replay`` (issue 38, item 2): the plan counts without changing anything; a
replay runs each chosen action's handler through the processing queue; it is idempotent
per id; one killed mid-way and run again runs each action's handler exactly once; and a
serving receiver's metrics count the replays from the store's replay rows."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gptools.models import GameEventNotification
from gptools.webhooks import open_store
from gptools.webhooks._find import FindFilter
from gptools.webhooks._replay import ReplayTotals, plan_replay, replay, replay_totals
from tests._support.brokers import http_sink
from tests._support.cli import run_gptools
from tests.webhooks.conftest import T0, ReceiverProcess, accept, scrape
from tests.webhooks.find_support import ACTIONS, fill

A1, A2, A3, A4, A5 = ACTIONS


def _ran(url: str) -> list[str]:
    ran: list[str] = []

    def handler(e: GameEventNotification) -> None:
        ran.append(str(e.action_id))

    replay(open_store(url, create=False), FindFilter(player_id="p-1"), handler=handler,
           show_progress=False)  # fmt: skip
    return ran


def test_plan_counts_and_changes_nothing(store_url: str) -> None:
    fill(store_url)
    plan = plan_replay(open_store(store_url, create=False), FindFilter(player_id="p-1"))
    assert (plan.actions, plan.deliveries, plan.gone, plan.queued) == (2, 4, 0, 0)
    conn = open_store(store_url, create=False).connect()
    try:
        assert conn.raw.execute("SELECT COUNT(*) FROM replays").fetchone()[0] == 0
        assert conn.queue_counts().pending == 0
    finally:
        conn.close()


def test_replay_runs_the_handler_once_per_action_and_twice_does_nothing_new(
    store_url: str,
) -> None:
    fill(store_url)  # stored without bodies: a receiver with no handler keeps none
    assert sorted(_ran(store_url)) == [A1, A2]
    assert _ran(store_url) == []
    conn = open_store(store_url, create=False).connect()
    try:
        row = conn.raw.execute(
            "SELECT actions, queued, gone, filter, finished_at IS NOT NULL FROM replays"
        ).fetchone()
        assert tuple(row[:3]) == (2, 2, 0) and row[3] == '{"player_id": "p-1"}' and row[4]
        assert conn.queue_counts().done == 3  # A1, A2, A5 (A3, A4 were never stored)
    finally:
        conn.close()


def test_lost_actions_are_refused_and_purged_ones_counted_gone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url)
    store = open_store(url, create=False)
    with pytest.raises(ValueError, match="only acknowledged actions are stored"):
        plan_replay(store, FindFilter(outcome="lost"))
    conn = store.connect()
    try:
        conn.purge(T0 + store.retention + timedelta(hours=2, minutes=30))  # A1, A2 purged
    finally:
        conn.close()
    plan = plan_replay(store, FindFilter(since=T0, until=T0 + timedelta(days=1)))
    assert (plan.actions, plan.gone) == (1, 2)
    assert "2 matched actions are gone" in str(plan)


def test_a_killed_replay_resumed_runs_each_handler_exactly_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    ids = [str(uuid.UUID(int=n, version=4)) for n in range(1, 41)]
    accept(url, ids, T0, state="done")
    record = tmp_path / "ran.txt"
    run = [sys.executable, "-m", "tests.webhooks.replay_worker", url, str(record)]
    killed = subprocess.run([*run, "17"], capture_output=True, text=True, timeout=60, check=False)
    assert killed.returncode == -9, killed.stderr
    assert len(record.read_text().splitlines()) == 16
    resumed = subprocess.run([*run, "0"], capture_output=True, text=True, timeout=60, check=False)
    assert resumed.returncode == 0, resumed.stderr
    counts = Counter(record.read_text().splitlines())
    assert sorted(counts) == sorted(ids) and set(counts.values()) == {1}
    again = subprocess.run([*run, "0"], capture_output=True, text=True, timeout=60, check=False)
    assert again.stdout.split() == ["0", "40", "True"]
    assert Counter(record.read_text().splitlines()) == counts


def test_cli_plan_then_replay_through_the_receivers_queue(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from gptools.cli import cli

    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url)
    runner = CliRunner()
    args = ["webhooks", "replay", "--store", url, "--game-id", "g-a", "--json"]
    plan = runner.invoke(cli, [*args, "--plan"])
    assert plan.exit_code == 0, plan.output
    assert {k: json.loads(plan.stdout)[k] for k in ("actions", "deliveries", "queued")} == {
        "actions": 1, "deliveries": 2, "queued": 0,
    }  # fmt: skip
    done = runner.invoke(cli, args)
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert (document["queued"], document["done"]) == (1, False)
    conn = open_store(url, create=False).connect()
    try:
        assert conn.queue_counts().pending == 1  # for the serving receiver's queue
    finally:
        conn.close()
    refused = runner.invoke(cli, ["webhooks", "replay", "--store", url, "--since", "2026-03-02"])
    assert refused.exit_code == 2 and "has no zone" in refused.output


def test_a_forward_replay_requeues_only_the_named_destinations_forwards(store_url: str) -> None:
    """On both stores: the chosen actions' forward to ``dwh`` is pending again (a done one
    set back, attempts from zero; one it never had inserted), ``crm``'s is left done, and
    the processing queue is not touched."""
    fill(store_url)
    conn = open_store(store_url, create=False).connect()
    try:
        for action_id in (A1, A5):
            conn.enqueue_forwards(action_id, "{}", ["dwh", "crm"], T0)
        conn.raw.execute("UPDATE webhook_forwards SET state = 'done', attempts = 1")
        pending_before = conn.queue_counts().pending
    finally:
        conn.close()
    result = replay(open_store(store_url, create=False), FindFilter(player_id="p-1"),
                    forward=["dwh"], show_progress=False)  # fmt: skip
    assert (result.actions, result.queued, result.forward, result.done) == (2, 2, ("dwh",), False)
    assert "queued for the receiver's forwarding to dwh" in str(result)
    conn = open_store(store_url, create=False).connect()
    try:
        rows = {(r.action_id, r.destination): (r.state, r.attempts) for r in conn.forwards()}
        assert conn.queue_counts().pending == pending_before
    finally:
        conn.close()
    assert rows == {
        (A1, "dwh"): ("pending", 0), (A2, "dwh"): ("pending", 0),
        (A1, "crm"): ("done", 1), (A5, "dwh"): ("done", 1), (A5, "crm"): ("done", 1),
    }  # fmt: skip
    with pytest.raises(ValueError, match="forwards again or runs a handler, not both"):
        replay(open_store(store_url, create=False), FindFilter(player_id="p-1"),
               forward=["dwh"], handler=lambda e: None, show_progress=False)  # fmt: skip


def test_a_forward_replay_is_not_the_handler_replay_of_the_same_filter(store_url: str) -> None:
    """Its id comes from its destinations: after the handler's replay of a filter, a
    forward replay of the same filter still queues its actions."""
    fill(store_url)
    assert sorted(_ran(store_url)) == [A1, A2]
    result = replay(open_store(store_url, create=False), FindFilter(player_id="p-1"),
                    forward=["dwh"], show_progress=False)  # fmt: skip
    assert (result.actions, result.queued) == (2, 2)


def test_replay_totals_add_up_the_stores_replays(store_url: str) -> None:
    """The receiver's replay metrics come from these totals: replays recorded and
    finished, and actions queued again by target (a replay to two destinations counts its
    actions for each; one run again queues nothing and is still one replay)."""
    fill(store_url)
    store = open_store(store_url, create=False)
    conn = store.connect()
    try:
        assert replay_totals(conn) == ReplayTotals(0, 0, 0, {})
    finally:
        conn.close()
    assert sorted(_ran(store_url)) == [A1, A2]  # ran here: finished
    for _ in range(2):
        replay(store, FindFilter(game_id="g-a"), forward=["dwh", "crm"], show_progress=False)
    replay(store, FindFilter(action_id=A5), target="the receiver's queue", show_progress=False)
    conn = store.connect()
    try:
        totals = replay_totals(conn)
    finally:
        conn.close()
    assert totals == ReplayTotals(started=3, finished=1, handler=3, forwarded={"dwh": 1, "crm": 1})


def _replay_gauges(metrics_url: str) -> dict[str, dict[tuple[str, str], float]]:
    samples = scrape(metrics_url)
    return {
        name: {(labels.get("target", ""), labels.get("destination", "")): value
               for labels, value in samples.get(name, [])}
        for name in ("gptools_webhook_replayed_actions", "gptools_webhook_replays_started",
                     "gptools_webhook_replays_finished")
    }  # fmt: skip


def _wait_for_replay_gauges(
    metrics_url: str, want: dict[str, dict[tuple[str, str], float]]
) -> None:
    # The store watch counts every 5 s; with two workers either one's latest count shows.
    deadline = time.monotonic() + 30.0
    while (got := _replay_gauges(metrics_url)) != want:
        assert time.monotonic() < deadline, f"{got} never became {want}"
        time.sleep(0.1)


def test_replays_run_from_the_cli_show_in_the_receivers_metrics(
    tmp_path: Path, receiver_process: Callable[..., ReceiverProcess]
) -> None:
    """Replays are commands of their own: a receiver (two workers) that serves the store
    shows them in its metrics, from the store's replay rows, never summed over workers."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    # Received just now: the receiver's purge keeps them (T0's are past the retention).
    now = datetime.now(UTC)
    ids = [str(uuid.UUID(int=n, version=4)) for n in range(1, 4)]
    accept(url, ids, now, state="done")
    with http_sink() as sink:
        rp = receiver_process(url, workers=2, args=("--forward", f"dwh={sink.url}"))
        metrics = f"{rp.base_url}/metrics"
        # Before any replay: the handler's and the receiver's destination's series at 0.
        _wait_for_replay_gauges(metrics, {
            "gptools_webhook_replayed_actions": {("handler", ""): 0.0, ("forward", "dwh"): 0.0},
            "gptools_webhook_replays_started": {("", ""): 0.0},
            "gptools_webhook_replays_finished": {("", ""): 0.0},
        })  # fmt: skip
        since = (now - timedelta(hours=1)).isoformat()
        replays = [
            ["--since", since],  # the three, for the receiver's queue
            ["--since", since],  # the same replay again: queues nothing
            ["--action-id", ids[1], "--forward", "dwh", "--forward", "crm"],  # one, to both
            ["--action-id", ids[2], "--url", sink.url],  # run here to the end: finished
        ]
        for args in replays:
            run = run_gptools("webhooks", "replay", "--store", url, *args, "--json")
            assert run.returncode == 0, run.stderr
        _wait_for_replay_gauges(metrics, {
            "gptools_webhook_replayed_actions": {
                ("handler", ""): 4.0, ("forward", "dwh"): 1.0, ("forward", "crm"): 1.0,
            },
            "gptools_webhook_replays_started": {("", ""): 3.0},
            "gptools_webhook_replays_finished": {("", ""): 1.0},
        })  # fmt: skip


def test_a_failed_count_of_the_replays_leaves_the_store_watch_healthy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The replays' totals are metrics: a store whose replays cannot be read (here the
    table is gone; in production, a role without SELECT on it) still has its queue
    counted and the worker's store health intact, and says so once per streak."""
    from gptools.webhooks._store_watch import StoreWatch

    url = f"sqlite:///{tmp_path / 's.db'}"
    fill(url)
    store = open_store(url, create=False)
    replay(store, FindFilter(player_id="p-1"), target="the receiver's queue", show_progress=False)
    watch = StoreWatch(store)
    handed: list[ReplayTotals] = []
    watch.on_replays = handed.append
    try:
        watch.refresh()
        assert handed == [ReplayTotals(started=1, finished=0, handler=2, forwarded={})]
        conn = store.connect()
        try:
            conn.raw.execute("ALTER TABLE replays RENAME TO replays_away")
            with caplog.at_level("WARNING", logger="gptools.webhooks"):
                for _ in range(2):
                    assert watch.refresh().pending == 2  # the queue is still counted
            failed = [r for r in caplog.records if getattr(r, "event", "") == "replay_count_failed"]
            assert len(failed) == 1 and "cannot count the replays" in failed[0].getMessage()
            assert watch.store_ok and len(handed) == 1 and watch.replays == handed[0]
            conn.raw.execute("ALTER TABLE replays_away RENAME TO replays")
        finally:
            conn.close()
        watch.refresh()
        assert len(handed) == 2 and handed[1] == handed[0]
        # A new streak of failures is said again.
        conn = store.connect()
        try:
            conn.raw.execute("ALTER TABLE replays RENAME TO replays_away")
            with caplog.at_level("WARNING", logger="gptools.webhooks"):
                watch.refresh()
            conn.raw.execute("ALTER TABLE replays_away RENAME TO replays")
        finally:
            conn.close()
        failed = [r for r in caplog.records if getattr(r, "event", "") == "replay_count_failed"]
        assert len(failed) == 2
    finally:
        watch.stop()
