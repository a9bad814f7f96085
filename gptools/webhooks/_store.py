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
  pending / done / dead, ``attempts``, ``next_attempt_at``, ``lease_until``).

A :class:`Store` object is a factory of :class:`StoreConnection` objects; a connection
belongs to one thread. Writes go through :meth:`StoreConnection.write_batch`, which
commits a whole batch in one transaction (group commit).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit, urlunsplit

from gptools import spec

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


class StoreError(Exception):
    """The store could not be opened, read or written (the cause is chained)."""


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
    """An action claimed from the processing queue: its id, raw body and attempt number."""

    action_id: str
    body: str
    attempts: int


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """How many actions are in each processing state."""

    pending: int = 0
    done: int = 0
    dead: int = 0


@dataclass(slots=True)
class _Dialect:
    name: Literal["sqlite", "postgresql"]
    placeholder: str
    ddl: tuple[str, ...]
    begin: str
    claim_lock: str = ""


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
        last_error TEXT
    )""",  # a rowid table: with the body inline, WITHOUT ROWID made inserts 2.5x slower
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
        last_error text
    )""",
    *_QUEUE_INDEX_DDL,
)

_SQLITE = _Dialect("sqlite", "?", _SQLITE_DDL, "BEGIN IMMEDIATE")
_PG = _Dialect("postgresql", "%s", _PG_DDL, "BEGIN", claim_lock=" FOR UPDATE SKIP LOCKED")

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
_PG_INSERT_ACTION = (
    "INSERT INTO webhook_actions (action_id, first_received_at, body, next_attempt_at, state)"
    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (action_id) DO NOTHING"
)


def _sqlite_ts(moment: datetime) -> str:
    """:func:`format_utc` for the write path: the same text, about half the cost for an
    aware UTC time (what the receiver's clock gives)."""
    if moment.tzinfo is not UTC:
        return format_utc(moment)
    return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031  (faster than f-string)
        moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second,
        moment.microsecond,
    )


def _pg_ts(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


class Store:
    """Where the receiver keeps what it must not lose; open one with :func:`open_store`.

    ``retention`` is how long a processed action's dedupe key is kept (at least the
    provider's 7-day retry window, or a late retry would pass as new).
    """

    dialect: _Dialect

    def __init__(self, *, retention: timedelta = spec.WEBHOOK_DEDUPE_RETENTION) -> None:
        if retention < spec.WEBHOOK_RETRY_WINDOW:
            raise ValueError(
                f"dedupe retention {retention} is shorter than the provider's retry window "
                f"{spec.WEBHOOK_RETRY_WINDOW}: a late retry would be processed twice"
            )
        self.retention = retention
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

    def connect(self) -> StoreConnection:
        """A new connection for the calling thread; creates the tables on first use."""
        try:
            raw = self._raw_connect()
        except Exception as exc:
            raise StoreError(f"cannot open the store {self.url}: {exc}") from exc
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
        retention: timedelta = spec.WEBHOOK_DEDUPE_RETENTION,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout: timedelta = timedelta(seconds=2),
    ) -> None:
        super().__init__(retention=retention)
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
    waits for a lock before the request is answered 503."""

    dialect = _PG

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        retention: timedelta = spec.WEBHOOK_DEDUPE_RETENTION,
        lock_timeout: timedelta = timedelta(seconds=2),
    ) -> None:
        super().__init__(retention=retention)
        self.dsn = dsn
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

    def _raw_connect(self) -> Any:
        import psycopg

        raw = psycopg.connect(self.dsn, autocommit=True)
        ms = int(self.lock_timeout.total_seconds() * 1000)
        raw.execute(f"SET lock_timeout = {ms}")
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
    may carry ``?schema=NAME``; other query parameters go to libpq.
    ``options`` are passed to :class:`SQLiteStore` or :class:`PostgresStore`.
    """
    if url.startswith("sqlite:///"):
        path, _, params = url[len("sqlite:///") :].partition("?")
        if not path:
            raise ValueError("sqlite store URL needs a path: sqlite:///PATH")
        sync = parse_qs(params).get("synchronous", [None])[0]
        if sync is not None:
            if sync.upper() not in ("FULL", "NORMAL"):
                raise ValueError(f"synchronous={sync!r}: use FULL or NORMAL")
            options["synchronous"] = sync.upper()
        return SQLiteStore(path, **options)
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        schema = query.pop("schema", [None])[0]
        rest = "&".join(f"{k}={v}" for k, vs in query.items() for v in vs)
        dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
        return PostgresStore(dsn, schema=schema or options.pop("schema", None), **options)
    raise ValueError(
        f"unknown store URL {url!r}: use sqlite:///PATH or postgresql://USER@HOST:PORT/DB"
    )


