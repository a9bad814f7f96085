"""Fixtures of the receiver tests: real servers on loopback, real SQLite files, a real
PostgreSQL schema per test (dropped afterwards), receiver subprocesses."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from gptools import spec
from gptools.models import dumps_wire

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
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                           http="httptools", loop="asyncio",
                                           timeout_graceful_shutdown=5))
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


def free_port() -> int:
    """A port that was free a moment ago (for subprocesses that bind it themselves)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class ReceiverProcess:
    """A ``gptools webhooks serve`` subprocess."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        """The webhook URL."""
        return f"http://127.0.0.1:{self.port}{spec.DEFAULT_WEBHOOK_PATH}"

    def wait_ready(self) -> None:
        """Poll /healthz until it answers 200 (or fail with the process's output)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"receiver exited: {self.log.read_text()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"receiver not ready: {self.log.read_text()}")

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


@pytest.fixture
def receiver_process(tmp_path: Path) -> Iterator[Callable[..., ReceiverProcess]]:
    """Start ``gptools webhooks serve`` subprocesses (stopped after the test)."""
    started: list[ReceiverProcess] = []

    def start(store: str, *, workers: int = 1, auth: str = "bearer",
              extra_env: dict[str, str] | None = None) -> ReceiverProcess:
        port = free_port()
        log = tmp_path / f"receiver-{port}.log"
        env = {**os.environ, "GP_WEBHOOK_API_KEY": "test-key", **(extra_env or {})}
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", "from gptools.cli import main; main()", "webhooks",
                 "serve", "--auth", auth, "--store", store, "--port", str(port),
                 "--workers", str(workers)],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        rp = ReceiverProcess(proc, port, log)
        started.append(rp)
        rp.wait_ready()
        return rp

    yield start
    for rp in started:
        rp.terminate()


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
