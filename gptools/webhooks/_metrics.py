"""Prometheus metrics of the receiver (``/metrics``, or ``--metrics-port``).

Counted per answer, but cheaply: the hot path adds to a plain dict and a list, and
:meth:`DeliveryMetrics.flush` hands the sums to ``prometheus_client`` every half second
(and before a scrape), so a request pays no lock and no histogram walk. With several
worker processes ``gptools webhooks serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a
directory of its own, and every process's values are summed at scrape time. The queue's
depth and its dead letters are read from the store at scrape time (the store is shared,
so any one process reads the truth).

``prometheus_client`` is imported on first use, not with this module: it fixes its
storage (memory or multiprocess files) at import, which must come after the serve
command has set the directory.
"""

from __future__ import annotations

import bisect
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gptools import spec
from gptools.openapi import OPENAPI_PATH
from gptools.webhooks._store import Store

#: The environment variable prometheus_client reads for multiprocess mode.
ENV_MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
#: Where the receiver answers a scrape (unless metrics are served on their own port).
METRICS_PATH = "/metrics"
#: The Prometheus alerting rules shipped with the package (receiver down or not ready,
#: acknowledgement latency over the document's 1 s, a surge of 4xx, dead letters,
#: suppressed refusal rows), over the metrics of this module.
ALERT_RULES = Path(__file__).with_name("alerts.yml")

#: What an answer's error code counts as, in the ``outcome`` label and as the prefix of its
#: log row's ``error``: the refusals before authentication or routing by their one name
#: (``spec.WEBHOOK_REFUSALS``), the receiver's other answers by theirs.
OUTCOMES = {
    **{name: name for name in spec.WEBHOOK_REFUSALS.values()},
    "payload_too_large": spec.WEBHOOK_REFUSALS[413],
    "invalid_payload": "invalid",
    "store_unavailable": "unavailable",
    "injected_fault": "injected_fault",
}
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass(frozen=True, slots=True)
class _Instruments:
    deliveries: Any
    request_seconds: Any
    commit_seconds: Any
    handler_failures: Any
    suppressed: Any
    live: Any
    ready: Any
    schema_version: Any


@functools.cache
def _instruments() -> _Instruments:
    from prometheus_client import Counter, Gauge, Histogram

    return _Instruments(
        deliveries=Counter(
            "gptools_webhook_deliveries_total",
            "Deliveries answered, by HTTP status and outcome.",
            ["status", "outcome"],
        ),
        request_seconds=Histogram(
            "gptools_webhook_request_seconds",
            "Time from a delivery's arrival to its answer.",
            buckets=_LATENCY_BUCKETS,
        ),
        commit_seconds=Histogram(
            "gptools_webhook_store_commit_seconds",
            "Time to write and commit one group-commit batch.",
            buckets=_LATENCY_BUCKETS,
        ),
        handler_failures=Counter(
            "gptools_webhook_handler_failures_total", "Handler runs that raised or timed out."
        ),
        suppressed=Counter(
            "gptools_webhook_refusals_suppressed_total",
            "Refusals answered without a log row of their own (past the reason's row budget;"
            " a summary row counts them).",
            ["reason"],
        ),
        # Per worker (the lowest of the live ones is what an alert reads): 1 while
        # /healthz (live) or /readyz (ready) would answer 200.
        live=Gauge(
            "gptools_webhook_live",
            "1 while every background loop of the worker runs (GET /healthz answers 200).",
            multiprocess_mode="livemin",
        ),
        ready=Gauge(
            "gptools_webhook_ready",
            "1 while the worker is live and its store reachable (GET /readyz answers 200).",
            multiprocess_mode="livemin",
        ),
        schema_version=Gauge(
            "gptools_webhook_schema_version",
            "The store's schema version as the worker found it when it connected (0: not"
            " read yet, or a store laid out before schema versions).",
            multiprocess_mode="max",
        ),
    )


