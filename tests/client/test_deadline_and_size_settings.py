"""Where a call's deadline and the answer size limit come from (issue 22): ``timeout=N``
is a deadline of N seconds for the whole call, per-phase values end a call within
connect + read; ``max_response_bytes`` / ``GP_MAX_RESPONSE_BYTES`` like the other settings.
How they hold against hostile servers: ``tests/hostile/test_client_servers.py``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools import errors
from gptools.client import AsyncClient, Client, ClientSettings
from gptools.client import _constants as C
from gptools.client._base import Deadline
from gptools.client._settings import call_deadline, parse_timeout

BASE = ("https://gp.example", "u", "p")


@pytest.mark.parametrize(
    ("timeout", "deadline"),
    [(10, 10.0), (2.5, 2.5), ((2, 30), 32.0), (httpx.Timeout(9, connect=1), 10.0)],
)
def test_the_deadline_of_each_form(timeout: Any, deadline: float) -> None:
    assert call_deadline(timeout) == deadline


def test_the_default_call_ends_within_35_seconds() -> None:
    s = ClientSettings.resolve(*BASE, env_file=None, environ={})
    assert s.deadline == C.DEFAULT_CONNECT_TIMEOUT + C.DEFAULT_READ_TIMEOUT == 35.0
    assert s.max_response_bytes == C.DEFAULT_MAX_RESPONSE_BYTES == 10 * 1024 * 1024


def test_gp_timeout_seconds_are_a_deadline_and_a_pair_is_per_phase(tmp_path: Path) -> None:
    assert parse_timeout("10") == 10.0 and parse_timeout("2,30") == (2.0, 30.0)
    s = ClientSettings.resolve(*BASE, env_file=None, environ={"GP_TIMEOUT": "7"})
    assert s.deadline == 7.0 and s.timeout.read == 7.0
    s = ClientSettings.resolve(*BASE, env_file=None, environ={"GP_TIMEOUT": "2,30"})
    assert s.deadline == 32.0 and (s.timeout.connect, s.timeout.read) == (2.0, 30.0)


def test_max_response_bytes_precedence(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("GP_MAX_RESPONSE_BYTES=5000\n")
    assert ClientSettings.resolve(*BASE, env_file=env_file, environ={}).max_response_bytes == 5000
    s = ClientSettings.resolve(*BASE, env_file=env_file, environ={"GP_MAX_RESPONSE_BYTES": "6000"})
    assert s.max_response_bytes == 6000
    s = ClientSettings.resolve(
        *BASE, max_response_bytes=7000, env_file=env_file, environ={"GP_MAX_RESPONSE_BYTES": "1"}
    )
    assert s.max_response_bytes == 7000


@pytest.mark.parametrize("value", ["0", "-5", "ten", "1.5"])
def test_a_bad_gp_max_response_bytes_says_which_variable(value: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=r"^GP_MAX_RESPONSE_BYTES must be"):
        ClientSettings.resolve(*BASE, env_file=None, environ={"GP_MAX_RESPONSE_BYTES": value})


@pytest.mark.parametrize("klass", [Client, AsyncClient])
def test_clients_and_views_carry_both(
    klass: type[Client] | type[AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GP_MAX_RESPONSE_BYTES", "4096")
    client = klass(*BASE, env_file=None, timeout=4)
    assert (client.deadline, client.max_response_bytes) == (4.0, 4096)
    view = client.with_options(timeout=(1, 2))
    assert view.deadline == 3.0 and client.deadline == 4.0
    assert klass(*BASE, env_file=None, max_response_bytes=10).max_response_bytes == 10
    with pytest.raises(errors.ConfigurationError, match="max_response_bytes"):
        klass(*BASE, env_file=None, max_response_bytes=0)


def test_each_attempt_gets_the_time_left() -> None:
    deadline = Deadline.start(1.0)
    phases = deadline.phases(httpx.Timeout(30, connect=5))
    assert phases.connect is not None and phases.read is not None
    assert 0.9 < phases.connect <= 1.0 and 0.9 < phases.read <= 1.0
    spent = Deadline(1.0, time.monotonic() - 1)
    assert spent.passed()
    with pytest.raises(httpx.ReadTimeout, match="deadline of 1 s"):
        spent.check()
