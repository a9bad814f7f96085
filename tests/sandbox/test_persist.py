"""The embedded sandbox keeps its state across CLI commands (issue 11, item 2): one state
on disk, loaded when a command's sandbox starts and saved when it stops, under a lock."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from gptools.models import dumps_wire, loads_wire
from gptools.sandbox._persist import (
    LOCK_FILE,
    STATE_DIR_ENV,
    STATE_FILE,
    SandboxStateError,
    default_state_dir,
    persisted,
)
from gptools.sandbox._state import SandboxState
from tests._support.cli import run_gptools, start_gptools

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "data" / "example_plan.yaml"


def _env(state_dir: Path) -> dict[str, str]:
    env = {
        **os.environ,
        STATE_DIR_ENV: str(state_dir),
        "GP_BASE_URL": "",
        "GPTOOLS_JOURNAL_DIR": str(state_dir.parent / "journals"),
    }
    env.pop("GPTOOLS_SANDBOX_URL", None)
    return env


def test_snapshot_round_trip_keeps_campaigns_participants_and_idempotency() -> None:
    state = SandboxState()
    at = datetime(2030, 3, 1, 10, tzinfo=UTC)
    first = state.add_campaign(201, "req-1", {"bet": Decimal("0.10"), "name": "a"}, at)
    state.add_participants(first.campaign_id, ["p-1", "p-1", "p-2"])
    state.subscriptions[201] = {"callbackUrl": "https://x.example/hook", "apiKey": "k"}
    restored = SandboxState()
    restored.restore(loads_wire(dumps_wire(state.snapshot())))
    assert restored.campaigns == state.campaigns
    assert restored.participants(first.campaign_id) == {"p-1": 2, "p-2": 1}
    assert restored.subscriptions == state.subscriptions
    assert restored.campaign_for_request_id(201, "req-1") == first
    assert restored.add_campaign(201, None, {}, at).campaign_id == "CMP-000002"


def test_state_dir_respects_the_override_then_xdg(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "override"))
    assert default_state_dir() == tmp_path / "override"
    monkeypatch.delenv(STATE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == tmp_path / "xdg" / "gptools" / "sandbox"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_state_dir() == tmp_path / "home" / ".cache" / "gptools" / "sandbox"


def test_a_damaged_state_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text("{not json", encoding="utf-8")
    with (
        pytest.raises(SandboxStateError, match="gptools sandbox reset"),
        persisted(SandboxState(), tmp_path),
    ):
        pass


def test_consecutive_commands_share_one_sandbox(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    env = _env(state_dir)
    (tmp_path / "players.csv").write_text("playerId\np-1\np-2\n", encoding="utf-8")
    apply = ("campaigns", "apply", str(PLAN), "--json")
    load = ["participants", "load", "players.csv", "--campaign", "CMP-000001", "--brand", "201",
            "--no-progress"]  # fmt: skip
    applied = run_gptools(*apply, cwd=tmp_path, env=env)
    assert applied.returncode == 0, applied.stderr
    ids = [c["campaignId"] for c in json.loads(applied.stdout)["campaigns"]]
    assert ids == ["CMP-000001", "CMP-000002", "CMP-000003"]
    notice = [line for line in applied.stderr.splitlines() if "embedded sandbox" in line]
    assert len(notice) == 1 and str(state_dir / STATE_FILE) in notice[0]

    loaded = run_gptools(*load, "--json", cwd=tmp_path, env=env)
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["loaded"] == 2

    again = run_gptools(*apply, cwd=tmp_path, env=env)
    assert [c["campaignId"] for c in json.loads(again.stdout)["campaigns"]] == ids

    reset = run_gptools("sandbox", "reset", cwd=tmp_path, env=env)
    assert reset.returncode == 0 and "cleared" in reset.stdout
    assert not (state_dir / STATE_FILE).exists()
    unknown = run_gptools(*load, cwd=tmp_path, env=env)
    assert unknown.returncode == 2 and "INVALID_REQUEST" in unknown.stderr


def test_a_second_command_waits_for_the_first(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    with (state_dir / LOCK_FILE).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiting = start_gptools(
            "campaigns", "apply", str(PLAN), "--json", cwd=tmp_path, env=_env(state_dir)
        )
        try:
            assert waiting.stderr is not None
            line = waiting.stderr.readline()  # blocks until the command says it waits
            assert "waiting for another gptools command" in line
            assert waiting.poll() is None
            fcntl.flock(held, fcntl.LOCK_UN)
            out, err = waiting.communicate(timeout=300)
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.wait()
    assert waiting.returncode == 0, err
    assert len(json.loads(out)["campaigns"]) == 3
    assert (state_dir / STATE_FILE).exists()


def test_the_sandbox_imports_nothing_from_the_client() -> None:
    code = (
        "import pkgutil, importlib, sys, gptools.sandbox as s\n"
        "for m in pkgutil.iter_modules(s.__path__):\n"
        "    importlib.import_module(f'gptools.sandbox.{m.name}')\n"
        "print(sorted(n for n in sys.modules if n.startswith('gptools.client')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"
