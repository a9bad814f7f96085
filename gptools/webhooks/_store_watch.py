"""The store watch: one supervised loop per worker that keeps what the health checks and
the metrics say about the store, so that neither ever reaches the store itself.

Every few seconds (``QUEUE_COUNTS_EVERY``) it counts the processing queue's pending and
dead actions over their partial indexes (:meth:`~gptools.webhooks._store.StoreConnection.
queue_depth`: the cost follows those actions, never the processed ones or the log) and
hands the counts on (the metrics); while the store fails it tries again every
``PROBE_EVERY``. Its connection's state is half of the worker's store health (the
writer's is the other half), so an idle worker notices within seconds that its store went
away, and that it came back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from gptools.webhooks._constants import PROBE_EVERY, QUEUE_COUNTS_EVERY
from gptools.webhooks._records import QueueDepth, StoreError
from gptools.webhooks._store import Store
from gptools.webhooks._supervision import LoopHealth, StoreLink

logger = logging.getLogger("gptools.webhooks")


class StoreWatch:
    """Counts the queue every ``every`` (every ``retry_every`` while the store fails);
    ``depth`` is the last count (None before the first), ``on_depth`` gets each one."""

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
        """Count the queue now; :class:`StoreError` when the store cannot answer."""
        try:
            depth = self.link.get().queue_depth()
        except StoreError as exc:
            self.link.failed(exc)
            raise
        self.link.ok()
        if self.on_depth is not None:
            self.on_depth(depth)
        self.depth = depth
        return depth

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
