"""Schema versions and migrations (issue 34, item 7): a new store is created at the current
version; a store laid out by the previous gptools (version 0) is refused by every command
until ``gptools webhooks migrate`` brings it to version 1, keeping its rows; migrate says
from which version to which, is idempotent, and ``--dry-run`` changes nothing; a store at
a newer version is run on only when it says this version still can; and the previous
gptools keeps working on a migrated store while a new receiver shares it (the rolling
upgrade the operations guide describes)."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.webhooks import (
    ReceiverAuth,
    SchemaVersionError,
    SQLiteStore,
    WebhookReceiver,
    export_log,
    migrate,
    open_store,
)
from gptools.webhooks._migrations import MIGRATIONS, SCHEMA_VERSION
from tests.webhooks.conftest import JSON, PG_DSN, event, serve_in_thread, wire
from tests.webhooks.legacy_store import OldProcess, legacy_store

#: Every migration's (version, compatible_from), as a store made now records them.
VERSIONS = [(m.version, m.compatible_from) for m in MIGRATIONS]
#: Versions of a gptools newer than this one.
NEXT, AFTER_NEXT = SCHEMA_VERSION + 1, SCHEMA_VERSION + 2

DDL = re.compile(r"^\s*(CREATE|ALTER|DROP)\b", re.IGNORECASE)


def _ids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


def _schema_of(url: str) -> str:
    return url.partition("?schema=")[2]


def _raw(url: str) -> Any:
    """A plain driver connection to the store (to look at it as it is)."""
    if url.startswith("sqlite:///"):
        return sqlite3.connect(url[len("sqlite:///") :])
    conn = psycopg.connect(PG_DSN, autocommit=True)
    conn.execute(f'SET search_path TO "{_schema_of(url)}"')
    return conn


def _versions(url: str) -> list[tuple[int, int]]:
    raw = _raw(url)
    try:
        rows = raw.execute(
            "SELECT version, compatible_from FROM webhook_schema_version ORDER BY version"
        ).fetchall()
    finally:
        raw.close()
    return [(int(v), int(c)) for v, c in rows]


def _indexes(url: str) -> set[str]:
    raw = _raw(url)
    try:
        if url.startswith("sqlite:///"):
            rows = raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'").fetchall()
        else:
            rows = raw.execute(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                " WHERE c.relnamespace = to_regnamespace(current_schema()) AND i.indisvalid"
            ).fetchall()
    finally:
        raw.close()
    return {str(r[0]) for r in rows}


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.fixture
def no_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    """``webhooks serve`` returns where it would start serving."""
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    monkeypatch.setenv("GP_WEBHOOK_API_KEY", "k" * 32)


def test_a_new_store_is_created_at_the_current_version(store_url: str) -> None:
    store = open_store(store_url)
    store.connect().close()
    assert store.schema_version == SCHEMA_VERSION
    assert _versions(store_url) == VERSIONS
    assert {
        "delivery_log_received_at",
        "webhook_actions_done",
        "webhook_actions_pending",
    } <= _indexes(store_url)


def test_every_command_refuses_a_store_of_the_previous_gptools_until_it_is_migrated(
    store_url: str, tmp_path: Path, no_serving: None
) -> None:
    kept = _ids(2)
    legacy_store(store_url, kept)
    shown = open_store(store_url).url
    with pytest.raises(SchemaVersionError) as refused:
        open_store(store_url).connect()
    assert refused.value.found == 0 and refused.value.expected == SCHEMA_VERSION
    for args in (
        ["webhooks", "serve", "--auth", "bearer", "--store", store_url, "--port", "0"],
        ["webhooks", "dead-letters", "--store", store_url],
        [
            "webhooks",
            "export",
            "--store",
            store_url,
            "--format",
            "jsonl",
            str(tmp_path / "o.jsonl"),
        ],
    ):
        result = _invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert "schema version 0" in lines[0], lines[0]
        assert f"run `gptools webhooks migrate --store {shown}`" in lines[0], lines[0]
    assert not (tmp_path / "o.jsonl").exists()

    first = _invoke("webhooks", "migrate", "--store", store_url, "--json")
    assert first.exit_code == 0, first.output
    document = json.loads(first.stdout)
    assert (document["from_version"], document["to_version"]) == (0, SCHEMA_VERSION)
    assert [m["version"] for m in document["applied"]] == [m.version for m in MIGRATIONS]
    again = _invoke("webhooks", "migrate", "--store", store_url, "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout) == {
        "store": shown,
        "from_version": SCHEMA_VERSION,
        "to_version": SCHEMA_VERSION,
        "dry_run": False,
        "applied": [],
    }
    human = _invoke("webhooks", "migrate", "--store", store_url)
    assert human.stdout.strip() == f"{shown} is at schema version {SCHEMA_VERSION}: nothing to do"
    assert _versions(store_url) == VERSIONS
    assert {"delivery_log_received_at", "webhook_actions_done"} <= _indexes(store_url)
    conn = open_store(store_url).connect()
    try:
        assert conn.action_ids() == set(kept)  # the dedupe keys survived
        assert conn.log_count() == 2
    finally:
        conn.close()


def test_the_previous_gptools_and_this_one_share_a_migrated_store(store_url: str) -> None:
    """The rolling upgrade: migrate while the old processes serve, then a new receiver
    and an old process on the same store, each seeing what the other stored."""
    at = datetime.now(UTC)
    kept, old_new, new_new = _ids(2), _ids(1), _ids(1)
    legacy_store(store_url, kept, at)
    migrate(store_url)
    receiver = WebhookReceiver(store_url, auth=ReceiverAuth.none())
    old = OldProcess(store_url)  # connects as it did: its whole DDL, on the migrated store
    try:
        with serve_in_thread(receiver) as srv, httpx.Client(timeout=10) as client:

            def post(action_id: str) -> dict[str, Any]:
                answer = client.post(srv.url, content=wire(event(action_id)), headers=JSON)
                assert answer.status_code == 200, answer.text
                document: dict[str, Any] = answer.json()
                return document

            assert post(kept[0])["status"] == "duplicate"  # stored before the migration
            assert old.write(old_new, at) == [True]
            assert post(old_new[0])["status"] == "duplicate"
            assert post(new_new[0])["status"] == "accepted"
            assert old.write(new_new, at) == [False]
            assert old.claim_and_finish(at + timedelta(seconds=1)) in kept
            old.mark_export("nightly", at)
            assert old.purge_log(at - timedelta(days=1)) == 0
            assert post(str(uuid.uuid4()))["status"] == "accepted"  # still serving
        second = OldProcess(store_url)  # an old process (re)starting after the migration
        second.close()
    finally:
        old.close()
    assert _versions(store_url) == VERSIONS
    assert {"delivery_log_received_at", "webhook_actions_done"} <= _indexes(store_url)
    conn = open_store(store_url).connect()
    try:
        assert conn.action_ids() >= {*kept, *old_new, *new_new}
        assert conn.export_mark("nightly") is not None
    finally:
        conn.close()


def test_a_dry_run_changes_nothing(tmp_path: Path, pg_url: str) -> None:
    absent = f"sqlite:///{tmp_path / 'new.sqlite3'}"
    for url in (absent, pg_url):
        result = _invoke("webhooks", "migrate", "--store", url, "--dry-run", "--json")
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert document["dry_run"] is True
        assert (document["from_version"], document["to_version"]) == (None, SCHEMA_VERSION)
        statements = document["applied"][0]["statements"]
        assert any("CREATE INDEX IF NOT EXISTS delivery_log_received_at" in s for s in statements)
    assert list(tmp_path.iterdir()) == []
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        found = admin.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (_schema_of(pg_url),)
        ).fetchone()
    assert found is None
    old = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    legacy_store(old, _ids(1))
    planned = migrate(old, dry_run=True)
    assert (planned.from_version, planned.to_version, planned.dry_run) == (0, SCHEMA_VERSION, True)
    assert "would migrate" in str(planned)
    with pytest.raises(SchemaVersionError):
        open_store(old).connect()  # still version 0


def test_a_newer_store_is_run_on_only_while_it_says_this_version_can(
    store_url: str, tmp_path: Path
) -> None:
    migrate(store_url)
    raw = _raw(store_url)
    insert = (
        "INSERT INTO webhook_schema_version (version, compatible_from, description,"
        " applied_at, applied_by) VALUES ({}, {}, 'later', '2030-01-01T00:00:00Z', 'later')"
    )
    try:
        raw.execute(insert.format(NEXT, SCHEMA_VERSION))
        if isinstance(raw, sqlite3.Connection):
            raw.commit()
        store = open_store(store_url)
        store.connect().close()  # a rolling upgrade towards the next version: this one runs
        assert store.schema_version == NEXT
        raw.execute(insert.format(AFTER_NEXT, AFTER_NEXT))
        if isinstance(raw, sqlite3.Connection):
            raw.commit()
    finally:
        raw.close()
    with pytest.raises(SchemaVersionError, match="upgrade gptools on this host") as refused:
        open_store(store_url).connect()
    assert refused.value.found == AFTER_NEXT
    for args in (
        ["webhooks", "migrate", "--store", store_url],
        ["webhooks", "dead-letters", "--store", store_url],
    ):
        result = _invoke(*args)
        assert result.exit_code == 2, result.output
        assert f"schema version {AFTER_NEXT}" in result.stderr
        assert "upgrade gptools" in result.stderr


def test_receivers_starting_together_create_a_new_store_once(pg_url: str) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def first_connection() -> None:
        try:
            start.wait()
            open_store(pg_url).connect().close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_connection) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert _versions(pg_url) == VERSIONS


class _TracedStore(SQLiteStore):
    """A SQLite store that records every statement each of its connections runs."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.statements: list[str] = []

    def _raw_connect(self, *, create: bool) -> sqlite3.Connection:
        raw = super()._raw_connect(create=create)
        raw.set_trace_callback(self.statements.append)
        return raw


