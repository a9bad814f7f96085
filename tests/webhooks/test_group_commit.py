"""The group-commit writer and the SQLite write lock: batching, acknowledgement only after
the sync, one failure failing its whole batch, and writers queueing on the lock instead of
failing on SQLite's busy timeout."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from gptools.webhooks import SQLiteStore, StoreError, migrate
from gptools.webhooks._connection import WriteLock
from gptools.webhooks._records import LogEntry, WriteItem
from gptools.webhooks._writer import GroupCommitWriter
from tests.webhooks.conftest import event, wire

AT = datetime(2026, 3, 2, 10, 15, tzinfo=UTC)


def _item(action_id: str) -> WriteItem:
    return WriteItem(
        LogEntry(AT, 200, wire(event(action_id)).decode(), action_id, latency_ms=1.0), accept=True
    )


class GatedStore(SQLiteStore):
    """A real SQLite store (tables created) whose sync then waits for ``gate`` (to observe
    what happens before it) and fails while ``fail_sync`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.connect().close()
        self.gate = threading.Event()
        self.syncing = threading.Event()
        self.fail_sync = False

    def make_durable(self) -> None:
        if not hasattr(self, "gate"):  # creating the tables
            super().make_durable()
            return
        self.syncing.set()
        if not self.gate.wait(30):
            raise AssertionError("gate never opened")
        if self.fail_sync:
            raise StoreError("disk sync failed")
        super().make_durable()


def test_batches_are_acknowledged_only_after_the_sync(tmp_path: Path) -> None:
    store = GatedStore(tmp_path / "s.db")
    writer = GroupCommitWriter(store, state="done", wait_limit=timedelta(seconds=30))
    writer.start()
    ids = [str(uuid.uuid4()) for _ in range(200)]

    async def run() -> list[bool]:
        tasks = [asyncio.ensure_future(writer.write(_item(i))) for i in ids + ids[:1]]
        await asyncio.to_thread(store.syncing.wait, 30)
        # Committed (another connection reads it) but not yet synced: no answer yet.
        reader = store.connect()
        assert reader.log_count() > 0
        reader.close()
        assert not any(t.done() for t in tasks)
        store.gate.set()
        return list(await asyncio.gather(*tasks))

    try:
        results = asyncio.run(run())
    finally:
        writer.stop()
    assert results == [True] * len(ids) + [False]  # the repeated id is a duplicate
    assert writer.batches < len(ids)  # grouped, not one transaction per item
    conn = store.connect()
    assert conn.action_ids() == set(ids)
    assert conn.log_count() == len(ids) + 1
    conn.close()


def test_a_failed_sync_fails_every_waiting_write(tmp_path: Path) -> None:
    store = GatedStore(tmp_path / "s.db")
    store.fail_sync = True
    store.gate.set()
    writer = GroupCommitWriter(store, state="done", wait_limit=timedelta(seconds=30))
    writer.start()

    async def run() -> list[BaseException | bool]:
        tasks = [writer.write(_item(str(uuid.uuid4()))) for _ in range(20)]
        return list(await asyncio.gather(*tasks, return_exceptions=True))

    try:
        results = asyncio.run(run())
    finally:
        writer.stop()
    assert len(results) == 20
    assert all(isinstance(r, StoreError) and "disk sync failed" in str(r) for r in results)


def test_writers_queue_on_the_lock_instead_of_timing_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # busy_timeout is short, the other writer's transaction is long: without the flock
    # the second write would fail with "database is locked".
    busy = timedelta(milliseconds=50)
    store = SQLiteStore(tmp_path / "s.db", busy_timeout=busy)
    store.connect().close()
    lock_path = store.path.with_name(store.path.name + SQLiteStore.LOCK_SUFFIX)
    holder = WriteLock(lock_path)
    other = sqlite3.connect(store.path, isolation_level=None)
    outcome: list[object] = []
    taking_the_lock = threading.Event()  # set by the writer just before it waits on it
    finished = threading.Event()  # set by the writer when its write returned or failed

    class SignallingLock(WriteLock):
        def __enter__(self) -> None:
            taking_the_lock.set()
            super().__enter__()

    monkeypatch.setattr(store, "_write_lock", lambda: SignallingLock(lock_path))

    def second_writer() -> None:
        conn = store.connect()
        try:
            outcome.append(conn.write_batch([_item(str(uuid.uuid4()))], state="done"))
        except StoreError as exc:
            outcome.append(exc)
        finally:
            conn.close()
            finished.set()

    with holder:
        other.execute("BEGIN IMMEDIATE")
        thread = threading.Thread(target=second_writer)
        thread.start()
        assert taking_the_lock.wait(30), "the second writer never tried to write"
        # Ten busy timeouts after it began to wait, it waits still: queued, not failed.
        assert not finished.wait(10 * busy.total_seconds()), outcome
        other.execute("COMMIT")
    assert finished.wait(30)
    thread.join()
    other.close()
    holder.close()
    assert outcome == [[True]]


def test_max_batch_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_batch"):
        GroupCommitWriter(SQLiteStore(tmp_path / "s.db"), max_batch=0)


def test_one_batch_dedupes_against_the_store_and_within_itself(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    conn = store.connect()
    try:
        old, new = str(uuid.uuid4()), str(uuid.uuid4())
        assert conn.write_batch([_item(old)], state="done") == [True]
        refused = WriteItem(LogEntry(AT, 401, "{}", auth_ok=False, error="unauthorized"))
        items = [_item(new), _item(old), refused, _item(new)]
        assert conn.write_batch(items, state="done") == [True, False, False, False]
        rows = conn.raw.execute(
            "SELECT action_id, status, duplicate FROM delivery_log ORDER BY rowid"
        ).fetchall()
    finally:
        conn.close()
    assert rows == [(old, 200, 0), (new, 200, 0), (old, 200, 1), (None, 401, 0), (new, 200, 1)]


def test_only_actions_left_to_process_keep_a_copy_of_the_body(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    conn = store.connect()
    try:
        done, pending = str(uuid.uuid4()), str(uuid.uuid4())
        conn.write_batch([_item(done)], state="done")
        conn.write_batch([_item(pending)], state="pending")
        bodies = dict(conn.raw.execute("SELECT action_id, body FROM webhook_actions"))
        logged = dict(conn.raw.execute("SELECT action_id, body FROM delivery_log"))
    finally:
        conn.close()
    assert bodies == {done: "", pending: logged[pending]}
    assert logged[done] == wire(event(done)).decode()


def test_an_old_store_gets_the_pending_only_queue_index(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    raw = sqlite3.connect(path)
    raw.execute(
        "CREATE TABLE webhook_actions (action_id TEXT PRIMARY KEY,"
        " first_received_at TEXT NOT NULL, body TEXT NOT NULL,"
        " state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,"
        " next_attempt_at TEXT NOT NULL, lease_until TEXT, last_error TEXT)"
    )
    raw.execute("CREATE INDEX webhook_actions_due ON webhook_actions (state, next_attempt_at)")
    raw.close()
    migrate(SQLiteStore(path))  # issue 34: an earlier layout is migrated, never at start
    SQLiteStore(path).connect().close()
    raw = sqlite3.connect(path)
    names = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    plan = " ".join(
        str(r)
        for r in raw.execute(
            "EXPLAIN QUERY PLAN SELECT action_id FROM webhook_actions"
            " WHERE state = 'pending' AND next_attempt_at <= '2026' ORDER BY next_attempt_at"
        )
    )
    raw.close()
    assert "webhook_actions_due" not in names and "webhook_actions_pending" in names
    assert "webhook_actions_pending" in plan


def test_write_path_timestamps_match_the_log_format() -> None:
    from gptools.webhooks._dialects import _sqlite_ts
    from gptools.webhooks._records import format_utc

    paris = timezone(timedelta(hours=1))
    for moment in (
        AT,
        AT.replace(microsecond=7),
        datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=paris),
    ):
        assert _sqlite_ts(moment) == format_utc(moment)
    with pytest.raises(ValueError, match="naive"):
        _sqlite_ts(datetime(2026, 1, 1))


def test_a_stopped_writer_refuses_new_writes(tmp_path: Path) -> None:
    writer = GroupCommitWriter(SQLiteStore(tmp_path / "s.db"), state="done")
    writer.start()
    assert writer.alive
    assert asyncio.run(writer.write(_item(str(uuid.uuid4())))) is True
    writer.stop()
    assert not writer.alive
    with pytest.raises(StoreError, match="not running"):
        asyncio.run(writer.write(_item(str(uuid.uuid4()))))
