"""The health gauges tell what the health checks tell, in every topology (issue 34 item 1).

``gptools_webhook_live``, ``gptools_webhook_ready`` and ``gptools_webhook_store_up`` are
exported as the lowest value of the living workers. The serve process used to write a 0
of its own when it rendered the ``--metrics-port`` scrape for several workers (it serves
no delivery), and a worker that had stopped left its 0 behind: both alerts on these
gauges fired on a healthy receiver. Each topology here is a real ``gptools webhooks
serve``; every gauge of its scrape is compared with ``/healthz``, ``/readyz``, the store
and the options it was started with.
"""

from __future__ import annotations

import os
import signal
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools.webhooks import open_store
from gptools.webhooks._migrations import SCHEMA_VERSION
from tests._support.cli import serve_workers
from tests.webhooks.conftest import (
    ReceiverProcess,
    accept,
    event,
    free_port,
    scrape,
    wire,
)
from tests.webhooks.test_tls import tls as tls  # the fixture, for the TLS topologies

HEADERS = {"authorization": "Bearer test-key", "content-type": "application/json"}
DEADLINE_S = 20.0
QUIET_AFTER_S = 1234.5
#: Actions in the store before the receiver starts: none of them is processed (no
#: handler), so the queue's gauges must show exactly these, however many workers count.
PENDING = [f"00000000-0000-4000-8000-{i:012x}" for i in range(2)]
DEAD = [f"00000000-0000-4000-9000-{i:012x}" for i in range(3)]

Gauges = dict[str, dict[tuple[tuple[str, str], ...], float]]


def gauges(url: str, verify: Any = True) -> Gauges:
    """Every gauge of a scrape: name -> {sorted labels: value}. Counters and histograms
    are left out by their suffixes; the rest of a multiprocess scrape is gauges."""
    found: Gauges = {}
    for name, samples in scrape(url, verify=verify).items():
        if name.endswith(("_total", "_bucket", "_count", "_sum", "_created")):
            continue
        found[name] = {tuple(sorted(labels.items())): value for labels, value in samples}
    return found


def _seed_queue(store: str) -> None:
    accept(store, PENDING + DEAD)
    conn = open_store(store).connect()
    try:
        conn.raw.execute(
            "UPDATE webhook_actions SET state = 'dead' WHERE action_id IN (?, ?, ?)", DEAD
        )
    finally:
        conn.close()


def _expected(rp: ReceiverProcess, acknowledged: tuple[float, float]) -> dict[str, Any]:
    """What every gauge must say, from the health checks, the store and the options;
    ``acknowledged``: the Unix times before the one 2xx answer was asked for and at the
    scrape (the worker notes the time just after it sent the answer, which may be after
    the client has read it)."""
    health = httpx.get(f"{rp.base_url}/healthz", verify=rp.verify, timeout=10)
    ready = httpx.get(f"{rp.base_url}/readyz", verify=rp.verify, timeout=10)
    return {
        "gptools_webhook_live": 1.0 if health.status_code == 200 else 0.0,
        "gptools_webhook_ready": 1.0 if ready.status_code == 200 else 0.0,
        "gptools_webhook_store_up": 1.0 if health.json()["store"] == "ok" else 0.0,
        "gptools_webhook_queue_actions": {
            (("state", "dead"),): float(len(DEAD)),
            (("state", "pending"),): float(len(PENDING)),
        },
        "gptools_webhook_dead_letters": float(len(DEAD)),
        "gptools_webhook_last_acknowledged_timestamp_seconds": acknowledged,
        "gptools_webhook_quiet_threshold_seconds": QUIET_AFTER_S,
        # No outage: nothing spooled, no action answered only 5xx; the store just made.
        "gptools_webhook_spool_rows": 0.0,
        "gptools_webhook_oldest_unacknowledged_seconds": 0.0,
        "gptools_webhook_schema_version": float(SCHEMA_VERSION),
        # No replay in the store: the handler's series is there at 0, and no destination's
        # (the receiver forwards nowhere).
        "gptools_webhook_replayed_actions": {
            (("destination", ""), ("target", "handler")): 0.0,
        },
        "gptools_webhook_replays_started": 0.0,
        "gptools_webhook_replays_finished": 0.0,
    }