@pytest.fixture
def old_rows(tmp_path: Path) -> Iterator[Path]:
    """A migrated SQLite store holding actions and log rows past every retention."""
    path = tmp_path / "s.sqlite3"
    legacy_store(f"sqlite:///{path}", _ids(3), datetime(2020, 1, 1, tzinfo=UTC))
    migrate(f"sqlite:///{path}")
    yield path


def test_a_receiver_on_an_up_to_date_store_runs_no_ddl(old_rows: Path, tmp_path: Path) -> None:
    fresh = _TracedStore(tmp_path / "fresh.sqlite3")
    fresh.connect().close()
    assert any(DDL.match(s) for s in fresh.statements)  # the trace sees DDL where it runs

    store = _TracedStore(old_rows)
    handled: list[str] = []
    receiver = WebhookReceiver(
        store, auth=ReceiverAuth.none(), handler=lambda e: handled.append(str(e.action_id))
    )
    sent = _ids(3)
    with serve_in_thread(receiver) as srv, httpx.Client(timeout=10) as client:
        for action_id in sent:
            answer = client.post(srv.url, content=wire(event(action_id)), headers=JSON)
            assert answer.status_code == 200, answer.text
        deadline = datetime.now(UTC) + timedelta(seconds=20)
        while set(sent) - set(handled) and datetime.now(UTC) < deadline:
            threading.Event().wait(0.05)
    assert set(sent) <= set(handled)
    assert receiver.maintenance.rounds_skipped == 0
    export_log(store, tmp_path / "out.jsonl", format="jsonl", target="nightly")
    conn = store.connect()
    try:
        assert conn.dead_letters() == []
        conn.retry_dead(datetime.now(UTC))
        assert conn.log_count() == 3  # the three old rows purged, the three new kept
    finally:
        conn.close()
    ddl = [s for s in store.statements if DDL.match(s) or "PRAGMA table_info" in s]
    assert ddl == []
    assert any(s.startswith("DELETE FROM delivery_log") for s in store.statements)


