"""Maintenance: the supervised loop that purges, every so often, the dedupe keys and log
rows past their retention (the purges themselves: ``_retention.py``)."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from gptools.webhooks._constants import DEFAULT_PURGE_EVERY, MAINTENANCE_LINK_MAX_BACKOFF
from gptools.webhooks._records import Clock, StoreError, utc_now
from gptools.webhooks._store import Store
from gptools.webhooks._supervision import LoopHealth, StoreLink

logger = logging.getLogger("gptools.webhooks")


class Maintenance:
    """Purges, every ``every``: dedupe keys past the store's retention, then log rows
    past the log retention (both in small steps: see
    :meth:`~gptools.webhooks._store.StoreConnection.purge_log`). Supervised; ``clock``
    gives the time the retentions are measured against."""

    def __init__(
        self, store: Store, *, every: timedelta = DEFAULT_PURGE_EVERY, clock: Clock = utc_now
    ) -> None:
        self.store = store
        self.every = every
        self.clock = clock
        self.link = StoreLink(store, max_backoff=MAINTENANCE_LINK_MAX_BACKOFF)
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
                extra={"event": "purge_done"},
            )
        return keys, log.rows

    def _step(self) -> bool:
        try:
            self.run_once()
        except StoreError as exc:
            # The store's trouble, not the loop's: try again at the next round.
            logger.warning("purge failed: %s", exc, extra={"event": "purge_failed"})
        return not self._stop.wait(self.every.total_seconds())
