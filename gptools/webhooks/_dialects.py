"""What differs between SQLite and PostgreSQL, in one place: each engine's dialect (its
placeholders, timestamps, transactions, schema creation, purge steps and how a batch's
actions go in). The store's code path asks its dialect and never branches on the engine
(``tests/webhooks/test_store_dialect.py`` keeps it so)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from gptools.webhooks._constants import POSTGRES_PURGE_STEP, SQLITE_PURGE_STEP
from gptools.webhooks._records import ActionState, WriteItem, format_utc, parse_utc
from gptools.webhooks._schema import (
    PG_DDL,
    PG_INSERT_ACTIONS,
    SQLITE_DDL,
    SQLITE_EXISTING,
    SQLITE_INSERT_ACTION,
)


def _sqlite_ts(moment: datetime) -> str:
    """:func:`format_utc` for the write path: the same text, about half the cost for an
    aware UTC time (what the receiver's clock gives)."""
    if moment.tzinfo is not UTC:
        return format_utc(moment)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031  (faster than f-string)
        moment.year,
        moment.month,
        moment.day,
        moment.hour,
        moment.minute,
        moment.second,
        moment.microsecond,
    )


def _pg_ts(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


class ActionInserts:
    """The action rows of one write transaction: :meth:`add` inserts one unless its key
    exists (stored earlier, or added earlier in the transaction) and says whether it was
    new; :meth:`flush` sends whatever :meth:`add` held back. ``xid`` is the transaction's
    id where a COMMIT can be in doubt (None where it cannot)."""

    xid: int | None = None

    def add(self, row: tuple[Any, ...]) -> bool:
        """Insert ``row`` (action_id, first_received_at, body, next_attempt_at, state)
        unless its action id exists; True when it did not."""
        raise NotImplementedError

    def flush(self) -> None:
        """Send the rows held back (none by default)."""


class _SQLiteActionInserts(ActionInserts):
    """BEGIN IMMEDIATE holds the database's only write lock, so the keys read once here
    cannot change before the inserts, and every new row goes in with one executemany."""

    def __init__(self, cur: Any, items: Sequence[WriteItem]) -> None:
        self.cur = cur
        self.rows: list[tuple[Any, ...]] = []
        ids = [item.log.action_id for item in items if item.accept]
        # One fixed statement whatever the batch size: the ids travel as a JSON array.
        self.seen: set[str | None] = (
            {row[0] for row in cur.execute(SQLITE_EXISTING, (json.dumps(ids),)).fetchall()}
            if ids
            else set()
        )

    def add(self, row: tuple[Any, ...]) -> bool:
        if row[0] in self.seen:
            return False
        self.seen.add(row[0])
        self.rows.append(row)
        return True

    def flush(self) -> None:
        if self.rows:
            self.cur.executemany(SQLITE_INSERT_ACTION, self.rows)


class _PostgresActionInserts(ActionInserts):
    """PostgreSQL has concurrent writers: the inserts ask the unique index themselves
    (ON CONFLICT DO NOTHING), all of a batch in one statement sent here, which also reads
    the transaction id; :meth:`add` then only says whether the key was one it inserted."""

    def __init__(
        self, cur: Any, items: Sequence[WriteItem], *, keep_body: bool, state: ActionState
    ) -> None:
        accepted = [item.log for item in items if item.accept]
        xid, inserted = cur.execute(
            PG_INSERT_ACTIONS,
            (
                state,
                [log.action_id for log in accepted],
                [_pg_ts(log.received_at) for log in accepted],
                [log.body if keep_body else "" for log in accepted],
            ),
        ).fetchone()
        self.xid = int(xid)
        self.inserted: set[str | None] = set(inserted)

    def add(self, row: tuple[Any, ...]) -> bool:
        new = row[0] in self.inserted
        self.inserted.discard(row[0])  # a repeat later in the batch is not new
        return new


class Dialect:
    """What differs between SQLite and PostgreSQL, in one place: the store's code path
    asks its dialect and never branches on the engine. The store writes its SQL with
    ``?`` placeholders (:meth:`sql` adapts them) and its times as aware datetimes
    (:meth:`ts` and :meth:`from_ts` convert them for the columns)."""

    #: The statement that opens a write transaction.
    begin: str
    #: The tables and indexes, created in this order.
    ddl: tuple[str, ...]
    #: Added to the processing queue's claim, so that concurrent claimers skip a row
    #: another one holds.
    claim_lock: str = ""
    #: Rows deleted per purge step, each step one write transaction.
    purge_step: int
    #: The column that addresses a row, for the purge's delete.
    row_address: str

    def sql(self, sql: str) -> str:
        """``sql`` with the engine's placeholders."""
        return sql

    @staticmethod
    def text(value: str | None) -> str | None:
        """A text column's value as the engine can keep it (a stranger's body, a
        handler's error: anything)."""
        return value

    @staticmethod
    def ts(moment: datetime) -> Any:
        """An aware datetime as a timestamp column's value."""
        raise NotImplementedError

    @staticmethod
    def from_ts(value: Any) -> datetime:
        """A timestamp column's value as an aware UTC datetime."""
        raise NotImplementedError

    def create_schema(self, execute: Callable[[str], Any]) -> None:
        """Create the tables and indexes inside the open transaction."""
        for ddl in self.ddl:
            execute(ddl)

    def broken(self, raw: Any) -> bool:
        """Whether the connection itself is gone, so that only a new one can go on."""
        return False

    def action_inserts(
        self, cur: Any, items: Sequence[WriteItem], *, keep_body: bool, state: ActionState
    ) -> ActionInserts:
        """How the action rows of ``items`` go in, each inserted once (in ``state``, with
        its body when ``keep_body``)."""
        raise NotImplementedError

    def delete_at(self, table: str, where: str, found: list[Any]) -> tuple[str, Any]:
        """The statement that deletes the rows at the addresses ``found`` that still match
        ``where``, and its first parameter (``where``'s own parameters follow)."""
        raise NotImplementedError


class _SQLiteDialect(Dialect):
    """SQLite: ``?`` placeholders, times as format_utc's text, one writer at a time."""

    begin = "BEGIN IMMEDIATE"
    ddl = SQLITE_DDL
    purge_step = SQLITE_PURGE_STEP
    row_address = "rowid"
    ts = staticmethod(_sqlite_ts)

    @staticmethod
    def from_ts(value: Any) -> datetime:
        return parse_utc(value)  # timestamps are format_utc's text

    def create_schema(self, execute: Callable[[str], Any]) -> None:
        super().create_schema(execute)
        columns = {r[1] for r in execute("PRAGMA table_info(webhook_actions)")}
        if "lease_owner" not in columns:  # a store made before leases had owners
            execute("ALTER TABLE webhook_actions ADD COLUMN lease_owner TEXT")

    def action_inserts(
        self, cur: Any, items: Sequence[WriteItem], *, keep_body: bool, state: ActionState
    ) -> ActionInserts:
        return _SQLiteActionInserts(cur, items)

    def delete_at(self, table: str, where: str, found: list[Any]) -> tuple[str, Any]:
        return (
            f"DELETE FROM {table} WHERE rowid IN (SELECT value FROM json_each(?)) AND {where}",
            json.dumps(found),
        )


class _PostgresDialect(Dialect):
    """PostgreSQL through psycopg: ``%s`` placeholders, timestamptz, concurrent writers."""

    begin = "BEGIN"
    ddl = PG_DDL
    claim_lock = " FOR UPDATE SKIP LOCKED"
    purge_step = POSTGRES_PURGE_STEP
    row_address = "ctid"
    ts = staticmethod(_pg_ts)

    @staticmethod
    def from_ts(value: Any) -> datetime:
        moment: datetime = value  # timestamptz arrives as an aware datetime
        return moment.astimezone(UTC)

    def sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    @staticmethod
    def text(value: str | None) -> str | None:
        # PostgreSQL's text cannot hold NUL: one in a refused body failed the whole batch
        # (every request in it answered 503). It is kept as U+FFFD, as an invalid UTF-8
        # byte is; a valid notification never holds one.
        return value.replace("\x00", "\ufffd") if value and "\x00" in value else value

    def create_schema(self, execute: Callable[[str], Any]) -> None:
        # Concurrent CREATE ... IF NOT EXISTS can still collide; the lock serialises them.
        execute("SELECT pg_advisory_xact_lock(7262012)")
        super().create_schema(execute)

    def broken(self, raw: Any) -> bool:
        return bool(raw.closed or getattr(raw, "broken", False))

    def action_inserts(
        self, cur: Any, items: Sequence[WriteItem], *, keep_body: bool, state: ActionState
    ) -> ActionInserts:
        return _PostgresActionInserts(cur, items, keep_body=keep_body, state=state)

    def delete_at(self, table: str, where: str, found: list[Any]) -> tuple[str, Any]:
        return (
            f"DELETE FROM {table} WHERE ctid = ANY(%s::tid[]) AND {where}",
            [str(t) for t in found],
        )


#: The dialects, one each (they hold no state).
SQLITE = _SQLiteDialect()
POSTGRES = _PostgresDialect()
