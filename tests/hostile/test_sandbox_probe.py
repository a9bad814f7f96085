"""Issue 35 item 9: the sandbox probe ends within its deadline, the whole exchange.

Every command with a loopback ``GP_BASE_URL`` first asks ``/_sandbox/identity`` whether a
sandbox serves there. Against a server that drips its answer one byte every half second
(:class:`~tests.hostile.test_client_servers.HostileServer`), the probe gives up within its
deadline (at most 2 s, and never longer than the client's own deadline for a call), so a
command ends within the probe's deadline plus its own calls' deadlines.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest

from gptools.sandbox._remote import served_sandbox_identity
from gptools.session import connect
from tests._support.cli import run_gptools
from tests.hostile.test_client_servers import HostileServer

#: The probe's own bound (``sandbox._remote._PROBE_TIMEOUT_S``).
PROBE_S = 2.0
#: What a slow, shared machine may add to a deadline (the hostile tests' own margin).
SLACK_S = 1.0


@pytest.fixture(params=["drip-head", "drip-body"])
def drip(request: pytest.FixtureRequest) -> Iterator[HostileServer]:
    with HostileServer(request.param) as running:
        yield running


@pytest.mark.parametrize("deadline", [PROBE_S, 0.5])
def test_the_probe_ends_within_its_deadline(drip: HostileServer, deadline: float) -> None:
    start = time.monotonic()
    assert served_sandbox_identity(drip.url, deadline=deadline) is None
    took = time.monotonic() - start
    assert took < deadline + SLACK_S, f"{drip.mode}: {took:.1f} s for a {deadline} s deadline"


def test_connect_probes_within_the_clients_deadline(
    drip: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {"GP_BASE_URL": drip.url, "GP_USERNAME": "u", "GP_PASSWORD": "p"}.items():
        monkeypatch.setenv(name, value)
    start = time.monotonic()
    with connect(timeout=0.5, env_file=None) as client:
        took = time.monotonic() - start
        assert client.server_identity == drip.url  # no sandbox answered: the base URL
    assert took < 0.5 + SLACK_S, f"{drip.mode}: {took:.1f} s for a 0.5 s deadline"


@pytest.mark.parametrize("drip", ["drip-head"], indirect=True)
def test_a_command_against_a_drip_server_ends_within_its_deadlines(drip: HostileServer) -> None:
    env = {
        **os.environ,
        "GP_BASE_URL": drip.url,
        "GP_USERNAME": "u",
        "GP_PASSWORD": "p",
        "GP_TIMEOUT": "3",
        "GP_MAX_RETRIES": "0",
    }
    command = ("costs", "preview", "--game", "g", "--currency", "EUR")
    # The baseline, in the same run: the same command against a closed port fails at once,
    # so it takes what starting the command takes on this machine now.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{closed.getsockname()[1]}"
    start = time.monotonic()
    baseline = run_gptools(*command, env={**env, "GP_BASE_URL": refused}, timeout=60)
    startup = time.monotonic() - start
    assert baseline.returncode == 1, baseline.stderr
    start = time.monotonic()
    done = run_gptools(*command, env=env, timeout=60)
    took = time.monotonic() - start
    assert done.returncode == 1, done.stderr
    assert "deadline of 3 s" in done.stderr and "Traceback" not in done.stderr
    # The probe (2 s) and the call (3 s) past the command's start; the drip itself would
    # hold a per-read time-out for 20 s.
    assert took < startup + PROBE_S + 3.0 + 3 * SLACK_S, f"{took:.1f} s ({startup:.1f} s start)"
