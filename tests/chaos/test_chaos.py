"""Chaos: the receiver (uvicorn, 2 workers, a processing handler) under a steady load of
valid and duplicate deliveries while the test restarts PostgreSQL, fills and frees the
disk, SIGKILLs a worker and sends actions whose handler kills its process (issue 17).

At the end: every acknowledged action is stored exactly once; no action is lost from
the queue (every acknowledged one is processed, the killers are dead-lettered); every
log row's status is one the load generator was answered; and the receiver is healthy
and ready again, without a restart (same parent process).

PostgreSQL is a server shared with other tests, so its disk is not filled: the disk
scenario runs on SQLite (the file capped with ``max_page_count``, SQLite's own "disk
full"), the PostgreSQL restart on PostgreSQL; both get the worker SIGKILL and the killer
handler.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from gptools import spec
from gptools.webhooks import open_store
from tests._support.cli import serve_workers
from tests.webhooks.conftest import (
    JSON,
    READY_TIMEOUT_S,
    LoadGenerator,
    assert_log_tells_the_truth,
    event,
    free_port,
    wire,
)

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 2
#: The SQLite file's cap in pages (4 KiB): far above what the run writes by itself; the
#: test fills the rest with a filler table to make the disk "full".
MAX_PAGES = 25_000


@dataclass
class Receiver:
    """The receiver under test: uvicorn's parent process and its port."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    processed: Path

    @property
    def url(self) -> str:
        """The webhook URL."""
        return f"http://127.0.0.1:{self.port}{spec.DEFAULT_WEBHOOK_PATH}"

    def get(self, path: str) -> httpx.Response:
        """GET a path of the receiver."""
        return httpx.get(f"http://127.0.0.1:{self.port}{path}", timeout=5)

    def workers(self) -> list[int]:
        """The pids of the worker processes (uvicorn's children that serve)."""
        return sorted(serve_workers(self.proc.pid))

    def wait_until(self, what: str, predicate: Callable[[], bool], timeout: float) -> None:
        """Poll ``predicate`` until it holds, or fail with the receiver's output."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if self.proc.poll() is not None:
                raise AssertionError(f"receiver exited: {self.log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{what} not within {timeout} s; receiver output: "
                    f"{self.log.read_text()[-3000:]}"
                )
            time.sleep(0.05)

    def healthy(self) -> bool:
        """/healthz and /readyz both answer 200."""
        try:
            return all(self.get(p).status_code == 200 for p in ("/healthz", "/readyz"))
        except httpx.TransportError:
            return False


@pytest.fixture
def start_receiver(tmp_path: Path) -> Iterator[Callable[..., Receiver]]:
    """Start the chaos receiver (stopped, and PostgreSQL left running, afterwards)."""
    started: list[Receiver] = []

    def start(store: str, killers: list[str], **env: str) -> Receiver:
        port = free_port()
        log = tmp_path / "receiver.log"
        processed = tmp_path / "processed.txt"
        processed.touch()
        environ = {
            **os.environ,
            "CHAOS_STORE": store,
            "CHAOS_KILLERS": ",".join(killers),
            "CHAOS_PROCESSED": str(processed),
            # Temporary files of the killed workers stay in the test's folder.
            "TMPDIR": str(tmp_path),
            **env,
        }
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "tests.chaos.app:make",
                    "--factory",
                    "--port",
                    str(port),
                    "--workers",
                    str(WORKERS),
                    "--http",
                    "httptools",
                    "--loop",
                    "uvloop",
                    "--log-level",
                    "warning",
                    "--no-access-log",
                    "--timeout-graceful-shutdown",
                    "5",
                ],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=environ,
                start_new_session=True,
            )
        receiver = Receiver(proc, port, log, processed)
        started.append(receiver)
        receiver.wait_until(
            "ready",
            lambda: receiver.healthy() and len(receiver.workers()) == WORKERS,
            READY_TIMEOUT_S,
        )
        return receiver

    yield start
    for receiver in started:
        if receiver.proc.poll() is None:
            receiver.proc.send_signal(signal.SIGTERM)
            try:
                receiver.proc.wait(READY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(receiver.proc.pid, signal.SIGKILL)
                receiver.proc.wait(READY_TIMEOUT_S)


def _recovers(load: LoadGenerator, timeout: float, oks: int = 100) -> None:
    """The load gets ``oks`` more 200s within ``timeout`` s."""
    mark = len(load.statuses())
    assert load.wait_for(lambda s: s[mark:].count(200) >= oks, timeout), (
        f"no recovery within {timeout} s: {load.statuses()[mark:][-20:]}"
    )


def _sigkill_a_worker(receiver: Receiver, load: LoadGenerator) -> None:
    victim = receiver.workers()[0]
    os.kill(victim, signal.SIGKILL)
    receiver.wait_until(
        "a replacement worker",
        lambda: victim not in receiver.workers() and len(receiver.workers()) == WORKERS,
        60,
    )
    _recovers(load, 30)


def _killer_handlers(receiver: Receiver, load: LoadGenerator, killers: list[str]) -> None:
    with httpx.Client(timeout=5) as client:
        for killer in killers:
            deadline = time.monotonic() + 30
            # The worker that runs it dies; its request may be cut off: send until a 200.
            while True:
                try:
                    status = client.post(
                        receiver.url, content=wire(event(killer)), headers=JSON
                    ).status_code
                except httpx.TransportError:
                    status = 0
                load.record(killer, status)
                if status == 200:
                    break
                assert time.monotonic() < deadline, "a killer action was never acknowledged"


def _final_checks(
    receiver: Receiver, load: LoadGenerator, killers: list[str], store_url: str, parent: int
) -> None:
    try:
        _check(receiver, load, killers, store_url, parent)
    except AssertionError as exc:
        lines = [
            ln for ln in receiver.log.read_text().splitlines() if "WARNING" in ln or "ERROR" in ln
        ]
        raise AssertionError(
            f"{exc}\nreceiver warnings and errors:\n" + "\n".join(lines[-60:])
        ) from exc


def _check(
    receiver: Receiver, load: LoadGenerator, killers: list[str], store_url: str, parent: int
) -> None:
    acknowledged = load.acknowledged()
    assert set(killers) <= acknowledged
    store = open_store(store_url)

    def settled() -> bool:
        conn = store.connect()
        try:
            return conn.queue_counts().pending == 0
        finally:
            conn.close()

    # Three runs of each killer, each one taking a worker down, then its dead letter.
    receiver.wait_until("the queue to be empty", settled, 120)
    receiver.wait_until("healthy and ready", receiver.healthy, 30)
    assert receiver.proc.pid == parent and receiver.proc.poll() is None  # never restarted
    conn = store.connect()
    try:
        rows = list(conn.iter_log())
        stored = conn.action_ids()
        dead = {d.action_id: d for d in conn.dead_letters()}
        states = dict(conn.raw.execute("SELECT action_id, state FROM webhook_actions"))
    finally:
        conn.close()
    assert_log_tells_the_truth(load.answers(), rows, acknowledged, stored)
    assert set(dead) == set(killers), f"dead letters: {list(dead.items())[:3]}"
    assert all("the last one never finished" in (d.last_error or "") for d in dead.values())
    processed = set(receiver.processed.read_text().split())
    lost = {a for a in acknowledged - set(killers) if states.get(a) != "done" or a not in processed}
    assert not lost, f"{len(lost)} acknowledged actions never processed"
    assert receiver.get("/healthz").json()["store"] == "ok"


def test_chaos_on_postgres(
    pg_url: str, start_receiver: Callable[..., Receiver], postgres_restarts: Callable[[], None]
) -> None:
    killers = [str(uuid.uuid4()) for _ in range(2)]
    receiver = start_receiver(pg_url, killers)
    parent = receiver.proc.pid
    with LoadGenerator(receiver.url, threads=3, pace=0.005) as load:
        _recovers(load, 30, oks=200)
        postgres_restarts()
        _recovers(load, 10, oks=20)  # 200s again within 10 s of the server being back
        _sigkill_a_worker(receiver, load)
        _killer_handlers(receiver, load, killers)
        postgres_restarts()  # again, while the killers take workers down
        # Not the 10 s of a restart alone (above, and test_recovery): the killer handlers
        # are taking workers down at the same time, and each replacement worker has to
        # start (seconds of imports on a loaded 2-core machine) before it answers.
        _recovers(load, 30, oks=20)
        _recovers(load, 30, oks=200)
    _final_checks(receiver, load, killers, pg_url, parent)


def test_chaos_on_sqlite(tmp_path: Path, start_receiver: Callable[..., Receiver]) -> None:
    db = tmp_path / "store.sqlite3"
    url = f"sqlite:///{db}"
    killers = [str(uuid.uuid4()) for _ in range(2)]
    receiver = start_receiver(url, killers, CHAOS_MAX_PAGES=str(MAX_PAGES))
    parent = receiver.proc.pid
    filler = sqlite3.connect(db, isolation_level=None, timeout=10)
    filler.execute("CREATE TABLE IF NOT EXISTS filler (blob BLOB)")
    with LoadGenerator(receiver.url, threads=3, pace=0.005) as load:
        _recovers(load, 30, oks=200)
        # The disk fills: only 503s, and the receiver is not ready.
        while (pages := filler.execute("PRAGMA page_count").fetchone()[0]) < MAX_PAGES - 2:
            filler.executemany(
                "INSERT INTO filler VALUES (zeroblob(4000))",
                [()] * max(1, min(2000, MAX_PAGES - 2 - pages)),
            )
        assert load.wait_for(lambda s: s[-30:] == [503] * 30, 30), load.statuses()[-30:]
        receiver.wait_until(
            "unready on a full disk", lambda: receiver.get("/readyz").status_code == 503, 10
        )
        assert receiver.get("/healthz").status_code == 200  # unready, not dead
        _sigkill_a_worker_while_full = receiver.workers()[0]
        os.kill(_sigkill_a_worker_while_full, signal.SIGKILL)  # a worker restarts on a full disk
        receiver.wait_until(
            "a replacement worker",
            lambda: (
                len(receiver.workers()) == WORKERS
                and _sigkill_a_worker_while_full not in receiver.workers()
            ),
            60,
        )
        filler.execute("DELETE FROM filler")  # space is back
        _recovers(load, 10, oks=20)
        _sigkill_a_worker(receiver, load)
        _killer_handlers(receiver, load, killers)
        _recovers(load, 30, oks=200)
    filler.close()
    _final_checks(receiver, load, killers, url, parent)
