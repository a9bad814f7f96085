"""The receiver's durable store: which engine, where, and how long it keeps things.

Two engines share one schema (``_schema.py``) and one code path, their differences held by
a dialect (``_dialects.py``): SQLite in WAL mode (the embedded default, ``sqlite:///PATH``)
and PostgreSQL through psycopg 3 (``postgresql://...``, for several receiver processes or
hosts sharing one dedupe store). :func:`open_store` reads a store URL.

A :class:`Store` object is a factory of :class:`StoreConnection` objects; a connection
belongs to one thread. Writes go through :meth:`StoreConnection.write_batch`, which
commits a whole batch in one transaction (group commit).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit, urlunsplit

from gptools import spec
from gptools._private_files import create_private
from gptools._secrets import redact_url, scrub
from gptools.errors import import_extra, require_extra
from gptools.webhooks._connection import WriteLock
from gptools.webhooks._constants import (
    DEFAULT_PG_CONNECT_TIMEOUT,
    DEFAULT_PG_LOCK_TIMEOUT,
    DEFAULT_SQLITE_BUSY_TIMEOUT,
)
from gptools.webhooks._dialects import POSTGRES, SQLITE, Dialect
from gptools.webhooks._outage_store import OutageOperations
from gptools.webhooks._queue_store import QueueOperations
from gptools.webhooks._records import StoreError
from gptools.webhooks._retention import RetentionOperations


class StoreConnection(QueueOperations, RetentionOperations, OutageOperations):
    """One connection to a :class:`Store`, used by one thread at a time: the log's writes
    and reads (:class:`~gptools.webhooks._log_io.LogOperations`), the processing queue's
    operations (:class:`~gptools.webhooks._queue_store.QueueOperations`), the purges
    (:class:`~gptools.webhooks._retention.RetentionOperations`) and an outage's replays
    (:class:`~gptools.webhooks._outage_store.OutageOperations`)."""


class Store:
    """Where the receiver keeps what it must not lose; open one with :func:`open_store`.

    ``retention`` is how long a processed action's dedupe key is kept (at least the
    provider's 7-day retry window, or a late retry would pass as new). ``log_retention``
    is how long ``delivery_log`` rows are kept (at least the retry window too, so that
    every attempt of an action the provider may still retry stays analysable).
    ``export_target`` names an export (see :func:`~gptools.webhooks.export_log`) that
    must see every row: the log's purge then never deletes rows it has not exported.
    """

    dialect: Dialect

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
        try:
            with self._init_lock:
                if not self._initialised:
                    conn.create_schema()
                    self._initialised = True
        except BaseException:
            conn.close()  # a failed start leaks no server connection (a loop retries it)
            raise
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

    dialect = SQLITE
    #: Suffix of the sidecar file whose ``flock`` serialises this store's writers.
    LOCK_SUFFIX = "-writer.lock"

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout: timedelta = DEFAULT_SQLITE_BUSY_TIMEOUT,
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

    dialect = POSTGRES

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        lock_timeout: timedelta = DEFAULT_PG_LOCK_TIMEOUT,
        connect_timeout: timedelta = DEFAULT_PG_CONNECT_TIMEOUT,
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
        try:
            ms = int(self.lock_timeout.total_seconds() * 1000)
            raw.execute(f"SET lock_timeout = {ms}")
            raw.execute("SET synchronous_commit = on")
            if self.schema:
                # Concurrent CREATE SCHEMA IF NOT EXISTS can still collide; the lock
                # serialises it.
                raw.execute("SELECT pg_advisory_lock(7262011)")
                try:
                    raw.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                finally:
                    raw.execute("SELECT pg_advisory_unlock(7262011)")
                raw.execute(f'SET search_path TO "{self.schema}"')
        except BaseException:
            raw.close()  # a lock time-out here leaks no server connection
            raise
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
