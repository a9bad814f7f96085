"""A store outage, brought into the log: the supervised loop that replays the outage spool
(``_spool.py``) into ``delivery_log`` once the store is back, takes over the spools of
dead workers, and keeps the age of the oldest unacknowledged action.

The 503s of an outage: a request whose write failed (the store is down, or the writer
stopped) is answered 503 at once, and :meth:`OutageRecovery.refused` keeps its row in the
spool; a request that the time-out answered 503 first has its row written by the writer,
or, when that batch then failed, handed to the spool by the writer
(``GroupCommitWriter.on_unwritten``). A request whose batch was committed (the sync
failed after, or a COMMIT's outcome is unknown) is not spooled: its row may be in the
store, and a replay must never write one twice.

The metrics (``gptools_webhook_spool_rows``, ``..._spool_dropped_total``,
``..._spool_replayed_total``, ``..._oldest_unacknowledged_seconds``) are set by this loop,
never by a request, and never read the store at scrape time.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import datetime, timedelta

from gptools import spec
from gptools.webhooks._constants import (
    DEFAULT_SPOOL_MAX_BYTES,
    DEFAULT_SPOOL_MAX_ROWS,
    DEFAULT_SPOOL_REPLAY_EVERY,
    DEFAULT_UNACKNOWLEDGED_REFRESH,
    QUEUE_LINK_MAX_BACKOFF,
    SPOOL_REPLAY_CHUNK,
)
from gptools.webhooks._metric_families import Families, counter, gauge
from gptools.webhooks._records import (
    Clock,
    CommitUncertain,
    LogEntry,
    NotDurable,
    StoreError,
    utc_now,
)
from gptools.webhooks._spool import (
    Segment,
    Spool,
    spool_directory,
    store_identity,
    unavailable_row,
)
from gptools.webhooks._store import Store, StoreConnection
from gptools.webhooks._supervision import LoopHealth, StoreLink

logger = logging.getLogger("gptools.webhooks")

#: How long an action answered only 5xx stays counted: the provider retries for 7 days
#: after its first attempt, and the dedupe keys are kept a day longer
#: (``spec.WEBHOOK_DEDUPE_RETENTION``); past it the action can no longer come.
UNACKNOWLEDGED_KEPT = spec.WEBHOOK_DEDUPE_RETENTION


_INSTRUMENTS = Families(
    # Per worker; the highest of the live workers is what a scrape shows.
    spool_rows=gauge(
        "gptools_webhook_spool_rows",
        "Log rows of 503 answers waiting in the worker's outage spool for the store.",
        mode="livemax",
    ),
    dropped=counter(
        "gptools_webhook_spool_dropped_total",
        "Log rows of 503 answers not kept because the outage spool was full (or its"
        " disk failed): counted, not kept.",
    ),
    replayed=counter(
        "gptools_webhook_spool_replayed_total",
        "Spooled log rows written to delivery_log after the store returned.",
    ),
    # Every worker reads the same store: the highest is the truth.
    oldest_unacknowledged=gauge(
        "gptools_webhook_oldest_unacknowledged_seconds",
        "Age of the oldest action answered only 5xx so far (the provider retries it"
        " for 7 days after its first attempt); 0 when there is none.",
        mode="livemax",
    ),
)


class OutageRecovery:
    """A worker's outage spool (:class:`Spool`, in ``spool_dir``'s folder for ``store``,
    bounded by ``max_rows`` and ``max_bytes``) and its loop: every ``replay_every`` it
    takes over the spools of dead workers and, when the spool holds rows and the store
    answers, replays them in order (``SPOOL_REPLAY_CHUNK`` rows a transaction, each
    file's replay mark moved in the same transaction); every ``refresh_every`` (and after
    a replay) it refreshes the unacknowledged actions. Supervised (:class:`LoopHealth`),
    over its own :class:`StoreLink`; ``clock`` gives the time ages are measured at."""

    def __init__(
        self,
        store: Store,
        *,
        spool_dir: str | os.PathLike[str] | None = None,
        max_rows: int = DEFAULT_SPOOL_MAX_ROWS,
        max_bytes: int = DEFAULT_SPOOL_MAX_BYTES,
        clock: Clock = utc_now,
        replay_every: timedelta = DEFAULT_SPOOL_REPLAY_EVERY,
        refresh_every: timedelta = DEFAULT_UNACKNOWLEDGED_REFRESH,
    ) -> None:
        self.store = store
        self.spool = Spool(
            spool_directory(store, spool_dir),
            max_rows=max_rows,
            max_bytes=max_bytes,
            store_url=store_identity(store)[1],
        )
        self.clock = clock
        self.replay_every = replay_every
        self.refresh_every = refresh_every
        self.link = StoreLink(store, max_backoff=QUEUE_LINK_MAX_BACKOFF)
        self.health = LoopHealth("spool")
        self._instruments = _INSTRUMENTS.made()
        #: The oldest unacknowledged action in the store, as last read.
        self._stored_oldest: datetime | None = None
        self._refresh_due = 0.0
        self._replayed = 0
        self._failing = False

    # -- the hot path -------------------------------------------------------------------

    def refused(self, entry: LogEntry, error: BaseException, seconds: float) -> None:
        """A request was answered 503 ``seconds`` after it arrived because its write
        raised ``error``: keep its row in the spool unless someone else has it (the
        writer, after a time-out) or it may be in the store already."""
        if isinstance(error, (TimeoutError, NotDurable, CommitUncertain)):
            return
        self.spool.keep(unavailable_row(entry, seconds))

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Run the loop in a background thread."""
        self.health.start(self._step)

    def stop(self) -> None:
        """Stop the loop; replay once more when the store answered last, then close the
        spool (rows left stay on disk for the next worker)."""
        self.health.stop()
        try:
            if self.spool.waiting and self.link.reachable:
                self.run_once()
        except StoreError as exc:
            logger.warning(
                "outage spool left for the next start: %s", exc, extra={"event": "spool_left"}
            )
        finally:
            self.report()
            self.spool.close()
            self.link.close()

    def _step(self) -> bool:
        try:
            self.run_once()
        except StoreError as exc:
            # The store's trouble, not the loop's: said once, tried again next round.
            if not self._failing:
                logger.warning(
                    "the spool loop cannot reach the store (%d spooled rows wait): %s",
                    self.spool.waiting,
                    exc,
                    extra={"event": "spool_waiting"},
                )
            self._failing = True
        else:
            self._failing = False
        finally:
            self.report()
        return self.health.wait(self.replay_every.total_seconds())

    # -- one round ----------------------------------------------------------------------

    def run_once(self) -> int:
        """One round: take over dead workers' spools, replay what is held, refresh the
        unacknowledged actions when due; return how many rows were written."""
        self.spool.adopt()
        self.spool.sync()
        refresh = time.monotonic() >= self._refresh_due
        if not (self.spool.waiting or refresh):
            return 0
        # Outside the try: a failed open is recorded by the link itself.
        conn = self.link.get()
        written = 0
        try:
            if self.spool.waiting:
                for segment in self.spool.seal():
                    written += self._replay(conn, segment)
            if written or refresh:
                self._stored_oldest = conn.oldest_unacknowledged(self.clock(), UNACKNOWLEDGED_KEPT)
                self._refresh_due = time.monotonic() + self.refresh_every.total_seconds()
        except StoreError as exc:
            self.link.failed(exc)
            raise
        self.link.ok()
        return written

    def _replay(self, conn: StoreConnection, segment: Segment) -> int:
        """Write one sealed spool file's rows past its replay mark, then delete it."""
        entries, bad = self.spool.read(segment)
        if bad:
            logger.warning(
                "%d lines of the outage spool %s are not log rows: skipped",
                bad,
                segment.path,
                extra={"event": "spool_unreadable"},
            )
        written = 0
        for start in range(0, len(entries), SPOOL_REPLAY_CHUNK):
            mark, n = conn.replay_spooled(
                segment.name, start, entries[start : start + SPOOL_REPLAY_CHUNK], self.clock()
            )
            self.spool.replayed(segment, mark)
            written += n
            self._replayed += n
        self.spool.finished(segment)
        conn.forget_spooled(segment.name, self.clock(), spec.WEBHOOK_LOG_RETENTION)
        if written:
            logger.info(
                "%d log rows of 503 answers written from the outage spool",
                written,
                extra={"event": "spool_replayed"},
            )
        return written

    # -- metrics ------------------------------------------------------------------------

    def oldest_unacknowledged(self) -> float:
        """Seconds since the first 5xx answer of the oldest action answered only 5xx so
        far, in the store or still in the spool (0 when there is none)."""
        times = [t for t in (self._stored_oldest, self.spool.oldest()) if t is not None]
        if not times:
            return 0.0
        return max(0.0, (self.clock() - min(times)).total_seconds())

    def report(self) -> None:
        """Hand the loop's state to the metrics (from the loop's thread)."""
        instruments = self._instruments
        instruments.spool_rows.set(self.spool.waiting)
        dropped = self.spool.take_dropped()
        if dropped:
            instruments.dropped.inc(dropped)
        replayed, self._replayed = self._replayed, 0
        if replayed:
            instruments.replayed.inc(replayed)
        instruments.oldest_unacknowledged.set(self.oldest_unacknowledged())
