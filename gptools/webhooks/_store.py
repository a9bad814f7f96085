"""The receiver's durable store: which engine, where, at which schema version, and how
long it keeps things.

Two engines share one schema (``_schema.py``, laid out by the migrations of
``_migrations.py``) and one code path, their differences held by a dialect
(``_dialects.py``): SQLite in WAL mode (the embedded default, ``sqlite:///PATH``) and
PostgreSQL through psycopg 3 (``postgresql://...``, for several receiver processes or
hosts sharing one dedupe store). :func:`open_store` reads a store URL; :func:`migrate`
brings a store to this gptools' schema version.

A :class:`Store` object is a factory of :class:`StoreConnection` objects; a connection
belongs to one thread. Every connection checks the store's schema version when it opens
and runs no DDL on a store that is up to date (so a role with data rights only can run
the receiver); a store that does not exist yet is created at the current version, unless
the store was opened with ``create=False``. Writes go through
:meth:`StoreConnection.write_batch`, which commits a whole batch in one transaction
(group commit).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from gptools import spec
from gptools._private_files import create_private
from gptools._secrets import scrub
from gptools._store_url import StoreAddress, parse_store_url, shown_url
from gptools.errors import import_extra, require_extra
from gptools.webhooks._connection import WriteLock
from gptools.webhooks._constants import (
    DEFAULT_PG_CONNECT_TIMEOUT,
    DEFAULT_PG_LOCK_TIMEOUT,
    DEFAULT_SQLITE_BUSY_TIMEOUT,
)
from gptools.webhooks._dialects import POSTGRES, SQLITE, Dialect
from gptools.webhooks._first_seen_store import FirstSeenOperations
from gptools.webhooks._forward_store import ForwardOperations
from gptools.webhooks._migrations import (
    READ_VERSION,
    RECORD_MIGRATION,
    SCHEMA_VERSION,
    Migration,
    MigrationResult,
    StoreVersion,
    applied_by,
    check_version,
    pending,
    result,
    version_from,
)
from gptools.webhooks._outage_store import OutageOperations
from gptools.webhooks._queue_store import QueueOperations
from gptools.webhooks._records import (
    StoreError,
    StoreNotFoundError,
    StoreUnreachableError,
)
from gptools.webhooks._retention import RetentionOperations

logger = logging.getLogger("gptools.webhooks")


class StoreConnection(
    QueueOperations,
    RetentionOperations,
    OutageOperations,
    FirstSeenOperations,
    ForwardOperations,
):
    """One connection to a :class:`Store`, used by one thread at a time: the log's writes
    and reads (:class:`~gptools.webhooks._log_io.LogOperations`), the processing queue's
    operations (:class:`~gptools.webhooks._queue_store.QueueOperations`), the purges
    (:class:`~gptools.webhooks._retention.RetentionOperations`), an outage's replays
    (:class:`~gptools.webhooks._outage_store.OutageOperations`), the contract watcher's
    first sightings (:class:`~gptools.webhooks._first_seen_store.FirstSeenOperations`)
    and the forwarding stage's queue
    (:class:`~gptools.webhooks._forward_store.ForwardOperations`)."""


class Store:
    """Where the receiver keeps what it must not lose; open one with :func:`open_store`.

    ``retention`` is how long a processed action's dedupe key is kept (at least the
    provider's 7-day retry window, or a late retry would pass as new). ``log_retention``
    is how long ``delivery_log`` rows are kept (at least the retry window too, so that
    every attempt of an action the provider may still retry stays analysable).
    ``export_target`` names an export (see :func:`~gptools.webhooks.export_log`) that
    must see every row: the log's purge then never deletes rows it has not exported.
    ``create``: a store that does not exist yet is created (at the current schema
    version) by the first connection; false, :meth:`connect` refuses it with
    :class:`~gptools.webhooks.StoreNotFoundError` and leaves nothing behind (what the
    commands that only read or repair a store want: a mistyped URL must not make an
    empty store).
    """

    dialect: Dialect

    def __init__(
        self,
        *,
        retention: timedelta = spec.WEBHOOK_DEDUPE_RETENTION,
        log_retention: timedelta = spec.WEBHOOK_LOG_RETENTION,
        export_target: str | None = None,
        create: bool = True,
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
        self.create = create
        #: The schema version the last connection found (None before any; 0 for a store
        #: laid out before schema versions), kept even when it was refused.
        self.schema_version: int | None = None

    @property
    def url(self) -> str:
        """The store's address, without any password."""
        raise NotImplementedError

    def _raw_connect(self, *, create: bool) -> Any:
        """A driver connection with the session's settings; it neither writes nor changes
        the layout. ``create`` false: :class:`StoreNotFoundError` rather than make a file."""
        raise NotImplementedError

    def _prepare(self, raw: Any) -> None:
        """Settings of a connection to a store that exists (they may write to it)."""

    def _tables(self, raw: Any) -> set[str]:
        """The names of the tables in the store's file or schema."""
        raise NotImplementedError

    def _ensure_container(self, raw: Any) -> None:
        """Create what holds the tables, where it is missing (a PostgreSQL schema)."""

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
        """A new connection for the calling thread, to a store this gptools runs on.

        Reads the store's schema version and runs no DDL on a store that is up to date.
        Raises :class:`~gptools.webhooks.SchemaVersionError` for a store at a version this
        gptools does not run on (``gptools webhooks migrate`` brings an older one up to
        date); creates a store that does not exist at the current version, or, opened with
        ``create=False``, raises :class:`~gptools.webhooks.StoreNotFoundError`;
        :class:`~gptools.webhooks.StoreUnreachableError` when no connection can be opened
        (an outage); :class:`~gptools.webhooks.StoreError` for anything else.
        """
        raw = self._open_raw(create=self.create)
        try:
            found = self._read_version(raw)
            self.schema_version = found.version
            if found.version is None and not self.create:
                raise StoreNotFoundError(self._not_found())
            check_version(self.url, found)
            conn = self._connection(raw)
        except BaseException:
            with contextlib.suppress(Exception):
                raw.close()
            raise
        if found.version is not None:
            return conn
        try:
            found, done = self._migrate(conn)
        except StoreError as exc:
            conn.close()
            raise StoreError(
                self.scrub(
                    f"cannot create the store {self.url}: {exc} (create it with `gptools "
                    f"webhooks migrate --store {self.url}`, as a role allowed to create "
                    "tables)"
                )
            ) from exc
        except BaseException:
            conn.close()
            raise
        if done:
            logger.info(
                "created the store %s at schema version %d",
                self.url,
                done[-1].version,
                extra={"event": "store_created"},
            )
        self.schema_version = SCHEMA_VERSION
        return conn

    def migrate(self, *, dry_run: bool = False) -> MigrationResult:
        """Bring the store to this gptools' schema version, creating it when it does not
        exist (with DDL rights: the tables, the indexes, a PostgreSQL schema); idempotent.
        ``dry_run``: change nothing (not even create a file), say what would be done.
        :class:`~gptools.webhooks.SchemaVersionError` for a store this gptools cannot run
        on because it is newer."""
        steps = self.dialect.migration_steps
        try:
            raw = self._open_raw(create=not dry_run)
        except StoreNotFoundError:  # a dry run on a SQLite file that does not exist
            absent = StoreVersion(None)
            return result(self.url, absent, pending(absent), steps, dry_run=True)
        try:
            found = self._read_version(raw)
            if (found.version or 0) > SCHEMA_VERSION:
                check_version(self.url, found)  # newer: fine only if this code runs on it
            if dry_run:
                raw.close()
                return result(self.url, found, pending(found), steps, dry_run=True)
            conn = self._connection(raw)
        except BaseException:
            with contextlib.suppress(Exception):
                raw.close()
            raise
        try:
            found, done = self._migrate(conn)
        finally:
            conn.close()
        self.schema_version = done[-1].version if done else found.version
        return result(self.url, found, done, steps)

    def _open_raw(self, *, create: bool) -> Any:
        try:
            return self._raw_connect(create=create)
        except StoreError:
            raise
        except Exception as exc:
            text = " ".join(str(exc).split())  # one line: a driver's may have several
            raise StoreError(self.scrub(f"cannot open the store {self.url}: {text}")) from exc

    def _connection(self, raw: Any) -> StoreConnection:
        try:
            self._prepare(raw)
        except Exception as exc:
            raise StoreError(self.scrub(f"cannot open the store {self.url}: {exc}")) from exc
        return StoreConnection(self, raw)

    def _read_version(self, raw: Any) -> StoreVersion:
        try:
            tables = self._tables(raw)
            return version_from(tables, lambda: raw.execute(READ_VERSION).fetchone())
        except Exception as exc:
            raise StoreError(
                self.scrub(f"cannot read the schema version of the store {self.url}: {exc}")
            ) from exc

    def _not_found(self) -> str:
        return (
            f"no store at {self.url} (it would hold the tables delivery_log and "
            f"webhook_actions): check the URL, or create it with `gptools webhooks migrate "
            f"--store {self.url}`"
        )

    def _migrate(self, conn: StoreConnection) -> tuple[StoreVersion, tuple[Migration, ...]]:
        """Apply the pending migrations over ``conn``; (version found, migrations done)."""
        d = self.dialect
        raw = conn.raw
        with conn._errors("migrate"), d.migration_guard(raw.execute):
            self._ensure_container(raw)
            found = self._read_version(raw)
            todo = pending(found)
            if not todo:
                return found, ()
            steps = [step for m in todo for step in d.migration_steps(m)]
            d.build_indexes_online(raw.execute, steps, self._tables(raw))
            with conn._transaction():
                # Read again under the write lock: another run may have gone first.
                found = self._read_version(raw)
                todo = pending(found)
                for migration in todo:
                    for step in d.migration_steps(migration):
                        if isinstance(step, str):
                            conn._execute(step)
                        else:
                            step(conn._execute)
                    conn._execute(
                        RECORD_MIGRATION,
                        (
                            migration.version,
                            migration.compatible_from,
                            migration.description,
                            conn._ts(datetime.now(UTC)),
                            applied_by(),
                        ),
                    )
        return found, todo

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

    def _raw_connect(self, *, create: bool) -> sqlite3.Connection:
        if not self.path.is_file():
            if not create:
                raise StoreNotFoundError(self._not_found())
            folder = Path(self.path).resolve().parent
            if not folder.is_dir():
                # sqlite:///a/b is relative to the working directory; sqlite:////a/b is
                # absolute.
                raise StoreError(
                    f"no folder {folder} for the SQLite file {str(self.path)!r} (sqlite:///PATH "
                    "is relative to the working directory; write sqlite:////PATH for an "
                    "absolute one)"
                )
            create_private(self.path)
        return sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=self.busy_timeout.total_seconds(),
        )

    def _prepare(self, raw: sqlite3.Connection) -> None:
        raw.execute("PRAGMA journal_mode=WAL")
        # FULL durability comes from make_durable, outside the write lock (see above).
        raw.execute("PRAGMA synchronous=NORMAL")

    def _tables(self, raw: sqlite3.Connection) -> set[str]:
        rows = raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(r[0]) for r in rows}

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
        """The DSN without its password or libpq options (its ``?schema=NAME`` kept)."""
        shown = shown_url(self.dsn)
        return f"{shown}?schema={self.schema}" if self.schema else shown

    def scrub(self, text: str) -> str:
        """``text`` without the DSN's password (libpq quotes a bad part of the URL)."""
        return scrub(text, self.dsn)

    def _raw_connect(self, *, create: bool) -> Any:
        psycopg = import_extra("psycopg", "postgres", "A PostgreSQL store")
        try:
            raw = psycopg.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=max(1, round(self.connect_timeout.total_seconds())),
            )
        except psycopg.OperationalError as exc:
            # libpq gives no SQLSTATE for a failed connection: a server that answered
            # with an error of its own (FATAL) refused these settings, unless it only
            # said it cannot take connections now.
            text = " ".join(str(exc).split())  # one line: libpq's has several
            refused = "FATAL:" in text and not any(w in text for w in _PG_OUTAGE_WORDS)
            if refused:
                raise
            raise StoreUnreachableError(
                self.scrub(f"cannot open the store {self.url}: {text}")
            ) from exc
        try:
            ms = int(self.lock_timeout.total_seconds() * 1000)
            raw.execute(f"SET lock_timeout = {ms}")
            raw.execute("SET synchronous_commit = on")
            if self.schema:
                raw.execute(f'SET search_path TO "{self.schema}"')
        except BaseException:
            raw.close()  # a failure here leaks no server connection
            raise
        return raw

    def _tables(self, raw: Any) -> set[str]:
        rows = raw.execute(
            "SELECT tablename FROM pg_catalog.pg_tables"
            " WHERE schemaname = COALESCE(%s, current_schema())",
            (self.schema,),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def _ensure_container(self, raw: Any) -> None:
        if not self.schema:
            return
        found = raw.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
        if found.fetchone() is None:
            # Only when missing: CREATE SCHEMA IF NOT EXISTS needs the right to create
            # schemas even when it exists, which the owner of a schema made for it lacks.
            raw.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            raw.execute(f'SET search_path TO "{self.schema}"')


#: What a PostgreSQL server says when it is there but cannot take a connection now.
_PG_OUTAGE_WORDS = (
    "the database system is",
    "too many clients",
    "connection slots are reserved",
    "administrator command",
)


def open_store(url: str, **options: Any) -> Store:
    """Open the store named by ``url``: ``sqlite:///PATH`` or ``postgresql://...``
    (nothing is connected to yet; :meth:`Store.connect` does).

    A SQLite URL may carry ``?synchronous=NORMAL`` (faster commits that survive a
    process crash but not a power loss; the default FULL survives both). A PostgreSQL URL
    may carry ``?schema=NAME``; its other query parameters go to libpq. Both take
    ``log_retention_days=N`` (how long ``delivery_log`` rows are kept) and
    ``export_target=NAME`` (never purge log rows that export has not written yet).
    ``options`` are passed to :class:`SQLiteStore` or :class:`PostgresStore` (``create=False``:
    never create a store that does not exist). A malformed URL (an unknown scheme, no path
    or host, a port out of range, an option or a value nobody takes) is a
    :class:`ValueError` naming what is wrong.
    """
    address = parse_store_url(url)
    _receiver_options(address, options)
    opener = _OPENERS[address.engine]
    return opener(address, options)


def _open_sqlite(address: StoreAddress, options: dict[str, Any]) -> Store:
    sync = address.options.get("synchronous")
    if sync is not None:
        options["synchronous"] = sync.upper()
    return SQLiteStore(address.location, **options)


def _open_postgres(address: StoreAddress, options: dict[str, Any]) -> Store:
    # Said here, once, rather than by a loop that retries its connection.
    require_extra("postgres", "A PostgreSQL store")
    schema = address.schema or options.pop("schema", None)
    return PostgresStore(address.location, schema=schema, **options)


_OPENERS = {"sqlite": _open_sqlite, "postgres": _open_postgres}


def _receiver_options(address: StoreAddress, options: dict[str, Any]) -> None:
    """Move the log's retention options of a store URL into ``options``."""
    days = address.options.get("log_retention_days")
    if days is not None:
        options["log_retention"] = timedelta(days=float(days))
    target = address.options.get("export_target")
    if target is not None:
        options["export_target"] = target


def migrate(store: Store | str, *, dry_run: bool = False) -> MigrationResult:
    """Bring ``store`` (a :class:`Store` or its URL) to this gptools' schema version:
    what ``gptools webhooks migrate`` runs, with a role allowed to create and change
    tables. A store that does not exist is created; one laid out by a gptools from before
    schema versions (version 0) keeps its rows and gets the version table, the new indexes
    and tables. Idempotent, and safe to run while receivers serve (an index of PostgreSQL
    is built without blocking writes; a SQLite store's write lock is held while its
    indexes are built). ``dry_run``: change nothing and say what would be done.

    Raises :class:`~gptools.webhooks.SchemaVersionError` for a store newer than this
    gptools runs on, :class:`~gptools.webhooks.StoreError` when the store cannot be
    reached or changed, :class:`ValueError` for a malformed URL.
    """
    opened = open_store(store) if isinstance(store, str) else store
    return opened.migrate(dry_run=dry_run)
