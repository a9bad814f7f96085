"""Fixtures of the receiver tests: real servers on loopback, real SQLite files, a real
PostgreSQL schema per test (dropped afterwards), receiver subprocesses."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from gptools import spec
from gptools.models import dumps_wire
from gptools.webhooks._records import ActionState
from tests._support.cli import start_gptools, wait_until_ready

PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
READY_TIMEOUT_S = 30.0


def event(action_id: str | None = None, **overrides: Any) -> dict[str, Any]:
    """A valid notification body as a dict (``overrides`` replace fields; None drops one)."""
    from decimal import Decimal

    body: dict[str, Any] = {
        "roundId": "R-1",
        "gameId": "golden-pharaoh",
        "playerId": "player-00001",
        "timestamp": "2026-03-02T10:15:30.123456",
        "bet": Decimal("2.10"),
        "currencyCode": "EUR",
        "events": ["COIN"],
        "actionId": action_id or str(uuid.uuid4()),
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


def wire(body: dict[str, Any]) -> bytes:
    """``body`` as exact JSON bytes."""
    return dumps_wire(body)


JSON = {"content-type": "application/json"}


class StatementRecorder:
    """A driver connection that records the statements run on it (and their parameters)."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.statements: list[tuple[str, tuple[Any, ...]]] = []

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.statements.append((sql, tuple(params)))
        return self._raw.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


#: The instant the queue tests start their clocks at.
T0 = datetime(2026, 3, 2, tzinfo=UTC)


class ManualClock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def accept(
    store_url: str, action_ids: list[str], at: datetime = T0, *, state: ActionState = "pending"
) -> None:
    """Write ``action_ids`` into the store as accepted deliveries (answered 200 at ``at``),
    as the receiver does, without serving them; their actions in ``state`` (``done``: as
    if the handler had run them)."""
    from gptools.webhooks import open_store
    from gptools.webhooks._records import LogEntry, WriteItem

    conn = open_store(store_url).connect()
    try:
        conn.write_batch(
            [
                WriteItem(
                    LogEntry(at, 200, wire(event(a)).decode(), a, auth_ok=True, latency_ms=1.0),
                    accept=True,
                )
                for a in action_ids
            ],
            state=state,
        )
    finally:
        conn.close()


def log_rows(store_url: str) -> list[dict[str, Any]]:
    """Every ``delivery_log`` row of the store at ``store_url``, in order."""
    from gptools.webhooks import open_store

    conn = open_store(store_url).connect()
    try:
        return list(conn.iter_log())
    finally:
        conn.close()


@dataclass
class ThreadServer:
    """A uvicorn server in a thread: its base URL and the webhook URL."""

    base_url: str
    url: str


@contextmanager
def serve_in_thread(app: Any, path: str = spec.DEFAULT_WEBHOOK_PATH) -> Iterator[ThreadServer]:
    """Serve ``app`` with uvicorn on 127.0.0.1 (free port) until the block ends."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            http="httptools",
            loop="asyncio",
            timeout_graceful_shutdown=5,
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    base = f"http://127.0.0.1:{port}"
    try:
        yield ThreadServer(base, base + path)
    finally:
        server.should_exit = True
        thread.join(READY_TIMEOUT_S)
        sock.close()


def scrape(url: str, *, verify: Any = True) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A Prometheus scrape of ``url``: (labels, value) of each sample, by sample name
    (fails unless it answers 200)."""
    from prometheus_client.parser import text_string_to_metric_families

    answer = httpx.get(url, timeout=10, verify=verify)
    assert answer.status_code == 200, answer.text
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def free_port() -> int:
    """A port that was free a moment ago (for subprocesses that bind it themselves)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class ReceiverProcess:
    """A ``gptools webhooks serve`` subprocess."""

    proc: subprocess.Popen[str]
    port: int
    log: Path
    scheme: str = "http"
    verify: Any = True

    @property
    def base_url(self) -> str:
        """Scheme, host and port."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The webhook URL."""
        return f"{self.base_url}{spec.DEFAULT_WEBHOOK_PATH}"

    def wait_ready(self) -> None:
        """Poll /healthz until it answers 200 (or fail with the process's output)."""
        wait_until_ready(
            self.proc, f"{self.base_url}/healthz", self.log, timeout=READY_TIMEOUT_S,
            verify=self.verify,
        )  # fmt: skip

    def kill(self) -> None:
        """SIGKILL the whole process group (uvicorn's workers too)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(READY_TIMEOUT_S)

    def terminate(self) -> None:
        """SIGTERM (graceful shutdown) and wait."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(READY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()


