"""Prometheus metrics of the receiver (``/metrics``, or ``--metrics-port``).

Counted per answer, but cheaply: the hot path adds to a plain dict and a list, and
:meth:`DeliveryMetrics.flush` hands the sums to ``prometheus_client`` every half second
(and before a scrape), so a request pays no lock and no histogram walk. With several
worker processes ``gptools webhooks serve`` points ``PROMETHEUS_MULTIPROC_DIR`` at a
directory of its own, and every process's values are merged at scrape time.

A scrape reads only what the workers already keep: it never opens a store connection
and never counts a table, so it answers 200 however the store is doing (with
``gptools_webhook_ready`` and ``gptools_webhook_store_up`` 0 while it is unreachable).
The queue's pending and dead counts come from each worker's store watch
(``_store_watch.py``), which refreshes them off the scrape path.

How the processes' values merge (each gauge's ``multiprocess_mode``):

- ``live``, ``ready`` and ``store_up``: the lowest of the living workers (``livemin``).
  Only workers write them, and only once they serve (a process that renders a scrape
  without serving, the serve command's with ``--metrics-port`` and several workers, has
  none); a worker withdraws its own on shutdown, and a scrape forgets those of workers
  that died without one (``prometheus_client``'s ``mark_process_dead``, for a worker
  that uvicorn's supervisor replaced). When no living worker reports, the scrape says 0:
  nothing answers ``/healthz`` then.
- the queue's counts and the replays' totals: the most recent refresh of a living
  worker (``livemostrecent``): every worker counts the same shared store, so the values
  are never summed. The replays' totals are gauges for that reason (a counter's values
  are summed over the processes), though they only grow: a replay's row stays.
- the last acknowledgement and the quiet threshold: the highest (``max``).

``prometheus_client`` is imported on first use, not with this module: it fixes its
storage (memory or multiprocess files) at import, which must come after the serve
command has set the directory.
"""

from __future__ import annotations

import bisect
import contextlib
import glob
import os
import time
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gptools import spec
from gptools.openapi import OPENAPI_PATH
from gptools.webhooks._logs import metrics_request_failed, request_id
from gptools.webhooks._metric_families import Families, counter, gauge, histogram
from gptools.webhooks._records import QueueDepth

if TYPE_CHECKING:
    from gptools.webhooks._replay import ReplayTotals

#: The environment variable prometheus_client reads for multiprocess mode.
ENV_MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
#: Where the receiver answers a scrape (unless metrics are served on their own port).
METRICS_PATH = "/metrics"
#: The Prometheus alerting rules shipped with the package, over the metrics of this module
#: (each alert's runbook: docs/guides/operations.md, "Alerts and runbooks").
ALERT_RULES = Path(__file__).with_name("alerts.yml")
#: The Grafana dashboard shipped with the package (JSON to import), over the same metrics.
GRAFANA_DASHBOARD = Path(__file__).with_name("dashboard.json")

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

#: The health gauges (name and help), one per worker, the lowest of the living ones is
#: exported; 0 when no living worker reports one.
HEALTH_GAUGES = {
    "gptools_webhook_live": "1 while every background loop of the worker runs "
    "(GET /healthz answers 200).",
    "gptools_webhook_ready": "1 while the worker is live and its store reachable "
    "(GET /readyz answers 200).",
    "gptools_webhook_store_up": "1 while the worker's last store operations (its writer's "
    "and its store watch's) succeeded.",
}


_INSTRUMENTS = Families(
    deliveries=counter(
        "gptools_webhook_deliveries_total",
        "Deliveries answered, by HTTP status and outcome.",
        "status",
        "outcome",
    ),
    request_seconds=histogram(
        "gptools_webhook_request_seconds",
        "Time from a delivery's arrival to its answer.",
        buckets=_LATENCY_BUCKETS,
    ),
    commit_seconds=histogram(
        "gptools_webhook_store_commit_seconds",
        "Time to write and commit one group-commit batch.",
        buckets=_LATENCY_BUCKETS,
    ),
    handler_failures=counter(
        "gptools_webhook_handler_failures_total", "Handler runs that raised or timed out."
    ),
    suppressed=counter(
        "gptools_webhook_refusals_suppressed_total",
        "Refusals answered without a log row of their own (past the reason's row budget;"
        " a summary row counts them).",
        "reason",
    ),
)

# Made when a worker starts serving, like the health gauges: before that, a 0 would read
# as "nothing acknowledged since 1970".
_QUIET_GAUGES = Families(
    last_acknowledged=gauge(
        "gptools_webhook_last_acknowledged_timestamp_seconds",
        "Unix time of the latest 2xx answer (before the first one: when the worker"
        " started serving).",
        mode="max",
    ),
    threshold=gauge(
        "gptools_webhook_quiet_threshold_seconds",
        "How long no delivery may be acknowledged while the receiver is up before the"
        " quiet alert fires (serve --quiet-alert-after).",
        mode="max",
    ),
)