def _differences(got: Gauges, expected: dict[str, Any]) -> list[str]:
    wrong = [f"unexpected gauge {name}" for name in got if name not in expected]
    for name, want in expected.items():
        values = got.get(name)
        if values is None:
            wrong.append(f"{name} missing")
        elif isinstance(want, dict):
            if values != want:
                wrong.append(f"{name} = {values}, expected {want}")
        elif isinstance(want, tuple):
            (value,) = values.values()
            if not want[0] <= value <= want[1]:
                wrong.append(f"{name} = {value}, expected within {want}")
        elif values != {(): want}:
            wrong.append(f"{name} = {values}, expected {want}")
    return wrong


@pytest.mark.parametrize(
    ("workers", "separate_port", "https"),
    [
        (1, False, False),
        (1, True, False),
        (2, False, False),
        (2, True, False),
        (2, False, True),
        (2, True, True),
    ],
    ids=[
        "1-worker",
        "1-worker-metrics-port",
        "2-workers",
        "2-workers-metrics-port",
        "tls-2-workers",
        "tls-2-workers-metrics-port",
    ],
)
def test_every_gauge_says_what_the_health_checks_say(
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
    request: pytest.FixtureRequest,
    workers: int,
    separate_port: bool,
    https: bool,
) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    _seed_queue(store)
    args: tuple[str, ...] = ("--quiet-alert-after", str(QUIET_AFTER_S))
    verify: Any = True
    if https:
        ca, cert, key = request.getfixturevalue("tls")
        verify = ssl.create_default_context(cafile=str(ca))
        args += ("--ssl-certfile", str(cert), "--ssl-keyfile", str(key))
    metrics_port = free_port()
    if separate_port:
        args += ("--metrics-port", str(metrics_port))
    rp = receiver_process(
        store, workers=workers, args=args, scheme="https" if https else "http", verify=verify
    )
    # The metrics port is plain HTTP (for Prometheus on the host), the delivery port TLS.
    metrics_url, metrics_verify = (
        (f"http://127.0.0.1:{metrics_port}/metrics", True)
        if separate_port
        else (f"{rp.base_url}/metrics", verify)
    )
    before = time.time()
    answer = httpx.post(rp.url, content=wire(event()), headers=HEADERS, verify=verify)
    assert answer.status_code == 200

    # Workers report every half second, the store watch counts every 5 s: poll.
    deadline = time.monotonic() + DEADLINE_S
    while True:
        got = gauges(metrics_url, metrics_verify)
        expected = _expected(rp, (before, time.time()))
        wrong = _differences(got, expected)
        if not wrong or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert wrong == []
    assert expected["gptools_webhook_live"] == expected["gptools_webhook_ready"] == 1.0


#: How long uvicorn may take to replace a worker: its supervisor notices an ended worker
#: within a second (tests/webhooks/test_worker_ping.py; uvicorn alone waited its whole
#: 60 s health check when its ping reached a worker on its way out), but on a loaded
#: machine a new worker's imports alone take seconds.
REPLACEMENT_DEADLINE_S = 60.0


def wait_for_workers(rp: ReceiverProcess, count: int, *, other_than: set[int]) -> set[int]:
    """Poll until ``count`` workers run, none of them in ``other_than``; their pids."""
    deadline = time.monotonic() + REPLACEMENT_DEADLINE_S
    while True:
        pids = serve_workers(rp.proc.pid)
        if len(pids) == count and not pids & other_than:
            return pids
        assert time.monotonic() < deadline, (
            f"workers {pids}, waiting for {count} not in {other_than}; "
            f"the receiver's output ends with: {rp.log.read_text()[-3000:]}"
        )
        time.sleep(0.05)


