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

:class:`Maintenance` purges old dedupe keys and log rows, in small steps.

Every background loop here is supervised (:class:`LoopHealth`): an error is logged, the
loop backs off and goes on, and a loop that keeps failing (or whose thread ended) makes the
receiver's health check fail. Each loop holds its connection through a :class:`StoreLink`,
which replaces a connection that broke (a PostgreSQL restart) with backoff.
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
from typing import Any

from gptools._backoff import backoff_delay
from gptools.errors import GptoolsError
from gptools.models import GameEventNotification, loads_wire
from gptools.webhooks._store import (
    ActionState,
    ClaimedAction,
    CommitUncertain,
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


class StoreLink:
    """One thread's connection to the store, replaced when it breaks.

    :meth:`get` returns the connection, opening one when there is none. After a failed
    open, or an operation that left the connection broken (:meth:`failed`), the next
    open waits for a backoff that doubles from ``first_backoff`` up to ``max_backoff``;
    until then :meth:`get` raises :class:`StoreError` at once, so callers answer 503
    without waiting. ``reachable`` and ``error`` describe the store as this link last
    saw it.
    """

    def __init__(
        self,
        store: Store,
        *,
        first_backoff: timedelta = timedelta(milliseconds=50),
        max_backoff: timedelta = timedelta(seconds=1),
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
            self._down(str(exc))
            raise
        logger.info("connected to the store %s", self.store.url)
        self._failed_opens = 0
        return self.conn

    def ok(self) -> None:
        """An operation succeeded: the store is reachable."""
        if not self.reachable:
            logger.warning("the store %s answers again", self.store.url)
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
        self, name: str, *, give_up_after: int = 5, max_backoff: timedelta = timedelta(seconds=5)
    ) -> None:
        self.name = name
        self.give_up_after = give_up_after
        self.max_backoff = max_backoff.total_seconds()
        self.failures = 0
        self.last_error: str | None = None
        self.thread: threading.Thread | None = None
        self.stopping = False

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
            "background loop %s failed (%d in a row); going on", self.name, self.failures
        )
        return backoff_delay(self.failures - 1, base=0.05, cap=self.max_backoff)

    def clean(self) -> None:
        """Record a clean run."""
        if self.failures:
            logger.warning("background loop %s runs cleanly again", self.name)
        self.failures = 0

    def start(self, step: Callable[[], bool], stop: threading.Event) -> None:
        """Run ``step`` in a daemon thread until it returns False or ``stop`` is set,
        backing off after every exception."""

        def supervise() -> None:
            while not stop.is_set():
                try:
                    if not step():
                        return
                except Exception as exc:
                    stop.wait(self.crashed(exc))
                else:
                    if self.failures:
                        self.clean()

        self.stopping = False
        self.thread = threading.Thread(target=supervise, name=f"webhook-{self.name}", daemon=True)
        self.thread.start()


#: A submitted write: the item and the future its request awaits.
_Pending = tuple[WriteItem, "asyncio.Future[bool]"]

_WAITING, _WRITING, _EXPIRED = 0, 1, 2

#: What a request that timed out before its write began is logged with.
TIMED_OUT_STATUS = 503
_TIMED_OUT = "store_unavailable: the durable write did not begin within the time-out"


class _Handover:
    """The writes one event-loop iteration hands the writer, and who answers them.

    ``state`` decides, under ``lock``, which of two things happens first: the writer
    begins writing them (from then on, their answer is the write's outcome, even past the
    time-out) or the time-out expires (they are answered 503, and written to the log as
    503, without their actions). So every log row holds the status actually sent.
    """

    __slots__ = ("lock", "pending", "state")

    def __init__(self) -> None:
        self.pending: list[_Pending] = []
        self.lock = threading.Lock()
        self.state = _WAITING

    def expire(self) -> None:
        """The time-out: answer 503, unless the writer has begun writing."""
        with self.lock:
            if self.state != _WAITING:
                return
            self.state = _EXPIRED
            now = time.perf_counter()
            for item, _ in self.pending:
                log = item.log
                item.accept = False
                if log.started is not None:
                    log.latency_ms = round((now - log.started) * 1000.0, 3)
                previous = f" (it was to be answered {log.status})" if log.status else ""
                log.error = _TIMED_OUT + previous
                log.status = TIMED_OUT_STATUS
        error = TimeoutError("the durable write did not finish in time")
        for _, fut in self.pending:
            if not fut.done():
                fut.set_exception(error)


