"""No false failures (issue 35, item 8): `campaigns apply` checks that the register can be
written before it creates anything, and when recording fails after creation it names the
campaigns it created and how to record them, with an exit code of its own (4); a register
from before loads were recorded is read as it is and migrated by the first write."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from gptools.campaigns import CampaignRegister, ParticipantCounts, RegisterError, apply_plan
from gptools.cli import cli
from gptools.cli._main import EXIT_NOT_RECORDED
from gptools.client import Client
from gptools.participants import journal_summaries, load_participants, prune_journals
from gptools.sandbox import FaultRule, RunningSandbox
from tests._support.campaigns import free_rounds
from tests.campaigns.conftest import NOW as PLAN_NOW
from tests.campaigns.conftest import make_plan

EXAMPLE = str(Path(__file__).resolve().parents[2] / "data" / "example_plan.yaml")
NOW = "2029-12-01T12:00:00+00:00"


def test_a_register_that_cannot_be_written_stops_apply_before_anything_is_created(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox
) -> None:
    register = Path(os.environ["GPTOOLS_REGISTER"])
    register.parent.mkdir(parents=True, exist_ok=True)
    register.write_bytes(b"not a database " * 100)
    result = cli_runner.invoke(cli, ["campaigns", "apply", EXAMPLE, "--now", NOW])
    assert result.exit_code == 1, result.output
    assert str(register) in result.stderr and "Traceback" not in result.output
    assert fresh_sandbox.state.campaigns == {}
    assert not [r for r in fresh_sandbox.state.requests if r.method == "POST"]


def test_apply_plan_checks_the_register_before_creating_anything(
    client: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    register = tmp_path / "r.sqlite"
    register.write_bytes(b"not a database " * 100)
    with pytest.raises(RegisterError, match=r"r\.sqlite: cannot write .*; nothing was created"):
        apply_plan(client, make_plan(), now=PLAN_NOW, register=register)
    assert fresh_sandbox.state.campaigns == {}


def test_recording_that_fails_after_creation_names_the_campaigns_and_exits_4(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox
) -> None:
    register = Path(os.environ["GPTOOLS_REGISTER"])
    # Each creation takes a second: the register goes bad once the first campaign exists.
    fresh_sandbox.faults.add(FaultRule(endpoint="POST /campaign", latency_s=1.0))

    def spoil() -> None:
        deadline = time.monotonic() + 60
        while not fresh_sandbox.state.campaigns and time.monotonic() < deadline:
            time.sleep(0.01)  # polling the condition, with a deadline
        register.write_bytes(b"not a database " * 100)

    spoiler = threading.Thread(target=spoil)
    spoiler.start()
    result = cli_runner.invoke(cli, ["campaigns", "apply", EXAMPLE, "--now", NOW, "--json"])
    spoiler.join()
    assert result.exit_code == EXIT_NOT_RECORDED == 4, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "not_recorded" and error["exit"] == 4
    created = ("EUR CMP-000001", "JPY CMP-000002", "KWD CMP-000003")
    assert all(c in error["message"] for c in created), error["message"]
    assert f"gptools campaigns apply {EXAMPLE}` again" in error["message"]
    assert len(fresh_sandbox.state.campaigns) == 3
    # Doing what it says records them, and creates nothing new.
    fresh_sandbox.faults.clear()
    register.unlink()
    again = cli_runner.invoke(cli, ["campaigns", "apply", EXAMPLE, "--now", NOW, "--json"])
    assert again.exit_code == 0, again.output
    assert len(fresh_sandbox.state.campaigns) == 3
    assert {r.campaign_id for r in CampaignRegister(register).campaigns()} == {
        "CMP-000001", "CMP-000002", "CMP-000003",
    }  # fmt: skip


#: The register's layout before loads were recorded (version 1), as it was written.
_VERSION_1 = """
CREATE TABLE campaigns (
    server TEXT NOT NULL, campaign_id TEXT NOT NULL, request_id TEXT NOT NULL,
    brand INTEGER, plan_name TEXT NOT NULL, plan_hash TEXT NOT NULL, plan_json TEXT NOT NULL,
    campaign_type TEXT NOT NULL, currency TEXT NOT NULL, bet TEXT NOT NULL,
    bet_number INTEGER NOT NULL, game_ids TEXT NOT NULL, start_local TEXT NOT NULL,
    end_local TEXT NOT NULL, time_zone TEXT NOT NULL,
    players_sent INTEGER NOT NULL DEFAULT 0, recorded_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, PRIMARY KEY (server, campaign_id)
);
"""


def test_a_register_from_before_loads_were_recorded_is_read_then_migrated(
    client: Client, tmp_path: Path
) -> None:
    plan = make_plan()  # EUR lists p1 and p2
    path = tmp_path / "old.sqlite"
    server = client.server_identity
    with sqlite3.connect(path) as db:
        db.executescript(_VERSION_1)
        db.execute(
            "INSERT INTO campaigns VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (server, "CMP-000001", "r-1", 201, plan.name, "h",
             json.dumps(plan.model_dump(mode="json")), plan.campaign_type, "EUR", "20.00", 10,
             '["golden-pharaoh"]', "2030-03-01T10:00:00", "2030-03-31T22:00:00",
             "Europe/Malta", 2, "2029-12-01T12:00:00Z", "2029-12-01T12:00:00Z"),
        )  # fmt: skip
    db.close()
    register = CampaignRegister(path)
    # Read as it is: apply's players, from the plan.
    assert register.get("CMP-000001", server=server).players == ("p1", "p2")
    assert register.participant_counts() == {(server, "CMP-000001"): ParticipantCounts(2)}
    # A load of that time left only its journal, into another campaign: recorded nowhere
    # but there.
    assert client.create_campaign(free_rounds(), brand=201).campaign_id == "CMP-000001"
    campaign = client.create_campaign(free_rounds(), brand=201).campaign_id
    journals = tmp_path / "journals"
    load_participants(client, campaign, ["p2", "p3"], brand=201, journal=journals /
                      "participants-x.sqlite", register=False, progress=False)  # fmt: skip
    assert [s.state for s in journal_summaries(journals)] == ["complete"]  # read: not written
    # Pruning records the journal's load before deleting it, migrating the register.
    (pruned,) = prune_journals(journals, register=register)
    assert not pruned.path.exists()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 4
        # Every later version's tables, the multi-brand groups' (version 4) included.
        assert {
            "loads",
            "players",
            "holdouts",
            "holdout_players",
            "brand_groups",
            "brand_group_members",
        } <= {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    db.close()
    assert register.get("CMP-000001", server=server).players == ("p1", "p2")
    assert register.participant_counts()[(server, campaign)] == ParticipantCounts(2)
    assert [x.load_key for x in register.loads(campaign_id="CMP-000001")] == ["apply"]


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """``folder`` and its files made unwritable for this process: by mode, or (root
    ignores modes) by the immutable attribute."""
    files = [folder, *folder.iterdir()]
    if os.geteuid() != 0:
        for path in files:
            path.chmod(0o500 if path.is_dir() else 0o400)
        undo = [["chmod", "700" if p.is_dir() else "600", str(p)] for p in files]
    else:
        subprocess.run(["chattr", "+i", *map(str, files)], check=True)
        undo = [["chattr", "-i", *map(str, files)]]
    try:
        yield
    finally:
        for command in undo:
            subprocess.run(command, check=True)


def test_a_read_only_register_is_read_and_never_half_written(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox
) -> None:
    register = Path(os.environ["GPTOOLS_REGISTER"])
    applied = cli_runner.invoke(cli, ["campaigns", "apply", EXAMPLE, "--now", NOW, "--json"])
    assert applied.exit_code == 0, applied.output
    listed = cli_runner.invoke(cli, ["campaigns", "list", "--json"])
    with _read_only(register.parent):
        again = cli_runner.invoke(cli, ["campaigns", "list", "--json"])
        assert again.exit_code == 0, again.output
        assert json.loads(again.stdout) == json.loads(listed.stdout)
        shown = cli_runner.invoke(cli, ["campaigns", "show", "CMP-000001"])
        assert shown.exit_code == 0 and "players loaded 3" in shown.stdout
        other = Path(EXAMPLE).read_text().replace("Spring feature drop 2030", "Another drop")
        plan = register.parent.parent / "other.yaml"
        plan.write_text(other)
        refused = cli_runner.invoke(cli, ["campaigns", "apply", str(plan), "--now", NOW])
        assert refused.exit_code == 1 and "nothing was created" in refused.stderr
    assert len(fresh_sandbox.state.campaigns) == 3
