"""The campaign register: apply_plan records what it created, owner-only; a re-run updates
rather than duplicates; two processes writing at once lose nothing; states by window."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from gptools.campaigns import (
    AppliedCampaign,
    ApplyResult,
    CampaignRegister,
    LoadRecord,
    ParticipantCounts,
    RegisterError,
    apply_plan,
    shared_ids,
)
from gptools.campaigns._register import plan_hash
from gptools.client import Client
from tests.campaigns.conftest import NOW, make_plan


def test_apply_records_each_campaign_once(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "data" / "register.sqlite"
    plan = make_plan()
    first = apply_plan(client, plan, now=NOW, register=path, add_participants=True)
    apply_plan(client, plan, now=NOW, register=path)
    reg = CampaignRegister(path)
    records = reg.campaigns()
    assert sorted(r.campaign_id for r in records) == sorted(first.campaign_ids.values())
    eur = reg.get(first.campaign_ids["EUR"])
    assert eur.request_id == first.campaigns[0].request_id
    assert (eur.currency, eur.bet, eur.bet_number) == ("EUR", Decimal("20.00"), 10)
    assert eur.game_ids == ("golden-pharaoh",) and eur.brand == 201
    assert eur.time_zone == "Europe/Malta" and eur.start == datetime(2030, 3, 1, 10, 0)
    assert eur.start_utc == datetime(2030, 3, 1, 9, 0, tzinfo=UTC)  # CET = UTC+1
    assert eur.plan_hash == plan_hash(plan) and eur.plan["name"] == plan.name
    assert eur.server == client.server_identity
    # The second apply sent no players; the first one's count stays.
    assert eur.players_sent == 2 and eur.players == ("p1", "p2")
    assert eur.budget == Decimal("20.00") * 10 * 500
    # Owner-only: the folder and the file (and SQLite's WAL file, which copies the mode).
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for extra in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        if extra.exists():
            assert stat.S_IMODE(extra.stat().st_mode) == 0o600


def test_apply_records_in_the_default_register(client: Client) -> None:
    result = apply_plan(client, make_plan(), now=NOW)
    found = {r.campaign_id for r in CampaignRegister().campaigns()}
    assert found == set(result.campaign_ids.values())
    assert CampaignRegister().path == Path(os.environ["GPTOOLS_REGISTER"])


def test_apply_without_register_records_nothing(client: Client, tmp_path: Path) -> None:
    apply_plan(client, make_plan(), now=NOW, register=False)
    assert CampaignRegister().campaigns() == []


def test_state_by_window_in_the_campaign_zone(tmp_path: Path) -> None:
    # Europe/Malta leaves summer time on 2030-10-27 at 03:00 (back to 02:00).
    plan = make_plan(start=datetime(2030, 10, 27, 2, 30), end=datetime(2030, 10, 28, 0, 0))
    reg = CampaignRegister(tmp_path / "r.sqlite")
    result = ApplyResult(plan.name, (AppliedCampaign("EUR", "req-1", "CMP-1"),))
    (record,) = reg.record(plan, result, server="s")
    # 02:30 of the first (summer) pass is 00:30 UTC.
    assert record.start_utc == datetime(2030, 10, 27, 0, 30, tzinfo=UTC)
    assert record.state(datetime(2030, 10, 27, 0, 29, 59, tzinfo=UTC)) == "scheduled"
    assert record.state(datetime(2030, 10, 27, 0, 30, tzinfo=UTC)) == "running"
    assert record.end_utc == datetime(2030, 10, 27, 23, 0, tzinfo=UTC)
    assert record.state(datetime(2030, 10, 27, 23, 0, tzinfo=UTC)) == "ended"
    doc = record.to_dict(now=datetime(2030, 10, 27, 12, tzinfo=UTC))
    assert doc["state"] == "running" and doc["bet"] == "20.00" and doc["timeZone"] == "Europe/Malta"


def test_unknown_campaign_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RegisterError, match="'CMP-404' is not in the register"):
        CampaignRegister(tmp_path / "r.sqlite").get("CMP-404")


def test_a_file_that_is_not_sqlite_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    path.write_bytes(b"not a database" * 100)
    with pytest.raises(RegisterError, match=r"r\.sqlite"):
        CampaignRegister(path).campaigns()


def test_players_of_a_campaign_join_sent_and_loaded(tmp_path: Path) -> None:
    plan = make_plan()
    reg = CampaignRegister(tmp_path / "r.sqlite")
    result = ApplyResult(plan.name, (AppliedCampaign("EUR", "req-1", "CMP-1", 2),))
    reg.record(plan, result, server="s")
    load = LoadRecord("s", "CMP-1", "load-a", 201, "players.csv", 5, 2, 1, 1, 1,
                      {"empty": 1})  # fmt: skip
    reg.record_load(load, ["p2", "p3"])
    # The same campaign id on another server is another campaign.
    reg.record(plan, result, server="other")
    (record,) = reg.campaigns(server="s")
    assert record.players == ("p1", "p2", "p3")
    assert reg.participant_counts(server="s") == {
        ("s", "CMP-1"): ParticipantCounts(loaded=3, rejected=1, pending=1)
    }
    assert reg.participant_counts()[("other", "CMP-1")] == ParticipantCounts(loaded=2)
    assert [x.load_key for x in reg.loads(server="s")] == ["apply", "load-a"]
    # A load's later run replaces its counts, keeps its first record time and adds ids.
    first = reg.loads(server="s")[1].recorded_at
    reg.record_load(LoadRecord("s", "CMP-1", "load-a", 201, "players.csv", 5, 3, 1, 1, 0),
                    ["p4"])  # fmt: skip
    again = reg.loads(server="s", campaign_id="CMP-1")[1]
    assert (again.loaded, again.pending, again.recorded_at) == (3, 0, first)
    assert reg.get("CMP-1", server="s").players == ("p1", "p2", "p3", "p4")


def test_each_campaign_with_its_counts_zeros_where_no_load_went(tmp_path: Path) -> None:
    """What ``campaigns list`` and ``show`` print and the register's frame shows."""
    plan = make_plan()
    reg = CampaignRegister(tmp_path / "r.sqlite")
    result = ApplyResult(
        plan.name,
        (AppliedCampaign("EUR", "req-1", "CMP-1", 2), AppliedCampaign("JPY", "req-2", "CMP-2")),
    )
    reg.record(plan, result, server="s")
    reg.record(plan, result, server="other")
    reg.record_load(LoadRecord("s", "CMP-1", "load-a", 201, "players.csv", 5, 2, 1, 1, 1), ["p3"])
    counted = [(r.campaign_id, c) for r, c in reg.counted(server="s")]
    assert counted == [
        ("CMP-1", ParticipantCounts(loaded=3, rejected=1, pending=1)),
        ("CMP-2", ParticipantCounts()),
    ]
    second = reg.get("CMP-2", server="s")
    assert reg.participants_of(second) == ParticipantCounts()
    assert reg.participants_of(reg.get("CMP-1", server="other")) == ParticipantCounts(loaded=2)
    docs = reg.to_dicts(now=NOW, server="s")
    assert [(d["campaignId"], d["participants"]) for d in docs] == [
        ("CMP-1", {"loaded": 3, "rejected": 1, "pending": 1}),
        ("CMP-2", {"loaded": 0, "rejected": 0, "pending": 0}),
    ]
    assert docs[1] == second.to_dict(now=NOW, participants=ParticipantCounts())
    assert list(reg.frame(server="s")["loaded"]) == [3, 0]


