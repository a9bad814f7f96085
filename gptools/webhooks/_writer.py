"""The group-commit writer: requests hand it their log rows (and actions) and await the
commit; it writes every waiting item in one transaction, syncs once for several batches,
and only then answers. Its hand-over is the one place that decides the status a
handed-over row is logged with (the request's own answer, or 503 when the time-out came
before the write began), so every row holds the status actually sent.

So each 200 still follows a durable commit, but one commit (and one fsync) serves a whole
batch: that is where the throughput comes from.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from gptools.webhooks._constants import (
    DEFAULT_MAX_BATCH,
    DEFAULT_WAIT_LIMIT,
    PROBE_EVERY,
    RESOLVE_LIMIT,
    TIMED_OUT_STATUS,
)
from gptools.webhooks._records import (
    ActionState,
    CommitUncertain,
    LogEntry,
    NotDurable,
    SchemaVersionError,
    StoreError,
    WriteItem,
)
from gptools.webhooks._store import Store
from gptools.webhooks._supervision import LoopHealth, StoreLink

logger = logging.getLogger("gptools.webhooks")


#: A submitted write: the item and the future its request awaits.
_Pending = tuple[WriteItem, "asyncio.Future[bool]"]

_WAITING, _WRITING, _EXPIRED, _FAILED = 0, 1, 2, 3

#: The ``error`` of a row whose request timed out before its write began (it starts with
#: the 503's outcome, as every row's error starts with its answer's).
_TIMED_OUT = "unavailable: the durable write did not begin within the time-out"


class _Handover:
    """The writes one event-loop iteration hands the writer, and the one owner of their
    rows' status once handed over.

    Each row arrives with the status its request means to answer. :meth:`decide` settles,
    under ``lock``, which of two things happens first: the writer begins writing them
    (:meth:`begin`: from then on their answer is the write's outcome, even past the
    time-out, and the rows keep their status) or the time-out expires (:meth:`expire`:
    they are answered 503, and written to the log as 503, without their actions). Nothing
    else changes a handed-over row's status, so every log row holds the status sent.
    """

    __slots__ = ("lock", "pending", "state")

    def __init__(self) -> None:
        self.pending: list[_Pending] = []
        self.lock = threading.Lock()
        self.state = _WAITING

    def decide(self, outcome: int) -> bool:
        """Settle the race for these rows with ``outcome`` (``_WRITING``, ``_EXPIRED``, or
        ``_FAILED``: their batch failed before either); False when another came first. On
        expiry each row becomes the time-out's answer: ``TIMED_OUT_STATUS``, the latency
        so far, no action."""
        with self.lock:
            if self.state != _WAITING:
                return False
            self.state = outcome
            if outcome != _EXPIRED:
                return True
            now = time.perf_counter()
            for item, _ in self.pending:
                log = item.log
                item.accept = False
                if log.started is not None:
                    log.latency_ms = round((now - log.started) * 1000.0, 3)
                previous = f" (it was to be answered {log.status})" if log.status else ""
                log.error = _TIMED_OUT + previous
                log.status = TIMED_OUT_STATUS
        return True

    def begin(self) -> None:
        """The writer begins writing these rows (unless the time-out came first)."""
        self.decide(_WRITING)

    def expire(self) -> None:
        """The time-out: answer 503, unless the writer has begun writing."""
        if not self.decide(_EXPIRED):
            return
        error = TimeoutError("the durable write did not finish in time")
        for _, fut in self.pending:
            if not fut.done():
                fut.set_exception(error)


def _begin(handovers: list[_Handover]) -> Callable[[], None]:
    def begin() -> None:
        for h in handovers:
            h.begin()

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
        probe_every: timedelta = PROBE_EVERY,
        resolve_limit: timedelta = RESOLVE_LIMIT,
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
        #: Called (from the writer's thread) with the rows of requests already answered 503
        #: by the time-out whose batch then failed: nobody else holds them any more (the
        #: outage spool keeps them until the store is back).
        self.on_unwritten: Callable[[list[LogEntry]], None] | None = None
        self._queue: queue.SimpleQueue[list[_Handover] | None] = queue.SimpleQueue()
        self._gathering: dict[asyncio.AbstractEventLoop, _Handover] = {}
        self._committed: queue.SimpleQueue[
            tuple[list[_Handover], list[bool] | StoreError] | None
        ] = queue.SimpleQueue()
        self.link = StoreLink(store)
        self.writer_health = LoopHealth("writer")
        self.sync_health = LoopHealth("sync")
        self._started = False
        # True while both threads run: a plain attribute, because every request reads it
        # and Thread.is_alive() costs more than the rest of the check.
        self._up = False

    def start(self) -> None:
        """Open the store and start the threads. A store that is unreachable, or at a
        schema version this gptools does not run on, does not stop the start: a worker
        restarted during a database outage must come up, answer 503 and reconnect, not
        fail (uvicorn would then stop every worker), and one that found the store at
        another version says so once and is not ready until the store is migrated.
        ``gptools webhooks serve`` checks the store once before it starts."""
        try:
            self.link.get()
        except SchemaVersionError:
            pass  # the link said so
        except StoreError as exc:
            logger.error(
                "starting without the store (it will be retried): %s",
                exc,
                extra={"event": "store_unreachable"},
            )
        self._up = True
        self._started = True
        self.sync_health.start(self._sync_step)
        self.writer_health.start(self._write_step)

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
        # Each thread writes (or answers) what it was handed before it stops.
        self.writer_health.stop(wake=functools.partial(self._queue.put, None), drain=True)
        self.sync_health.stop(wake=functools.partial(self._committed.put, None), drain=True)
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
            self._unwritten(batch)
            self._committed.put((batch, StoreError(f"internal error: {exc}")))
            raise
        if isinstance(outcome, StoreError) and not isinstance(outcome, CommitUncertain):
            self._unwritten(batch)
        self._committed.put((batch, outcome))
        if stopping:
            self._committed.put(None)
            return False
        return True

    def _unwritten(self, batch: list[_Handover]) -> None:
        """A batch known not to be written: each hand-over that neither began nor expired
        is settled as failed (its requests answer 503 and keep their rows themselves);
        the rows of those the time-out answered 503 already go to ``on_unwritten``."""
        lost: list[LogEntry] = []
        for h in batch:
            if not h.decide(_FAILED) and h.state == _EXPIRED:
                lost.extend(item.log for item, _ in h.pending)
        if lost and self.on_unwritten is not None:
            self.on_unwritten(lost)

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
                logger.warning(
                    "the store connection broke (%s); reconnecting",
                    exc,
                    extra={"event": "store_reconnecting"},
                )
                outcome = self.link.get(now_or_never=True).write_batch(
                    items, state=self.state, durable=False, on_begin=_begin(batch)
                )
        except CommitUncertain as exc:
            self.link.failed(exc)
            return self._resolve(exc)
        except StoreError as exc:
            logger.error(
                "store write failed for %d deliveries: %s",
                len(items),
                exc,
                extra={"event": "store_write_failed"},
            )
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
                    "answering 200 as its log rows say",
                    extra={"event": "commit_resolved"},
                )
                self.batches += 1
                result: list[bool] = uncertain.result
                return result
            if status == "aborted":
                return StoreError(str(uncertain))  # known not written
            if status != "in progress":
                return uncertain
            time.sleep(0.01)
        logger.error(
            "the outcome of a COMMIT that lost its connection is still unknown after "
            "%.0f s: answered 503, though its log rows may say otherwise",
            self._resolve_seconds,
            extra={"event": "commit_unresolved"},
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
                logger.error("store sync failed: %s", exc, extra={"event": "store_sync_failed"})
                # Those rows are committed: NotDurable tells their requests not to log
                # them again (a batch that failed keeps its own error).
                error = NotDurable(
                    str(exc) if isinstance(exc, StoreError) else f"sync failed: {exc}"
                )
                done = [
                    (batch, outcome if isinstance(outcome, StoreError) else error)
                    for batch, outcome in done
                ]
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
            # its traceback with every waiter. Its class says whether the rows may be in
            # the store (the outage spool keeps only those known not to be).
            error = _fresh(result)
            error.__cause__ = result.__cause__
            fut.set_exception(error)
        else:
            fut.set_result(result)


def _fresh(error: StoreError) -> StoreError:
    """A new exception of ``error``'s kind, message and attributes (a
    :class:`~gptools.webhooks._records.CommitUncertain`'s ``xid``, a schema version
    error's versions), with no traceback yet; made without calling ``__init__``, whose
    signature differs from class to class."""
    fresh = type(error).__new__(type(error))
    fresh.args = error.args
    fresh.__dict__.update(vars(error))
    return fresh
