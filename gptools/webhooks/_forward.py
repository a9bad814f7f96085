"""The forwarding stage: every new action, once acknowledged and run by the processing
queue, is published to each configured destination (RabbitMQ, NATS JetStream, an HTTP
URL), once per destination.

How it holds:

- **Durable, through the processing queue.** When the queue has run an action's handler
  (a no-op when forwarding is all there is), it enqueues the action for each destination
  (:meth:`Forwarder.enqueue`: one ``webhook_forwards`` row per destination, an insert
  that does nothing on conflict) before it marks the action done; a crash in between
  runs the action again and enqueues nothing twice. Then the rows are the stage's own
  queue, in the store: a restart resumes whatever is pending.
- **Once per destination.** A row is leased to one run at a time (like the queue's
  actions) and marked done only after the broker confirmed it (RabbitMQ's publisher
  confirm, JetStream's acknowledgement, a 2xx). A publication whose confirm was lost
  (the broker restarted mid-way) is published again, with the same id: the actionId is
  the message id (RabbitMQ ``message_id``, JetStream ``Nats-Msg-Id``, which the stream
  deduplicates within its window; HTTP ``Idempotency-Key``), so the copy is known as one.
- **Retried with backoff, dead-lettered past its limit.** A failed publication is tried
  again after ``forward_first_delay`` doubling up to ``forward_max_delay``
  (``gptools._backoff``); after ``forward_max_attempts`` it is ``dead`` for that
  destination. A destination that fails is left alone until its retry is due: the rest
  of its batch is released without an attempt counted, so an outage of the broker
  costs one attempt per backoff, not one per row.
- **Replayable.** :meth:`~gptools.webhooks._forward_store.ForwardOperations.requeue_forwards`
  sets rows pending again (a replay, a retry of dead letters).
- **Bounded.** Done rows are purged once an hour past the log's retention
  (``Store(log_retention=...)``, 90 days by default), so a replay finds what the log
  still holds.
- **Measured per destination:** ``gptools_webhook_forwarded_total{destination,outcome}``
  (forwarded, failed, dead_lettered).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from gptools._backoff import backoff_delay
from gptools.errors import import_extra
from gptools.webhooks._constants import (
    DEFAULT_FACTOR,
    DEFAULT_FORWARD_FIRST_DELAY,
    DEFAULT_FORWARD_LEASE,
    DEFAULT_FORWARD_MAX_ATTEMPTS,
    DEFAULT_FORWARD_MAX_DELAY,
    DEFAULT_FORWARD_TIMEOUT,
    DEFAULT_IDLE_WAIT,
    FORWARD_BATCH,
    FORWARD_PURGE_EVERY,
    QUEUE_LINK_MAX_BACKOFF,
    QUEUE_STORE_BACKOFF_CAP,
)
from gptools.webhooks._forward_destinations import Destination
from gptools.webhooks._forward_store import ClaimedForward
from gptools.webhooks._logs import scrub
from gptools.webhooks._metric_families import Families, counter
from gptools.webhooks._records import ClaimedAction, Clock, StoreError, utc_now
from gptools.webhooks._store import Store, StoreConnection
from gptools.webhooks._supervision import LoopHealth, StoreLink

logger = logging.getLogger("gptools.webhooks")

_COUNTERS = Families(
    forwarded=counter(
        "gptools_webhook_forwarded_total",
        "Publications to a forwarding destination, by destination and outcome "
        "(forwarded: confirmed; failed: to be retried; dead_lettered: given up).",
        "destination",
        "outcome",
    ),
)
#: The outcomes of a publication, as the metric's label says them.
OUTCOMES = ("forwarded", "failed", "dead_lettered")


class Publisher(Protocol):
    """Publishes one action to one destination, waiting for its confirmation (raises
    on any failure); :meth:`close` drops the connection (the next publish opens one)."""

    def publish(self, action_id: str, body: str) -> None:
        """Publish ``body`` with ``action_id`` as its message id, confirmed."""
        ...

    def close(self) -> None:
        """Drop the connection; never raises."""
        ...


class HttpPublisher:
    """POSTs the body to the destination's URL (``Idempotency-Key``: the actionId); a
    2xx answer is the confirmation."""

    def __init__(self, destination: Destination, timeout: timedelta) -> None:
        import httpx

        self.destination = destination
        self._client = httpx.Client(timeout=timeout.total_seconds(), follow_redirects=False)

    def publish(self, action_id: str, body: str) -> None:
        """POST one action; an answer other than 2xx is a failure."""
        answer = self._client.post(
            self.destination.url,
            content=body.encode(),
            headers={
                "content-type": "application/json",
                "idempotency-key": action_id,
                "x-gptools-action-id": action_id,
            },
        )
        if not 200 <= answer.status_code < 300:
            raise RuntimeError(f"answered {answer.status_code}")

    def close(self) -> None:
        """Nothing to drop (httpx's pool reconnects by itself)."""


#: The client module each broker's destinations need (extra ``forward``), and what for.
_CLIENTS = {
    "rabbitmq": ("pika", "forwarding to RabbitMQ"),
    "nats": ("nats", "forwarding to NATS JetStream"),
}


def require_clients(destinations: tuple[Destination, ...]) -> None:
    """MissingExtraError (one line naming the extra) unless the client of every broker
    among ``destinations`` imports: said when the receiver starts, not at the first
    publication."""
    for destination in destinations:
        if destination.kind in _CLIENTS:
            module, capability = _CLIENTS[destination.kind]
            import_extra(module, "forward", capability)


def open_publisher(destination: Destination, timeout: timedelta) -> Publisher:
    """The publisher of ``destination``'s kind (MissingExtraError, one line, when the
    broker's client is not installed: extra ``forward``)."""
    if destination.kind == "rabbitmq":
        from gptools.webhooks._forward_rabbitmq import RabbitPublisher

        return RabbitPublisher(destination, timeout)
    if destination.kind == "nats":
        from gptools.webhooks._forward_nats import NatsPublisher

        return NatsPublisher(destination, timeout)
    return HttpPublisher(destination, timeout)


class Forwarder:
    """The forwarding stage of one worker (see the module docstring): ``destinations``,
    and the retry, lease and time-out settings (``forward_*`` of
    :class:`~gptools.webhooks.ReceiverConfig`)."""

    def __init__(
        self,
        store: Store,
        destinations: tuple[Destination, ...],
        *,
        max_attempts: int = DEFAULT_FORWARD_MAX_ATTEMPTS,
        first_delay: timedelta = DEFAULT_FORWARD_FIRST_DELAY,
        max_delay: timedelta = DEFAULT_FORWARD_MAX_DELAY,
        lease: timedelta = DEFAULT_FORWARD_LEASE,
        timeout: timedelta = DEFAULT_FORWARD_TIMEOUT,
        idle_wait: timedelta = DEFAULT_IDLE_WAIT,
        clock: Clock = utc_now,
        publishers: Callable[[Destination, timedelta], Publisher] = open_publisher,
    ) -> None:
        require_clients(destinations)
        self.store = store
        self.destinations = destinations
        self.names = tuple(d.name for d in destinations)
        self.max_attempts = max_attempts
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.lease = lease
        self.timeout = timeout
        self.idle_wait = idle_wait
        self.clock = clock
        self._open_publisher = publishers
        self._publishers: dict[str, Publisher] = {}
        #: When each failing destination is tried again (monotonic seconds).
        self._resume_at: dict[str, float] = {}
        self.health = LoopHealth("forward")
        self.link = StoreLink(store, max_backoff=QUEUE_LINK_MAX_BACKOFF)
        self._wake = threading.Event()
        self._store_failures = 0
        self._next_purge = 0.0  # monotonic seconds: the first round purges
        self._counters = _COUNTERS.made()
        for name in self.names:
            for outcome in OUTCOMES:
                self._counters.forwarded.labels(destination=name, outcome=outcome)

    # -- the processing queue's hook -------------------------------------------------

    def enqueue(self, conn: StoreConnection, action: ClaimedAction) -> None:
        """Put a processed action in every destination's queue (once), and wake the
        loop: the processing queue calls this before it marks the action done."""
        if conn.enqueue_forwards(action.action_id, action.body, self.names, self.clock()):
            self._wake.set()

    # -- the loop --------------------------------------------------------------------

    def start(self) -> None:
        """Run the stage in a background thread until :meth:`stop`."""
        self.health.start(self._step)

    def wake(self) -> None:
        """Tell the loop new work is there."""
        self._wake.set()

    def stop(self) -> None:
        """Finish the publication in progress, stop the loop, close the connections."""
        self.health.stop(wake=self._wake.set)
        self.link.close()
        for publisher in self._publishers.values():
            publisher.close()
        self._publishers.clear()

    def _purge(self, conn: StoreConnection) -> None:
        """Once every ``FORWARD_PURGE_EVERY``: the done forwards past the log's retention
        (the table stays as long as the log, not longer)."""
        if time.monotonic() < self._next_purge:
            return
        conn.purge_forwards(self.clock() - self.store.log_retention, step=conn.purge_step)
        self._next_purge = time.monotonic() + FORWARD_PURGE_EVERY.total_seconds()

    def _step(self) -> bool:
        try:
            conn = self.link.get()
            self._purge(conn)
            ran = self.run_due(conn)
        except StoreError as exc:
            self.link.failed(exc)
            self._store_failures += 1
            if self._store_failures == 1 or self._store_failures % 20 == 0:
                logger.warning(
                    "forwarding (%d failures in a row): %s",
                    self._store_failures,
                    exc,
                    extra={"event": "forward_store_failed"},
                )
            wait = backoff_delay(
                self._store_failures,
                base=self.idle_wait.total_seconds(),
                cap=QUEUE_STORE_BACKOFF_CAP,
            )
            return self.health.wait(wait)
        self.link.ok()
        self._store_failures = 0
        if not ran:
            wait = self.idle_wait.total_seconds()
            if self._resume_at:
                wait = min(wait, max(0.0, min(self._resume_at.values()) - time.monotonic()))
            self._wake.wait(wait)
            self._wake.clear()
        return True

    def delay_after(self, attempt: int) -> timedelta:
        """The wait before the publication that follows failed attempt ``attempt``."""
        return timedelta(
            seconds=backoff_delay(
                attempt - 1,
                base=self.first_delay.total_seconds(),
                cap=self.max_delay.total_seconds(),
                factor=DEFAULT_FACTOR,
            )
        )

    def run_due(self, conn: StoreConnection) -> int:
        """One round: each destination that is not backing off publishes up to a batch
        of its due rows. Returns how many publications were confirmed or given up."""
        done = 0
        for destination in self.destinations:
            if self.health.stopping:
                break
            resume = self._resume_at.get(destination.name)
            if resume is not None and time.monotonic() < resume:
                continue
            self._resume_at.pop(destination.name, None)
            claimed = conn.claim_forwards(
                destination.name,
                self.clock(),
                lease=self.lease,
                max_attempts=self.max_attempts,
                limit=FORWARD_BATCH,
            )
            done += self._publish_batch(conn, destination, claimed)
        return done

    def _publish_batch(
        self, conn: StoreConnection, destination: Destination, claimed: list[ClaimedForward]
    ) -> int:
        done = 0
        for i, row in enumerate(claimed):
            error = self._publish(destination, row)
            if error is None:
                state = "done"
                self._counters.forwarded.labels(
                    destination=destination.name, outcome="forwarded"
                ).inc()
                self._finish(conn, row, "done")
                done += 1
                continue
            retry = self.delay_after(row.attempts)
            fields = {
                "destination": destination.name,
                "actionId": row.action_id,
                "attempt": row.attempts,
            }
            if row.attempts >= self.max_attempts:
                state = "dead"
                self._counters.forwarded.labels(
                    destination=destination.name, outcome="dead_lettered"
                ).inc()
                logger.error(
                    "forwarding to %s gave up after %d attempts: %s",
                    destination.name,
                    row.attempts,
                    error,
                    extra={"event": "forward_dead_lettered", **fields},
                )
                self._finish(conn, row, "dead", error=error)
                done += 1
            else:
                state = "pending"
                self._counters.forwarded.labels(
                    destination=destination.name, outcome="failed"
                ).inc()
                logger.warning(
                    "forwarding to %s failed (attempt %d): %s",
                    destination.name,
                    row.attempts,
                    error,
                    extra={"event": "forward_failed", **fields},
                )
                self._finish(conn, row, state, error=error, retry_at=self.clock() + retry)
            # The destination fails: the rest of the batch waits for it, no attempt counted.
            rest = claimed[i + 1 :]
            if rest:
                conn.release_forwards(rest, self.clock() + retry)
            self._resume_at[destination.name] = time.monotonic() + retry.total_seconds()
            break
        return done

    def _publish(self, destination: Destination, row: ClaimedForward) -> str | None:
        """Publish one row; None when confirmed, else the (scrubbed) error."""
        try:
            publisher = self._publishers.get(destination.name)
            if publisher is None:
                publisher = self._open_publisher(destination, self.timeout)
                self._publishers[destination.name] = publisher
            publisher.publish(row.action_id, row.body)
        except Exception as exc:
            dropped = self._publishers.pop(destination.name, None)
            if dropped is not None:
                dropped.close()
            text = str(exc) or repr(exc)
            return scrub(f"{type(exc).__name__}: {text}")
        return None

    def _finish(
        self,
        conn: StoreConnection,
        row: ClaimedForward,
        state: str,
        *,
        error: str | None = None,
        retry_at: datetime | None = None,
    ) -> None:
        if not conn.finish_forward(
            row,
            state,  # type: ignore[arg-type]
            now=self.clock(),
            error=error,
            retry_at=retry_at,
        ):
            logger.warning(
                "forward of %s to %s: the lease ran out and another run took it over",
                row.action_id,
                row.destination,
                extra={
                    "event": "forward_lease_lost",
                    "actionId": row.action_id,
                    "destination": row.destination,
                },
            )

    def drain(self, *, timeout: timedelta = timedelta(seconds=30)) -> None:
        """Publish every row due now, in the calling thread, until none is left or every
        destination with rows backs off (for scripts and tests)."""
        deadline = time.monotonic() + timeout.total_seconds()
        conn = self.store.connect()
        try:
            while self.run_due(conn):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"forwarding not drained within {timeout}")
        finally:
            conn.close()
