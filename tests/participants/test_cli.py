"""``gptools participants load``: the CLI contract (JSON document, exit codes, rejects)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gptools import spec
from gptools.cli import cli
from gptools.sandbox import RunningSandbox
from tests.participants.conftest import BRAND
from tests.participants.test_loader import MESSY, MESSY_REJECTED


def _load(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["participants", "load", *args, "--no-progress"], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_load_json_then_resume(env: dict[str, str], campaign: str, tmp_path: Path) -> None:
    code, out, _ = _load(env, str(MESSY), "--campaign", campaign, "--brand", str(BRAND), "--json")
    assert code == 0
    doc = json.loads(out)
    assert (
        doc["rows"],
        doc["loaded"],
        doc["rejected"],
        doc["duplicate"],
        doc["not_attempted"],
    ) == (30, 20, 7, 3, 0)
    assert doc["balanced"] and doc["complete"]
    rejects = tmp_path / "players_messy.rejects.csv"
    assert Path(doc["rejects_file"]).resolve() == rejects
    assert len(rejects.read_text(encoding="utf-8").splitlines()) == 1 + len(MESSY_REJECTED)
    assert Path(doc["journal"]).parent == tmp_path / "journals"

    code, out, _ = _load(env, str(MESSY), "--campaign", campaign, "--brand", str(BRAND))
    assert code == 0
    assert "loaded         20 (0 in this run)" in out
    assert "adds up        yes" in out


def test_load_through_the_batch_endpoint(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox
) -> None:
    code, out, _ = _load(
        env,
        str(MESSY),
        "--campaign",
        campaign,
        "--brand",
        str(BRAND),
        "--endpoint",
        "batch",
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    assert (doc["loaded"], doc["endpoint"], doc["chunk_size"]) == (
        20,
        "batch",
        spec.BATCH_PARTICIPANT_MAX_IDS,
    )
    posts = [r.path for r in fresh_sandbox.state.requests if "/participant" in r.path]
    assert posts and all(p.endswith("/participant/batch") for p in posts)


def test_bad_input_exits_2(env: dict[str, str], campaign: str, tmp_path: Path) -> None:
    code, out, err = _load(env, str(tmp_path / "missing.csv"), "--campaign", campaign)
    assert (code, out) == (2, "")
    assert "missing.csv: no such file" in err
    code, _, err = _load(env, str(MESSY), "--campaign", "CMP-999999", "--brand", str(BRAND))
    assert code == 2
    assert "INVALID_REQUEST" in err and "'CMP-999999' is invalid or does not exist" in err
    code, _, err = _load(env, str(MESSY), "--campaign", campaign)
    assert code == 2 and "BRAND_REQUIRED" in err and "--brand" in err
    two = tmp_path / "two.csv"
    two.write_text("handle,name\nu-1,A\n", encoding="utf-8")
    code, _, err = _load(env, str(two), "--campaign", campaign, "--brand", str(BRAND))
    assert code == 2 and "no player-id column" in err and "Traceback" not in err
    code, out, _ = _load(
        env, str(two), "--campaign", campaign, "--brand", str(BRAND), "--column", "handle", "--json"
    )
    assert code == 0 and json.loads(out)["loaded"] == 1


def test_a_wrong_address_fails_fast_and_says_so(unreachable: Any) -> None:
    """Nothing reached the server: the load stops after the client's retry budget instead of
    re-sending the first chunk for a minute, and does not advise resuming."""
    unreachable(["participants", "load", str(MESSY), "--campaign", "CMP-1", "--brand", str(BRAND)])
    unreachable(
        [
            "--max-retries",
            "0",
            "--timeout",
            "2,30",
            "participants",
            "load",
            str(MESSY),
            "--campaign",
            "CMP-1",
            "--brand",
            str(BRAND),
            "--json",
        ]
    )
