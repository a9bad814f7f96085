"""The store as the gptools before schema versions laid it out and used it (schema version
0: the main branch before issue 34), copied here: its DDL, which it ran at every
connection, and the statements of its write path, processing queue, export marks and
purge. A fresh clone has no older gptools to install, so the upgrade path is tested
against this copy of what that version ran, unchanged.

:class:`OldProcess` is one process of that version on a store: it connects as it did
(DDL included), writes a batch, claims and finishes an action, marks an export, purges.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from gptools.webhooks._records import format_utc

_QUEUE_INDEX_DDL = (
    "DROP INDEX IF EXISTS webhook_actions_due",
    "CREATE INDEX IF NOT EXISTS webhook_actions_pending ON webhook_actions (next_attempt_at)"
    " WHERE state = 'pending'",
)
SQLITE_DDL = (
    """CREATE TABLE IF NOT EXISTS delivery_log (
        received_at TEXT NOT NULL, status INTEGER NOT NULL, latency_ms REAL NOT NULL,
        body TEXT NOT NULL, action_id TEXT, duplicate INTEGER NOT NULL,
        auth_ok INTEGER NOT NULL, error TEXT, remote_addr TEXT)""",
    """CREATE TABLE IF NOT EXISTS webhook_actions (
        action_id TEXT PRIMARY KEY, first_received_at TEXT NOT NULL, body TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT NOT NULL, lease_until TEXT, last_error TEXT, lease_owner TEXT)""",
    """CREATE TABLE IF NOT EXISTS log_export_marks (
        target TEXT PRIMARY KEY, exported_through TEXT NOT NULL)""",
    *_QUEUE_INDEX_DDL,
)
PG_DDL = (
    """CREATE TABLE IF NOT EXISTS delivery_log (
        received_at timestamptz NOT NULL, status integer NOT NULL,
        latency_ms double precision NOT NULL, body text NOT NULL, action_id text,
        duplicate boolean NOT NULL, auth_ok boolean NOT NULL, error text, remote_addr text)""",
    """CREATE TABLE IF NOT EXISTS webhook_actions (
        action_id text PRIMARY KEY, first_received_at timestamptz NOT NULL, body text NOT NULL,
        state text NOT NULL DEFAULT 'pending', attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL, lease_until timestamptz, last_error text,
        lease_owner text)""",
    "ALTER TABLE webhook_actions ADD COLUMN IF NOT EXISTS lease_owner text",
    """CREATE TABLE IF NOT EXISTS log_export_marks (
        target text PRIMARY KEY, exported_through timestamptz NOT NULL)""",
    *_QUEUE_INDEX_DDL,
)
_LOG_COLUMNS = (
    "received_at, status, latency_ms, body, action_id, duplicate, auth_ok, error, remote_addr"
)
INSERT_LOG = f"INSERT INTO delivery_log ({_LOG_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
SQLITE_EXISTING = (
    "SELECT action_id FROM webhook_actions WHERE action_id IN (SELECT value FROM json_each(?))"
)
SQLITE_INSERT_ACTION = (
    "INSERT INTO webhook_actions (action_id, first_received_at, body, next_attempt_at, state)"
    " VALUES (?, ?, ?, ?, ?)"
)
PG_INSERT_ACTIONS = (
    "WITH inserted AS ("
    "INSERT INTO webhook_actions (action_id, first_received_at, body, next_attempt_at, state)"
    " SELECT a, t, b, t, %s"
    " FROM unnest(%s::text[], %s::timestamptz[], %s::text[]) WITH ORDINALITY AS batch(a, t, b, n)"
    " ORDER BY a, n ON CONFLICT (action_id) DO NOTHING RETURNING action_id)"
    " SELECT txid_current(), ARRAY(SELECT action_id FROM inserted)"
)


class OldProcess:
    """One process of the previous gptools on the store at ``url`` (``sqlite:///PATH`` or
    ``postgresql://...?schema=NAME``), connecting as it did: session settings, then its
    whole DDL in a transaction."""

    def __init__(self, url: str) -> None:
        self.sqlite = url.startswith("sqlite:///")
        if self.sqlite:
            self.raw: Any = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
            self.raw.execute("PRAGMA journal_mode=WAL")
            self.raw.execute("PRAGMA synchronous=NORMAL")
        else:
            dsn, _, schema = url.partition("?schema=")
            self.raw = psycopg.connect(dsn, autocommit=True)
            self.raw.execute("SET lock_timeout = 2000")
            self.raw.execute("SET synchronous_commit = on")
            # The previous gptools waited for this lock in a statement; asked for here as
            # today's gptools asks (what is frozen is the layout): a statement waiting for
            # it deadlocks with another test's CREATE INDEX CONCURRENTLY holding it.
            while not self.raw.execute("SELECT pg_try_advisory_lock(7262011)").fetchone()[0]:
                time.sleep(0.05)  # another test migrates; the lock is released when it is done
            try:
                self.raw.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            finally:
                self.raw.execute("SELECT pg_advisory_unlock(7262011)")
            self.raw.execute(f'SET search_path TO "{schema}"')
        with self._transaction():
            if self.sqlite:
                for ddl in SQLITE_DDL:
                    self.raw.execute(ddl)
                columns = {r[1] for r in self.raw.execute("PRAGMA table_info(webhook_actions)")}
                if "lease_owner" not in columns:
                    self.raw.execute("ALTER TABLE webhook_actions ADD COLUMN lease_owner TEXT")
            else:
                self.raw.execute("SELECT pg_advisory_xact_lock(7262012)")
                for ddl in PG_DDL:
                    self.raw.execute(ddl)

    def close(self) -> None:
        """Close the connection."""
        self.raw.close()

    def _sql(self, sql: str) -> str:
        return sql if self.sqlite else sql.replace("?", "%s")

    def _ts(self, moment: datetime) -> Any:
        return format_utc(moment) if self.sqlite else moment

    def _transaction(self) -> Any:
        raw = self.raw

        class _Tx:
            def __enter__(tx) -> None:
                raw.execute("BEGIN IMMEDIATE" if self.sqlite else "BEGIN")

            def __exit__(tx, exc_type: object, *rest: object) -> None:
                raw.execute("COMMIT" if exc_type is None else "ROLLBACK")

        return _Tx()

    def write(self, action_ids: list[str], at: datetime, *, state: str = "done") -> list[bool]:
        """One batch of accepted deliveries, as its group commit wrote it; per action,
        whether it was new."""
        body = "{}"
        with self._transaction():
            if self.sqlite:
                seen = {r[0] for r in self.raw.execute(SQLITE_EXISTING, (json.dumps(action_ids),))}
                new = [a not in seen for a in action_ids]
                rows = [
                    (a, self._ts(at), body, self._ts(at), state)
                    for a in action_ids
                    if a not in seen
                ]
                self.raw.executemany(SQLITE_INSERT_ACTION, rows)
            else:
                _, inserted = self.raw.execute(
                    PG_INSERT_ACTIONS,
                    (state, action_ids, [at] * len(action_ids), [body] * len(action_ids)),
                ).fetchone()
                new = [a in inserted for a in action_ids]
            for action_id, fresh in zip(action_ids, new, strict=True):
                self.raw.execute(
                    self._sql(INSERT_LOG),
                    (self._ts(at), 200, 1.0, body, action_id, not fresh, True, None, None),
                )
        return new

    def claim_and_finish(self, now: datetime) -> str | None:
        """Claim the next due pending action and mark it done, as its queue did."""
        lock = "" if self.sqlite else " FOR UPDATE SKIP LOCKED"
        with self._transaction():
            row = self.raw.execute(
                self._sql(
                    "SELECT action_id, attempts FROM webhook_actions WHERE state = 'pending'"
                    " AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)"
                    f" ORDER BY next_attempt_at LIMIT 1{lock}"
                ),
                (self._ts(now), self._ts(now)),
            ).fetchone()
            if row is None:
                return None
            owner = uuid.uuid4().hex
            self.raw.execute(
                self._sql(
                    "UPDATE webhook_actions SET attempts = attempts + 1, lease_until = ?,"
                    " lease_owner = ? WHERE action_id = ? RETURNING body, attempts"
                ),
                (self._ts(now + timedelta(minutes=5)), owner, row[0]),
            ).fetchone()
        with self._transaction():
            self.raw.execute(
                self._sql(
                    "UPDATE webhook_actions SET state = ?, lease_until = NULL, lease_owner = NULL,"
                    " last_error = ? WHERE action_id = ? AND lease_owner = ? AND state = 'pending'"
                ),
                ("done", None, row[0], owner),
            )
        return str(row[0])

    def mark_export(self, target: str, through: datetime) -> None:
        """Record an export mark, as its export did."""
        with self._transaction():
            self.raw.execute(
                self._sql(
                    "INSERT INTO log_export_marks (target, exported_through) VALUES (?, ?)"
                    " ON CONFLICT (target) DO UPDATE"
                    " SET exported_through = excluded.exported_through"
                ),
                (target, self._ts(through)),
            )

    def purge_log(self, cutoff: datetime) -> int:
        """Delete the log rows received before ``cutoff``, in steps, as its purge did."""
        address = "rowid" if self.sqlite else "ctid"
        deleted = 0
        while True:
            found = [
                r[0]
                for r in self.raw.execute(
                    self._sql(
                        f"SELECT {address} FROM delivery_log WHERE received_at < ? LIMIT 200"
                    ),
                    (self._ts(cutoff),),
                ).fetchall()
            ]
            if not found:
                return deleted
            with self._transaction():
                if self.sqlite:
                    cur = self.raw.execute(
                        "DELETE FROM delivery_log WHERE rowid IN (SELECT value FROM json_each(?))"
                        " AND received_at < ?",
                        (json.dumps(found), self._ts(cutoff)),
                    )
                else:
                    cur = self.raw.execute(
                        "DELETE FROM delivery_log WHERE ctid = ANY(%s::tid[]) AND received_at < %s",
                        ([str(t) for t in found], cutoff),
                    )
                deleted += int(cur.rowcount)


def legacy_store(
    url: str, action_ids: list[str], at: datetime = datetime(2026, 3, 2, tzinfo=UTC)
) -> None:
    """Lay out a store at ``url`` as the previous gptools did, holding ``action_ids``
    (stored, pending for a handler)."""
    old = OldProcess(url)
    try:
        old.write(action_ids, at, state="pending")
    finally:
        old.close()