def test_postgres_builds_the_indexes_of_a_large_table_without_blocking_writes(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past PG_ONLINE_INDEX_BYTES (every table here), migrate builds a new index
    CONCURRENTLY before its transaction, and rebuilds one an interrupted build left
    invalid (made so here by hand, as a crash mid-build leaves it)."""
    from gptools.webhooks._dialects import POSTGRES

    legacy_store(pg_url, _ids(5))
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'SET search_path TO "{_schema_of(pg_url)}"')
        admin.execute("CREATE INDEX delivery_log_received_at ON delivery_log (received_at)")
        admin.execute(
            "UPDATE pg_index SET indisvalid = false"
            " WHERE indexrelid = 'delivery_log_received_at'::regclass"
        )
    assert "delivery_log_received_at" not in _indexes(pg_url)
    monkeypatch.setattr(POSTGRES, "online_index_bytes", -1)
    statements: list[str] = []
    store = open_store(pg_url)
    real = store._raw_connect

    def traced(*, create: bool) -> Any:
        raw = real(create=create)
        execute = raw.execute

        def recording(sql: Any, params: Any = None) -> Any:
            statements.append(str(sql))
            return execute(sql, params)

        raw.execute = recording
        return raw

    monkeypatch.setattr(store, "_raw_connect", traced)
    assert migrate(store).to_version == SCHEMA_VERSION
    online = [s for s in statements if "CONCURRENTLY" in s]
    assert (
        online
        == [
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_actions_dead ON webhook_actions"
            " (first_received_at) WHERE state = 'dead'",
            "DROP INDEX CONCURRENTLY IF EXISTS delivery_log_received_at",
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS delivery_log_received_at ON delivery_log"
            " (received_at)",
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS webhook_actions_done ON webhook_actions"
            " (first_received_at) WHERE state = 'done'",
            *(  # the later migrations' indexes of the (large) tables already there, in order;
                # a table a migration creates is empty, its indexes built in the transaction
                s.replace("CREATE INDEX", "CREATE INDEX CONCURRENTLY", 1)
                for m in MIGRATIONS[1:]
                for s in m.postgres
                if isinstance(s, str)
                and s.startswith("CREATE INDEX")
                and re.search(r" ON (delivery_log|webhook_actions) ", s)
            ),
        ]
    ), online
    assert {
        "webhook_actions_dead",
        "delivery_log_received_at",
        "webhook_actions_done",
    } <= _indexes(pg_url)


def test_each_worker_exports_the_schema_version_it_found(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite3'}"
    migrate(url)
    raw = _raw(url)
    raw.execute(
        "INSERT INTO webhook_schema_version (version, compatible_from, description,"
        f" applied_at, applied_by) VALUES ({NEXT}, {SCHEMA_VERSION}, 'later',"
        " '2030-01-01T00:00:00Z', 'later')"
    )
    raw.commit()
    raw.close()
    receiver = WebhookReceiver(url, auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv, httpx.Client(timeout=10) as client:
        deadline = datetime.now(UTC) + timedelta(seconds=10)
        while (
            f"\ngptools_webhook_schema_version {NEXT}.0\n"
            not in client.get(f"{srv.base_url}/metrics").text
        ):
            assert datetime.now(UTC) < deadline, f"the gauge never said version {NEXT}"
            threading.Event().wait(0.1)


def test_a_migration_waits_for_another_without_a_deadlock(pg_url: str) -> None:
    """Two migrations at once in one database: while one holds the migration lock and
    builds an index CONCURRENTLY (a large table's), the other waits for the lock. Waiting
    inside a statement would hold a snapshot the build waits for, while the build's
    session holds the lock the statement waits for: PostgreSQL's deadlock detector then
    kills one of them (seen in CI: two stores created at once)."""
    from gptools.webhooks._dialects import _PG_MIGRATION_LOCK

    scratch = f"t_{uuid.uuid4().hex[:12]}"
    holder = psycopg.connect(PG_DSN, autocommit=True)
    outcome: dict[str, Any] = {}
    try:
        holder.execute(f'CREATE SCHEMA "{scratch}"')
        holder.execute(f'CREATE TABLE "{scratch}".big (x int)')
        holder.execute(f'INSERT INTO "{scratch}".big SELECT generate_series(1, 1000)')
        holder.execute(f"SELECT pg_advisory_lock({_PG_MIGRATION_LOCK})")

        def create() -> None:
            try:
                # Patient: the wait is bounded by the connection's lock timeout.
                open_store(
                    pg_url, create=True, lock_timeout=timedelta(seconds=60)
                ).connect().close()
                outcome["store"] = "created"
            except Exception as exc:  # reported by the assertion below
                outcome["store"] = f"{type(exc).__name__}: {exc}"

        waiter = threading.Thread(target=create)
        waiter.start()
        # The other migration has asked for the lock (its last statement names it).
        with psycopg.connect(PG_DSN, autocommit=True) as look:
            for _ in range(600):
                asked = look.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid <> %s AND query LIKE %s",
                    (holder.info.backend_pid, f"%advisory_lock({_PG_MIGRATION_LOCK})%"),
                ).fetchone()
                if asked and asked[0]:
                    break
                waiter.join(0.05)
        holder.execute("SET statement_timeout = '60s'")
        try:
            holder.execute(f'CREATE INDEX CONCURRENTLY big_x ON "{scratch}".big (x)')
            outcome["build"] = "built"
        except psycopg.Error as exc:
            outcome["build"] = f"{type(exc).__name__}: {exc}"
        holder.execute(f"SELECT pg_advisory_unlock({_PG_MIGRATION_LOCK})")
        waiter.join(120)
        assert not waiter.is_alive()
        assert outcome == {"build": "built", "store": "created"}
        assert _versions(pg_url) == VERSIONS
    finally:
        holder.execute(f'DROP SCHEMA IF EXISTS "{scratch}" CASCADE')
        holder.close()
