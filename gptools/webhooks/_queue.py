"""The durable processing queue: runs the user's handler for each stored action after the
acknowledgement, from the ``webhook_actions`` table: at least once per action (a claim is
a lease; a worker that dies leaves it to expire and the action is claimed again), retried
with exponential backoff on failure, and ``dead`` after ``max_attempts``. A restart
resumes whatever is pending. Its store operations are ``_queue_store.py``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from gptools._backoff import backoff_delay
from gptools.errors import GptoolsError
from gptools.models import GameEventNotification, loads_wire
from gptools.webhooks._constants import (
    DEFAULT_FACTOR,
    DEFAULT_FIRST_DELAY,
    DEFAULT_HANDLER_TIMEOUT,
    DEFAULT_IDLE_WAIT,
    DEFAULT_LEASE,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_DELAY,
    DEFAULT_MAX_HUNG,
    DEFAULT_QUEUE_BATCH,
    QUEUE_LINK_MAX_BACKOFF,
    QUEUE_STORE_BACKOFF_CAP,
)
from gptools.webhooks._logs import scrub
from gptools.webhooks._records import (
    ActionState,
    ClaimedAction,
    Clock,
    SchemaVersionError,
    StoreError,
    utc_now,
)
from gptools.webhooks._store import Store, StoreConnection
from gptools.webhooks._supervision import LoopHealth, StoreLink

logger = logging.getLogger("gptools.webhooks")

#: The user's processing step; any exception it raises counts as a failed attempt.
Handler = Callable[[GameEventNotification], object]


class HandlerTimeout(GptoolsError):
    """A handler run took longer than the queue's ``handler_timeout``."""


