"""Writing and processing off the request path: the group-commit writer and the
durable processing queue.

:class:`GroupCommitWriter` owns one store connection in a thread. Requests hand it a
:class:`~gptools.webhooks._store.WriteItem` and await a future; the thread takes every
item waiting, writes them in one transaction, commits, and only then resolves the futures,
the whole batch with one wake-up of the event loop. So each 200 still follows a durable
commit, but one commit (and one fsync) serves a whole batch: that is where the throughput
comes from.

:class:`ProcessingQueue` runs the user's handler for each stored action after the
acknowledgement, from the ``webhook_actions`` table: at least once per action (a claim is a
lease; a worker that dies leaves it to expire and the action is claimed again), retried
with exponential backoff on failure, and ``dead`` after ``max_attempts``. A restart resumes
whatever is pending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from gptools._backoff import backoff_delay
from gptools.models import GameEventNotification, loads_wire
from gptools.webhooks._store import (
    ActionState,
    Store,
    StoreConnection,
    StoreError,
    WriteItem,
)

logger = logging.getLogger("gptools.webhooks")

#: The user's processing step; any exception it raises counts as a failed attempt.
Handler = Callable[[GameEventNotification], object]
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time, aware UTC (the default clock)."""
    return datetime.now(UTC)


#: Items one transaction takes at most, and how long a write waits for its commit (the
#: provider expects the answer within a second); the receiver's defaults too.
DEFAULT_MAX_BATCH = 512
DEFAULT_WAIT_LIMIT = timedelta(milliseconds=800)

#: A submitted write: the item and the future its request awaits.
_Pending = tuple[WriteItem, "asyncio.Future[bool]"]