class DeliveryMetrics:
    """One process's counters: cheap to record, flushed to prometheus_client in bulk."""

    def __init__(self) -> None:
        self._instruments = _instruments()
        self._answers: dict[tuple[int, str], int] = {}
        self._latencies: list[float] = []
        self._suppressed: dict[str, int] = {}

    def answered(self, status: int, outcome: str, seconds: float) -> None:
        """Count one answer (from the event loop's thread only)."""
        key = (status, outcome)
        self._answers[key] = self._answers.get(key, 0) + 1
        self._latencies.append(seconds)

    def suppressed(self, reason: str) -> None:
        """Count one refusal that got no log row of its own (event loop's thread only)."""
        self._suppressed[reason] = self._suppressed.get(reason, 0) + 1

    def flush(self) -> None:
        """Hand what was recorded since the last flush to prometheus_client (from the
        event loop's thread, like :meth:`answered`)."""
        answers, self._answers = self._answers, {}
        latencies, self._latencies = self._latencies, []
        suppressed, self._suppressed = self._suppressed, {}
        for reason, n in suppressed.items():
            self._instruments.suppressed.labels(reason=reason).inc(n)
        deliveries = self._instruments.deliveries
        for (status, outcome), n in answers.items():
            deliveries.labels(status=str(status), outcome=outcome).inc(n)
        if latencies:
            _observe_many(self._instruments.request_seconds, latencies)

    def health(self, live: bool, ready: bool) -> None:
        """The worker's liveness and readiness, as its gauges."""
        self._instruments.live.set(1 if live else 0)
        self._instruments.ready.set(1 if ready else 0)

    def schema(self, version: int) -> None:
        """The store's schema version as this worker found it."""
        self._instruments.schema_version.set(version)

    def committed(self, seconds: float) -> None:
        """One batch's write-and-commit time (from the writer's thread)."""
        self._instruments.commit_seconds.observe(seconds)

    def handler_failed(self) -> None:
        """One handler run that raised or timed out."""
        self._instruments.handler_failures.inc()


def _observe_many(histogram: Any, values: list[float]) -> None:
    """``histogram.observe`` for each value, in one step per bucket: one observe costs
    several microseconds in multiprocess mode (a locked file write per bucket and sum),
    too dear per delivery. Uses the histogram's bucket and sum values (prometheus_client
    keeps one non-cumulative value per bucket); falls back to ``observe`` without them."""
    buckets, total = getattr(histogram, "_buckets", None), getattr(histogram, "_sum", None)
    bounds = getattr(histogram, "_upper_bounds", None)
    if buckets is None or total is None or bounds is None or len(bounds) != len(buckets):
        for value in values:
            histogram.observe(value)
        return
    counts = [0] * len(bounds)
    for value in values:
        counts[bisect.bisect_left(bounds, value)] += 1  # the first bound >= value
    for value_of_bucket, n in zip(buckets, counts, strict=True):
        if n:
            value_of_bucket.inc(n)
    total.inc(sum(values))


class _QueueCollector:
    """The processing queue's depth by state and its dead letters, read at scrape time."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        conn = self.store.connect()
        try:
            counts = conn.queue_counts()
        finally:
            conn.close()
        depth = GaugeMetricFamily(
            "gptools_webhook_queue_actions",
            "Actions in the processing queue, by state.",
            labels=["state"],
        )
        for state in ("pending", "done", "dead"):
            depth.add_metric([state], getattr(counts, state))
        yield depth
        yield GaugeMetricFamily(
            "gptools_webhook_dead_letters", "Actions whose handler runs gave up.", value=counts.dead
        )


def render(store: Store) -> tuple[bytes, str]:
    """The exposition text of every process's metrics and the store's queue, and its
    content type."""
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
    from prometheus_client.exposition import CONTENT_TYPE_LATEST
    from prometheus_client.multiprocess import MultiProcessCollector

    _instruments()  # so that a scrape before the first delivery names them too
    if os.environ.get(ENV_MULTIPROC_DIR):
        processes = CollectorRegistry()
        MultiProcessCollector(processes)  # type: ignore[no-untyped-call]
    else:
        processes = REGISTRY
    queue = CollectorRegistry(auto_describe=False)
    queue.register(_QueueCollector(store))
    return generate_latest(processes) + generate_latest(queue), CONTENT_TYPE_LATEST


def serve_metrics(host: str, port: int, store: Store, *, openapi: bytes | None = None) -> Any:
    """Serve :func:`render` at ``/metrics`` (and ``openapi``, the receiver's OpenAPI
    description as JSON, at ``/openapi.json``) on ``host:port`` from a daemon thread (the
    serve command's own process, for ``--metrics-port``); returns the server."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class _Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == OPENAPI_PATH and openapi is not None:
                body, content_type = openapi, "application/json"
            elif path == METRICS_PATH:
                body, content_type = render(store)
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes are not news

    server = ThreadingHTTPServer((host, port), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
