"""Prometheus metrics (issue 14 item 3): after valid, duplicate, bad-auth and bad-body
deliveries, every counter equals what the delivery log says, with one worker, with two
(multiprocess mode) and on a separate ``--metrics-port``."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from gptools.models import GameEventNotification
from gptools.webhooks import ReceiverAuth, WebhookReceiver, open_store
from gptools.webhooks._metrics import OUTCOMES
from tests.webhooks.conftest import (
    ReceiverProcess,
    event,
    free_port,
    scrape,
    serve_in_thread,
    wire,
)

HEADERS = {"authorization": "Bearer test-key", "content-type": "application/json"}
DEADLINE_S = 30.0


def _deliver(url: str) -> None:
    """A seeded mix: 30 new, 10 duplicates, 7 with wrong or no credentials, 9 bad bodies."""
    ids = [f"00000000-0000-4000-8000-{i:012x}" for i in range(30)]
    with httpx.Client(headers=HEADERS) as http:
        for i in ids:
            assert http.post(url, content=wire(event(i))).status_code == 200
        for i in ids[:10]:
            assert http.post(url, content=wire(event(i.upper()))).status_code == 200
        for n in range(7):
            auth = {"authorization": "Bearer wrong"} if n % 2 else {"authorization": ""}
            assert http.post(url, content=wire(event()), headers=auth).status_code == 401
        bad = [
            b"{",
            b"",
            wire(event("{" + ids[0] + "}")),
            wire(event(roundId=7)),
            wire(event(action_id="urn:uuid:" + ids[1])),
            b"[1]",
            wire(event(bet="x")),
            wire(event(ids[2].replace("-", ""))),
            wire(event(events="COIN")),
        ]
        statuses = [http.post(url, content=body).status_code for body in bad]
        assert set(statuses) == {400, 422}


def _expected(store: str) -> Counter[tuple[str, str]]:
    """The delivery log's counts by (status, outcome)."""
    conn = open_store(store).connect()
    try:
        rows = list(conn.iter_log())
    finally:
        conn.close()
    counts: Counter[tuple[str, str]] = Counter()
    for row in rows:
        if row["status"] == 200:
            outcome = "duplicate" if row["duplicate"] else "stored"
        else:
            # One taxonomy: a row's error starts with the outcome its answer is counted as.
            outcome = row["error"].split(":", 1)[0]
            assert outcome in OUTCOMES.values()
        counts[str(row["status"]), outcome] += 1
    return counts


@pytest.mark.parametrize(
    ("workers", "separate_port"),
    [(1, False), (2, False), (2, True)],
    ids=["1-worker", "2-workers", "2-workers-metrics-port"],
)
def test_counters_equal_the_delivery_log(
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
    workers: int,
    separate_port: bool,
) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    metrics_port = free_port()
    args = ("--metrics-port", str(metrics_port)) if separate_port else ()
    rp = receiver_process(store, workers=workers, args=args)
    metrics_url = (
        f"http://127.0.0.1:{metrics_port}/metrics" if separate_port else f"{rp.base_url}/metrics"
    )
    if separate_port:
        assert httpx.get(f"{rp.base_url}/metrics").status_code == 404
    _deliver(rp.url)
    expected = _expected(store)
    assert expected[("200", "stored")] == 30 and expected[("200", "duplicate")] == 10
    assert sum(n for (s, _), n in expected.items() if s == "401") == 7

    # Workers hand their counts over every half second: poll until they are all in.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        samples = scrape(metrics_url)
        got = Counter(
            {
                (labels["status"], labels["outcome"]): int(value)
                for labels, value in samples.get("gptools_webhook_deliveries_total", [])
                if value
            }
        )
        if got == expected or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert got == expected
    total = sum(expected.values())
    assert samples["gptools_webhook_request_seconds_count"][0][1] == total
    assert samples["gptools_webhook_store_commit_seconds_count"][0][1] >= 1
    queue = {labels["state"]: value for labels, value in samples["gptools_webhook_queue_actions"]}
    # Processed actions are not counted (that would read every one of them at each
    # refresh): only those still pending and the dead letters.
    assert queue == {"pending": 0, "dead": 0}
    assert samples["gptools_webhook_dead_letters"][0][1] == 0
    assert samples["gptools_webhook_handler_failures_total"][0][1] == 0