def start_receiver_process(
    directory: Path,
    store: str,
    *args: str,
    port: int | None = None,
    workers: int = 1,
    auth: str = "bearer",
    env: dict[str, str] | None = None,
    scheme: str = "http",
    verify: Any = True,
    **options: Any,
) -> ReceiverProcess:
    """``gptools webhooks serve`` on ``store`` with ``args``, in a session of its own, once it
    is ready (the caller stops it). Its output goes to ``directory/receiver-PORT.log``;
    ``env`` is set on top of this environment and an API key of ``test-key``; ``options``
    go to :class:`subprocess.Popen`."""
    port = free_port() if port is None else port
    log = directory / f"receiver-{port}.log"
    # Its temporary files (the metrics directory) under the test's own folder: a test
    # that SIGKILLs the receiver leaves them there, not in the machine's /tmp.
    scratch = directory / "receiver-tmp"
    scratch.mkdir(exist_ok=True)
    environ = {
        **os.environ,
        "GP_WEBHOOK_API_KEY": "test-key",
        "TMPDIR": str(scratch),
        **(env or {}),
    }
    with log.open("wb") as out:
        proc = start_gptools(
            *("webhooks", "serve", "--auth", auth, "--store", store, "--port", str(port)),
            *("--workers", str(workers), *args),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environ,
            start_new_session=True,
            **options,
        )
    rp = ReceiverProcess(proc, port, log, scheme, verify)
    try:
        rp.wait_ready()
    except BaseException:
        rp.kill()
        raise
    return rp


@pytest.fixture
def receiver_process(tmp_path: Path) -> Iterator[Callable[..., ReceiverProcess]]:
    """Start ``gptools webhooks serve`` subprocesses (:func:`start_receiver_process`;
    stopped after the test)."""
    started: list[ReceiverProcess] = []

    def start(
        store: str,
        *,
        workers: int = 1,
        auth: str = "bearer",
        extra_env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        scheme: str = "http",
        verify: Any = True,
    ) -> ReceiverProcess:
        rp = start_receiver_process(
            tmp_path, store, *args, workers=workers, auth=auth, env=extra_env, scheme=scheme,
            verify=verify,
        )  # fmt: skip
        started.append(rp)
        return rp

    yield start
    for rp in started:
        rp.terminate()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store of each backend in turn: a SQLite file in the test's folder, then a
    PostgreSQL schema of its own (:func:`pg_url`)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 's.db'}"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL store URL with a schema of its own, dropped after the test."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield f"{PG_DSN}?schema={schema}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def rng() -> random.Random:
    """A seeded RNG."""
    return random.Random(20260302)


def _pg_cluster() -> list[str]:
    version = sorted(os.listdir("/etc/postgresql"))[0]
    return ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main"]


def postgres_is_up() -> bool:
    """Whether the shared PostgreSQL server accepts connections."""
    return (
        subprocess.run(
            ["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"], check=False
        ).returncode
        == 0
    )


def restart_postgres() -> None:
    """Restart the shared PostgreSQL server (as scripts/ensure-services knows how) and
    return once it accepts connections again."""
    subprocess.run([*_pg_cluster(), "restart"], check=True, capture_output=True, timeout=60)
    deadline = time.monotonic() + 60
    while not postgres_is_up():
        if time.monotonic() > deadline:
            raise RuntimeError("PostgreSQL did not come back within 60 s")
        time.sleep(0.1)


