"""Shared fixtures: one sandbox per test session, reset before each test that asks for it.

``sandbox`` is a :class:`gptools.sandbox.RunningSandbox` with every rate tier enforced;
use ``fresh_sandbox`` instead when a test must not see state left by earlier tests
(it is the same server, reset: no requests, campaigns, faults or rate windows).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox


@pytest.fixture(autouse=True)
def _sandbox_state_dir(tmp_path_factory: pytest.TempPathFactory,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """CLI commands run by a test keep their embedded sandbox's state in a directory of
    that test, never in the user's cache."""
    monkeypatch.setenv("GPTOOLS_SANDBOX_STATE_DIR",
                       str(tmp_path_factory.mktemp("sandbox-state")))


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