def _begin(handovers: list[_Handover]) -> Callable[[], None]:
    def begin() -> None:
        for h in handovers:
            with h.lock:
                if h.state == _WAITING:
                    h.state = _WRITING

    return begin


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
    will); ``wait_limit`` is how long a write may wait for its transaction to begin:
    past it the request is answered 503 and logged so (a write already begun is answered
    by its outcome). When the store is unreachable, the writer reconnects with backoff
    (:class:`StoreLink`) and fails batches at once meanwhile; when idle and the store is
    down, it tries again every ``probe_every``. When a PostgreSQL connection breaks during
    COMMIT, the writer asks a new connection whether that transaction committed before it
    answers (for up to ``resolve_limit``), so that the answers match the log.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        state: ActionState = "pending",
        wait_limit: timedelta = DEFAULT_WAIT_LIMIT,
        probe_every: timedelta = timedelta(milliseconds=500),
        resolve_limit: timedelta = timedelta(seconds=10),
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.store = store
        self.state = state
        self.max_batch = max_batch
        self._wait_seconds = wait_limit.total_seconds()
        self._probe_seconds = probe_every.total_seconds()
        self._resolve_seconds = resolve_limit.total_seconds()
        #: How many batches were committed (for tests and diagnostics).
        self.batches = 0
        #: Called with each committed batch's write-and-commit seconds (the metrics).
        self.on_commit: Callable[[float], None] | None = None
        self._queue: queue.SimpleQueue[list[_Handover] | None] = queue.SimpleQueue()
        self._gathering: dict[asyncio.AbstractEventLoop, _Handover] = {}
        self._committed: queue.SimpleQueue[
            tuple[list[_Handover], list[bool] | StoreError] | None
        ] = queue.SimpleQueue()
        self.link = StoreLink(store)
        self.writer_health = LoopHealth("writer")
        self.sync_health = LoopHealth("sync")
        self._stop_writer = threading.Event()
        self._stop_sync = threading.Event()
        self._started = False
        # True while both threads run: a plain attribute, because every request reads it
        # and Thread.is_alive() costs more than the rest of the check.
        self._up = False

    def start(self) -> None:
        """Open the store (creating its tables) and start the threads. A store that is
        unreachable does not stop the start: a worker restarted during a database outage
        must come up, answer 503 and reconnect, not fail (uvicorn would then stop every
        worker). ``gptools webhooks serve`` checks the store once before it starts."""
        try:
            self.link.get()
        except StoreError as exc:
            logger.error("starting without the store (it will be retried): %s", exc)
        self._up = True
        self._started = True
        self._stop_writer.clear()
        self._stop_sync.clear()
        self.sync_health.start(self._sync_step, self._stop_sync)
        self.writer_health.start(self._write_step, self._stop_writer)

    @property
    def alive(self) -> bool:
        """Whether the writer accepts writes (started and not stopped)."""
        return self._up

    @property
    def store_ok(self) -> bool:
        """Whether the last write (or probe) reached the store."""
        return self.link.reachable

    async def write(self, item: WriteItem) -> bool:
        """Write ``item`` in the next group commit; return whether its action was new.

        Returns only after the commit. Raises :class:`StoreError` when the batch could
        not be written, or :class:`TimeoutError` when its transaction did not begin
        within ``wait_limit`` (the item is then logged as answered 503, without its
        action).
        """
        if not self._up:
            raise StoreError("the store writer is not running")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        gathering = self._gathering.get(loop)
        if gathering is None:
            # The first write of this loop iteration: the items of every request that
            # reaches this point in the same iteration travel to the writer together.
            gathering = self._gathering[loop] = _Handover()
            loop.call_soon(self._hand_over, loop)
        gathering.pending.append((item, fut))
        return await fut

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """Give the writer what this loop gathered: one wake-up of the writer thread and
        one time-out timer per loop iteration, not per request."""
        gathered = self._gathering.pop(loop)
        self._queue.put([gathered])
        loop.call_later(self._wait_seconds, gathered.expire)

    def stop(self) -> None:
        """Write everything already submitted, then stop the threads and close the store."""
        self._up = False
        if not self._started:
            return
        self._started = False
        for health, stop, inbox in (
            (self.writer_health, self._stop_writer, self._queue),
            (self.sync_health, self._stop_sync, self._committed),
        ):
            health.stopping = True
            inbox.put(None)
            if health.thread is not None:
                health.thread.join()
            stop.set()
        self.link.close()

    def _write_step(self) -> bool:
        """Take the waiting hand-overs, write them as one batch; False on stop."""
        try:
            first = self._queue.get(timeout=None if self.link.reachable else self._probe_seconds)
        except queue.Empty:
            self._probe()
            return True
        if first is None:
            self._committed.put(None)
            return False
        batch = first
        size = sum(len(h.pending) for h in batch)
        stopping = False
        # Requests gathered on the event loop since the last batch arrive as lists;
        # take every list waiting (max_batch is checked between lists, not inside).
        while size < self.max_batch:
            try:
                nxt = self._queue.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                stopping = True
                break
            batch.extend(nxt)
            size += sum(len(h.pending) for h in nxt)
        outcome: list[bool] | StoreError
        try:
            outcome = self._write(batch)
        except Exception as exc:
            # A bug, not the store: the batch is refused (503) and the loop goes on.
            self._committed.put((batch, StoreError(f"internal error: {exc}")))
            raise
        self._committed.put((batch, outcome))
        if stopping:
            self._committed.put(None)
            return False
        return True

    def _write(self, batch: list[_Handover]) -> list[bool] | StoreError:
        began = time.perf_counter()
        items = [item for h in batch for item, _ in h.pending]
        had_connection = self.link.conn is not None
        try:
            try:
                outcome = self.link.get().write_batch(
                    items, state=self.state, durable=False, on_begin=_begin(batch)
                )
            except CommitUncertain:
                raise
            except StoreError as exc:
                self.link.failed(exc)
                if not (had_connection and self.link.conn is None):
                    raise
                # The connection had broken while idle (a server restart, an idle-session
                # kill): nothing was written, so the batch goes again on a new one at once.
                logger.warning("the store connection broke (%s); reconnecting", exc)
                outcome = self.link.get(now_or_never=True).write_batch(
                    items, state=self.state, durable=False, on_begin=_begin(batch)
                )
        except CommitUncertain as exc:
            self.link.failed(exc)
            return self._resolve(exc)
        except StoreError as exc:
            logger.error("store write failed for %d deliveries: %s", len(items), exc)
            self.link.failed(exc)
            return exc
        if not self.link.reachable:
            self.link.ok()
        self.batches += 1
        if self.on_commit is not None:
            self.on_commit(time.perf_counter() - began)
        return outcome

    def _resolve(self, uncertain: CommitUncertain) -> list[bool] | StoreError:
        """Find out, over a new connection, whether a batch whose COMMIT lost its
        connection was committed, so that its requests are answered what its log rows
        say: 200 when it was, 503 when not. Gives up (503) after ``resolve_limit``."""
        deadline = time.monotonic() + self._resolve_seconds
        while time.monotonic() < deadline:
            try:
                status = self.link.get().commit_status(uncertain.xid)
            except StoreError as exc:
                self.link.failed(exc)
                time.sleep(0.05)
                continue
            self.link.ok()
            if status == "committed":
                logger.warning(
                    "a batch whose COMMIT lost its connection was committed: "
                    "answering 200 as its log rows say"
                )
                self.batches += 1
                result: list[bool] = uncertain.result
                return result
            if status != "in progress":
                return uncertain
            time.sleep(0.01)
        logger.error(
            "the outcome of a COMMIT that lost its connection is still unknown after "
            "%.0f s: answered 503, though its log rows may say otherwise",
            self._resolve_seconds,
        )
        return uncertain

    def _probe(self) -> None:
        """While the store is down and nothing is written: see whether it is back."""
        try:
            self.link.get().probe_write()
        except StoreError as exc:
            self.link.failed(exc)
        else:
            self.link.ok()

    def _sync_step(self) -> bool:
        first = self._committed.get()
        if first is None:
            return False
        done = [first]
        stopping = False
        while True:
            try:
                nxt = self._committed.get_nowait()
            except queue.Empty:
                break
            if nxt is None:
                stopping = True
                break
            done.append(nxt)
        unexpected: Exception | None = None
        if any(not isinstance(outcome, StoreError) for _, outcome in done):
            try:
                self.store.make_durable()
            except Exception as exc:
                # Committed but maybe not on disk: not acknowledged, so it is retried.
                logger.error("store sync failed: %s", exc)
                error = exc if isinstance(exc, StoreError) else StoreError(f"sync failed: {exc}")
                done = [(batch, error) for batch, _ in done]
                if not isinstance(exc, StoreError):
                    unexpected = exc
        for batch, outcome in done:
            _settle_threadsafe(batch, outcome)
        if unexpected is not None and not stopping:
            raise unexpected  # after the answers: the supervisor logs it and goes on
        return not stopping


