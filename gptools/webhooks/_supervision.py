"""How the receiver's background loops stay up unattended: :class:`LoopHealth` supervises
one loop (an error is logged, the loop backs off and goes on; one that keeps failing, or
whose thread ended, makes the receiver's health check fail) and :class:`StoreLink` holds
one loop's connection, replacing one that broke (a PostgreSQL restart) with backoff."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from gptools._backoff import backoff_delay
from gptools.webhooks._constants import (
    LINK_FIRST_BACKOFF,
    LINK_MAX_BACKOFF,
    LOOP_FIRST_BACKOFF,
    LOOP_GIVE_UP_AFTER,
    LOOP_MAX_BACKOFF,
)
from gptools.webhooks._records import SchemaVersionError, StoreError
from gptools.webhooks._store import Store, StoreConnection

logger = logging.getLogger("gptools.webhooks")

#: The (store, schema version) refusals this process has logged: a link retries every
#: second or so, and every loop has one; the refusal is said once.
_REPORTED: set[tuple[str, int]] = set()


class StoreLink:
    """One thread's connection to the store, replaced when it breaks.

    :meth:`get` returns the connection, opening one when there is none. After a failed
    open, or an operation that left the connection broken (:meth:`failed`), the next
    open waits for a backoff that doubles from ``first_backoff`` up to ``max_backoff``;
    until then :meth:`get` raises :class:`StoreError` at once, so callers answer 503
    without waiting. ``reachable`` and ``error`` describe the store as this link last
    saw it. A store at a schema version this gptools does not run on is refused like an
    outage (503, not ready) until it is migrated, and said once per process in the log.
    """

    def __init__(
        self,
        store: Store,
        *,
        first_backoff: timedelta = LINK_FIRST_BACKOFF,
        max_backoff: timedelta = LINK_MAX_BACKOFF,
    ) -> None:
        self.store = store
        self.conn: StoreConnection | None = None
        self.reachable = True
        self.error: str | None = None
        self._first = first_backoff.total_seconds()
        self._max = max_backoff.total_seconds()
        self._failed_opens = 0
        self._next_try = 0.0

    def get(self, *, now_or_never: bool = False) -> StoreConnection:
        """The live connection, or a new one; :class:`StoreError` while unreachable
        (``now_or_never``: try to connect even while backing off)."""
        if self.conn is not None:
            return self.conn
        now = time.monotonic()
        if now < self._next_try and not now_or_never:
            raise StoreError(f"the store {self.store.url} is unreachable: {self.error}")
        try:
            self.conn = self.store.connect()
        except StoreError as exc:
            if (
                isinstance(exc, SchemaVersionError)
                and (key := (self.store.url, exc.found)) not in _REPORTED
            ):
                _REPORTED.add(key)
                logger.error("%s", exc, extra={"event": "schema_version_mismatch"})
            self._down(str(exc))
            raise
        logger.info("connected to the store %s", self.store.url, extra={"event": "store_connected"})
        # Should the store be at another version again (a restored backup), say so again.
        _REPORTED.difference_update({k for k in _REPORTED if k[0] == self.store.url})
        self._failed_opens = 0
        return self.conn

    def ok(self) -> None:
        """An operation succeeded: the store is reachable."""
        if not self.reachable:
            logger.warning(
                "the store %s answers again", self.store.url, extra={"event": "store_recovered"}
            )
        self.reachable = True
        self.error = None

    def failed(self, exc: BaseException) -> None:
        """An operation failed with ``exc``: drop the connection if it broke."""
        self.reachable = False
        self.error = str(exc)
        if self.conn is not None and self.conn.broken:
            self.conn.close()
            self.conn = None
            self._down(str(exc))

    def _down(self, error: str) -> None:
        self.reachable = False
        self.error = error
        self._next_try = time.monotonic() + backoff_delay(
            self._failed_opens, base=self._first, cap=self._max
        )
        self._failed_opens += 1

    def close(self) -> None:
        """Close the connection, if any."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class LoopHealth:
    """The state of one supervised background loop.

    ``give_up_after`` unexpected errors in a row (or the loop's thread ending while it
    should run) mean the loop cannot go on: :attr:`ok` turns false and the receiver's
    health check fails, so that whatever watches it restarts the process. The loop itself
    keeps trying, at the longest backoff, and is ok again after a clean run.
    """

    def __init__(
        self,
        name: str,
        *,
        give_up_after: int = LOOP_GIVE_UP_AFTER,
        max_backoff: timedelta = LOOP_MAX_BACKOFF,
    ) -> None:
        self.name = name
        self.give_up_after = give_up_after
        self.max_backoff = max_backoff.total_seconds()
        self.failures = 0
        self.last_error: str | None = None
        self.thread: threading.Thread | None = None
        #: Set by :meth:`stop`: the loop ends, and its health no longer depends on it.
        self.stopping = False
        self._stop = threading.Event()

    @property
    def ok(self) -> bool:
        """Whether the loop runs and is not failing over and over."""
        running = self.stopping or (self.thread is not None and self.thread.is_alive())
        return running and self.failures < self.give_up_after

    def describe(self) -> str:
        """ "ok", or why not."""
        if self.ok:
            return "ok"
        if self.thread is None or not self.thread.is_alive():
            return f"stopped ({self.last_error or 'thread ended'})"
        return f"failing ({self.failures} errors in a row; last: {self.last_error})"

    def crashed(self, exc: BaseException) -> float:
        """Record an unexpected error; return how long to back off before going on."""
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        logger.exception(
            "background loop %s failed (%d in a row); going on",
            self.name,
            self.failures,
            extra={"event": "loop_failed"},
        )
        return backoff_delay(self.failures - 1, base=LOOP_FIRST_BACKOFF, cap=self.max_backoff)

    def clean(self) -> None:
        """Record a clean run."""
        if self.failures:
            logger.warning(
                "background loop %s runs cleanly again",
                self.name,
                extra={"event": "loop_recovered"},
            )
        self.failures = 0

    def start(self, step: Callable[[], bool]) -> None:
        """Run ``step`` in a daemon thread until it returns False or :meth:`stop` is
        called, backing off after every exception."""

        def supervise() -> None:
            while not self._stop.is_set():
                try:
                    if not step():
                        return
                except Exception as exc:
                    self._stop.wait(self.crashed(exc))
                else:
                    if self.failures:
                        self.clean()

        self.stopping = False
        self._stop.clear()
        self.thread = threading.Thread(target=supervise, name=f"webhook-{self.name}", daemon=True)
        self.thread.start()

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds``, less when the loop is stopped meanwhile; whether it goes on
        (what a step returns after its pause)."""
        return not self._stop.wait(seconds)

    def stop(self, *, wake: Callable[[], None] | None = None, drain: bool = False) -> None:
        """Stop the loop and wait for its thread to end: after the current step, whose
        :meth:`wait` the stop cuts short (``wake`` cuts short what else the step waits
        on); with ``drain``, once a step returns False, which ``wake`` tells it to do (the
        writer writes what it was handed before it stops)."""
        self.stopping = True
        if not drain:
            self._stop.set()
        if wake is not None:
            wake()
        if self.thread is not None:
            self.thread.join()
