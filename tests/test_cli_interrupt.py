"""Ctrl-C is exit 130 everywhere (issue 23, item 13): each long-running command, run as the
console script, gets a SIGINT while it is at work and ends with 130, one line, no
"Aborted!", no traceback; with ``--json`` stdout holds one error document (item 14).
Commands that talk to the provider first wait for the requests in flight (at most their
time-out), so the test gives them a short one.

"At work" is not guessed with a sleep: the command talks to a server of the test's that
accepts connections and never answers, and the signal goes out once that server has
accepted the command's connection.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support.cli import start_gptools

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "data" / "example_plan.yaml"
PLAYERS = ROOT / "data" / "players_messy.csv"
_READY_TIMEOUT_S = 60.0


class BlackHole:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.accepted = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed: the test is over
                return
            self._held.append(conn)
            self.accepted.set()

    def close(self) -> None:
        """Stop accepting and drop the held connections."""
        self.sock.close()
        self._thread.join(timeout=10)
        for conn in self._held:
            conn.close()


@pytest.fixture
def hole() -> Iterator[BlackHole]:
    server = BlackHole()
    yield server
    server.close()


def _env(tmp_path: Path, hole: BlackHole) -> dict[str, str]:
    env = {
        **os.environ,
        "GP_BASE_URL": f"http://127.0.0.1:{hole.port}",
        "GP_USERNAME": "someone",
        "GP_PASSWORD": "secret",
        "GPTOOLS_SANDBOX_STATE_DIR": str(tmp_path / "state"),
        "GPTOOLS_JOURNAL_DIR": str(tmp_path / "journals"),
        # A command waits for the answers already in flight when Ctrl-C comes (the loader
        # records them in its journal); here they never come, so they time out quickly.
        "GP_TIMEOUT": "2",
        "GP_MAX_RETRIES": "0",
    }
    env.pop("GPTOOLS_SANDBOX_URL", None)
    return env


def interrupt_when_at_work(
    args: list[str], tmp_path: Path, hole: BlackHole
) -> subprocess.CompletedProcess[str]:
    """Run ``gptools ARGS``; once the black hole accepted its connection, send SIGINT."""
    proc = start_gptools(*args, cwd=tmp_path, env=_env(tmp_path, hole))
    try:
        if not hole.accepted.wait(_READY_TIMEOUT_S):
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"gptools {' '.join(args)} never connected: {err[-2000:]}")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


LONG_RUNNING = {
    "campaigns apply": ["campaigns", "apply", str(PLAN), "--now", "2029-12-01T12:00:00Z"],
    "participants load": [
        "participants",
        "load",
        str(PLAYERS),
        "--campaign",
        "CMP-000001",
        "--brand",
        "201",
        "--no-progress",
    ],
    "costs preview": ["costs", "preview", "--game", "neon-fruits", "--currency", "EUR"],
}


@pytest.mark.parametrize("name", sorted(LONG_RUNNING))
def test_ctrl_c_is_130_on_a_client_command(name: str, tmp_path: Path, hole: BlackHole) -> None:
    done = interrupt_when_at_work(LONG_RUNNING[name], tmp_path, hole)
    assert done.returncode == 130, done.stderr
    assert "Aborted!" not in done.stderr and "Traceback" not in done.stderr
    assert "interrupted" in done.stderr


def test_ctrl_c_is_130_on_sandbox_deliver_with_one_json_document(
    tmp_path: Path, hole: BlackHole
) -> None:
    url = f"http://127.0.0.1:{hole.port}/v1/game-action-events"
    done = interrupt_when_at_work(
        ["sandbox", "deliver", "--url", url, "-n", "3", "--json"], tmp_path, hole
    )
    assert done.returncode == 130, done.stderr
    assert "Aborted!" not in done.stderr and "Traceback" not in done.stderr
    assert json.loads(done.stdout) == {
        "error": {"code": "interrupted", "message": "interrupted", "exit": 130}
    }


def test_ctrl_c_is_130_on_webhooks_analyze(tmp_path: Path, hole: BlackHole) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://postgres@127.0.0.1:{hole.port}/test?connect_timeout=60"
    done = interrupt_when_at_work(["webhooks", "analyze", url], tmp_path, hole)
    assert done.returncode == 130, done.stderr
    assert "Aborted!" not in done.stderr and "Traceback" not in done.stderr
