"""The processing queue under crashing and slow handlers, dead letters, and the log's
retention (issue 17 items 4 and 5)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from gptools.models import GameEventNotification
from gptools.webhooks import ProcessingQueue, export_log, open_store
from gptools.webhooks._records import DeadLetter, LogEntry, WriteItem
from tests._support.cli import run_gptools
from tests.webhooks.conftest import T0, ManualClock, accept


def _states(url: str) -> dict[str, tuple[str, int]]:
    conn = open_store(url).connect()
    try:
        rows = conn.raw.execute("SELECT action_id, state, attempts FROM webhook_actions")
        return {r[0]: (r[1], r[2]) for r in rows}
    finally:
        conn.close()


_KILLER_WORKER = """
import os, signal, sys
from datetime import timedelta
from gptools.webhooks import ProcessingQueue, open_store

def handler(event):
    if str(event.action_id) == sys.argv[2]:
        os.kill(os.getpid(), signal.SIGKILL)  # the handler takes its process down

ProcessingQueue(open_store(sys.argv[1]), handler, max_attempts=3, lease=timedelta(seconds=1),
                handler_timeout=timedelta(milliseconds=500)).drain()
"""


def test_a_handler_that_kills_its_process_costs_only_its_own_action(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    killer = str(uuid.uuid4())
    others = [str(uuid.uuid4()) for _ in range(40)]
    accept(url, [killer], at=T0)  # first in line, so it is claimed before the others
    accept(url, others, at=T0 + timedelta(seconds=1))
    exits = []
    deadline = datetime.now(UTC) + timedelta(seconds=60)
    while _states(url)[killer][0] != "dead":
        assert datetime.now(UTC) < deadline, f"killer never dead-lettered: {_states(url)[killer]}"
        exits.append(
            subprocess.run(
                [sys.executable, "-c", _KILLER_WORKER, url, killer], check=False, timeout=60
            ).returncode
        )
    states = _states(url)
    assert states[killer] == ("dead", 3)  # three runs started, none returned
    assert exits.count(-9) == 3
    # Its batch-mates ran once each and were never charged for the killer's runs.
    assert {states[a] for a in others} == {("done", 1)}
    conn = open_store(url).connect()
    [letter] = conn.dead_letters()
    conn.close()
    assert letter.action_id == killer and "3 runs started and the last one never finished" in (
        letter.last_error or ""
    )


def test_finish_only_updates_a_lease_it_still_holds(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    action = str(uuid.uuid4())
    accept(url, [action])
    conn = open_store(url).connect()
    lease = timedelta(minutes=1)
    first = conn.claim_next(T0, lease=lease, max_attempts=5)
    assert first is not None and first.attempts == 1
    assert conn.claim_next(T0 + timedelta(seconds=59), lease=lease, max_attempts=5) is None
    # The first run outlives its lease; another run takes the action over.
    second = conn.claim_next(T0 + timedelta(seconds=61), lease=lease, max_attempts=5)
    assert second is not None and second.attempts == 2 and second.owner != first.owner
    assert not conn.finish(action, "dead", owner=first.owner, error="late")
    assert _states(url)[action] == ("pending", 2)
    assert conn.finish(action, "done", owner=second.owner)
    assert _states(url)[action] == ("done", 2)
    conn.close()


def test_a_handler_that_hangs_times_out_and_is_retried(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    action = str(uuid.uuid4())
    accept(url, [action])
    release = threading.Event()
    calls: list[int] = []

    def handler(ev: GameEventNotification) -> None:
        calls.append(1)
        if len(calls) == 1:
            release.wait(30)  # hangs (until the test lets it go)

    q = ProcessingQueue(
        open_store(url),
        handler,
        handler_timeout=timedelta(milliseconds=200),
        first_delay=timedelta(0),
        clock=ManualClock(),
    )
    try:
        q.drain()
        assert len(calls) == 2  # the hung run failed by time-out; the retry ran
        assert _states(url)[action] == ("done", 2)
        assert len(q.abandoned) == 1 and q.abandoned[0].is_alive()
    finally:
        release.set()
    q.abandoned[0].join(5)
    with pytest.raises(ValueError, match="shorter than the lease"):
        ProcessingQueue(open_store(url), handler, handler_timeout=timedelta(minutes=5))


def test_dead_letters_are_kept_listed_and_retried(
    store_url: str,
) -> None:
    url = store_url
    good, bad = str(uuid.uuid4()), str(uuid.uuid4())
    accept(url, [good, bad])

    def failing(ev: GameEventNotification) -> None:
        if str(ev.action_id) == bad:
            raise RuntimeError("wallet said no")

    ProcessingQueue(open_store(url), failing, max_attempts=1, clock=ManualClock()).drain()
    conn = open_store(url).connect()
    # Long after the retention, only the processed action's key goes.
    assert conn.purge(T0 + timedelta(days=30)) == 1
    assert conn.action_ids() == {bad}
    conn.close()
    listed = run_gptools("webhooks", "dead-letters", "--store", url, "--json")
    assert listed.returncode == 0, listed.stderr
    [letter] = json.loads(listed.stdout)["dead_letters"]
    assert letter["action_id"] == bad and letter["attempts"] == 1
    assert letter["last_error"] == "RuntimeError: wallet said no"
    retried = run_gptools("webhooks", "dead-letters", "--store", url, "--retry")
    assert retried.returncode == 0 and "1 queued again" in retried.stdout
    seen: list[str] = []
    ProcessingQueue(
        open_store(url),
        lambda ev: seen.append(str(ev.action_id)),
        clock=ManualClock(datetime.now(UTC) + timedelta(seconds=1)),
    ).drain()
    assert seen == [bad]
    assert json.loads(run_gptools("webhooks", "dead-letters", "--store", url, "--json").stdout) == {
        "dead_letters": [],
        "retried": 0,
    }


def _log(url: str, at: datetime, n: int) -> None:
    conn = open_store(url).connect()
    conn.write_batch([WriteItem(LogEntry(at, 200, "{}", latency_ms=1.0)) for _ in range(n)])
    conn.close()


def test_the_log_is_purged_after_its_retention_in_small_steps(
    store_url: str,
) -> None:
    base = store_url
    url = base + ("&" if "?" in base else "?") + "log_retention_days=10"
    _log(url, T0, 25)
    _log(url, T0 + timedelta(days=9), 5)
    conn = open_store(url).connect()
    conn.purge_step = 10
    assert conn.purge_log(T0 + timedelta(days=10)).rows == 0
    result = conn.purge_log(T0 + timedelta(days=10, seconds=1))
    assert (result.rows, result.steps) == (25, 3)
    assert 0 < result.longest_hold < 1
    assert conn.log_count() == 5
    conn.close()
    with pytest.raises(ValueError, match="retry window"):
        open_store(base + ("&" if "?" in base else "?") + "log_retention_days=6")
    assert open_store(base).log_retention == timedelta(days=90)


def test_log_rows_not_yet_exported_are_never_purged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}?export_target=archive"
    _log(url, T0, 10)
    _log(url, T0 + timedelta(days=2), 10)
    store = open_store(url)
    conn = store.connect()
    far = T0 + timedelta(days=400)
    assert conn.purge_log(far).rows == 0  # nothing exported yet: everything stays
    first = export_log(
        store, tmp_path / "1.jsonl", format="jsonl", target="archive", now=T0 + timedelta(days=1)
    )
    assert first.records == 10
    assert conn.purge_log(far).rows == 10  # only what the export wrote
    assert conn.log_count() == 10
    second = export_log(store, tmp_path / "2.jsonl", format="jsonl", target="archive", now=far)
    assert second.records == 10 and second.after == first.through
    assert conn.purge_log(far).rows == 10
    conn.close()
    r = run_gptools(
        "webhooks",
        "export",
        "--store",
        url,
        "--format",
        "jsonl",
        "--target",
        "archive",
        str(tmp_path / "3.jsonl"),
        "--json",
    )
    assert r.returncode == 0 and json.loads(r.stdout)["records"] == 0


def test_hung_handler_threads_do_not_pile_up(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    accept(url, [str(uuid.uuid4()) for _ in range(4)])
    release = threading.Event()
    q = ProcessingQueue(
        open_store(url),
        lambda ev: release.wait(30),
        max_hung=2,
        handler_timeout=timedelta(milliseconds=50),
        lease=timedelta(seconds=1),
        idle_wait=timedelta(milliseconds=10),
    )
    q.start()
    try:
        deadline = datetime.now(UTC) + timedelta(seconds=30)
        while q.health.ok:
            assert datetime.now(UTC) < deadline, "the queue never reported the hung runs"
            time.sleep(0.02)
        assert len(q.abandoned) == 2  # it stopped starting runs at the limit
        assert "have not returned" in q.health.describe()
        release.set()
        while not q.health.ok:
            assert datetime.now(UTC) < deadline, "the queue did not go on"
            time.sleep(0.02)
    finally:
        release.set()
        q.stop()


def test_a_dead_letter_as_listed() -> None:
    """``webhooks dead-letters --json`` lists each one so: the log's time form, in UTC."""
    letter = DeadLetter(
        action_id="a-1",
        first_received_at=datetime(2030, 1, 2, 5, 4, 5, 60, tzinfo=timezone(timedelta(hours=2))),
        attempts=3,
        last_error=None,
    )
    assert letter.to_dict() == {
        "action_id": "a-1",
        "first_received_at": "2030-01-02T03:04:05.000060Z",
        "attempts": 3,
        "last_error": None,
    }
