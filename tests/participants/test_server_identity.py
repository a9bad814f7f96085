"""Issue 23 item 1: a server identity that does not depend on the port.

The journal of a load is named by the server's identity; the embedded sandbox listens on
a new port in every process, so its identity is its state's (random, persisted, new after
a reset), and an interrupted load resumes with the embedded sandbox too.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from gptools.client import AsyncClient, Client
from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox
from gptools.sandbox._persist import STATE_FILE, load_state, persisted
from gptools.sandbox._remote import RemoteSandbox, served_sandbox_identity
from gptools.sandbox._state import SandboxState
from tests._support.cli import start_gptools
from tests.participants.conftest import BRAND, make_client, new_campaign
from tests.participants.test_kill_resume import _acknowledged

IDS = 10_000
CHUNK = 50
SEED = 20261126


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_server_identity_defaults_to_the_normalised_base_url(cls: type[Client]) -> None:
    client = cls("HTTPS://Api.Example.COM:443/", "u", "p", env_file=None)
    assert client.server_identity == "https://api.example.com"
    other = cls("http://api.example.com:8080/gp/", "u", "p", env_file=None)
    assert other.server_identity == "http://api.example.com:8080/gp"


@pytest.mark.parametrize("cls", [Client, AsyncClient])
def test_server_identity_is_set_at_construction_and_read_only(cls: type[Client]) -> None:
    client = cls("http://127.0.0.1:5", "u", "p", env_file=None, server_identity="sandbox:ab")
    assert client.server_identity == "sandbox:ab"
    with pytest.raises(AttributeError):
        client.server_identity = "x"  # type: ignore[misc]
    view = client.brand(201)
    assert view.server_identity == "sandbox:ab"
    assert client.with_options(server_identity="other").server_identity == "other"
    for bad in ("", " ", "a\nb", "x" * 513):
        with pytest.raises(ValueError, match="server_identity"):
            cls("http://127.0.0.1:5", "u", "p", env_file=None, server_identity=bad)


def test_sandbox_identity_is_kept_with_its_state_and_new_after_a_reset(tmp_path: Path) -> None:
    with run_sandbox(SandboxConfig(seed=0)) as sb, persisted(sb.state, tmp_path):
        first = sb.identity
        assert first.startswith("sandbox:")
        answer = httpx.get(f"{sb.base_url}/_sandbox/identity", timeout=5).json()
        assert answer == {"identity": first}
        assert RemoteSandbox.at(sb.base_url).identity == first
        assert served_sandbox_identity(sb.base_url) == first
        assert served_sandbox_identity(sb.base_url.replace("127.0.0.1", "localhost")) == first
    # Another process (another port) starting from the saved state has the same identity.
    with run_sandbox(SandboxConfig(seed=0)) as again, persisted(again.state, tmp_path):
        assert again.identity == first
        again.reset()
        assert again.identity != first and again.identity.startswith("sandbox:")
        second = again.identity
    restored = SandboxState()
    load_state(restored, tmp_path / STATE_FILE)
    assert restored.identity == second


def test_only_a_loopback_sandbox_is_asked_for_its_identity(sandbox: RunningSandbox) -> None:
    # Not on this machine: no request at all (the real provider never gets one).
    assert served_sandbox_identity("https://api.example.invalid") is None
    # Something on loopback that is not a sandbox: no identity.
    before = len(sandbox.state.requests)
    assert served_sandbox_identity(f"{sandbox.base_url}/api") is None
    assert len(sandbox.state.requests) == before + 1  # recorded as an API path: a 404


def _state_counts(state_dir: Path, campaign: str) -> dict[str, int]:
    state = SandboxState()
    load_state(state, state_dir / STATE_FILE)
    return state.participants(campaign)


@pytest.mark.slow
def test_sigint_then_resume_on_the_embedded_sandbox(tmp_path: Path) -> None:
    """Each CLI run serves its own embedded sandbox on a new port from the persisted
    state: the second run resumes the first's journal, and the sandbox receives every id
    exactly once."""
    state_dir = tmp_path / "state"
    journals = tmp_path / "journals"
    with (
        run_sandbox(SandboxConfig(seed=0)) as sb,
        persisted(sb.state, state_dir),
        make_client(sb) as client,
    ):
        campaign = new_campaign(client)
    ids = [f"s-{i:05d}" for i in range(IDS)]
    players = tmp_path / "players.csv"
    players.write_text("playerId\n" + "\n".join(ids) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GP_", "GPTOOLS_SANDBOX"))}
    env.update(
        GP_BASE_URL="", GPTOOLS_SANDBOX_STATE_DIR=str(state_dir), GPTOOLS_JOURNAL_DIR=str(journals)
    )
    args = [
        "participants", "load", str(players), "--campaign", campaign, "--brand", str(BRAND),
        "--rejects", str(tmp_path / "rejects.csv"), "--no-progress", "--json",
        "--chunk-size", str(CHUNK),
    ]  # fmt: skip
    threshold = random.Random(SEED).randint(10, IDS // CHUNK - 60)

    proc = start_gptools(*args, env=env)
    deadline = time.monotonic() + 120
    try:
        while True:
            found = list(journals.glob("participants-*.sqlite"))
            if found and _acknowledged(found[0]) >= threshold:
                break
            assert proc.poll() is None, f"the load ended before the interrupt: {proc.communicate()}"
            assert time.monotonic() < deadline, "the load never reached the interrupt point"
            time.sleep(0.002)  # readiness poll of the journal, bounded by the deadline
        os.kill(proc.pid, signal.SIGINT)
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    first = json.loads(out)
    assert 0 < first["loaded"] < IDS
    counts = _state_counts(state_dir, campaign)
    assert len(counts) == first["loaded"]

    again = start_gptools(*args, env=env)
    out, err = again.communicate(timeout=180)
    assert again.returncode == 0, err
    summary = json.loads(out)
    assert summary["resumed"] is True
    assert summary["loaded"] == IDS
    assert summary["loaded_this_run"] == IDS - first["loaded"]
    assert len(list(journals.glob("participants-*.sqlite"))) == 1
    counts = _state_counts(state_dir, campaign)
    assert set(counts) == set(ids)
    assert set(counts.values()) == {1}, "an id was sent twice"


@pytest.mark.parametrize(("pad", "expected"), [(10, "sandbox:00112233aabbccdd"), (2000, None)])
def test_the_identity_probe_reads_a_bounded_answer(pad: int, expected: str | None) -> None:
    body = json.dumps({"identity": "sandbox:00112233aabbccdd", "pad": "x" * pad}).encode()

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the handler's name is http.server's
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return None

    with ThreadingHTTPServer(("127.0.0.1", 0), Answer) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            port = server.server_address[1]
            assert served_sandbox_identity(f"http://127.0.0.1:{port}") == expected
        finally:
            server.shutdown()
            thread.join(timeout=10)