def _failing_handler(event: GameEventNotification) -> None:
    raise RuntimeError(f"cannot handle {event.action_id}")


def test_handler_failures_and_dead_letters_are_counted(tmp_path: Path) -> None:
    receiver = WebhookReceiver(
        f"sqlite:///{tmp_path / 's.db'}",
        auth=ReceiverAuth.none(),
        handler=_failing_handler,
        queue_options={"max_attempts": 2, "first_delay": timedelta(milliseconds=10)},
    )
    with serve_in_thread(receiver) as srv:

        def scrape_now() -> dict[str, list[tuple[dict[str, str], float]]]:
            return scrape(f"{srv.base_url}/metrics")

        before = scrape_now()["gptools_webhook_handler_failures_total"][0][1]
        for i in range(3):
            r = httpx.post(
                srv.url,
                content=wire(event(f"00000000-0000-4000-8000-{i:012x}")),
                headers={"content-type": "application/json"},
            )
            assert r.status_code == 200
        # The store watch counts every 5 s (and other receivers of this process set the
        # same gauges before): poll until the failures are in and the count is new.
        deadline = time.monotonic() + DEADLINE_S
        while True:
            samples = scrape_now()
            failures = samples["gptools_webhook_handler_failures_total"][0][1] - before
            dead = samples.get("gptools_webhook_dead_letters", [({}, 0.0)])[0][1]
            if (failures, dead) == (6, 3) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    # Two failed runs per action, each counted once.
    assert failures == 6
    assert dead == 3
    queue = {labels["state"]: value for labels, value in samples["gptools_webhook_queue_actions"]}
    assert queue == {"pending": 0, "dead": 3}


def test_bulk_observation_equals_one_observe_each() -> None:
    from prometheus_client import CollectorRegistry, Histogram

    from gptools.webhooks._metrics import _LATENCY_BUCKETS, _observe_many

    registry = CollectorRegistry()
    one = Histogram("one_each", "h", buckets=_LATENCY_BUCKETS, registry=registry)
    bulk = Histogram("in_bulk", "h", buckets=_LATENCY_BUCKETS, registry=registry)
    # Bounds exactly, between them, below the first and past the last.
    values = [0.0, 0.0005, *_LATENCY_BUCKETS, 0.003, 0.07, 2.4999, 9.0, 0.001, 0.001]
    for value in values:
        one.observe(value)
    _observe_many(bulk, values)

    def samples(name: str) -> list[tuple[str, dict[str, str], float]]:
        return [
            (s.name.replace(name, "h"), s.labels, s.value)
            for family in registry.collect()
            if family.name == name
            for s in family.samples
            if not s.name.endswith("_created")
        ]

    assert samples("in_bulk") == samples("one_each")
    assert samples("one_each")  # the comparison saw the samples


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_removes_the_metrics_directory(
    tmp_path: Path, receiver_process: Callable[..., ReceiverProcess], workers: int
) -> None:
    """systemd stops the service with SIGTERM: the per-run metrics directory goes with it
    (with one worker uvicorn re-raises the signal, which used to skip the clean-up), and a
    single process still ends by that signal, as a service manager expects."""
    import signal

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    rp = receiver_process(
        f"sqlite:///{tmp_path / 's.db'}", workers=workers, extra_env={"TMPDIR": str(scratch)}
    )
    rp.wait_ready()
    assert [p.name for p in scratch.glob("gptools-metrics-*")], "the run made no directory"
    rp.terminate()
    assert rp.proc.returncode == (-signal.SIGTERM if workers == 1 else 0), rp.log.read_text()
    assert list(scratch.glob("gptools-metrics-*")) == []
