"""The shipped alerting rules and dashboard in a real Prometheus server (Debian's
``prometheus``, installed by ``scripts/ensure-promtool``) scraping a real receiver:
``gptools webhooks serve --workers 2 --metrics-port`` on PostgreSQL, reached through a TCP
proxy the test cuts (a store outage that leaves the machine's PostgreSQL alone).
Prometheus scrapes and evaluates every second; each phase drives traffic and polls
Prometheus' HTTP API until the alerts pending or firing are exactly the expected ones (a
deadline, never a sleep). A pending alert is enough: its expression holds, and its
``for:`` would make the test wait minutes.

The phases run in order on one receiver and one Prometheus (the module's fixture):
healthy traffic, a store outage, then the provider's deliveries with a key the receiver
does not accept, then a delivery with an event type never seen before; the last test
queries every panel of the shipped dashboard. Each phase starts from the state the one
before left (the outage's proxy reopened by the next, its 503s in the dashboard's
window), so the module is one xdist group: ``--dist loadgroup`` runs it whole, in order,
on one worker, instead of spreading its phases over workers that each start their own
stack."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from gptools.webhooks import ALERT_RULES, GRAFANA_DASHBOARD
from tests._support.proxy import TcpProxy
from tests._support.tools import installed
from tests.webhooks.conftest import (
    PG_DSN,
    LoadGenerator,
    ReceiverProcess,
    free_port,
    start_receiver_process,
)

#: The phases depend on each other's order: one worker runs them all (see above).
pytestmark = pytest.mark.xdist_group("prometheus-server")

JOB = "gptools-webhooks"
#: How long a phase may take to reach its state (each usually takes a few seconds).
PHASE_DEADLINE_S = 30.0
#: What the test puts for the dashboard's variables: its job, and a rate window that spans
#: the whole test (Grafana's $__rate_interval depends on the time range shown).
DASHBOARD_VARIABLES = {"$job": JOB, "$__rate_interval": "5m"}
#: Evaluations over which a phase's alerts must stay as expected once they are.
HOLD_ROUNDS = 3
#: The receiver's default --quiet-alert-after (30 minutes), as its gauge reports it.
DEFAULT_QUIET_THRESHOLD_S = 1800.0


@dataclass
class Prometheus:
    """A Prometheus server's HTTP API."""

    base_url: str

    def _get(self, path: str, **params: str) -> Any:
        answer = httpx.get(f"{self.base_url}{path}", params=params, timeout=10)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of ``expr`` now."""
        data = self._get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", (expr, data)
        result: list[dict[str, Any]] = data["result"]
        return result

    def values(self, expr: str) -> list[float]:
        """The sample values of ``expr`` now."""
        return [float(r["value"][1]) for r in self.query(expr)]

    def alerts(self) -> dict[str, str]:
        """Every active alert (pending or firing) by name: its state. One condition is one
        alert, so a name seen twice fails here."""
        alerts = self._get("/api/v1/alerts")["alerts"]
        names = [a["labels"]["alertname"] for a in alerts]
        assert len(names) == len(set(names)), f"an alert raised more than once: {alerts}"
        return {a["labels"]["alertname"]: a["state"] for a in alerts}

    def evaluated(self) -> list[str]:
        """When each rule group was last evaluated."""
        return [g["lastEvaluation"] for g in self._get("/api/v1/rules")["groups"]]

    def rules(self) -> list[dict[str, Any]]:
        """Every alerting rule loaded, with its health and last evaluation."""
        return [r for g in self._get("/api/v1/rules")["groups"] for r in g["rules"]]


@dataclass
class Stack:
    """The receiver, the proxy in front of its store, and the Prometheus scraping it."""

    receiver: ReceiverProcess
    proxy: TcpProxy
    prometheus: Prometheus
    prometheus_process: subprocess.Popen[bytes]
    prometheus_log: Path
    store: str = ""

    def load(self, key: str, *, threads: int, pace: float) -> LoadGenerator:
        """Deliveries sent with the BEARER ``key`` (started by ``with``)."""
        return LoadGenerator(
            self.receiver.url,
            threads=threads,
            pace=pace,
            duplicate_share=0.1,
            headers={"authorization": f"Bearer {key}"},
        )

    def wait_for(self, what: str, check: Callable[[], Any]) -> Any:
        """Poll ``check`` until it returns something true; fail naming ``what``, its last
        value and Prometheus' alerts once the phase's deadline passes."""
        deadline = time.monotonic() + PHASE_DEADLINE_S
        while True:
            assert self.prometheus_process.poll() is None, self.prometheus_log.read_text()
            last = check()
            if last:
                return last
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not within {PHASE_DEADLINE_S} s; last: {last!r}")
            time.sleep(0.2)

    def next_round(self) -> None:
        """Wait until Prometheus has evaluated the rules once more from now on."""
        before = self.prometheus.evaluated()
        self.wait_for(
            "a new evaluation of the rules", lambda: self.prometheus.evaluated() != before
        )

    def wait_for_alerts(self, expected: dict[str, str]) -> None:
        """Poll until the active alerts are exactly ``expected`` (name: state), then check
        that they stay so for :data:`HOLD_ROUNDS` more evaluations (a state passed
        through on the way is not the phase's)."""
        seen: dict[str, str] = {}

        def exactly() -> bool:
            seen.clear()
            seen.update(self.prometheus.alerts())
            return seen == expected

        deadline = time.monotonic() + PHASE_DEADLINE_S
        while not exactly():
            assert self.prometheus_process.poll() is None, self.prometheus_log.read_text()
            if time.monotonic() > deadline:
                pytest.fail(f"alerts {seen} after {PHASE_DEADLINE_S} s, expected {expected}")
            time.sleep(0.2)
        for _ in range(HOLD_ROUNDS):
            self.next_round()
            assert self.prometheus.alerts() == expected


def _start_prometheus(directory: Path, target: str) -> tuple[subprocess.Popen[bytes], str]:
    """Prometheus on a free loopback port, scraping ``target`` as the receiver's job and
    evaluating the shipped rules every second, with storage in ``directory``."""
    binary = installed("prometheus", "ensure-promtool")
    config = directory / "prometheus.yml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "global": {
                    "scrape_interval": "1s",
                    "scrape_timeout": "1s",
                    "evaluation_interval": "1s",
                },
                "rule_files": [str(ALERT_RULES)],
                "scrape_configs": [
                    {"job_name": JOB, "static_configs": [{"targets": [target]}]},
                ],
            }
        )
    )
    port = free_port()
    log = directory / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + PHASE_DEADLINE_S
    while True:
        assert process.poll() is None, f"prometheus exited: {log.read_text()}"
        try:
            if httpx.get(f"{base}/-/ready", timeout=2).status_code == 200:
                return process, base
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"prometheus not ready within {PHASE_DEADLINE_S} s: {log.read_text()}")
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The receiver (2 workers, a metrics port, PostgreSQL through a proxy), and Prometheus
    scraping it with the shipped rules; everything stopped and dropped afterwards, failed
    or not."""
    directory = tmp_path_factory.mktemp("prometheus-server")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with TcpProxy(("127.0.0.1", 5432)) as proxy:
        store = f"postgresql://postgres@127.0.0.1:{proxy.port}/test?schema={schema}"
        metrics_port = free_port()
        receiver = start_receiver_process(
            directory, store, "--metrics-port", str(metrics_port), workers=2
        )
        process = None
        try:
            process, base = _start_prometheus(directory, f"127.0.0.1:{metrics_port}")
            yield Stack(
                receiver, proxy, Prometheus(base), process, directory / "prometheus.log", store
            )
        finally:
            if process is not None:
                _stop(process)
            receiver.kill()
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _acknowledged(prometheus: Prometheus) -> bool:
    return any(
        v > 0
        for v in prometheus.values(
            f'sum(gptools_webhook_deliveries_total{{job="{JOB}", status="200"}})'
        )
    )


def test_healthy_traffic_raises_no_alert(stack: Stack) -> None:
    prometheus = stack.prometheus
    with stack.load("test-key", threads=2, pace=0.1) as load:
        stack.wait_for("acknowledged deliveries scraped", lambda: _acknowledged(prometheus))
        stack.next_round()  # over series that hold them
        stack.wait_for_alerts({})
        # Every rule evaluates without an error on the real series (no many-to-many
        # matching, no missing label): its health is "ok".
        rules = stack.wait_for(
            "every rule evaluated",
            lambda: (r := prometheus.rules()) and all(x["health"] != "unknown" for x in r) and r,
        )
        assert {r["name"]: (r["health"], r.get("lastError", "")) for r in rules} == {
            r["name"]: ("ok", "") for r in rules
        }
        assert len(rules) == ALERT_RULES.read_text().count("- alert: ")
        # Two workers, one metrics port: one series per gauge, and it tells the truth.
        for gauge in ("live", "ready", "store_up"):
            series = prometheus.query(f'gptools_webhook_{gauge}{{job="{JOB}"}}')
            assert [s["value"][1] for s in series] == ["1"], (gauge, series)
        assert prometheus.values(f'up{{job="{JOB}"}}') == [1.0]
        assert prometheus.values(f'gptools_webhook_quiet_threshold_seconds{{job="{JOB}"}}') == [
            DEFAULT_QUIET_THRESHOLD_S
        ]
    assert set(load.statuses()) == {200}


def test_a_store_outage_is_not_ready_never_down(stack: Stack) -> None:
    prometheus = stack.prometheus
    stack.proxy.cut()
    with stack.load("test-key", threads=8, pace=0.0) as load:
        # Every delivery answered 503 (the provider retries them); the receiver still
        # answers scrapes, and says its store is unreachable.
        stack.wait_for_alerts(
            {"GptoolsReceiverNotReady": "pending", "GptoolsUnavailableAnswers": "pending"}
        )
        assert prometheus.values(f'up{{job="{JOB}"}}') == [1.0]
        assert prometheus.values(f'gptools_webhook_store_up{{job="{JOB}"}}') == [0.0]
        assert prometheus.values(f'gptools_webhook_live{{job="{JOB}"}}') == [1.0]
        # Well over the rule's 5%, so that the share stays over it in the next phase
        # (the outage's 503s stay in the rule's 2-minute window).
        stack.wait_for(
            "a fifth of the answers 503",
            lambda: prometheus.values(
                f'sum(gptools_webhook_deliveries_total{{job="{JOB}", status="503"}})'
                f' / sum(gptools_webhook_deliveries_total{{job="{JOB}"}}) > 0.2'
            ),
        )
        load.stop()
        assert stack.receiver.proc.poll() is None
        assert 503 in load.statuses() and 200 not in load.statuses()
        # Still exactly these two once the load stopped.
        stack.wait_for_alerts(
            {"GptoolsReceiverNotReady": "pending", "GptoolsUnavailableAnswers": "pending"}
        )


def test_a_rotated_key_pages_as_refused_by_auth(stack: Stack) -> None:
    prometheus = stack.prometheus
    stack.proxy.open()
    stack.wait_for(
        "the receiver ready again",
        lambda: httpx.get(f"{stack.receiver.base_url}/readyz", timeout=2).status_code == 200,
    )
    # The provider's deliveries now carry a key the receiver does not accept, at 0.5/s
    # (the case): each is answered 401 and lost, and none is acknowledged since
    # the outage. The 503 share keeps its outage in its window: still pending.
    with stack.load("rotated-key", threads=1, pace=2.0) as load:
        stack.wait_for(
            "the receiver scraped ready",
            lambda: prometheus.values(f'gptools_webhook_ready{{job="{JOB}"}}') == [1.0],
        )
        stack.wait_for_alerts(
            {"GptoolsDeliveriesRefusedByAuth": "pending", "GptoolsUnavailableAnswers": "pending"}
        )
    assert set(load.statuses()) == {401}


def test_a_new_event_type_is_recorded_counted_and_alerted(stack: Stack) -> None:
    """Issue 38, item 3: one real delivery of an event type the document does not list,
    to a two-worker receiver: recorded once in the store, counted once, and the shipped
    rule fires (for: 0m: firing at the first evaluation that sees it)."""
    from gptools.webhooks import open_store
    from gptools.webhooks._first_seen_store import Sighting
    from tests.webhooks.conftest import event, wire

    prometheus = stack.prometheus
    action_id = str(uuid.uuid4())
    answer = httpx.post(
        stack.receiver.url,
        content=wire(event(action_id, events=["COIN", "MEGA_SPIN"])),
        headers={"content-type": "application/json", "authorization": "Bearer test-key"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    stack.wait_for(
        "the new event type counted",
        lambda: (
            prometheus.values(
                f'sum(gptools_webhook_first_seen_total{{job="{JOB}", kind="event_type"}})'
            )
            == [1.0]
        ),
    )
    stack.wait_for(
        "the payload alert firing",
        lambda: prometheus.alerts().get("GptoolsPayloadChanged") == "firing",
    )
    conn = open_store(stack.store).connect()
    try:
        (row,) = conn.first_seen("event_type")
    finally:
        conn.close()
    assert row == Sighting("event_type", "MEGA_SPIN", row.seen_at, action_id)


def test_every_dashboard_panel_returns_data(stack: Stack) -> None:
    dashboard = json.loads(GRAFANA_DASHBOARD.read_text())
    empty = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for variable, value in DASHBOARD_VARIABLES.items():
                expr = expr.replace(variable, value)
            assert "$" not in expr, expr
            if not stack.prometheus.query(expr):
                empty.append(f"{panel['title']}: {expr}")
    assert not empty, "panels without data:\n" + "\n".join(empty)
