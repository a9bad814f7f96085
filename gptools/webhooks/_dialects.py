"""What differs between SQLite and PostgreSQL, in one place: each engine's dialect (its
placeholders, timestamps, transactions, migrations, purge steps and how a batch's
actions go in). The store's code path asks its dialect and never branches on the engine
(``tests/webhooks/test_store_dialect.py`` keeps it so)."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gptools.webhooks._constants import (
    PG_MIGRATION_LOCK_POLL,
    PG_ONLINE_INDEX_BYTES,
    POSTGRES_PURGE_STEP,
    SQLITE_PURGE_STEP,
)
from gptools.webhooks._records import ActionState, WriteItem, format_utc, parse_utc
from gptools.webhooks._schema import PG_INSERT_ACTIONS, SQLITE_EXISTING, SQLITE_INSERT_ACTION

if TYPE_CHECKING:
    from gptools.webhooks._migrations import Migration, Step

#: ``CREATE INDEX IF NOT EXISTS name ON table ...``: an index a migration builds.
_CREATE_INDEX = re.compile(
    r"^\s*CREATE INDEX IF NOT EXISTS (\w+) ON (\w+)\b(.*)$", re.IGNORECASE | re.DOTALL
)
#: Serialises migrations (and the creation of a store) across every process and host.
_PG_MIGRATION_LOCK = 7262011


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
    #: Added to the processing queue's claim, so that concurrent claimers skip a row
    #: another one holds.
    claim_lock: str = ""
    #: Whether one write statement commits by itself (an autocommit connection that needs
    #: no lock of ours around a write): :meth:`ConnectionCore._write_one` sends it alone.
    commits_alone: bool = False
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

    def migration_steps(self, migration: Migration) -> tuple[Step, ...]:
        """``migration``'s steps on this engine."""
        raise NotImplementedError

    @contextlib.contextmanager
    def migration_guard(self, execute: Callable[..., Any]) -> Iterator[None]:
        """Held around a whole migration run, beyond its transactions (none by default:
        the migration's write transaction serialises it)."""
        yield

    def build_indexes_online(
        self, execute: Callable[..., Any], steps: Sequence[Step], tables: set[str]
    ) -> None:
        """Before a migration's transaction: build the indexes of ``steps`` on tables
        that exist (``tables``) without blocking writes, where the engine can (by default
        the transaction builds them)."""

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
    purge_step = SQLITE_PURGE_STEP
    row_address = "rowid"
    ts = staticmethod(_sqlite_ts)

    @staticmethod
    def from_ts(value: Any) -> datetime:
        return parse_utc(value)  # timestamps are format_utc's text

    def migration_steps(self, migration: Migration) -> tuple[Step, ...]:
        return migration.sqlite

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
    claim_lock = " FOR UPDATE SKIP LOCKED"
    commits_alone = True
    #: Tables larger than this get a migration's new indexes built CONCURRENTLY.
    online_index_bytes = PG_ONLINE_INDEX_BYTES
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

    def migration_steps(self, migration: Migration) -> tuple[Step, ...]:
        return migration.postgres

    @contextlib.contextmanager
    def migration_guard(self, execute: Callable[..., Any]) -> Iterator[None]:
        # Concurrent CREATE ... IF NOT EXISTS can still collide, and two runs would build
        # the same index at once: one run at a time, in the whole database. Asked for
        # again and again, never waited for in a statement (PG_MIGRATION_LOCK_POLL).
        # The connection's lock_timeout still bounds the wait, as it bounded the blocking
        # call (0: none): a receiver's loops retry a store they cannot open.
        limit = float(
            execute(
                "SELECT extract(epoch FROM current_setting('lock_timeout')::interval)"
            ).fetchone()[0]
        )
        deadline = time.monotonic() + limit
        poll = PG_MIGRATION_LOCK_POLL.total_seconds()
        while not execute(f"SELECT pg_try_advisory_lock({_PG_MIGRATION_LOCK})").fetchone()[0]:
            left = deadline - time.monotonic()
            if limit and left <= 0:
                raise TimeoutError(
                    f"another run holds the migration lock: lock timeout after {limit:g} s"
                )
            # Another run migrates (as long as an index build may take, with no limit).
            time.sleep(min(poll, left) if limit else poll)
        try:
            yield
        finally:
            execute(f"SELECT pg_advisory_unlock({_PG_MIGRATION_LOCK})")

    def build_indexes_online(
        self, execute: Callable[..., Any], steps: Sequence[Step], tables: set[str]
    ) -> None:
        # Built in the transaction, an index on a large table would block every insert
        # (deliveries answered 503) for as long as the build takes; CONCURRENTLY does not
        # block them, and cannot run in a transaction. The transaction's own CREATE INDEX
        # IF NOT EXISTS then finds it built.
        builds = [m for s in steps if isinstance(s, str) and (m := _CREATE_INDEX.match(s))]
        builds = [
            m
            for m in builds
            if m.group(2) in tables
            and execute("SELECT pg_relation_size(%s)", (m.group(2),)).fetchone()[0]
            > self.online_index_bytes
        ]
        if not builds:
            return
        previous = execute("SHOW lock_timeout").fetchone()[0]
        # It waits for the transactions in progress, and blocks no write meanwhile.
        execute("SET lock_timeout = 0")
        try:
            for match in builds:
                name, table, rest = match.groups()
                valid = execute(
                    "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
                    " WHERE c.relname = %s AND c.relnamespace = to_regnamespace(current_schema())",
                    (name,),
                ).fetchone()
                if valid is not None and valid[0]:
                    continue
                if valid is not None:  # an interrupted build leaves an invalid index
                    execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table}{rest}")
        finally:
            execute(f"SET lock_timeout = '{previous}'")

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
