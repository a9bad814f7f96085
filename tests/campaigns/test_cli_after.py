"""``gptools campaigns list|show|results`` against the embedded sandbox and a log file:
the register lists what apply created, with participants from apply and from a load's
journal; results read a delivery log and write the players never reached."""

from __future__ import annotations

import csv
import json
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from click.testing import CliRunner

from gptools.cli import cli
from tests.deliverylog.campaign_logs import CampaignLog

EXAMPLE = str(Path(__file__).resolve().parents[2] / "data" / "example_plan.yaml")
NOW = "2029-12-01T12:00:00+00:00"
MALTA = ZoneInfo("Europe/Malta")


def _json(runner: CliRunner, *args: str) -> dict[str, object]:
    result = runner.invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def test_list_show_and_results(cli_runner: CliRunner, tmp_path: Path) -> None:
    applied = _json(cli_runner, "campaigns", "apply", EXAMPLE, "--now", NOW, "--json")
    ids = {c["currency"]: c["campaignId"] for c in applied["campaigns"]}  # type: ignore[attr-defined]
    eur = ids["EUR"]
    # A participant load of two more EUR players (one already sent by apply).
    players = tmp_path / "players.csv"
    players.write_text("player_id\np-eur-0003\np-eur-0100\n")
    loaded = cli_runner.invoke(
        cli, ["participants", "load", str(players), "--campaign", eur, "--brand", "201", "--json"]
    )
    assert loaded.exit_code == 0, loaded.output

    listed = _json(cli_runner, "campaigns", "list", "--json", "--now", "2030-03-05T00:00:00Z")
    by_id = {c["campaignId"]: c for c in listed["campaigns"]}  # type: ignore[attr-defined]
    assert set(by_id) == set(ids.values())
    assert by_id[eur]["state"] == "running" and by_id[eur]["bet"] == "20.00"
    assert by_id[eur]["participants"] == {"loaded": 4, "rejected": 0, "pending": 0}
    assert by_id[ids["KWD"]]["participants"]["loaded"] == 0

    shown = _json(cli_runner, "campaigns", "show", eur, "--json", "--now", NOW)
    assert shown["state"] == "scheduled" and shown["timeZone"] == "Europe/Malta"
    human = cli_runner.invoke(cli, ["campaigns", "show", eur])
    assert eur in human.stdout and "players loaded" in human.stdout

    # The log: p-eur-0001 plays 2 features, p-eur-0100 (loaded by the journal) plays 1;
    # p-jpy-0001 plays once in JPY; a decoy at the EUR bet one second before the start.
    log = CampaignLog(3)
    start = datetime(2030, 3, 1, 10, 0, tzinfo=MALTA)
    feat = {"game": "golden-pharaoh", "currency": "EUR", "bet": "20.00"}
    log.event(eur, player="p-eur-0001", at=start.replace(hour=11), statuses=(503, 200), **feat)
    log.event(eur, player="p-eur-0001", at=start.replace(hour=12), **feat)
    log.event(eur, player="p-eur-0100", at=start.replace(day=2), **feat)
    log.event(None, player="p-eur-0002", at=start.replace(hour=9, minute=59, second=59), **feat)
    log.event(ids["JPY"], player="p-jpy-0001", game="golden-pharaoh", currency="JPY",
              bet="2000", at=start.replace(day=3))  # fmt: skip
    path = log.write(tmp_path / "log.jsonl")
    out = tmp_path / "unreached.csv"
    doc = _json(
        cli_runner, "campaigns", "results", str(path), "--json", "--unreached-out", str(out)
    )
    assert (doc["actions"], doc["attributed"], doc["unattributed"]) == (5, 4, 1)
    campaigns = {c["campaign_id"]: c for c in doc["campaigns"]}  # type: ignore[attr-defined]
    assert campaigns[eur]["assigned"] == 4 and campaigns[eur]["reached"] == 2
    assert campaigns[eur]["exposure_used"] == "60.00" and campaigns[eur]["budget"] == "100000.00"
    assert campaigns[ids["JPY"]]["exposure_used"] == "2000"
    with out.open(newline="") as fh:
        rows = sorted((r["campaign_id"], r["player_id"]) for r in csv.DictReader(fh))
    assert rows == [(eur, "p-eur-0002"), (eur, "p-eur-0003"), (ids["JPY"], "p-jpy-0002")]
    assert doc["unreached"] == 3

    one = _json(cli_runner, "campaigns", "results", str(path), "--campaign", eur, "--json")
    assert [c["campaign_id"] for c in one["campaigns"]] == [eur]  # type: ignore[attr-defined]


def test_unknown_campaign_exits_2(cli_runner: CliRunner, tmp_path: Path) -> None:
    shown = cli_runner.invoke(cli, ["campaigns", "show", "CMP-404"])
    assert shown.exit_code == 2 and "CMP-404" in shown.stderr and "Traceback" not in shown.output
    log = tmp_path / "log.jsonl"
    log.write_text("")
    result = cli_runner.invoke(cli, ["campaigns", "results", str(log), "--campaign", "CMP-404"])
    assert result.exit_code == 2 and "not in the register" in result.stderr


def test_empty_register_lists_nothing(cli_runner: CliRunner) -> None:
    result = cli_runner.invoke(cli, ["campaigns", "list"])
    assert result.exit_code == 0 and "no campaign of the server" in result.stdout
    result = cli_runner.invoke(cli, ["campaigns", "list", "--all-servers"])
    assert result.exit_code == 0 and "no campaign in the register" in result.stdout