class _HandlerThread:
    """Runs handler calls in a daemon thread, so that the queue can stop waiting for one
    that hangs. Python cannot kill a thread: one that timed out is abandoned (it ends
    whenever its call returns) and the next call gets a fresh thread."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self._inbox: queue.SimpleQueue[
            tuple[GameEventNotification, threading.Event, list[Any]] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="webhook-handler", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (job := self._inbox.get()) is not None:
            event, done, result = job
            try:
                self.handler(event)
            except BaseException as exc:
                result.append(exc)
            done.set()

    def call(self, event: GameEventNotification, timeout: float) -> bool:
        """Run the handler; raise what it raised; False when it did not return in time."""
        done = threading.Event()
        result: list[Any] = []
        self._inbox.put((event, done, result))
        if not done.wait(timeout):
            return False
        if result:
            raise result[0]
        return True

    def close(self) -> None:
        """Let the thread end after its current call."""
        self._inbox.put(None)


def lease_refusal(handler_timeout: timedelta, lease: timedelta) -> str | None:
    """Why a run's time-out does not fit in its lease, or None: a run slower than its
    lease would be taken over while it runs."""
    if handler_timeout < lease:
        return None
    return (
        f"{handler_timeout} must be shorter than the lease {lease}, "
        "or a slow run would be taken over while it runs"
    )


class ProcessingQueue:
    """Runs ``handler`` for every stored action, at least once, off the request path.

    Each run starts by leasing its one action for ``lease`` and counting the attempt
    (:meth:`~gptools.webhooks._store.StoreConnection.claim_next`), so a handler that
    kills its process costs only its own action an attempt, and an action whose runs
    keep never returning is dead-lettered once ``max_attempts`` runs have started. A run
    that takes longer than ``handler_timeout`` counts as failed (the thread running it
    is abandoned). A failed run is retried after ``first_delay`` × ``factor`` **
    (attempt − 1), capped at ``max_delay``; after ``max_attempts`` failed runs the action
    is ``dead`` (kept with its last error until ``gptools webhooks dead-letters --retry``).
    A run whose lease ran out and was taken over does not record its outcome. The
    handler must be idempotent (it may run again after a crash). While ``max_hung``
    timed-out runs have still not returned, the queue runs nothing more and its health
    fails (threads are not to pile up without end); it goes on once they return.
    """

    def __init__(
        self,
        store: Store,
        handler: Handler,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        first_delay: timedelta = DEFAULT_FIRST_DELAY,
        factor: float = DEFAULT_FACTOR,
        max_delay: timedelta = DEFAULT_MAX_DELAY,
        lease: timedelta = DEFAULT_LEASE,
        handler_timeout: timedelta = DEFAULT_HANDLER_TIMEOUT,
        max_hung: int = DEFAULT_MAX_HUNG,
        batch: int = DEFAULT_QUEUE_BATCH,
        idle_wait: timedelta = DEFAULT_IDLE_WAIT,
        clock: Clock = utc_now,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        if (refusal := lease_refusal(handler_timeout, lease)) is not None:
            raise ValueError(f"handler_timeout {refusal}")
        self.store = store
        self.handler = handler
        self.max_attempts = max_attempts
        self.first_delay = first_delay
        self.factor = factor
        self.max_delay = max_delay
        self.lease = lease
        self.handler_timeout = handler_timeout
        self.max_hung = max_hung
        self.batch = batch
        self.idle_wait = idle_wait
        self.clock = clock
        self.health = LoopHealth("queue")
        self.link = StoreLink(store, max_backoff=QUEUE_LINK_MAX_BACKOFF)
        self._wake = threading.Event()
        self._runner: _HandlerThread | None = None
        self._store_failures = 0
        #: Handler threads abandoned after a time-out that have not returned yet.
        self.abandoned: list[threading.Thread] = []
        #: Called once for each handler run that raised or timed out (the metrics).
        self.on_failure: Callable[[], None] | None = None
        #: Called after a run succeeded, before the action is marked done, on the queue's
        #: connection (the forwarding stage enqueues the action there); a store error
        #: leaves the action to run again once its lease ends.
        self.after_done: Callable[[StoreConnection, ClaimedAction], None] | None = None

    def delay_after(self, attempt: int) -> timedelta:
        """The wait before the run that follows failed run number ``attempt`` (1-based)."""
        return timedelta(
            seconds=backoff_delay(
                attempt - 1,
                base=self.first_delay.total_seconds(),
                cap=self.max_delay.total_seconds(),
                factor=self.factor,
            )
        )

    def start(self) -> None:
        """Run the queue in a background thread until :meth:`stop`."""
        self.health.start(self._step)

    def wake(self) -> None:
        """Tell the background thread new work was committed (saves a poll interval)."""
        self._wake.set()

    def stop(self) -> None:
        """Finish the run in progress and stop the background thread."""
        self.health.stop(wake=self._wake.set)
        self.link.close()
        if self._runner is not None:
            self._runner.close()
            self._runner = None

    def _step(self) -> bool:
        try:
            ran = self.run_due(self.link.get())
        except StoreError as exc:
            self.link.failed(exc)
            self._store_failures += 1
            said = isinstance(exc, SchemaVersionError)  # the link said it once
            if not said and (self._store_failures == 1 or self._store_failures % 20 == 0):
                logger.warning(
                    "processing queue (%d failures in a row): %s",
                    self._store_failures,
                    exc,
                    extra={"event": "queue_store_failed"},
                )
            # The store's trouble: back off (doubling up to 5 s), and go on.
            wait = backoff_delay(
                self._store_failures,
                base=self.idle_wait.total_seconds(),
                cap=QUEUE_STORE_BACKOFF_CAP,
            )
            return self.health.wait(wait)
        self.link.ok()
        self._store_failures = 0
        if not ran:
            self._wake.wait(self.idle_wait.total_seconds())
            self._wake.clear()
        return True

    def run_due(self, conn: StoreConnection) -> int:
        """Run up to ``batch`` due actions, one lease each; return how many ran."""
        ran = 0
        while ran < self.batch and not self.health.stopping:
            self.abandoned = [t for t in self.abandoned if t.is_alive()]
            if len(self.abandoned) >= self.max_hung:
                # Not a store error: the supervisor counts it, and health fails.
                raise HandlerTimeout(
                    f"{len(self.abandoned)} handler runs timed out and have "
                    "not returned yet; no more runs until they do"
                )
            action = conn.claim_next(self.clock(), lease=self.lease, max_attempts=self.max_attempts)
            if action is None:
                break
            state, error, retry_at = self._run_one(action)
            if state == "done" and self.after_done is not None:
                self.after_done(conn, action)
            if not conn.finish(
                action.action_id, state, owner=action.owner, error=error, retry_at=retry_at
            ):
                logger.warning(
                    "action %s: the lease ran out and another run took it over; "
                    "this run's outcome (%s) is not recorded",
                    action.action_id,
                    state,
                    extra={"event": "handler_lease_lost", "actionId": action.action_id},
                )
            ran += 1
        return ran

    def drain(self, *, timeout: timedelta = timedelta(seconds=30)) -> None:
        """Run every action that is due now, in the calling thread, until none is left
        (for scripts and tests; actions waiting for a retry delay are not waited for)."""
        deadline = time.monotonic() + timeout.total_seconds()
        conn = self.store.connect()
        try:
            while self.run_due(conn):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"processing queue not drained within {timeout}")
        finally:
            conn.close()

    def _call_handler(self, event: GameEventNotification) -> None:
        if self._runner is None:
            self._runner = _HandlerThread(self.handler)
        runner = self._runner
        if not runner.call(event, self.handler_timeout.total_seconds()):
            # The thread is stuck in the handler: leave it, and use a fresh one next time.
            runner.close()
            self._runner = None
            self.abandoned = [t for t in self.abandoned if t.is_alive()]
            self.abandoned.append(runner._thread)
            raise HandlerTimeout(f"the handler did not return within {self.handler_timeout}")

    def _run_one(self, action: ClaimedAction) -> tuple[ActionState, str | None, datetime | None]:
        attempt = action.attempts
        try:
            event = GameEventNotification.model_validate(loads_wire(action.body))
            self._call_handler(event)
        except Exception as exc:
            if self.on_failure is not None:
                self.on_failure()
            # The handler's text may quote anything (a database URL with its password):
            # scrubbed before it is logged or stored.
            error = scrub(f"{type(exc).__name__}: {exc}")
            fields = {"actionId": action.action_id, "attempt": attempt}
            if attempt >= self.max_attempts:
                logger.error(
                    "handler gave up after %d attempts: %s",
                    attempt,
                    error,
                    extra={"event": "action_dead_lettered", **fields},
                )
                return "dead", error, None
            logger.warning(
                "handler run %d failed: %s",
                attempt,
                error,
                extra={"event": "handler_failed", **fields},
            )
            return "pending", error, self.clock() + self.delay_after(attempt)
        return "done", None, None
