"""The store watch: one supervised loop per worker that keeps what the health checks and
the metrics say about the store, so that neither ever reaches the store itself.

Every few seconds (``QUEUE_COUNTS_EVERY``) it counts the processing queue's pending and
dead actions over their partial indexes (:meth:`~gptools.webhooks._store.StoreConnection.
queue_depth`: the cost follows those actions, never the processed ones or the log), and
adds up the store's replays (:func:`~gptools.webhooks._replay.replay_totals`: a row per
replay), and hands both on (the metrics: a replay runs as a command of its own, so the
store is where the receiver learns of it); while the store fails it tries again every
``PROBE_EVERY``. Only the queue's count is part of the store's health: the replays'
totals are metrics, and a failure to read them is logged, not a reason to be not ready.
Its connection's state is half of the worker's store health (the
writer's is the other half), so an idle worker notices within seconds that its store went
away, and that it came back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from gptools.webhooks._constants import PROBE_EVERY, QUEUE_COUNTS_EVERY
from gptools.webhooks._records import QueueDepth, StoreError
from gptools.webhooks._replay import ReplayTotals, replay_totals
from gptools.webhooks._store import Store, StoreConnection
from gptools.webhooks._supervision import LoopHealth, StoreLink

logger = logging.getLogger("gptools.webhooks")


class StoreWatch:
    """Counts the queue and the replays every ``every`` (every ``retry_every`` while the
    store fails); ``depth`` and ``replays`` are the last counts (None before the first),
    ``on_depth`` and ``on_replays`` get each one."""

    def __init__(
        self,
        store: Store,
        *,
        every: timedelta = QUEUE_COUNTS_EVERY,
        retry_every: timedelta = PROBE_EVERY,
    ) -> None:
        self.store = store
        self.every = every.total_seconds()
        self.retry_every = retry_every.total_seconds()
        self.link = StoreLink(store)
        self.health = LoopHealth("store_watch")
        self.depth: QueueDepth | None = None
        #: Called with each new count, from the watch's thread (the metrics).
        self.on_depth: Callable[[QueueDepth], None] | None = None
        #: The replays' totals at the last count (None before the first).
        self.replays: ReplayTotals | None = None
        #: Called with each new count of the replays, from the watch's thread (the metrics).
        self.on_replays: Callable[[ReplayTotals], None] | None = None
        self._replays_failing = False

    @property
    def store_ok(self) -> bool:
        """Whether the last count reached the store."""
        return self.link.reachable

    def start(self) -> None:
        """Count now, then every ``every``, in a background thread."""
        self.health.start(self._step)

    def stop(self) -> None:
        """Stop after the current count."""
        self.health.stop()
        self.link.close()

    def refresh(self) -> QueueDepth:
        """Count the queue, then the replays, now; :class:`StoreError` when the store
        cannot count the queue."""
        try:
            conn = self.link.get()
            depth = conn.queue_depth()
        except StoreError as exc:
            self.link.failed(exc)
            raise
        self.link.ok()
        if self.on_depth is not None:
            self.on_depth(depth)
        self.depth = depth
        self._count_replays(conn)
        return depth

    def _count_replays(self, conn: StoreConnection) -> None:
        """The replays' totals, handed on. A failure here (a role without SELECT on
        ``replays``, say) is one log line per streak and the last totals stay: it must
        not make the worker look unhealthy, as a failure to count the queue does (the
        queue's count just now reached the store; a connection lost since fails that
        count next time)."""
        try:
            replays = replay_totals(conn)
        except StoreError as exc:
            if not self._replays_failing:
                logger.warning(
                    "the store watch cannot count the replays (their metrics keep their "
                    "last values): %s",
                    exc,
                    extra={"event": "replay_count_failed"},
                )
            self._replays_failing = True
            return
        self._replays_failing = False
        if self.on_replays is not None:
            self.on_replays(replays)
        self.replays = replays

    def _step(self) -> bool:
        was_ok = self.link.reachable
        try:
            self.refresh()
        except StoreError as exc:
            if was_ok:
                logger.warning(
                    "the store watch cannot count the queue (trying again every %.1f s): %s",
                    self.retry_every,
                    exc,
                    extra={"event": "store_watch_failed"},
                )
            wait = self.retry_every
        else:
            wait = self.every
        return self.health.wait(wait)