def wait_for_gauges(url: str, want: dict[str, float]) -> Gauges:
    """Poll the scrape until each gauge of ``want`` has its value; the last scrape."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        got = gauges(url)
        if all(got.get(name) == {(): value} for name, value in want.items()):
            return got
        assert time.monotonic() < deadline, f"{got} never matched {want}"
        time.sleep(0.05)


HEALTHY = {"gptools_webhook_live": 1.0, "gptools_webhook_ready": 1.0}


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_replaced_worker_leaves_no_gauge_behind(
    tmp_path: Path, receiver_process: Callable[..., ReceiverProcess], how: signal.Signals
) -> None:
    """A worker that stops (gracefully, or killed) is replaced by uvicorn's supervisor:
    what the stopped one last reported must not count any more."""
    rp = receiver_process(f"sqlite:///{tmp_path / 's.db'}", workers=2)
    metrics = f"{rp.base_url}/metrics"
    first = wait_for_workers(rp, 2, other_than=set())
    wait_for_gauges(metrics, HEALTHY)
    victim = min(first)
    os.kill(victim, how)
    replaced = wait_for_workers(rp, 2, other_than={victim})
    assert len(replaced & first) == 1
    rp.wait_ready()
    wait_for_gauges(metrics, HEALTHY)
    files = [p.name for p in (tmp_path / "receiver-tmp").glob("gptools-metrics-*/gauge_live*")]
    assert not [name for name in files if f"_{victim}.db" in name]


def test_a_scrape_with_no_living_worker_says_not_live(tmp_path: Path) -> None:
    """A worker that reported healthy and then died (no worker left, the metrics port's
    process still answering) must not keep the receiver "live": its gauges are forgotten
    and the scrape says 0, as nothing answers /healthz."""
    import subprocess
    import sys

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    report = (
        "from gptools.webhooks._metrics import DeliveryMetrics; "
        "DeliveryMetrics().health(live=True, ready=True, store_up=True)"
    )
    subprocess.run([sys.executable, "-c", report], env=env, check=True, timeout=60)
    assert [p.name.split("_")[:2] for p in tmp_path.glob("gauge_live*")] == [["gauge", "livemin"]]
    values = _render_values(
        "import sys; from gptools.webhooks._metrics import render; "
        "sys.stdout.write(render()[0].decode())",
        env,
    )
    assert values == {
        "gptools_webhook_live": 0.0,
        "gptools_webhook_ready": 0.0,
        "gptools_webhook_store_up": 0.0,
    }
    assert list(tmp_path.glob("gauge_live*")) == []


def _render_values(script: str, env: dict[str, str]) -> dict[str, float]:
    """Run ``script`` (which writes a scrape to stdout) and read its health gauges."""
    import subprocess
    import sys

    from prometheus_client.parser import text_string_to_metric_families

    text = subprocess.run(
        [sys.executable, "-c", script], env=env, check=True, timeout=60, capture_output=True
    ).stdout.decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in HEALTHY or sample.name == "gptools_webhook_store_up"
    }


def test_a_worker_that_shuts_down_stops_counting(tmp_path: Path) -> None:
    """A worker draining its last requests on shutdown (uvicorn waits up to 10 s) serves
    no new one, while its siblings do: it withdraws its gauges instead of reporting 0,
    which would read as "not live" for the whole receiver."""
    import subprocess
    import sys

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    (tmp_path / "metrics").mkdir()
    sibling = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from gptools.webhooks._metrics import DeliveryMetrics; "
            "DeliveryMetrics().health(live=True, ready=True, store_up=True); "
            "print('reported', flush=True); sys.stdin.read()",
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sibling.stdout is not None and sibling.stdout.readline() == "reported\n"
        store = f"sqlite:///{tmp_path / 's.db'}"
        values = _render_values(
            "import asyncio, sys\n"
            "from gptools.webhooks import ReceiverAuth, WebhookReceiver\n"
            "from gptools.webhooks._metrics import render\n"
            f"receiver = WebhookReceiver({store!r}, auth=ReceiverAuth.none())\n"
            "async def lifespan():\n"
            "    inbox = asyncio.Queue()\n"
            "    for kind in ('lifespan.startup', 'lifespan.shutdown'):\n"
            "        inbox.put_nowait({'type': kind})\n"
            "    async def send(message):\n"
            "        assert message['type'].endswith('.complete'), message\n"
            "    await receiver({'type': 'lifespan'}, inbox.get, send)\n"
            "asyncio.run(lifespan())\n"
            "sys.stdout.write(render()[0].decode())\n",
            env,
        )
    finally:
        sibling.communicate(timeout=60)
    assert values == {
        "gptools_webhook_live": 1.0,
        "gptools_webhook_ready": 1.0,
        "gptools_webhook_store_up": 1.0,
    }