def test_ids_shared_between_servers(tmp_path: Path) -> None:
    plan = make_plan()
    reg = CampaignRegister(tmp_path / "r.sqlite")
    both = ApplyResult(
        plan.name,
        (AppliedCampaign("EUR", "req-1", "CMP-1"), AppliedCampaign("JPY", "req-2", "CMP-2")),
    )
    reg.record(plan, both, server="s")
    reg.record(plan, ApplyResult(plan.name, (AppliedCampaign("EUR", "req-1", "CMP-1"),)),
               server="other")  # fmt: skip
    assert shared_ids(reg.campaigns()) == {"CMP-1": ["s", "other"]}
    assert shared_ids(reg.campaigns(server="s")) == {}


def test_a_campaign_and_a_load_recorded_again_keep_their_first_recorded_at(
    tmp_path: Path,
) -> None:
    plan = make_plan()
    reg = CampaignRegister(tmp_path / "r.sqlite")
    result = ApplyResult(plan.name, (AppliedCampaign("EUR", "req-1", "CMP-1"),))
    first, later = datetime(2030, 1, 1, 9, tzinfo=UTC), datetime(2030, 1, 2, 17, tzinfo=UTC)
    reg.record(plan, result, server="s", now=first)
    (again,) = reg.record(plan, result, server="s", now=later)
    assert (again.recorded_at, again.updated_at) == (first, later)
    load = LoadRecord("s", "CMP-1", "load-a", 201, "players.csv", 2, 2, 0, 0, 0)
    reg.record_load(load, ["p1", "p2"], now=first)
    reg.record_load(load, ["p1", "p2"], now=later)
    (kept,) = reg.loads(server="s", campaign_id="CMP-1")
    assert (kept.recorded_at, kept.updated_at) == (first, later)


_WRITER = """
import sys
from gptools.campaigns import AppliedCampaign, ApplyResult, CampaignRegister
from tests.campaigns.conftest import make_plan

path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
plan = make_plan()
reg = CampaignRegister(path)
print("ready", flush=True)
sys.stdin.readline()
for i in range(n):
    result = ApplyResult(plan.name, (AppliedCampaign("EUR", f"r-{tag}-{i}", f"{tag}-{i}"),))
    reg.record(plan, result, server="s")
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    n = 60
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), tag, str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=root,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for p in procs:  # both are ready before either starts writing
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        p.communicate(timeout=120)  # closes the pipes
        assert p.returncode == 0
    ids = {r.campaign_id for r in CampaignRegister(path).campaigns()}
    assert ids == {f"{t}-{i}" for t in ("a", "b") for i in range(n)}
