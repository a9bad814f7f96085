"""The receiver's durable store: dedupe keys, the processing queue and the delivery log.

Two engines share one schema and one code path: SQLite in WAL mode (the embedded default,
``sqlite:///PATH``) and PostgreSQL through psycopg 3 (``postgresql://...``, for several
receiver processes or hosts sharing one dedupe store). Three tables:

- ``delivery_log``: one row per delivery attempt. Its columns are a contract that the log
  analyser reads (docs/design.md, "The delivery-log fields"): ``received_at``, ``status``,
  ``latency_ms``, ``body``, ``action_id``, ``duplicate``, ``auth_ok``, ``error``,
  ``remote_addr``.
- ``webhook_actions``: one row per distinct ``actionId``; its primary key is the durable
  dedupe key, and the same row is the action's entry in the processing queue (``state``
  pending / done / dead, ``attempts``, ``next_attempt_at``, ``lease_until``,
  ``lease_owner``).
- ``log_export_marks``: per export target, the ``received_at`` up to which the log has
  been exported; the log's retention purge never deletes past it.

A :class:`Store` object is a factory of :class:`StoreConnection` objects; a connection
belongs to one thread. Writes go through :meth:`StoreConnection.write_batch`, which
commits a whole batch in one transaction (group commit).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit, urlunsplit

from gptools import spec
from gptools._private_files import PRIVATE_FILE_MODE, create_private
from gptools._secrets import redact_url, scrub
from gptools.errors import GptoolsError, import_extra, require_extra

logger = logging.getLogger("gptools.webhooks")
#: The columns of ``delivery_log``, in order (the contract of docs/design.md).
LOG_COLUMNS: tuple[str, ...] = (
    "received_at",
    "status",
    "latency_ms",
    "body",
    "action_id",
    "duplicate",
    "auth_ok",
    "error",
    "remote_addr",
)

ActionState = Literal["pending", "done", "dead"]


class StoreError(GptoolsError):
    """The store could not be opened, read or written (the cause is chained)."""


class CommitUncertain(StoreError):
    """The connection broke during COMMIT: the transaction may or may not have been
    committed. ``xid`` lets a new connection find out
    (:meth:`StoreConnection.commit_status`); ``result`` is what the write would have
    returned had the COMMIT answered."""

    def __init__(self, message: str, xid: int) -> None:
        super().__init__(message)
        self.xid = xid
        self.result: Any = None


def format_utc(moment: datetime) -> str:
    """``moment`` as the log's text form: ISO 8601 UTC, microseconds, trailing ``Z``."""
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment!r}: the store keeps aware UTC times only")
    # isoformat is several times cheaper than strftime, and this runs once per delivery.
    naive = moment.astimezone(UTC).replace(tzinfo=None)
    return naive.isoformat(timespec="microseconds") + "Z"


def parse_utc(text: str) -> datetime:
    """Parse :func:`format_utc`'s form back to an aware UTC datetime."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


@dataclass(slots=True)
class LogEntry:
    """One delivery attempt, as it goes into ``delivery_log``.

    ``started`` is the ``time.perf_counter()`` reading when the request arrived; the
    writer turns it into ``latency_ms`` when it writes the row, so the latency covers
    everything up to the durable write (not the commit itself, a millisecond or so).
    ``latency_ms`` set explicitly wins over ``started``.
    """

    received_at: datetime
    status: int
    body: str
    action_id: str | None = None
    auth_ok: bool = True
    error: str | None = None
    remote_addr: str | None = None
    started: float | None = None
    latency_ms: float | None = None
    duplicate: bool = False


@dataclass(slots=True)
class WriteItem:
    """One unit of a group commit: a log entry and, for a valid delivery, its action.

    When ``accept`` is true the action (``log.action_id`` with ``log.body``) is inserted
    unless its key already exists; the log row then records whether it was a duplicate.
    """

    log: LogEntry
    accept: bool = False


@dataclass(frozen=True, slots=True)
class ClaimedAction:
    """An action whose run has started: its id, raw body, attempt number (this run's,
    1-based) and the lease token that :meth:`StoreConnection.finish` must present."""

    action_id: str
    body: str
    attempts: int
    owner: str = ""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead-lettered action: kept with its last error until someone retries it."""

    action_id: str
    first_received_at: datetime
    attempts: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """What one purge removed, in how many steps, and the longest any step held the
    store's write lock (seconds)."""

    rows: int = 0
    steps: int = 0
    longest_hold: float = 0.0


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """How many actions are in each processing state."""

    pending: int = 0
    done: int = 0
    dead: int = 0


#: Only pending actions are ever looked up by due time, so only they are indexed: most
#: actions are done at once and then cost the index nothing. (The first version indexed
#: every row on (state, next_attempt_at); it is replaced on start-up.)
_QUEUE_INDEX_DDL = (
    "DROP INDEX IF EXISTS webhook_actions_due",
    "CREATE INDEX IF NOT EXISTS webhook_actions_pending ON webhook_actions (next_attempt_at)"
    " WHERE state = 'pending'",
)

