"""``gptools.webhooks.serve``: the receiver served from Python, as the CLI serves it.

The full run is a child process (uvicorn and SIGTERM belong to a process's main thread):
a script that calls ``serve(...)`` receives a delivery, is stopped by SIGTERM, cleans up
and ends by SIGTERM. The refusals before anything starts are called in this process, and
leave its environment as it was.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from gptools.errors import ConfigurationError
from gptools.webhooks import ListenError, ServeError, open_store, serve
from tests.webhooks.conftest import ReceiverProcess, event, free_port, wire

SCRIPT = """
import sys
from gptools.webhooks import serve

def announce(line):
    print("ANNOUNCED", line, flush=True)

serve(sys.argv[1], auth="bearer", port=int(sys.argv[2]), announce=announce)
print("RETURNED", flush=True)
"""


@pytest.fixture
def environment_kept() -> Iterator[None]:
    """The refusals below must leave the caller's environment exactly as it was."""
    before = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    yield
    assert {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"} == before


def test_a_python_caller_serves_receives_and_stops_on_sigterm(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    port = free_port()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    log = tmp_path / "serve.log"
    env = {**os.environ, "GP_WEBHOOK_API_KEY": "test-key", "TMPDIR": str(scratch)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, store, str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    receiver = ReceiverProcess(proc, port, log)
    try:
        receiver.wait_ready()
        # Every process counts its metrics into a fresh directory of this run.
        assert [p.name[:16] for p in scratch.iterdir()] == ["gptools-metrics-"]
        body = event("7b0c5a6e-2f51-4d7e-9a43-0c1f2e3d4b5a")
        answer = httpx.post(
            receiver.url,
            content=wire(body),
            headers={"Authorization": "Bearer test-key", "Content-Type": "application/json"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
    finally:
        receiver.terminate()
    output = log.read_text()
    # It announced where it listens through the caller's function, and ended by SIGTERM
    # after its clean-up, as a service manager expects (it never returned).
    assert f"ANNOUNCED receiving webhooks on http://127.0.0.1:{port}/" in output
    assert proc.returncode == -signal.SIGTERM and "RETURNED" not in output
    assert list(scratch.iterdir()) == []  # the metrics directory went with it
    conn = open_store(store).connect()
    try:
        assert conn.action_ids() == {"7b0c5a6e-2f51-4d7e-9a43-0c1f2e3d4b5a"}
    finally:
        conn.close()


@pytest.mark.usefixtures("environment_kept")
def test_bad_settings_are_configuration_errors_before_anything_starts(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    os.environ["GP_WEBHOOK_API_KEY"] = "test-key"
    try:
        with pytest.raises(ConfigurationError, match="must start with '/'"):
            serve(store, auth="bearer", path="v1/events")
        with pytest.raises(ConfigurationError, match="go together"):
            serve(store, auth="bearer", ssl_certfile=str(tmp_path / "cert.pem"))
        with pytest.raises(ConfigurationError, match="unknown store URL"):
            serve("mysql://db/x", auth="bearer")
        with pytest.raises(ConfigurationError, match=r"must look like package\.module:function"):
            serve(store, auth="bearer", handler="no-colon")
        # The quiet alert's threshold: above 0, within the provider's 7-day retry window.
        for quiet in (timedelta(0), timedelta(days=7, seconds=1)):
            with pytest.raises(ConfigurationError, match="quiet_alert_after must be above 0"):
                serve(store, auth="bearer", quiet_alert_after=quiet)
    finally:
        del os.environ["GP_WEBHOOK_API_KEY"]
    with pytest.raises(ConfigurationError, match="API key"):
        serve(store, auth="bearer")


@pytest.mark.usefixtures("environment_kept")
def test_an_address_in_use_is_a_listen_error(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenError, match=f"cannot listen on 127\\.0\\.0\\.1:{port}"):
            serve(store, auth="none", port=port)
    assert issubclass(ListenError, ServeError)
