"""Shared fixtures: one sandbox per test session, reset before each test that asks for it.

``sandbox`` is a :class:`gptools.sandbox.RunningSandbox` with every rate tier enforced;
use ``fresh_sandbox`` instead when a test must not see state left by earlier tests
(it is the same server, reset: no requests, campaigns, faults or rate windows).
"""

from __future__ import annotations

import importlib
import socket
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from click.testing import CliRunner, Result

from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox


@pytest.fixture(autouse=True)
def _sandbox_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLI commands run by a test keep their embedded sandbox's state in a directory of
    that test, never in the user's cache."""
    monkeypatch.setenv("GPTOOLS_SANDBOX_STATE_DIR", str(tmp_path_factory.mktemp("sandbox-state")))
    # The campaign register too (apply_plan and every load record themselves there), and
    # the loader's default journals.
    monkeypatch.setenv("GPTOOLS_REGISTER", str(tmp_path_factory.mktemp("register") / "r.sqlite"))
    # And the receiver's outage spools of PostgreSQL stores (~/.local/state otherwise).
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    monkeypatch.setenv("GPTOOLS_JOURNAL_DIR", str(tmp_path_factory.mktemp("journals")))


@pytest.fixture(scope="session")
def sandbox() -> Iterator[RunningSandbox]:
    """A sandbox served on 127.0.0.1 for the whole session (rate limits enforced)."""
    with run_sandbox(SandboxConfig(seed=0)) as sb:
        yield sb


@pytest.fixture
def fresh_sandbox(sandbox: RunningSandbox) -> RunningSandbox:
    """The session sandbox, reset so the test starts from nothing."""
    sandbox.reset()
    return sandbox


@pytest.fixture
def cli_runner(fresh_sandbox: RunningSandbox, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A click runner whose environment points the CLI at the fresh sandbox as ``partner``."""
    acct = fresh_sandbox.accounts["partner"]
    monkeypatch.setenv("GP_BASE_URL", fresh_sandbox.base_url)
    monkeypatch.setenv("GP_USERNAME", acct.username)
    monkeypatch.setenv("GP_PASSWORD", acct.password)
    return CliRunner()


#: How long a command may take to give up on an address that refuses every connection,
#: with the default retry budget (issue 13: "by default under 10 s").
CONNECT_FAILURE_BUDGET_S = 10.0


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture
def unreachable(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[Sequence[str]], Result]:
    """``run(args)``: the CLI invoked with GP_BASE_URL at a closed loopback port; checks the
    contract of a wrong address (issue 13 item 5) and returns the result: exit 1 within the
    retry budget, one line on stderr naming the address, no advice to resume."""
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("GP_BASE_URL", url)
    monkeypatch.setenv("GP_USERNAME", "someone")
    monkeypatch.setenv("GP_PASSWORD", "secret-x")
    for var in ("GP_MAX_RETRIES", "GP_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GPTOOLS_JOURNAL_DIR", str(tmp_path_factory.mktemp("journals")))

    def run(args: Sequence[str]) -> Result:
        from gptools.cli import cli

        # The budget is the retry budget: the commands' lazy imports (pandas, ...) take
        # seconds of their own on a busy machine, so they are done before the clock starts.
        for module in (
            "gptools.campaigns",
            "gptools.costs",
            "gptools.participants",
            "gptools.session",
        ):
            importlib.import_module(module)
        started = time.monotonic()
        result = CliRunner().invoke(cli, list(args))
        elapsed = time.monotonic() - started
        assert result.exit_code == 1, result.output
        # The progress bar (when shown) may precede it; the message is one line, the last.
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines[-1] == f"Error: cannot connect to {url}: connection refused", lines
        assert sum("Error" in line for line in lines) == 1, lines
        assert "resume" not in result.output
        assert elapsed < CONNECT_FAILURE_BUDGET_S
        return result

    return run