def _settle_threadsafe(batch: list[_Handover], outcome: list[bool] | StoreError) -> None:
    """Hand a committed (or failed) batch back to the event loops its requests wait on:
    one wake-up per loop, however large the batch."""
    futures = [fut for h in batch for _, fut in h.pending]
    results: list[bool | StoreError] = (
        [outcome] * len(futures) if isinstance(outcome, StoreError) else list(outcome)
    )
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[bool], bool | StoreError]]]
    by_loop = {}
    for fut, result in zip(futures, results, strict=True):
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


class Maintenance:
    """Purges, every ``every``: dedupe keys past the store's retention, then log rows
    past the log retention (both in small steps: see
    :meth:`~gptools.webhooks._store.StoreConnection.purge_log`). Supervised; ``clock``
    gives the time the retentions are measured against."""

    def __init__(
        self, store: Store, *, every: timedelta = timedelta(hours=1), clock: Clock = utc_now
    ) -> None:
        self.store = store
        self.every = every
        self.clock = clock
        self.link = StoreLink(store, max_backoff=timedelta(seconds=30))
        self.health = LoopHealth("maintenance")
        self._stop = threading.Event()

    def start(self) -> None:
        """Purge now, then every ``every``, in a background thread."""
        self._stop.clear()
        self.health.start(self._step, self._stop)

    def stop(self) -> None:
        """Stop after the current step."""
        self.health.stopping = True
        self._stop.set()
        if self.health.thread is not None:
            self.health.thread.join()
        self.link.close()

    def run_once(self) -> tuple[int, int]:
        """One purge; returns (dedupe keys, log rows) removed."""
        conn = self.link.get()
        try:
            now = self.clock()
            keys = conn.purge(now)
            log = conn.purge_log(now)
        except StoreError as exc:
            self.link.failed(exc)
            raise
        self.link.ok()
        if keys or log.rows:
            logger.info(
                "purged %d dedupe keys and %d log rows (%d steps, longest write-lock hold %.1f ms)",
                keys,
                log.rows,
                log.steps,
                log.longest_hold * 1000,
            )
        return keys, log.rows

    def _step(self) -> bool:
        try:
            self.run_once()
        except StoreError as exc:
            # The store's trouble, not the loop's: try again at the next round.
            logger.warning("purge failed: %s", exc)
        return not self._stop.wait(self.every.total_seconds())


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
        max_attempts: int = 5,
        first_delay: timedelta = timedelta(seconds=1),
        factor: float = 2.0,
        max_delay: timedelta = timedelta(minutes=10),
        lease: timedelta = timedelta(minutes=5),
        handler_timeout: timedelta = timedelta(minutes=1),
        max_hung: int = 8,
        batch: int = 32,
        idle_wait: timedelta = timedelta(milliseconds=200),
        clock: Clock = utc_now,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        if handler_timeout >= lease:
            raise ValueError(
                f"handler_timeout {handler_timeout} must be shorter than the "
                f"lease {lease}, or a slow run would be taken over while it runs"
            )
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
        self.link = StoreLink(store, max_backoff=timedelta(seconds=5))
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._runner: _HandlerThread | None = None
        self._store_failures = 0
        #: Handler threads abandoned after a time-out that have not returned yet.
        self.abandoned: list[threading.Thread] = []
        #: Called once for each handler run that raised or timed out (the metrics).
        self.on_failure: Callable[[], None] | None = None

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
        self._stop.clear()
        self.health.start(self._step, self._stop)

    def wake(self) -> None:
        """Tell the background thread new work was committed (saves a poll interval)."""
        self._wake.set()

    def stop(self) -> None:
        """Finish the run in progress and stop the background thread."""
        self.health.stopping = True
        self._stop.set()
        self._wake.set()
        if self.health.thread is not None:
            self.health.thread.join()
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
            if self._store_failures == 1 or self._store_failures % 20 == 0:
                logger.warning(
                    "processing queue (%d failures in a row): %s", self._store_failures, exc
                )
            # The store's trouble: back off (doubling up to 5 s), and go on.
            wait = backoff_delay(self._store_failures, base=self.idle_wait.total_seconds(), cap=5.0)
            self._stop.wait(wait)
            return True
        self.link.ok()
        self._store_failures = 0
        if not ran:
            self._wake.wait(self.idle_wait.total_seconds())
            self._wake.clear()
        return True

    def run_due(self, conn: StoreConnection) -> int:
        """Run up to ``batch`` due actions, one lease each; return how many ran."""
        ran = 0
        while ran < self.batch and not self._stop.is_set():
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
            if not conn.finish(
                action.action_id, state, owner=action.owner, error=error, retry_at=retry_at
            ):
                logger.warning(
                    "action %s: the lease ran out and another run took it over; "
                    "this run's outcome (%s) is not recorded",
                    action.action_id,
                    state,
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
            error = f"{type(exc).__name__}: {exc}"
            if attempt >= self.max_attempts:
                logger.error("handler gave up after %d attempts: %s", attempt, error)
                return "dead", error, None
            return "pending", error, self.clock() + self.delay_after(attempt)
        return "done", None, None