class StoreConnection:
    """One connection to a :class:`Store`, used by one thread at a time."""

    def __init__(self, store: Store, raw: Any) -> None:
        self.store = store
        self.raw = raw
        self._d = store.dialect
        try:
            self._lock = store._write_lock()
        except OSError as exc:
            raw.close()
            raise StoreError(f"cannot open the store {store.url}: {exc}") from exc

    # -- plumbing ---------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return sql if self._d.placeholder == "?" else sql.replace("?", "%s")

    def _ts(self, moment: datetime) -> Any:
        return _sqlite_ts(moment) if self._d.name == "sqlite" else moment.astimezone(UTC)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(self._sql(sql), params)

    def _transaction(self, *, durable: bool = True) -> _Transaction:
        return _Transaction(self, durable=durable)

    def create_schema(self) -> None:
        """Create the tables and indexes if they do not exist (safe to run concurrently)."""
        with self._transaction():
            if self._d.name == "postgresql":
                self._execute("SELECT pg_advisory_xact_lock(7262012)")
            for ddl in self._d.ddl:
                self._execute(ddl)

    def close(self) -> None:
        """Close the connection."""
        self.raw.close()
        if self._lock is not None:
            self._lock.close()

    # -- writes -----------------------------------------------------------------------

    def write_batch(
        self, items: Sequence[WriteItem], *, state: ActionState = "pending",
        durable: bool = True,
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
        """
        sqlite = self._d.name == "sqlite"
        ts_of = _sqlite_ts if sqlite else _pg_ts
        keep_body = state == "pending"
        fresh: list[bool] = []
        rows: list[tuple[Any, ...]] = []
        actions: list[tuple[Any, ...]] = []
        now = time.perf_counter()
        try:
            with self._transaction(durable=durable):
                cur = self.raw.cursor()
                # SQLite: BEGIN IMMEDIATE holds the database's only write lock, so the keys
                # read here cannot change before the inserts below, and every action row
                # goes in with one executemany. PostgreSQL has concurrent writers: there,
                # each insert asks the unique index itself (ON CONFLICT DO NOTHING).
                seen = self._existing(cur, items) if sqlite else set()
                for item in items:
                    log = item.log
                    ts = ts_of(log.received_at)
                    new = False
                    if item.accept:
                        action_id = log.action_id
                        if sqlite:
                            new = action_id not in seen
                            if new:
                                seen.add(action_id)
                                actions.append((action_id, ts, log.body if keep_body else "",
                                                ts, state))
                        else:
                            cur.execute(_PG_INSERT_ACTION, (
                                action_id, ts, log.body if keep_body else "", ts, state))
                            new = cur.rowcount == 1
                        log.duplicate = not new
                    fresh.append(new)
                    if log.latency_ms is None:
                        start = log.started if log.started is not None else now
                        log.latency_ms = round((now - start) * 1000.0, 3)
                    # bools bind as 0/1 in SQLite and as booleans in PostgreSQL.
                    rows.append((ts, log.status, log.latency_ms, log.body, log.action_id,
                                 log.duplicate, log.auth_ok, log.error, log.remote_addr))
                if actions:
                    cur.executemany(_SQLITE_INSERT_ACTION, actions)
                cur.executemany(self._sql(_INSERT_LOG), rows)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"write to {self.store.url} failed: {exc}") from exc
        return fresh

    @staticmethod
    def _existing(cur: Any, items: Sequence[WriteItem]) -> set[str | None]:
        """Which accepted items' action ids are already stored (one query per batch)."""
        ids = [item.log.action_id for item in items if item.accept]
        if not ids:
            return set()
        # One fixed statement whatever the batch size: the ids travel as a JSON array.
        cur.execute(_SQLITE_EXISTING, (json.dumps(ids),))
        return {row[0] for row in cur.fetchall()}

    # -- processing queue -------------------------------------------------------------

    def claim(self, now: datetime, *, limit: int, lease: timedelta) -> list[ClaimedAction]:
        """Claim up to ``limit`` due pending actions for ``lease`` and count the attempt.

        A claim whose lease runs out (its worker died) becomes due again, so every action
        is handled at least once.
        """
        sql = (
            "UPDATE webhook_actions SET lease_until = ?, attempts = attempts + 1"
            " WHERE action_id IN (SELECT action_id FROM webhook_actions"
            " WHERE state = 'pending' AND next_attempt_at <= ?"
            " AND (lease_until IS NULL OR lease_until <= ?)"
            f" ORDER BY next_attempt_at LIMIT ?{self._d.claim_lock})"
            " RETURNING action_id, body, attempts"
        )
        with self._transaction():
            rows = self._execute(
                sql, (self._ts(now + lease), self._ts(now), self._ts(now), limit)
            ).fetchall()
        return [ClaimedAction(r[0], r[1], int(r[2])) for r in rows]

    def finish(self, action_id: str, state: ActionState, *, error: str | None = None,
               retry_at: datetime | None = None) -> None:
        """Record a handler run: ``done``, ``dead``, or ``pending`` again at ``retry_at``."""
        with self._transaction():
            if state == "pending":
                if retry_at is None:
                    raise ValueError("a pending action needs retry_at")
                self._execute(
                    "UPDATE webhook_actions SET state = 'pending', lease_until = NULL,"
                    " last_error = ?, next_attempt_at = ? WHERE action_id = ?",
                    (error, self._ts(retry_at), action_id),
                )
            else:
                self._execute(
                    "UPDATE webhook_actions SET state = ?, lease_until = NULL, last_error = ?"
                    " WHERE action_id = ?",
                    (state, error, action_id),
                )

    def queue_counts(self) -> QueueCounts:
        """How many actions are pending, done and dead."""
        rows = self._execute(
            "SELECT state, COUNT(*) FROM webhook_actions GROUP BY state"
        ).fetchall()
        counts = {str(r[0]): int(r[1]) for r in rows}
        return QueueCounts(counts.get("pending", 0), counts.get("done", 0), counts.get("dead", 0))

    def purge(self, now: datetime) -> int:
        """Delete dedupe keys of finished actions first received longer ago than the
        store's retention; pending actions are never purged. Returns how many went."""
        cutoff = now - self.store.retention
        with self._transaction():
            cur = self._execute(
                "DELETE FROM webhook_actions WHERE state <> 'pending' AND first_received_at < ?",
                (self._ts(cutoff),),
            )
            return int(cur.rowcount)

    # -- reads ------------------------------------------------------------------------

    def action_ids(self) -> set[str]:
        """Every stored action id (the dedupe keys)."""
        return {str(r[0]) for r in self._execute("SELECT action_id FROM webhook_actions")}

    def iter_log(self, *, batch: int = 5000) -> Iterator[dict[str, Any]]:
        """Every ``delivery_log`` row as a dict, oldest ``received_at`` first."""
        cur = self.raw.cursor()
        cur.execute(f"SELECT {', '.join(LOG_COLUMNS)} FROM delivery_log ORDER BY received_at")
        while rows := cur.fetchmany(batch):
            for row in rows:
                rec = dict(zip(LOG_COLUMNS, row, strict=True))
                at = rec["received_at"]
                rec["received_at"] = parse_utc(at) if isinstance(at, str) else at.astimezone(UTC)
                rec["duplicate"] = bool(rec["duplicate"])
                rec["auth_ok"] = bool(rec["auth_ok"])
                yield rec

    def log_count(self) -> int:
        """How many rows ``delivery_log`` holds."""
        return int(self._execute("SELECT COUNT(*) FROM delivery_log").fetchone()[0])


class _Transaction:
    """``BEGIN`` ... ``COMMIT`` on an autocommit connection, ``ROLLBACK`` on error."""

    def __init__(self, conn: StoreConnection, *, durable: bool) -> None:
        self.conn = conn
        self.durable = durable

    def __enter__(self) -> None:
        lock = self.conn._lock
        if lock is not None:
            lock.__enter__()
        try:
            self.conn.raw.execute(self.conn.store.dialect.begin)
        except BaseException:
            if lock is not None:
                lock.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                self.conn.raw.execute("COMMIT")
            else:
                # The original error is the one to report; a failed rollback adds nothing.
                with contextlib.suppress(Exception):
                    self.conn.raw.execute("ROLLBACK")
        finally:
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
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def __enter__(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Release the file (and the lock, if held)."""
        os.close(self._fd)
