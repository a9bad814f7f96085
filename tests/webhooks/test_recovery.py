"""The receiver heals itself (issue 17): PostgreSQL restarts, store errors in every
background loop, a full disk, time-outs logged as what was sent, failed COMMITs."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools.models import GameEventNotification
from gptools.webhooks import (
    PostgresStore,
    ReceiverAuth,
    SQLiteStore,
    StoreError,
    WebhookReceiver,
)
from gptools.webhooks._connection import WriteLock
from gptools.webhooks._records import LogEntry, WriteItem
from tests._support.stores import CappedSQLiteStore
from tests.webhooks.conftest import (
    JSON,
    PG_DSN,
    LoadGenerator,
    assert_log_tells_the_truth,
    event,
    serve_in_thread,
    wire,
)

T0 = datetime(2026, 3, 2, tzinfo=UTC)


def _stored(receiver: WebhookReceiver) -> tuple[list[dict[str, Any]], set[str]]:
    conn = receiver.store.connect()
    try:
        return list(conn.iter_log()), conn.action_ids()
    finally:
        conn.close()


def _get(srv_base: str, path: str) -> httpx.Response:
    return httpx.get(srv_base + path, timeout=5)


def test_postgres_restart_under_load_heals_within_10_s(
    pg_url: str,
    postgres_restarts: Any,
) -> None:
    receiver = WebhookReceiver(pg_url, auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv, LoadGenerator(srv.url, threads=4) as load:
        assert load.wait_for(lambda s: s.count(200) >= 100, 30)
        postgres_restarts()
        back = time.monotonic()
        # Keep the load on for 12 s after the server is back.
        assert not load.wait_for(lambda s: False, 12)
        load.stop()
        health = _get(srv.base_url, "/healthz")
        ready = _get(srv.base_url, "/readyz")
    late = [(s, t - back) for _, s, t in load.seen if t > back + 10]
    assert late and all(s == 200 for s, _ in late), (
        f"not all 200 from 10 s after the server was back: {[x for x in late if x[0] != 200][:5]}"
    )
    assert health.status_code == 200 and health.json()["store"] == "ok"
    assert ready.status_code == 200
    rows, stored = _stored(receiver)
    assert_log_tells_the_truth(load.answers(), rows, load.acknowledged(), stored)


def test_store_errors_never_end_a_background_loop(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    processed: list[str] = []
    receiver = WebhookReceiver(
        f"sqlite:///{db}",
        auth=ReceiverAuth.none(),
        handler=lambda ev: processed.append(str(ev.action_id)),
        queue_options={"idle_wait": timedelta(milliseconds=20)},
        purge_every=timedelta(milliseconds=50),
    )
    with serve_in_thread(receiver) as srv:
        first = str(uuid.uuid4())
        assert httpx.post(srv.url, content=wire(event(first)), headers=JSON).status_code == 200
        raw = sqlite3.connect(db, isolation_level=None)
        raw.execute("ALTER TABLE webhook_actions RENAME TO hidden")  # the store breaks
        during = [
            httpx.post(srv.url, content=wire(event()), headers=JSON).status_code for _ in range(5)
        ]
        # The queue and the purge hit the broken store too, several times.
        deadline = time.monotonic() + 10
        while receiver.writer.store_ok or time.monotonic() < deadline - 9:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        health, ready = _get(srv.base_url, "/healthz"), _get(srv.base_url, "/readyz")
        raw.execute("ALTER TABLE hidden RENAME TO webhook_actions")  # the store is back
        after = str(uuid.uuid4())
        deadline = time.monotonic() + 10
        while httpx.post(srv.url, content=wire(event(after)), headers=JSON).status_code != 200:
            assert time.monotonic() < deadline, "no 200 after the store came back"
        while after not in processed:
            assert time.monotonic() < deadline, "the processing queue did not go on"
            time.sleep(0.02)
        final = _get(srv.base_url, "/healthz").json()
        raw.close()
    assert during == [503] * 5
    assert health.status_code == 200 and "unreachable" in health.json()["store"]
    assert ready.status_code == 503  # unready while the store is down, but not dead
    assert first in processed
    assert final["status"] == "ok" and set(final["loops"].values()) == {"ok"}


@pytest.mark.parametrize(
    "operation",
    ["claim_next", "finish", "purge", "purge_log", "queue_counts", "dead_letters", "retry_dead"],
)
def test_every_store_operation_fails_as_store_error(tmp_path: Path, operation: str) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    conn = store.connect()
    conn.raw.execute("DROP TABLE webhook_actions")
    conn.raw.execute("DROP TABLE delivery_log")
    calls = {
        "claim_next": lambda: conn.claim_next(T0, lease=timedelta(minutes=1), max_attempts=3),
        "finish": lambda: conn.finish("x", "done", owner="o"),
        "purge": lambda: conn.purge(T0),
        "purge_log": lambda: conn.purge_log(T0),
        "queue_counts": conn.queue_counts,
        "dead_letters": conn.dead_letters,
        "retry_dead": lambda: conn.retry_dead(T0),
    }
    with pytest.raises(StoreError, match="no such table"):
        calls[operation]()
    conn.close()


class _FailingClock:
    """A clock that raises while ``broken`` is set (a bug in a loop, not in the store)."""

    def __init__(self) -> None:
        self.broken = threading.Event()

    def __call__(self) -> datetime:
        if self.broken.is_set():
            raise RuntimeError("clock is broken")
        return datetime.now(UTC)


def test_a_loop_that_cannot_go_on_fails_the_health_check(tmp_path: Path) -> None:
    clock = _FailingClock()
    receiver = WebhookReceiver(
        f"sqlite:///{tmp_path / 's.db'}",
        auth=ReceiverAuth.none(),
        purge_every=timedelta(milliseconds=10),
        clock=clock,
    )
    receiver.maintenance.health.max_backoff = 0.05
    with serve_in_thread(receiver) as srv:
        assert _get(srv.base_url, "/healthz").status_code == 200
        clock.broken.set()
        deadline = time.monotonic() + 10
        while (r := _get(srv.base_url, "/healthz")).status_code == 200:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert r.status_code == 503
        assert r.json()["loops"]["maintenance"].startswith("failing")
        assert "clock is broken" in r.json()["loops"]["maintenance"]
        clock.broken.clear()  # the loop kept trying, and runs cleanly again
        while _get(srv.base_url, "/healthz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.02)


def test_a_full_disk_gives_503s_and_heals_when_space_is_back(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    filler = sqlite3.connect(db, isolation_level=None)
    filler.execute("CREATE TABLE filler (blob BLOB)")
    filler.executemany("INSERT INTO filler VALUES (zeroblob(3000))", [()] * 250)
    store = CappedSQLiteStore(
        db, max_pages=int(filler.execute("PRAGMA page_count").fetchone()[0]) + 60
    )
    processed: set[str] = set()

    def handler(ev: GameEventNotification) -> None:
        processed.add(str(ev.action_id))

    receiver = WebhookReceiver(
        store,
        auth=ReceiverAuth.none(),
        handler=handler,
        queue_options={"idle_wait": timedelta(milliseconds=20)},
        purge_every=timedelta(milliseconds=100),
    )
    with serve_in_thread(receiver) as srv, LoadGenerator(srv.url, threads=4) as load:
        # The file fills up: 503s, and nothing but 503s for a while.
        assert load.wait_for(lambda s: s[-40:].count(503) == 40 and 200 in s, 60)
        full_ready = _get(srv.base_url, "/readyz").status_code
        filler.execute("DELETE FROM filler")  # space is back
        mark = len(load.statuses())
        assert load.wait_for(lambda s: s[mark:].count(200) >= 100, 30), "no recovery"
        load.stop()
        acknowledged = load.acknowledged()
        deadline = time.monotonic() + 30
        while not acknowledged <= processed:
            assert time.monotonic() < deadline, "the queue did not process every action"
            time.sleep(0.05)
        health = _get(srv.base_url, "/healthz").json()
        ready = _get(srv.base_url, "/readyz").status_code
    filler.close()
    assert full_ready == 503
    assert health["status"] == "ok" and health["store"] == "ok" and ready == 200
    rows, stored = _stored(receiver)
    assert_log_tells_the_truth(load.answers(), rows, acknowledged, stored)


def test_every_log_row_holds_the_status_the_client_saw(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = SQLiteStore(db)
    store.connect().close()
    receiver = WebhookReceiver(
        store, auth=ReceiverAuth.none(), ack_timeout=timedelta(milliseconds=300)
    )
    # Another receiver process holding the write lock longer than the time-out: the
    # store is slower than the time-out.
    other = WriteLock(db.with_name(db.name + SQLiteStore.LOCK_SUFFIX))
    with serve_in_thread(receiver) as srv, LoadGenerator(srv.url, threads=6) as load:
        for _ in range(3):
            ok = load.statuses().count(200)
            assert load.wait_for(lambda s, ok=ok: s.count(200) >= ok + 50, 30)
            timed_out = load.statuses().count(503)
            with other:
                assert load.wait_for(lambda s, n=timed_out: s.count(503) >= n + 12, 30)
        load.stop()
    other.close()
    rows, stored = _stored(receiver)
    assert load.statuses().count(503) >= 36
    assert sum(r["status"] == 503 for r in rows) >= 30  # timed-out requests are logged 503
    assert_log_tells_the_truth(load.answers(), rows, load.acknowledged(), stored)


def test_a_failed_commit_is_rolled_back_before_the_lock_is_released(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = SQLiteStore(db, busy_timeout=timedelta(milliseconds=200))
    conn = store.connect()
    # A deferred foreign key: only COMMIT checks it, and SQLite then leaves the
    # transaction open.
    setup = sqlite3.connect(db, isolation_level=None)
    setup.executescript("""
        CREATE TABLE parent (id TEXT PRIMARY KEY);
        CREATE TABLE child (id TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
        CREATE TRIGGER poison AFTER INSERT ON delivery_log WHEN NEW.body = 'poison'
        BEGIN INSERT INTO child VALUES ('missing'); END;
    """)
    setup.close()
    conn.raw.execute("PRAGMA foreign_keys = ON")

    def item(body: str) -> WriteItem:
        return WriteItem(LogEntry(T0, 400, body, latency_ms=1.0))

    with pytest.raises(StoreError, match="FOREIGN KEY"):
        conn.write_batch([item("poison")])
    assert not conn.raw.in_transaction
    other = store.connect()
    other.write_batch([item("from another connection")])  # not locked out
    conn.write_batch([item("the same connection goes on")])
    assert [r["body"] for r in other.iter_log()] == [
        "from another connection",
        "the same connection goes on",
    ]
    other.close()
    conn.close()


def test_postgres_sessions_set_synchronous_commit_on(pg_url: str) -> None:
    schema = pg_url.split("schema=")[1]
    # A role or server default of off must not reach the receiver's sessions.
    store = PostgresStore(f"{PG_DSN}?options=-csynchronous_commit%3Doff", schema=schema)
    conn = store.connect()
    try:
        assert conn.raw.execute("SHOW synchronous_commit").fetchone()[0] == "on"
    finally:
        conn.close()


def test_a_commit_that_loses_its_connection_is_answered_as_it_ended(pg_url: str) -> None:
    from gptools.webhooks import open_store
    from gptools.webhooks._records import CommitUncertain
    from gptools.webhooks._writer import GroupCommitWriter

    store = open_store(pg_url)
    conn, other = store.connect(), store.connect()
    # A COMMIT that takes its time: a deferred constraint trigger sleeps in it.
    other.raw.execute("""CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.body = 'slow' THEN PERFORM pg_sleep(30); END IF; RETURN NULL; END $$""")
    other.raw.execute(
        "CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON delivery_log DEFERRABLE"
        " INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()"
    )
    pid = conn.raw.info.backend_pid
    raised: list[BaseException] = []

    def write() -> None:
        try:
            conn.write_batch([WriteItem(LogEntry(T0, 200, "slow", latency_ms=1.0))])
        except BaseException as exc:
            raised.append(exc)

    writing = threading.Thread(target=write)
    writing.start()
    deadline = time.monotonic() + 20
    # Active: an idle session still shows its last statement, the schema's own COMMIT.
    while other.raw.execute(
        "SELECT query FROM pg_stat_activity WHERE pid = %s AND state = 'active'", (pid,)
    ).fetchone() != ("COMMIT",):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    other.raw.execute("SELECT pg_terminate_backend(%s)", (pid,))  # the server side goes away
    writing.join(20)
    [uncertain] = raised
    assert isinstance(uncertain, CommitUncertain) and uncertain.result == [False]
    assert other.commit_status(uncertain.xid) == "aborted" and other.log_count() == 0
    writer = GroupCommitWriter(store, state="done")
    writer.start()
    try:
        # Not committed: 503, and known not written (its rows go to the outage spool).
        aborted = writer._resolve(uncertain)
        assert type(aborted) is StoreError and str(aborted) == str(uncertain)
        # One that did commit is answered as committed.
        other.raw.execute("BEGIN")
        xid = int(other.raw.execute("SELECT txid_current()").fetchone()[0])
        other.raw.execute("COMMIT")
        committed = CommitUncertain("lost during COMMIT", xid)
        committed.result = [True]
        assert writer._resolve(committed) == [True]
    finally:
        writer.stop()
        conn.close()
        other.close()


def test_a_connection_killed_while_idle_costs_no_delivery(pg_url: str) -> None:
    receiver = WebhookReceiver(pg_url, auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv:
        assert httpx.post(srv.url, content=wire(event()), headers=JSON).status_code == 200
        conn = receiver.writer.link.conn
        assert conn is not None
        admin = receiver.store.connect()
        # An idle-session timeout or a proxy ends the writer's connection while it waits.
        admin.raw.execute("SELECT pg_terminate_backend(%s)", (conn.raw.info.backend_pid,))
        admin.close()
        action = str(uuid.uuid4())
        r = httpx.post(srv.url, content=wire(event(action)), headers=JSON)
        assert r.status_code == 200 and r.json()["status"] == "accepted"
        assert _get(srv.base_url, "/readyz").status_code == 200
    assert action in _stored(receiver)[1]


def test_a_connection_that_fails_to_start_is_closed(pg_url: str) -> None:
    """A store that cannot be opened (a lock held too long, as while another store is
    created or migrated) leaves no server connection behind: its loops retry every
    second."""
    import psycopg

    from gptools.webhooks import open_store
    from gptools.webhooks._dialects import _PG_MIGRATION_LOCK as lock

    name = f"leak-test-{uuid.uuid4().hex[:8]}"
    url = pg_url.replace("?", f"?application_name={name}&", 1)
    with psycopg.connect(PG_DSN, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (lock,))
        try:
            with pytest.raises(StoreError, match="lock timeout") as failed:
                open_store(url, lock_timeout=timedelta(milliseconds=200)).connect()
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (lock,))
        # A closed connection's server process takes a moment to go.
        deadline = time.monotonic() + 5
        while (
            left := holder.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchone()
        ) != (0,) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert failed.value is not None  # (the failure, and all it refers to, still alive)
    assert left == (0,)
