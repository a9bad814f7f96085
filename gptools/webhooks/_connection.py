"""A connection to the store: the one code path both engines share for transactions
(and the write lock around them), the write probe, a COMMIT's outcome
and turning driver errors into :class:`~gptools.webhooks._records.StoreError`.

What a connection does with the tables is written on top of it, one file per job: the
log's writes and reads (``_log_io.py``), the processing queue's operations
(``_queue_store.py``) and the purges (``_retention.py``); ``_store.StoreConnection``
puts them together.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from gptools._private_files import PRIVATE_FILE_MODE
from gptools.webhooks._dialects import Dialect
from gptools.webhooks._records import CommitUncertain, StoreError
from gptools.webhooks._schema import INSERT_LOG


class StoreView(Protocol):
    """What a connection needs of its :class:`~gptools.webhooks._store.Store` (named
    here so that this module needs nothing of ``_store``, which imports it)."""

    dialect: Dialect
    retention: timedelta
    log_retention: timedelta
    export_target: str | None

    @property
    def url(self) -> str:
        """The store's address, without any password."""
        ...

    def make_durable(self) -> None:
        """Make the write transactions committed so far survive a power loss."""
        ...

    def _write_lock(self) -> WriteLock | None:
        """The lock a connection holds around its write transactions (or None)."""
        ...


class ConnectionCore:
    """One connection to a store, used by one thread at a time: the shared plumbing."""

    def __init__(self, store: StoreView, raw: Any) -> None:
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

    def _sql(self, sql: str) -> str:
        return self._d.sql(sql)

    def _ts(self, moment: datetime) -> Any:
        return self._d.ts(moment)

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(self._sql(sql), params)

    def _write_one(
        self, sql: str, params: Sequence[Any] = (), *, durable: bool = True
    ) -> tuple[list[Any], int]:
        """One write statement as a transaction of its own: the rows it returns
        (``RETURNING``) and how many it changed. On PostgreSQL the statement alone, in
        autocommit: one round trip where BEGIN, the statement and COMMIT take three, and
        the processing queue's claim and outcome are such statements, twice per action.
        On SQLite inside the write lock, as every write."""
        alone = self._d.commits_alone
        with contextlib.nullcontext() if alone else self._transaction(durable=durable):
            cur = self._execute(sql, params)
            rows = cur.fetchall() if cur.description else []
            return rows, len(rows) if cur.description else int(cur.rowcount)

    def _transaction(self, *, durable: bool = True) -> _Transaction:
        return _Transaction(self, durable=durable)

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
                    self._execute(INSERT_LOG, (now, 0, 0.0, probe, probe, False, True, None, None))
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


class _Transaction:
    """``BEGIN`` ... ``COMMIT`` on an autocommit connection, ``ROLLBACK`` on error.

    A COMMIT that fails is rolled back before the lock is released: SQLite leaves the
    transaction open after a failed COMMIT (a full disk, say), and the connection would
    keep SQLite's own write lock, and stay inside a transaction, after our lock is gone.
    The time the lock was held is left in ``StoreConnection.last_hold`` (seconds).
    """

    def __init__(self, conn: ConnectionCore, *, durable: bool) -> None:
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