@pytest.fixture
def postgres_restarts() -> Iterator[Callable[[], None]]:
    """:func:`restart_postgres`, and a finaliser that makes sure the server is up again
    (other engineers' tests share it)."""
    yield restart_postgres
    if not postgres_is_up():
        subprocess.run([*_pg_cluster(), "start"], check=False, capture_output=True, timeout=60)
        deadline = time.monotonic() + 60
        while not postgres_is_up() and time.monotonic() < deadline:
            time.sleep(0.1)


class LoadGenerator:
    """Threads that POST valid deliveries (a share of them repeats of earlier ones) to a
    receiver and record what each request was answered: ``seen`` holds (actionId,
    status, monotonic time of the answer) per request, status 0 for a transport error
    (no answer)."""

    def __init__(
        self,
        url: str,
        *,
        threads: int = 4,
        duplicate_share: float = 0.3,
        seed: int = 20260302,
        headers: dict[str, str] | None = None,
        timeout: float = 5.0,
        pace: float = 0.0,
    ) -> None:
        self.url = url
        self.pace = pace
        self.headers = {**JSON, **(headers or {})}
        self.timeout = timeout
        self.duplicate_share = duplicate_share
        self.seen: list[tuple[str, int, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(seed + i,), daemon=True)
            for i in range(threads)
        ]

    def __enter__(self) -> LoadGenerator:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop sending and wait for the requests in flight."""
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def _run(self, seed: int) -> None:
        rng = random.Random(seed)
        mine: list[str] = []
        with httpx.Client(timeout=self.timeout) as client:
            while not self._stop.is_set():
                if mine and rng.random() < self.duplicate_share:
                    action_id = rng.choice(mine)
                else:
                    action_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
                    mine.append(action_id)
                try:
                    status = client.post(
                        self.url, content=wire(event(action_id)), headers=self.headers
                    ).status_code
                except httpx.TransportError:
                    status = 0
                self.record(action_id, status)
                if self.pace:
                    self._stop.wait(self.pace)  # a steady load, not the most it can send

    def record(self, action_id: str, status: int) -> None:
        """Record an answer (also for requests the test sends itself)."""
        with self._lock:
            self.seen.append((action_id, status, time.monotonic()))

    def statuses(self) -> list[int]:
        """The answers so far, in order."""
        with self._lock:
            return [s for _, s, _ in self.seen]

    def wait_for(self, predicate: Callable[[list[int]], bool], timeout: float) -> bool:
        """Poll until ``predicate(statuses)`` holds (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.statuses()):
                return True
            time.sleep(0.02)
        return False

    def acknowledged(self) -> set[str]:
        """Every actionId answered 200 at least once."""
        with self._lock:
            return {a for a, s, _ in self.seen if s == 200}

    def answers(self) -> list[tuple[str, int]]:
        """(actionId, status) of every request so far."""
        with self._lock:
            return [(a, s) for a, s, _ in self.seen]


def assert_log_tells_the_truth(
    answers: list[tuple[str, int]],
    rows: list[dict[str, Any]],
    acknowledged: set[str],
    stored: set[str],
) -> None:
    """The store against what the clients saw: every acknowledged action stored, with
    exactly one log row that accepted it; every log row's status one that a client got
    for that action (a 503 may have no row: the store is what failed). A request that
    got no answer at all (status 0: its worker was killed) excuses its action's rows."""
    from collections import Counter

    assert acknowledged <= stored, f"{len(acknowledged - stored)} acknowledged, not stored"
    accepting = Counter(r["action_id"] for r in rows if r["status"] == 200 and not r["duplicate"])
    assert all(accepting[a] == 1 for a in acknowledged), "an action accepted twice or never"
    logged = Counter((r["action_id"], r["status"]) for r in rows)
    sent = Counter(answers)
    unanswered = {a for a, s in answers if s == 0}
    lying = {k: n for k, n in logged.items() if n > sent[k] and k[0] not in unanswered}
    assert not lying, f"log rows with a status no client got: {list(lying.items())[:5]}"
    unlogged = {k: n for k, n in sent.items() if k[1] not in (0, 503) and logged[k] < n}
    assert not unlogged, f"answers without their log row: {list(unlogged.items())[:5]}"