class GroupCommitWriter:
    """Two threads that write submitted items in batches, one transaction per batch.

    Requests ``await`` :meth:`write` on their event loop. The items of all requests that
    reach :meth:`write` in one loop iteration are handed to the writer thread together,
    with one wake-up and one time-out timer for the lot. The writer thread waits for the
    first hand-over, takes every one queued by then (at most about ``max_batch`` items),
    writes them in one transaction and commits, without waiting for the disk. The sync
    thread takes every batch committed by then, makes them durable with ONE sync
    (:meth:`~gptools.webhooks._store.Store.make_durable`), and only then settles them,
    with one ``call_soon_threadsafe`` per event loop. So the next batch is written while
    the disk syncs the previous ones, and the busier the receiver, the larger the batches
    and the more batches one sync serves. ``state`` is where new actions start
    (``pending`` when a :class:`ProcessingQueue` will handle them, ``done`` when nothing
    will); ``wait_limit`` is how long :meth:`write` waits for the commit before giving up;
    ``purge_every`` is how often (while running) dedupe keys older than the store's
    retention are purged, measured on ``clock``.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        clock: Clock = utc_now,
        purge_every: timedelta = timedelta(hours=1),
        state: ActionState = "pending",
        wait_limit: timedelta = DEFAULT_WAIT_LIMIT,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.store = store
        self.state = state
        self.max_batch = max_batch
        self.clock = clock
        self.purge_every = purge_every
        self._wait_seconds = wait_limit.total_seconds()
        #: How many batches were committed (for tests and diagnostics).
        self.batches = 0
        self._queue: queue.SimpleQueue[list[_Pending] | None] = queue.SimpleQueue()
        self._gathering: dict[asyncio.AbstractEventLoop, list[_Pending]] = {}
        self._committed: queue.SimpleQueue[
            tuple[list[_Pending], list[bool] | StoreError] | None
        ] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._syncer: threading.Thread | None = None
        self._conn: StoreConnection | None = None
        # True while both threads run: a plain attribute, because every request reads it
        # and Thread.is_alive() costs more than the rest of the check.
        self._up = False

    def start(self) -> None:
        """Open the store (creating its tables) and start the threads."""
        self._conn = self.store.connect()
        self._up = True
        self._syncer = threading.Thread(target=self._until_down, args=(self._sync_run,),
                                        name="webhook-sync", daemon=True)
        self._syncer.start()
        self._thread = threading.Thread(target=self._until_down, args=(self._run,),
                                        name="webhook-writer", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        """Whether the writer threads are running."""
        return self._up

    def _until_down(self, run: Callable[[], None]) -> None:
        try:
            run()
        finally:
            # Either thread ending (stop, or a bug) stops new writes being accepted.
            self._up = False

    async def write(self, item: WriteItem) -> bool:
        """Write ``item`` in the next group commit; return whether its action was new.

        Returns only after the commit. Raises :class:`StoreError` when the batch could
        not be written, or :class:`TimeoutError` after ``wait_limit`` without a commit
        (the item may still be committed later; the caller must not claim it was).
        """
        if not self.alive:
            raise StoreError("the store writer is not running")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        gathering = self._gathering.get(loop)
        if gathering is None:
            # The first write of this loop iteration: the items of every request that
            # reaches this point in the same iteration travel to the writer together.
            gathering = self._gathering[loop] = []
            loop.call_soon(self._hand_over, loop)
        gathering.append((item, fut))
        return await fut

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """Give the writer what this loop gathered: one wake-up of the writer thread and
        one time-out timer per loop iteration, not per request."""
        gathered = self._gathering.pop(loop)
        self._queue.put(gathered)
        loop.call_later(self._wait_seconds, _expire, gathered)

    def stop(self) -> None:
        """Write everything already submitted, then stop the threads and close the store."""
        self._up = False
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._syncer is not None:
            self._committed.put(None)
            self._syncer.join()
            self._syncer = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self) -> None:
        assert self._conn is not None
        conn = self._conn
        last_purge = self.clock()
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            batch = first
            # Requests gathered on the event loop since the last batch arrive as lists;
            # take every list waiting (max_batch is checked between lists, not inside).
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stopping = True
                    break
                batch.extend(nxt)
            outcome: list[bool] | StoreError
            try:
                outcome = conn.write_batch([item for item, _ in batch], state=self.state,
                                           durable=False)
            except StoreError as exc:
                logger.error("store write failed for %d deliveries: %s", len(batch), exc)
                outcome = exc
            else:
                self.batches += 1
            self._committed.put((batch, outcome))
            now = self.clock()
            if now - last_purge >= self.purge_every:
                last_purge = now
                try:
                    purged = conn.purge(now)
                except StoreError as exc:
                    logger.warning("purging old dedupe keys failed: %s", exc)
                else:
                    if purged:
                        logger.info("purged %d dedupe keys older than %s", purged,
                                    self.store.retention)


    def _sync_run(self) -> None:
        stopping = False
        while not stopping:
            first = self._committed.get()
            if first is None:
                break
            done = [first]
            while True:
                try:
                    nxt = self._committed.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stopping = True
                    break
                done.append(nxt)
            if any(not isinstance(outcome, StoreError) for _, outcome in done):
                try:
                    self.store.make_durable()
                except StoreError as exc:
                    # Committed but maybe not on disk: not acknowledged, so it is retried.
                    logger.error("store sync failed: %s", exc)
                    done = [(batch, exc) for batch, _ in done]
            for batch, outcome in done:
                _settle_threadsafe(batch, outcome)


def _expire(gathered: list[_Pending]) -> None:
    for _, fut in gathered:
        if not fut.done():
            fut.set_exception(TimeoutError("the durable write did not finish in time"))


def _settle_threadsafe(batch: list[_Pending], outcome: list[bool] | StoreError) -> None:
    """Hand a committed (or failed) batch back to the event loops its requests wait on:
    one wake-up per loop, however large the batch."""
    results: list[bool | StoreError] = (
        [outcome] * len(batch) if isinstance(outcome, StoreError) else list(outcome)
    )
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[bool], bool | StoreError]]]
    by_loop = {}
    for (_, fut), result in zip(batch, results, strict=True):
        by_loop.setdefault(fut.get_loop(), []).append((fut, result))
    for loop, settled in by_loop.items():
        # A closed loop has no request left waiting for these answers.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, settled)


def _settle(settled: list[tuple[asyncio.Future[bool], bool | StoreError]]) -> None:
    for fut, result in settled:
        if fut.done():  # timed out or cancelled: its request already had an answer
            continue
        if isinstance(result, StoreError):
            # A fresh exception per request: re-raising one shared instance would grow
            # its traceback with every waiter.
            error = StoreError(str(result))
            error.__cause__ = result.__cause__
            fut.set_exception(error)
        else:
            fut.set_result(result)


class ProcessingQueue:
    """Runs ``handler`` for every stored action, at least once, off the request path.

    A failed run is retried after ``first_delay`` × ``factor`` ** (attempt − 1), capped at
    ``max_delay``; after ``max_attempts`` failed runs the action is ``dead`` (kept with its
    last error, never retried by itself). ``lease`` is how long a claim is held: a worker
    that dies mid-run leaves the action to be claimed again once it expires, so the
    handler must be idempotent (it is told the attempt number).
    """

    def __init__(
        self,
        store: Store,
        handler: Handler,
        *,
        max_attempts: int = 5,
        first_delay: timedelta = timedelta(seconds=1),
        factor: float = 2.0,
        max_delay: timedelta = timedelta(minutes=10),
        lease: timedelta = timedelta(minutes=5),
        batch: int = 32,
        idle_wait: timedelta = timedelta(milliseconds=200),
        clock: Clock = utc_now,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.store = store
        self.handler = handler
        self.max_attempts = max_attempts
        self.first_delay = first_delay
        self.factor = factor
        self.max_delay = max_delay
        self.lease = lease
        self.batch = batch
        self.idle_wait = idle_wait
        self.clock = clock
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def delay_after(self, attempt: int) -> timedelta:
        """The wait before the run that follows failed run number ``attempt`` (1-based)."""
        return timedelta(seconds=backoff_delay(attempt - 1, base=self.first_delay.total_seconds(),
                                               cap=self.max_delay.total_seconds(),
                                               factor=self.factor))

    def start(self) -> None:
        """Run the queue in a background thread until :meth:`stop`."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="webhook-queue", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Tell the background thread new work was committed (saves a poll interval)."""
        self._wake.set()

    def stop(self) -> None:
        """Finish the run in progress and stop the background thread."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        conn = self.store.connect()
        try:
            while not self._stop.is_set():
                try:
                    ran = self.run_due(conn)
                except StoreError as exc:
                    logger.warning("processing queue: %s", exc)
                    ran = 0
                if not ran:
                    self._wake.wait(self.idle_wait.total_seconds())
                    self._wake.clear()
        finally:
            conn.close()

    def run_due(self, conn: StoreConnection) -> int:
        """Claim and run one batch of due actions; return how many ran."""
        claimed = conn.claim(self.clock(), limit=self.batch, lease=self.lease)
        for action in claimed:
            if self._stop.is_set():
                # Unclaimed work keeps its lease and is picked up after it expires.
                break
            state, error, retry_at = self._run_one(action.body, action.attempts)
            conn.finish(action.action_id, state, error=error, retry_at=retry_at)
        return len(claimed)

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

    def _run_one(
        self, body: str, attempt: int
    ) -> tuple[ActionState, str | None, datetime | None]:
        try:
            event = GameEventNotification.model_validate(loads_wire(body))
            self.handler(event)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            if attempt >= self.max_attempts:
                logger.error("handler gave up after %d attempts: %s", attempt, error)
                return "dead", error, None
            return "pending", error, self.clock() + self.delay_after(attempt)
        return "done", None, None