_SQLITE_DDL = (
    """CREATE TABLE IF NOT EXISTS delivery_log (
        received_at TEXT NOT NULL,
        status INTEGER NOT NULL,
        latency_ms REAL NOT NULL,
        body TEXT NOT NULL,
        action_id TEXT,
        duplicate INTEGER NOT NULL,
        auth_ok INTEGER NOT NULL,
        error TEXT,
        remote_addr TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS webhook_actions (
        action_id TEXT PRIMARY KEY,
        first_received_at TEXT NOT NULL,
        body TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT NOT NULL,
        lease_until TEXT,
        last_error TEXT,
        lease_owner TEXT
    )""",  # a rowid table: with the body inline, WITHOUT ROWID made inserts 2.5x slower
    """CREATE TABLE IF NOT EXISTS log_export_marks (
        target TEXT PRIMARY KEY,
        exported_through TEXT NOT NULL
    )""",
    *_QUEUE_INDEX_DDL,
)

_PG_DDL = (
    """CREATE TABLE IF NOT EXISTS delivery_log (
        received_at timestamptz NOT NULL,
        status integer NOT NULL,
        latency_ms double precision NOT NULL,
        body text NOT NULL,
        action_id text,
        duplicate boolean NOT NULL,
        auth_ok boolean NOT NULL,
        error text,
        remote_addr text
    )""",
    """CREATE TABLE IF NOT EXISTS webhook_actions (
        action_id text PRIMARY KEY,
        first_received_at timestamptz NOT NULL,
        body text NOT NULL,
        state text NOT NULL DEFAULT 'pending',
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL,
        lease_until timestamptz,
        last_error text,
        lease_owner text
    )""",
    # Stores made before leases had owners get the column (a no-op on new ones).
    "ALTER TABLE webhook_actions ADD COLUMN IF NOT EXISTS lease_owner text",
    """CREATE TABLE IF NOT EXISTS log_export_marks (
        target text PRIMARY KEY,
        exported_through timestamptz NOT NULL
    )""",
    *_QUEUE_INDEX_DDL,
)