# Made only when a worker first reports (a gauge starts at 0 in its process's file, and a
# 0 from a process that serves nothing would win the lowest-of-all rule).
_HEALTH_GAUGES = Families(
    **{name: gauge(name, text, mode="livemin") for name, text in HEALTH_GAUGES.items()}
)

# Made when a worker first finds its store's version: a 0 before that would read as a
# store laid out before schema versions.
_SCHEMA_GAUGE = gauge(
    "gptools_webhook_schema_version",
    "The store's schema version as the worker found it when it connected.",
    mode="livemax",
)

_QUEUE_GAUGES = Families(
    actions=gauge(
        "gptools_webhook_queue_actions",
        "Actions in the processing queue that are pending or dead, as the store watch"
        " last counted them (processed actions are not counted: see the guide).",
        "state",
        mode="livemostrecent",
    ),
    dead_letters=gauge(
        "gptools_webhook_dead_letters",
        "Actions whose handler runs gave up, as the store watch last counted them.",
        mode="livemostrecent",
    ),
)

# Made at the store watch's first count, like the queue's: replays run as commands of
# their own, so their metrics are the store's replay rows as a worker last read them.
_REPLAY_GAUGES = Families(
    actions=gauge(
        "gptools_webhook_replayed_actions",
        "Actions the store's replays put back in a queue (webhooks replay), by target"
        " (handler: the processing queue; forward: a forwarding destination's, by"
        " destination), as the store watch last counted them.",
        "target",
        "destination",
        mode="livemostrecent",
    ),
    started=gauge(
        "gptools_webhook_replays_started",
        "Replays recorded in the store (one each, however often it was resumed), as the"
        " store watch last counted them.",
        mode="livemostrecent",
    ),
    finished=gauge(
        "gptools_webhook_replays_finished",
        "Replays that ran every action to the end themselves (webhooks replay --handler"
        " or --url), as the store watch last counted them.",
        mode="livemostrecent",
    ),
)


class DeliveryMetrics:
    """One process's counters: cheap to record, flushed to prometheus_client in bulk."""

    def __init__(self) -> None:
        self._instruments = _INSTRUMENTS.made()
        self._answers: dict[tuple[int, str], int] = {}
        self._latencies: list[float] = []
        self._suppressed: dict[str, int] = {}
        self._acknowledged_at = 0.0
        self._published_acknowledgement = 0.0

    def started(self, quiet_threshold: timedelta) -> None:
        """The worker serves from now on: the quiet alert's threshold, and "now" as the
        last acknowledgement, so that a receiver that never acknowledges anything is as
        quiet as one that stopped."""
        _QUIET_GAUGES.made().threshold.set(quiet_threshold.total_seconds())
        self._acknowledged_at = max(self._acknowledged_at, time.time())

    def answered(self, status: int, outcome: str, seconds: float) -> None:
        """Count one answer (from the event loop's thread only)."""
        key = (status, outcome)
        self._answers[key] = self._answers.get(key, 0) + 1
        self._latencies.append(seconds)
        if 200 <= status < 300:
            self._acknowledged_at = time.time()

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
        if self._acknowledged_at > self._published_acknowledgement:
            self._published_acknowledgement = self._acknowledged_at
            _QUIET_GAUGES.made().last_acknowledged.set(self._acknowledged_at)

    def health(self, *, live: bool, ready: bool, store_up: bool) -> None:
        """The worker's liveness, readiness and store health, as its gauges."""
        gauges = _HEALTH_GAUGES.made()
        for name, value in zip(HEALTH_GAUGES, (live, ready, store_up), strict=True):
            getattr(gauges, name).set(1 if value else 0)

    def queue(self, depth: QueueDepth) -> None:
        """The queue's counts as the store watch just read them (from its thread)."""
        gauges = _QUEUE_GAUGES.made()
        gauges.actions.labels(state="pending").set(depth.pending)
        gauges.actions.labels(state="dead").set(depth.dead)
        gauges.dead_letters.set(depth.dead)

    def replays(self, totals: ReplayTotals, destinations: tuple[str, ...] = ()) -> None:
        """The store's replays as the store watch just added them up (from its thread);
        ``destinations`` (the receiver's) are shown at 0 before any replay to them, so a
        first replay is an increase, not a new series."""
        gauges = _REPLAY_GAUGES.made()
        gauges.actions.labels(target="handler", destination="").set(totals.handler)
        for name in (*destinations, *totals.forwarded):
            queued = totals.forwarded.get(name, 0)
            gauges.actions.labels(target="forward", destination=name).set(queued)
        gauges.started.set(totals.started)
        gauges.finished.set(totals.finished)

    def withdraw(self) -> None:
        """The worker stops serving: its health and queue gauges no longer count (with
        several workers the others' still do; with none left, a scrape says 0)."""
        directory = os.environ.get(ENV_MULTIPROC_DIR)
        if directory:
            _forget_process(directory, os.getpid())
        else:
            self.health(live=False, ready=False, store_up=False)

    def schema(self, version: int) -> None:
        """The store's schema version as this worker found it."""
        _SCHEMA_GAUGE.made().set(version)

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


