"""Maintenance: the supervised loop that purges, every so often, the dedupe keys and log
rows past their retention (the purges themselves: ``_retention.py``), once per round for
the whole store, whatever the number of workers sharing it."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from gptools.webhooks._constants import DEFAULT_PURGE_EVERY, MAINTENANCE_LINK_MAX_BACKOFF
from gptools.webhooks._records import Clock, SchemaVersionError, StoreError, utc_now
from gptools.webhooks._store import Store
from gptools.webhooks._supervision import LoopHealth, StoreLink

logger = logging.getLogger("gptools.webhooks")


#: The store-wide lease of the purge rounds.
PURGE_LEASE = "purge"


class Maintenance:
    """Purges, every ``every``: dedupe keys past the store's retention, then log rows
    past the log retention (both in small steps: see
    :meth:`~gptools.webhooks._store.StoreConnection.purge_log`). Supervised; ``clock``
    gives the time the retentions are measured against.

    Every worker of every receiver sharing a store runs one, and one round is done once
    for the store: a round starts by taking the store's purge lease for ``every``; while
    another worker holds it, the round does nothing (``rounds_skipped`` counts them). The
    holder renews it at each of its rounds; when it stops, the lease runs out and the
    next worker whose round comes takes it over.
    """

    def __init__(
        self, store: Store, *, every: timedelta = DEFAULT_PURGE_EVERY, clock: Clock = utc_now
    ) -> None:
        self.store = store
        self.every = every
        self.clock = clock
        self.link = StoreLink(store, max_backoff=MAINTENANCE_LINK_MAX_BACKOFF)
        self.health = LoopHealth("maintenance")
        #: Who this worker is, as the holder of the store's purge lease.
        self.holder = uuid.uuid4().hex
        #: Rounds left to another worker, which held the purge lease.
        self.rounds_skipped = 0

    def start(self) -> None:
        """Purge now, then every ``every``, in a background thread."""
        self.health.start(self._step)

    def stop(self) -> None:
        """Stop after the current step."""
        self.health.stop()
        self.link.close()

    def run_once(self) -> tuple[int, int]:
        """One round of purges; returns (dedupe keys, log rows) removed, (0, 0) when
        another worker holds this round (see the class)."""
        conn = self.link.get()
        try:
            now = self.clock()
            if not conn.take_lease(PURGE_LEASE, self.holder, now, self.every):
                self.link.ok()
                self.rounds_skipped += 1
                logger.debug(
                    "purge round left to the worker that holds the lease",
                    extra={"event": "purge_round_skipped"},
                )
                return 0, 0
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
        except SchemaVersionError:
            pass  # said once by the link; the round is tried again at the next one
        except StoreError as exc:
            # The store's trouble, not the loop's: try again at the next round.
            logger.warning("purge failed: %s", exc, extra={"event": "purge_failed"})
        return self.health.wait(self.every.total_seconds())