_INSERT_LOG = (
    f"INSERT INTO delivery_log ({', '.join(LOG_COLUMNS)})"
    f" VALUES ({', '.join('?' for _ in LOG_COLUMNS)})"
)
#: A plain insert: a key that exists already would be a bug, and fails the whole batch.
_SQLITE_INSERT_ACTION = (
    "INSERT INTO webhook_actions (action_id, first_received_at, body, next_attempt_at, state)"
    " VALUES (?, ?, ?, ?, ?)"
)
_SQLITE_EXISTING = (
    "SELECT action_id FROM webhook_actions WHERE action_id IN (SELECT value FROM json_each(?))"
)
#: A batch's actions in ONE statement (one round trip, not one per action), which also
#: reads the transaction id: RETURNING names the keys that were new. The rows go in
#: ordered by key, so two processes' batches lock shared keys in the same order and
#: cannot deadlock; a key repeated in the batch is inserted at its first occurrence.
_PG_INSERT_ACTIONS = (
    "WITH inserted AS ("
    "INSERT INTO webhook_actions (action_id, first_received_at, body, next_attempt_at, state)"
    " SELECT a, t, b, t, %s"
    " FROM unnest(%s::text[], %s::timestamptz[], %s::text[]) WITH ORDINALITY AS batch(a, t, b, n)"
    " ORDER BY a, n ON CONFLICT (action_id) DO NOTHING RETURNING action_id)"
    " SELECT txid_current(), ARRAY(SELECT action_id FROM inserted)"
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


class _ActionInserts:
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


class _SQLiteActionInserts(_ActionInserts):
    """BEGIN IMMEDIATE holds the database's only write lock, so the keys read once here
    cannot change before the inserts, and every new row goes in with one executemany."""

    def __init__(self, cur: Any, items: Sequence[WriteItem]) -> None:
        self.cur = cur
        self.rows: list[tuple[Any, ...]] = []
        ids = [item.log.action_id for item in items if item.accept]
        # One fixed statement whatever the batch size: the ids travel as a JSON array.
        self.seen: set[str | None] = (
            {row[0] for row in cur.execute(_SQLITE_EXISTING, (json.dumps(ids),)).fetchall()}
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
            self.cur.executemany(_SQLITE_INSERT_ACTION, self.rows)


class _PostgresActionInserts(_ActionInserts):
    """PostgreSQL has concurrent writers: the inserts ask the unique index themselves
    (ON CONFLICT DO NOTHING), all of a batch in one statement sent here, which also reads
    the transaction id; :meth:`add` then only says whether the key was one it inserted."""

    def __init__(
        self, cur: Any, items: Sequence[WriteItem], *, keep_body: bool, state: ActionState
    ) -> None:
        accepted = [item.log for item in items if item.accept]
        xid, inserted = cur.execute(
            _PG_INSERT_ACTIONS,
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


class _Dialect:
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
    ) -> _ActionInserts:
        """How the action rows of ``items`` go in, each inserted once (in ``state``, with
        its body when ``keep_body``)."""
        raise NotImplementedError

    def delete_at(self, table: str, where: str, found: list[Any]) -> tuple[str, Any]:
        """The statement that deletes the rows at the addresses ``found`` that still match
        ``where``, and its first parameter (``where``'s own parameters follow)."""
        raise NotImplementedError


class _SQLiteDialect(_Dialect):
    """SQLite: ``?`` placeholders, times as format_utc's text, one writer at a time."""

    begin = "BEGIN IMMEDIATE"
    ddl = _SQLITE_DDL
    #: SQLite has one write lock for the whole file: small steps, so that a delivery waits
    #: for one step at most (tests/benchmarks/bench_purge.py).
    purge_step = 200
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
    ) -> _ActionInserts:
        return _SQLiteActionInserts(cur, items)

    def delete_at(self, table: str, where: str, found: list[Any]) -> tuple[str, Any]:
        return (
            f"DELETE FROM {table} WHERE rowid IN (SELECT value FROM json_each(?)) AND {where}",
            json.dumps(found),
        )


class _PostgresDialect(_Dialect):
    """PostgreSQL through psycopg: ``%s`` placeholders, timestamptz, concurrent writers."""

    begin = "BEGIN"
    ddl = _PG_DDL
    claim_lock = " FOR UPDATE SKIP LOCKED"
    #: PostgreSQL's deletes do not block inserts, and each step scans past the rows
    #: deleted before it: big steps.
    purge_step = 50_000
    row_address = "ctid"
    ts = staticmethod(_pg_ts)

    @staticmethod
    def from_ts(value: Any) -> datetime:
        moment: datetime = value  # timestamptz arrives as an aware datetime
        return moment.astimezone(UTC)

    def sql(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def create_schema(self, execute: Callable[[str], Any]) -> None:
        # Concurrent CREATE ... IF NOT EXISTS can still collide; the lock serialises them.
        execute("SELECT pg_advisory_xact_lock(7262012)")
        super().create_schema(execute)

    def broken(self, raw: Any) -> bool:
        return bool(raw.closed or getattr(raw, "broken", False))

    def action_inserts(
        self, cur: Any, items: Sequence[WriteItem], *, keep_body: bool, state: ActionState
    ) -> _ActionInserts:
        return _PostgresActionInserts(cur, items, keep_body=keep_body, state=state)

    def delete_at(self, table: str, where: str, found: list[Any]) -> tuple[str, Any]:
        return (
            f"DELETE FROM {table} WHERE ctid = ANY(%s::tid[]) AND {where}",
            [str(t) for t in found],
        )


_SQLITE = _SQLiteDialect()
_PG = _PostgresDialect()


class Store:
    """Where the receiver keeps what it must not lose; open one with :func:`open_store`.

    ``retention`` is how long a processed action's dedupe key is kept (at least the
    provider's 7-day retry window, or a late retry would pass as new). ``log_retention``
    is how long ``delivery_log`` rows are kept (at least the retry window too, so that
    every attempt of an action the provider may still retry stays analysable).
    ``export_target`` names an export (see :func:`~gptools.webhooks.export_log`) that
    must see every row: the log's purge then never deletes rows it has not exported.
    """

    dialect: _Dialect

    def __init__(
        self,
        *,
        retention: timedelta = spec.WEBHOOK_DEDUPE_RETENTION,
        log_retention: timedelta = spec.WEBHOOK_LOG_RETENTION,
        export_target: str | None = None,
    ) -> None:
        if retention < spec.WEBHOOK_RETRY_WINDOW:
            raise ValueError(
                f"dedupe retention {retention} is shorter than the provider's retry window "
                f"{spec.WEBHOOK_RETRY_WINDOW}: a late retry would be processed twice"
            )
        if log_retention < spec.WEBHOOK_RETRY_WINDOW:
            raise ValueError(
                f"log retention {log_retention} is shorter than the provider's retry window "
                f"{spec.WEBHOOK_RETRY_WINDOW}: the log would lose attempts of live actions"
            )
        if export_target is not None and not export_target:
            raise ValueError("export_target must be a non-empty name")
        self.retention = retention
        self.log_retention = log_retention
        self.export_target = export_target
        self._init_lock = threading.Lock()
        self._initialised = False

    @property
    def url(self) -> str:
        """The store's address, without any password."""
        raise NotImplementedError

    def _raw_connect(self) -> Any:
        raise NotImplementedError

    def _write_lock(self) -> WriteLock | None:
        """The lock a connection holds around its write transactions (None: the engine's
        own locking is enough)."""
        return None

    def make_durable(self) -> None:
        """Make every write transaction committed so far survive a power loss, where the
        commit itself did not (called after each write transaction, outside every lock,
        unless the caller defers it: see :meth:`StoreConnection.write_batch`)."""

    def scrub(self, text: str) -> str:
        """``text`` without the store's secrets (a driver's error may quote its URL)."""
        return text

    def connect(self) -> StoreConnection:
        """A new connection for the calling thread; creates the tables on first use."""
        try:
            raw = self._raw_connect()
        except Exception as exc:
            raise StoreError(self.scrub(f"cannot open the store {self.url}: {exc}")) from exc
        conn = StoreConnection(self, raw)
        with self._init_lock:
            if not self._initialised:
                conn.create_schema()
                self._initialised = True
        return conn

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"


class SQLiteStore(Store):
    """A SQLite file in WAL mode.

    ``synchronous`` is the durability of a commit, named after SQLite's pragma: ``FULL``
    (default) syncs the WAL to disk after every write transaction, before it returns, so
    a 200 survives a power loss, not only a crash; ``NORMAL`` leaves the sync to the next
    checkpoint (survives a process crash, not a power loss). FULL is implemented as
    SQLite's NORMAL plus our own ``fdatasync`` of the WAL once the write locks are
    released: SQLite's FULL would sync while holding the database's single write lock,
    so the receiver processes would queue behind each other's fsyncs. Checkpoints still
    sync the WAL before copying it into the database and the database afterwards.
    ``busy_timeout`` is how long a writer waits for a foreign process's write lock.
    """

    dialect = _SQLITE
    #: Suffix of the sidecar file whose ``flock`` serialises this store's writers.
    LOCK_SUFFIX = "-writer.lock"

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout: timedelta = timedelta(seconds=2),
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.path = Path(path)
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self._wal = str(self.wal_path)  # make_durable runs once per batch: no Path work there

    @property
    def url(self) -> str:
        """``sqlite:///PATH``."""
        return f"sqlite:///{self.path}"

    def _raw_connect(self) -> sqlite3.Connection:
        folder = Path(self.path).resolve().parent
        if not folder.is_dir():
            # sqlite:///a/b is relative to the working directory; sqlite:////a/b is absolute.
            raise StoreError(
                f"no folder {folder} for the SQLite file {str(self.path)!r} (sqlite:///PATH is "
                "relative to the working directory; write sqlite:////PATH for an absolute one)"
            )
        create_private(self.path)
        raw = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=self.busy_timeout.total_seconds(),
        )
        raw.execute("PRAGMA journal_mode=WAL")
        # FULL durability comes from make_durable, outside the write lock (see above).
        raw.execute("PRAGMA synchronous=NORMAL")
        return raw

    def make_durable(self) -> None:
        """``fdatasync`` the WAL (for ``synchronous=FULL``; NORMAL does nothing)."""
        if self.synchronous != "FULL":
            return
        # The commit wrote its frames to the -wal file; syncing that file (any descriptor
        # of it will do, and SQLite holds no locks on it) makes them durable, together with
        # any frames written before them. A fresh descriptor always names the current file.
        try:
            fd = os.open(self._wal, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StoreError(f"cannot sync {self.wal_path}: {exc}") from exc

    @property
    def wal_path(self) -> Path:
        """SQLite's write-ahead log next to the database file."""
        return self.path.with_name(self.path.name + "-wal")

    def _write_lock(self) -> WriteLock:
        # SQLite's busy handler polls with sleeps of 1, 2, 5 ... 100 ms, so a process that
        # commits back to back starves the other one (up to busy_timeout, then 503s). A
        # blocking flock hands the write lock over as soon as it is released.
        return WriteLock(self.path.with_name(self.path.name + self.LOCK_SUFFIX))


class PostgresStore(Store):
    """A PostgreSQL database; ``schema`` (default ``public``) holds the tables, so several
    receivers or test runs can share one server. ``lock_timeout`` bounds how long a write
    waits for a lock before the request is answered 503; ``connect_timeout`` how long
    opening a connection may take (a reconnect while the server is down gives up then).
    Every session sets ``synchronous_commit = on`` itself: a server or role default of
    ``off`` would let a 200 go out for a commit that a server crash then loses."""

    dialect = _PG

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        lock_timeout: timedelta = timedelta(seconds=2),
        connect_timeout: timedelta = timedelta(seconds=3),
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.dsn = dsn
        self.connect_timeout = connect_timeout
        if schema is not None and not schema.replace("_", "").isalnum():
            raise ValueError(f"schema name {schema!r} must be letters, digits and underscores")
        self.schema = schema
        self.lock_timeout = lock_timeout

    @property
    def url(self) -> str:
        """The DSN with the password removed."""
        parts = urlsplit(self.dsn)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        if parts.username:
            host = f"{parts.username}@{host}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    def scrub(self, text: str) -> str:
        """``text`` without the DSN's password (libpq quotes a bad part of the URL)."""
        return scrub(text, self.dsn)

    def _raw_connect(self) -> Any:
        psycopg = import_extra("psycopg", "postgres", "A PostgreSQL store")
        raw = psycopg.connect(
            self.dsn,
            autocommit=True,
            connect_timeout=max(1, round(self.connect_timeout.total_seconds())),
        )
        ms = int(self.lock_timeout.total_seconds() * 1000)
        raw.execute(f"SET lock_timeout = {ms}")
        raw.execute("SET synchronous_commit = on")
        if self.schema:
            # Concurrent CREATE SCHEMA IF NOT EXISTS can still collide; the lock serialises it.
            raw.execute("SELECT pg_advisory_lock(7262011)")
            try:
                raw.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            finally:
                raw.execute("SELECT pg_advisory_unlock(7262011)")
            raw.execute(f'SET search_path TO "{self.schema}"')
        return raw


def open_store(url: str, **options: Any) -> Store:
    """Open the store named by ``url``: ``sqlite:///PATH`` or ``postgresql://...``.

    A SQLite URL may carry ``?synchronous=NORMAL`` (faster commits that survive a
    process crash but not a power loss; the default FULL survives both). A PostgreSQL URL
    may carry ``?schema=NAME``; other query parameters go to libpq. Both take
    ``log_retention_days=N`` (how long ``delivery_log`` rows are kept) and
    ``export_target=NAME`` (never purge log rows that export has not written yet).
    ``options`` are passed to :class:`SQLiteStore` or :class:`PostgresStore`.
    """
    if url.startswith("sqlite:///"):
        path, _, params = url[len("sqlite:///") :].partition("?")
        if not path:
            raise ValueError("sqlite store URL needs a path: sqlite:///PATH")
        query = parse_qs(params)
        _log_options(query, options)
        sync = query.get("synchronous", [None])[0]
        if sync is not None:
            if sync.upper() not in ("FULL", "NORMAL"):
                raise ValueError(f"synchronous={sync!r}: use FULL or NORMAL")
            options["synchronous"] = sync.upper()
        return SQLiteStore(path, **options)
    if url.startswith(("postgresql://", "postgres://")):
        # Said here, once, rather than by a loop that retries its connection.
        require_extra("postgres", "A PostgreSQL store")
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        _log_options(query, options)
        schema = query.pop("schema", [None])[0]
        rest = "&".join(f"{k}={v}" for k, vs in query.items() for v in vs)
        dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
        return PostgresStore(dsn, schema=schema or options.pop("schema", None), **options)
    raise ValueError(
        f"unknown store URL {redact_url(url)!r}: use sqlite:///PATH or "
        "postgresql://USER@HOST:PORT/DB"
    )


def _log_options(query: dict[str, list[str]], options: dict[str, Any]) -> None:
    """Move the log's retention options from a store URL's query into ``options``."""
    days = query.pop("log_retention_days", [None])[0]
    if days is not None:
        try:
            options["log_retention"] = timedelta(days=float(days))
        except ValueError:
            raise ValueError(f"log_retention_days={days!r}: give a number of days") from None
    target = query.pop("export_target", [None])[0]
    if target is not None:
        options["export_target"] = target


class StoreConnection:
    """One connection to a :class:`Store`, used by one thread at a time."""

    def __init__(self, store: Store, raw: Any) -> None:
        self.store = store
        self.raw = raw
        self._d = store.dialect
        #: How long the last transaction held the store's write lock (seconds).
        self.last_hold = 0.0
        #: The PostgreSQL transaction id of the write in progress (see CommitUncertain).
        self.xid: int | None = None
        #: Rows deleted per purge step, each step one write transaction (see the dialect).
        self.purge_step = self._d.purge_step
        try:
            self._lock = store._write_lock()
        except OSError as exc:
            raw.close()
            raise StoreError(f"cannot open the store {store.url}: {exc}") from exc

    # -- plumbing ---------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return self._d.sql(sql)

    def _ts(self, moment: datetime) -> Any:
        return self._d.ts(moment)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(self._sql(sql), params)

    def _transaction(self, *, durable: bool = True) -> _Transaction:
        return _Transaction(self, durable=durable)

    def create_schema(self) -> None:
        """Create the tables and indexes if they do not exist (safe to run concurrently)."""
        with self._errors("create the tables"), self._transaction():
            self._d.create_schema(self._execute)

    def close(self) -> None:
        """Close the connection (never raises: a broken one is closed all the same)."""
        with contextlib.suppress(Exception):
            self.raw.close()
        if self._lock is not None:
            self._lock.close()

    @property
    def broken(self) -> bool:
        """Whether the connection itself is gone (server restarted, network cut), so that
        only a new one can go on; an error of one statement leaves it usable."""
        return self._d.broken(self.raw)

    def commit_status(self, xid: int) -> str | None:
        """PostgreSQL's word on transaction ``xid``: ``committed``, ``aborted``, ``in
        progress``, or None when it no longer knows."""
        with self._errors("ask for a commit's outcome"):
            row = self._execute("SELECT txid_status(?)", (xid,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def probe_write(self) -> None:
        """Rehearse a write and roll it back: :class:`StoreError` when the store cannot
        be reached, locked, or has no room for a row (a disk that fills only at COMMIT
        shows up at the next real write instead)."""
        probe = f"probe-{uuid.uuid4()}"
        now = self._ts(datetime.now(UTC))
        with self._errors("write to the store"):
            lock = self._lock
            if lock is not None:
                lock.__enter__()
            try:
                self.raw.execute(self._d.begin)
                try:
                    self._execute(
                        "INSERT INTO webhook_actions (action_id, first_received_at, body,"
                        " next_attempt_at, state) VALUES (?, ?, '', ?, 'done')",
                        (probe, now, now),
                    )
                    self._execute(_INSERT_LOG, (now, 0, 0.0, probe, probe, False, True, None, None))
                finally:
                    self.raw.execute("ROLLBACK")
            finally:
                if lock is not None:
                    lock.__exit__(None, None, None)

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Every driver error as :class:`StoreError`: the background loops handle that
        one, where a raw sqlite3/psycopg error would end their thread."""
        try:
            yield
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot {what} in {self.store.url}: {exc}") from exc

    # -- writes -----------------------------------------------------------------------

    def write_batch(
        self,
        items: Sequence[WriteItem],
        *,
        state: ActionState = "pending",
        durable: bool = True,
        on_begin: Callable[[], None] | None = None,
    ) -> list[bool]:
        """Write ``items`` in ONE transaction; return, per item, whether its action was new.

        New actions start in ``state``: ``pending`` when a handler will process them,
        ``done`` when the receiver only stores them (a ``done`` action keeps no copy of
        its body: nothing will read it, and the body is in ``delivery_log`` anyway). With
        ``durable`` false the caller takes over :meth:`Store.make_durable` (one sync can
        then serve several batches); until it has run, nothing written may be
        acknowledged.

        An accepted item whose key already exists (stored earlier or earlier in this
        batch) is logged with ``duplicate`` true. Nothing is visible until the commit; on
        any error the transaction is rolled back and :class:`StoreError` raised, so the
        caller answers 503 for every item of the batch.

        ``on_begin`` runs once the transaction holds the store's write lock, before any
        item is read: the last moment at which the caller may still change the items
        (the writer uses it to log as 503 the requests that timed out while it waited).
        """
        ts_of = self._d.ts
        keep_body = state == "pending"
        fresh: list[bool] = []
        rows: list[tuple[Any, ...]] = []
        now = time.perf_counter()
        try:
            with self._transaction(durable=durable):
                if on_begin is not None:
                    on_begin()
                cur = self.raw.cursor()
                inserts = self._d.action_inserts(cur, items, keep_body=keep_body, state=state)
                # Should the connection break during COMMIT, this id tells whether
                # the rows are in (the answer must say what the log says).
                self.xid = inserts.xid
                for item in items:
                    log = item.log
                    ts = ts_of(log.received_at)
                    new = False
                    if item.accept:
                        new = inserts.add(
                            (log.action_id, ts, log.body if keep_body else "", ts, state)
                        )
                        log.duplicate = not new
                    fresh.append(new)
                    if log.latency_ms is None:
                        start = log.started if log.started is not None else now
                        log.latency_ms = round((now - start) * 1000.0, 3)
                    # bools bind as 0/1 in SQLite and as booleans in PostgreSQL.
                    rows.append(
                        (
                            ts,
                            log.status,
                            log.latency_ms,
                            log.body,
                            log.action_id,
                            log.duplicate,
                            log.auth_ok,
                            log.error,
                            log.remote_addr,
                        )
                    )
                inserts.flush()
                cur.executemany(self._sql(_INSERT_LOG), rows)
        except CommitUncertain as exc:
            exc.result = fresh
            raise
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"write to {self.store.url} failed: {exc}") from exc
        return fresh

    # -- processing queue -------------------------------------------------------------

    def claim_next(
        self,
        now: datetime,
        *,
        lease: timedelta,
        max_attempts: int,
    ) -> ClaimedAction | None:
        """Start the run of the next due pending action: lease it for ``lease`` (one run,
        not a batch), count the attempt now, and return it; None when nothing is due.

        A due action whose attempts already reached ``max_attempts`` goes to dead letter
        instead: its last run started and never finished (the worker died or hung), and
        the handler must not take the process down forever.
        """
        lock = self._d.claim_lock
        pick = (
            "SELECT action_id, attempts FROM webhook_actions"
            " WHERE state = 'pending' AND next_attempt_at <= ?"
            f" AND (lease_until IS NULL OR lease_until <= ?) ORDER BY next_attempt_at LIMIT 1{lock}"
        )
        ts_now = self._ts(now)
        with self._errors("claim an action"), self._transaction(durable=False):
            while True:
                row = self._execute(pick, (ts_now, ts_now)).fetchone()
                if row is None:
                    return None
                action_id, attempts = str(row[0]), int(row[1])
                if attempts < max_attempts:
                    break
                self._execute(
                    "UPDATE webhook_actions SET state = 'dead', lease_until = NULL,"
                    " lease_owner = NULL, last_error = ? WHERE action_id = ?",
                    (
                        f"{attempts} runs started and the last one never finished (its worker "
                        f"died, hung or ran past its lease); error before that: "
                        f"{self._last_error(action_id)}",
                        action_id,
                    ),
                )
                logger.error(
                    "action %s dead-lettered: its last of %d runs never finished",
                    action_id,
                    attempts,
                )
            owner = uuid.uuid4().hex
            body, attempts = self._execute(
                "UPDATE webhook_actions SET attempts = attempts + 1, lease_until = ?,"
                " lease_owner = ? WHERE action_id = ? RETURNING body, attempts",
                (self._ts(now + lease), owner, action_id),
            ).fetchone()
        return ClaimedAction(action_id, str(body), int(attempts), owner)

    def _last_error(self, action_id: str) -> str | None:
        row = self._execute(
            "SELECT last_error FROM webhook_actions WHERE action_id = ?", (action_id,)
        ).fetchone()
        return None if row is None else row[0]

    def finish(
        self,
        action_id: str,
        state: ActionState,
        *,
        owner: str,
        error: str | None = None,
        retry_at: datetime | None = None,
    ) -> bool:
        """Record a run's outcome: ``done``, ``dead``, or ``pending`` again at ``retry_at``.

        Only the holder of the run's lease (``owner``, from :meth:`claim_next`) may: when
        the lease ran out and another run took the action, this returns False and changes
        nothing.
        """
        if state == "pending" and retry_at is None:
            raise ValueError("a pending action needs retry_at")
        with self._errors("record a handler run"), self._transaction():
            if state == "pending":
                assert retry_at is not None
                cur = self._execute(
                    "UPDATE webhook_actions SET state = 'pending', lease_until = NULL,"
                    " lease_owner = NULL, last_error = ?, next_attempt_at = ?"
                    " WHERE action_id = ? AND lease_owner = ? AND state = 'pending'",
                    (error, self._ts(retry_at), action_id, owner),
                )
            else:
                cur = self._execute(
                    "UPDATE webhook_actions SET state = ?, lease_until = NULL,"
                    " lease_owner = NULL, last_error = ?"
                    " WHERE action_id = ? AND lease_owner = ? AND state = 'pending'",
                    (state, error, action_id, owner),
                )
            return int(cur.rowcount) == 1

    def queue_counts(self) -> QueueCounts:
        """How many actions are pending, done and dead."""
        with self._errors("count the queue"):
            rows = self._execute(
                "SELECT state, COUNT(*) FROM webhook_actions GROUP BY state"
            ).fetchall()
        counts = {str(r[0]): int(r[1]) for r in rows}
        return QueueCounts(counts.get("pending", 0), counts.get("done", 0), counts.get("dead", 0))

    def dead_letters(self) -> list[DeadLetter]:
        """Every dead-lettered action, oldest first."""
        with self._errors("list the dead letters"):
            rows = self._execute(
                "SELECT action_id, first_received_at, attempts, last_error FROM webhook_actions"
                " WHERE state = 'dead' ORDER BY first_received_at, action_id"
            ).fetchall()
        return [DeadLetter(str(r[0]), self._d.from_ts(r[1]), int(r[2]), r[3]) for r in rows]

    def retry_dead(self, now: datetime, action_ids: Sequence[str] | None = None) -> int:
        """Put dead-lettered actions (all, or those of ``action_ids``) back in the queue,
        due at ``now`` with their attempts counted from zero; returns how many."""
        sql = (
            "UPDATE webhook_actions SET state = 'pending', attempts = 0, lease_until = NULL,"
            " lease_owner = NULL, next_attempt_at = ? WHERE state = 'dead'"
        )
        with self._errors("retry the dead letters"), self._transaction():
            if action_ids is None:
                return int(self._execute(sql, (self._ts(now),)).rowcount)
            count = 0
            for action_id in action_ids:
                count += int(
                    self._execute(sql + " AND action_id = ?", (self._ts(now), action_id)).rowcount
                )
            return count

    # -- retention --------------------------------------------------------------------

    def purge(self, now: datetime) -> int:
        """Delete the dedupe keys of actions processed (``done``) and first received
        longer ago than the store's retention, in small steps. Pending actions are never
        purged, and dead-lettered ones are kept for someone to look at and retry.
        Returns how many went."""
        cutoff = self._ts(now - self.store.retention)
        return self._purge_steps(
            "webhook_actions", "state = 'done' AND first_received_at < ?", (cutoff,)
        ).rows

    def purge_log(self, now: datetime) -> PurgeResult:
        """Delete ``delivery_log`` rows older than the store's log retention, in small
        steps; with an ``export_target``, never a row that target has not exported."""
        cutoff = now - self.store.log_retention
        target = self.store.export_target
        if target is not None:
            mark = self.export_mark(target)
            if mark is None:
                return PurgeResult()  # nothing exported yet: everything must stay
            cutoff = min(cutoff, mark)
        return self._purge_steps("delivery_log", "received_at < ?", (self._ts(cutoff),))

    def _purge_steps(self, table: str, where: str, params: tuple[Any, ...]) -> PurgeResult:
        # The rows of a step are found by a read outside the write lock (in SQLite, a
        # scan can take long when few old rows are left); the delete by row address
        # re-checks the condition, so a row that changed in between is left alone.
        address = self._d.row_address
        find = self._sql(f"SELECT {address} FROM {table} WHERE {where} LIMIT {self.purge_step}")
        rows = steps = 0
        longest = 0.0
        while True:
            with self._errors(f"purge {table}"):
                found = [r[0] for r in self._execute(find, params).fetchall()]
            if not found:
                return PurgeResult(rows, steps, longest)
            with self._errors(f"purge {table}"):
                sql, at = self._d.delete_at(table, where, found)
                args: tuple[Any, ...] = (at, *params)
                with self._transaction(durable=False):
                    rows += int(self.raw.execute(self._sql(sql), args).rowcount)
            longest = max(longest, self.last_hold)
            steps += 1
            if len(found) < self.purge_step:
                return PurgeResult(rows, steps, longest)

    # -- export marks -----------------------------------------------------------------

    def export_mark(self, target: str) -> datetime | None:
        """Up to which ``received_at`` the export ``target`` has written the log."""
        with self._errors("read an export mark"):
            row = self._execute(
                "SELECT exported_through FROM log_export_marks WHERE target = ?", (target,)
            ).fetchone()
        return None if row is None else self._d.from_ts(row[0])

    def set_export_mark(self, target: str, through: datetime) -> None:
        """Record that ``target`` has written every log row received up to ``through``."""
        with self._errors("record an export mark"), self._transaction():
            self._execute(
                "INSERT INTO log_export_marks (target, exported_through) VALUES (?, ?)"
                " ON CONFLICT (target) DO UPDATE SET exported_through = excluded.exported_through",
                (target, self._ts(through)),
            )

    # -- reads ------------------------------------------------------------------------

    def action_ids(self) -> set[str]:
        """Every stored action id (the dedupe keys)."""
        return {str(r[0]) for r in self._execute("SELECT action_id FROM webhook_actions")}

    def iter_log(
        self,
        *,
        batch: int = 5000,
        after: datetime | None = None,
        through: datetime | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every ``delivery_log`` row as a dict, oldest ``received_at`` first (only those
        received after ``after`` and up to ``through``, when given)."""
        where, params = [], []
        if after is not None:
            where.append("received_at > ?")
            params.append(self._ts(after))
        if through is not None:
            where.append("received_at <= ?")
            params.append(self._ts(through))
        condition = f" WHERE {' AND '.join(where)}" if where else ""
        cur = self.raw.cursor()
        cur.execute(
            self._sql(
                f"SELECT {', '.join(LOG_COLUMNS)} FROM delivery_log{condition} ORDER BY received_at"
            ),
            params,
        )
        while rows := cur.fetchmany(batch):
            for row in rows:
                rec = dict(zip(LOG_COLUMNS, row, strict=True))
                rec["received_at"] = self._d.from_ts(rec["received_at"])
                rec["duplicate"] = bool(rec["duplicate"])
                rec["auth_ok"] = bool(rec["auth_ok"])
                yield rec

    def log_count(self) -> int:
        """How many rows ``delivery_log`` holds."""
        return int(self._execute("SELECT COUNT(*) FROM delivery_log").fetchone()[0])


class _Transaction:
    """``BEGIN`` ... ``COMMIT`` on an autocommit connection, ``ROLLBACK`` on error.

    A COMMIT that fails is rolled back before the lock is released: SQLite leaves the
    transaction open after a failed COMMIT (a full disk, say), and the connection would
    keep SQLite's own write lock, and stay inside a transaction, after our lock is gone.
    The time the lock was held is left in ``StoreConnection.last_hold`` (seconds).
    """

    def __init__(self, conn: StoreConnection, *, durable: bool) -> None:
        self.conn = conn
        self.durable = durable
        self.held_from = 0.0

    def __enter__(self) -> None:
        lock = self.conn._lock
        if lock is not None:
            lock.__enter__()
        self.held_from = time.perf_counter()
        try:
            self.conn.raw.execute(self.conn.store.dialect.begin)
        except BaseException:
            if lock is not None:
                lock.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        raw = self.conn.raw
        xid, self.conn.xid = self.conn.xid, None
        try:
            if exc_type is None:
                try:
                    raw.execute("COMMIT")
                except Exception as commit_error:
                    with contextlib.suppress(Exception):
                        raw.execute("ROLLBACK")
                    if xid is not None and self.conn.broken:
                        raise CommitUncertain(
                            f"the connection to {self.conn.store.url} broke during COMMIT: "
                            f"{commit_error}",
                            xid,
                        ) from commit_error
                    raise
            else:
                # The original error is the one to report; a failed rollback adds nothing.
                with contextlib.suppress(Exception):
                    raw.execute("ROLLBACK")
        finally:
            self.conn.last_hold = time.perf_counter() - self.held_from
            if self.conn._lock is not None:
                self.conn._lock.__exit__(None, None, None)
        if exc_type is None and self.durable:
            self.conn.store.make_durable()


class WriteLock:
    """An exclusive ``flock`` on a sidecar file, held around write transactions.

    Exclusive between connections, threads and processes (each connection opens the
    file itself). A waiter blocks in the kernel and
    wakes as soon as the holder releases; the kernel releases the lock of a process that
    dies, so a killed receiver never leaves it held.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)

    def __enter__(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Release the file (and the lock, if held)."""
        os.close(self._fd)