def _live_gauge_files(directory: str) -> Iterable[tuple[str, int]]:
    """Each file of a ``live*`` gauge in the directory, with the pid that wrote it
    (prometheus_client names them ``gauge_<mode>_<pid>.db``)."""
    for path in glob.glob(os.path.join(directory, "gauge_live*_*.db")):
        pid = os.path.basename(path)[: -len(".db")].rpartition("_")[2]
        if pid.isdigit():
            yield path, int(pid)


def _forget_process(directory: str, pid: int) -> None:
    """prometheus_client's ``mark_process_dead``: drop the process's ``live*`` gauges
    (another scrape may be dropping them at the same moment)."""
    for path, owner in _live_gauge_files(directory):
        if owner == pid:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


def _forget_dead_processes(directory: str) -> None:
    """Drop the ``live*`` gauges of every process that is gone (a worker killed, or
    replaced by uvicorn's supervisor, leaves its files behind)."""
    for pid in {owner for _, owner in _live_gauge_files(directory)}:
        if not _alive(pid):
            _forget_process(directory, pid)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped by uvicorn's
    supervisor, does not)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Another user's process holds the pid now: ours cannot be told apart from it
        # without more than the pid, so its gauges stay (a rare, harmless leftover).
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return not Path("/proc/self/stat").exists()  # gone since, unless there is no /proc
    except OSError:
        return True
    state = stat.rpartition(")")[2].split()
    return not state or state[0] not in ("Z", "X")


def render() -> tuple[bytes, str]:
    """The exposition text of every process's metrics, and its content type. Reads the
    processes' values only (files in multiprocess mode): never the store."""
    from prometheus_client import REGISTRY, generate_latest
    from prometheus_client.core import GaugeMetricFamily
    from prometheus_client.exposition import CONTENT_TYPE_LATEST
    from prometheus_client.multiprocess import MultiProcessCollector
    from prometheus_client.registry import Collector

    directory = os.environ.get(ENV_MULTIPROC_DIR)
    if directory:
        _forget_dead_processes(directory)
        files = glob.glob(os.path.join(directory, "*.db"))
        families = list(MultiProcessCollector.merge(files))  # type: ignore[no-untyped-call]
    else:
        families = list(REGISTRY.collect())
    present = {family.name for family in families}
    families += [
        GaugeMetricFamily(name, text, value=0)
        for name, text in HEALTH_GAUGES.items()
        if name not in present
    ]

    class _Merged(Collector):
        def collect(self) -> Iterable[Any]:
            return families

    return generate_latest(_Merged()), CONTENT_TYPE_LATEST


def serve_metrics(host: str, port: int, *, openapi: bytes | None = None) -> Any:
    """Serve :func:`render` at ``/metrics`` (and ``openapi``, the receiver's OpenAPI
    description as JSON, at ``/openapi.json``) on ``host:port`` from a daemon thread (the
    serve command's own process, for ``--metrics-port``); returns the server. An
    unexpected error is one log line and a 500 answer, never a traceback."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class _Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            incoming = self.headers.get("X-Request-ID")
            rid = request_id(incoming.encode("latin-1") if incoming is not None else None)
            path = self.path.split("?", 1)[0]
            status = 200
            if path == OPENAPI_PATH and openapi is not None:
                body, content_type = openapi, "application/json"
            elif path == METRICS_PATH:
                try:
                    body, content_type = render()
                except Exception:
                    # One line in the log (never http.server's traceback on stderr), and
                    # an answer that says the scrape failed.
                    metrics_request_failed(rid, scrape=True)
                    status, body, content_type = 500, b"scrape failed\n", "text/plain"
            else:
                status, body, content_type = 404, b"not found\n", "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Request-ID", rid.decode("ascii"))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # scrapes are not news

    class _Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            # socketserver would print a traceback to stderr (a client that went away
            # while its answer was written, say): one log line instead.
            metrics_request_failed(None, scrape=False)

    server = _Server((host, port), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
