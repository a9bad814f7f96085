"""``gptools campaigns results LOG --ledger LEDGER``: the holdout uplift of a campaign
planned with a holdout, the same numbers as the Python function's, and clear refusals."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from gptools.campaigns import CampaignRegister
from gptools.cli import cli
from gptools.deliverylog import campaign_results, holdout_uplift
from gptools.models import dumps_wire, loads_wire
from gptools.sandbox import RunningSandbox
from gptools.sandbox._paid_play import write_paid_ledger
from gptools.wallet import reconcile

NOW = "2029-12-01T12:00:00+00:00"


def _plan(path: Path, holdout: str | None) -> Path:
    plan: dict[str, Any] = {
        "name": f"Holdout test {holdout}", "campaign_type": "AWARDED_FEATURE",
        "game_ids": ["golden-pharaoh"], "bet_number": 5, "brand": 201,
        "currencies": {"EUR": {"bet": "20.00", "players": 300,
                               "player_ids": [f"h-{i:03d}" for i in range(300)]}},
        "start": "2030-03-01T10:00:00", "end": "2030-03-15T22:00:00",
        "time_zone": "Europe/Malta",
    }  # fmt: skip
    if holdout is not None:
        plan["holdout"] = holdout
    path.write_text(json.dumps(plan))
    return path


def _invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(cli, list(args))


def _log(path: Path, events: list[dict[str, Any]]) -> Path:
    """A delivery log of ``events``, each received a second after its time."""
    lines = []
    for event in events:
        moment = datetime.fromisoformat(event["timestamp"]).replace(tzinfo=UTC)
        at = (moment + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines.append(dumps_wire({"received_at": at, "status": 200, "latency_ms": Decimal(2),
                                 "payload": event}))  # fmt: skip
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_results_with_a_ledger_add_the_uplift_and_roi(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    applied = _invoke(cli_runner, "campaigns", "apply", str(_plan(tmp_path / "p.json", "25%")),
                      "--now", NOW, "--json")  # fmt: skip
    assert applied.exit_code == 0, applied.output
    (record,) = CampaignRegister().campaigns()
    groups = CampaignRegister().holdout_groups(record)
    assert groups is not None and (len(groups.treatment), len(groups.holdout)) == (231, 69)
    url = f"{fresh_sandbox.base_url}/_sandbox/campaigns/{record.campaign_id}/paid-play"
    answer = httpx.post(url, content=dumps_wire({"holdout": list(groups.holdout), "seed": 2,
                                                 "roundsMean": 6}), timeout=30)  # fmt: skip
    truth = loads_wire(answer.content)
    free = loads_wire(httpx.get(url.replace("paid-play", "play"), timeout=30).content)
    log = _log(tmp_path / "log.jsonl", [*truth["events"], *free["events"]])
    ledger = write_paid_ledger(tmp_path / "ledger.csv", truth["ledger"])

    result = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger", str(ledger),
                     "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["uplift"]
    with campaign_results(log, [record]) as results:
        expected = holdout_uplift(results, {record.campaign_id: groups}, ledger=ledger)
    assert doc == json.loads(json.dumps(expected.to_dict()))
    (campaign,) = doc["campaigns"]
    assert [m["metric"] for m in campaign["metrics"]] == ["turnover", "active_days", "ngr"]
    assert campaign["roi"] is not None and "upper bound" in campaign["cost_basis"]

    human = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger", str(ledger))
    assert human.exit_code == 0, human.output
    assert "Holdout uplift: Welch's t interval" in human.stdout
    assert f"{record.campaign_id}: incremental revenue" in human.stdout and "ROI" in human.stdout
    # Without the ledger: turnover and active days, no ROI.
    plain = _invoke(cli_runner, "campaigns", "results", str(log))
    assert "no ROI without net gaming revenue (--ledger)" in plain.stdout

    bad = tmp_path / "bad.csv"
    bad.write_text("player_id,currency,amount,type,free_round,timestamp\n"
                   "h-001,EUR,lots,debit,false,2030-03-02T00:00:00Z\n")  # fmt: skip
    refused = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger", str(bad))
    assert refused.exit_code == 2
    assert refused.output == (
        f"Error: --ledger: cannot read it: {bad}: has no column for transaction_id "
        "('transaction_id'), round_id ('round_id'), game_id ('game_id'); name the columns "
        "with a LedgerMapping or --ledger-column FIELD=NAME\n"
    )


def test_a_ledger_without_a_holdout_campaign_is_refused(
    cli_runner: CliRunner, tmp_path: Path
) -> None:
    applied = _invoke(cli_runner, "campaigns", "apply", str(_plan(tmp_path / "p.json", None)),
                      "--now", NOW)  # fmt: skip
    assert applied.exit_code == 0, applied.output
    log = tmp_path / "log.jsonl"
    log.write_text("")
    ledger = tmp_path / "ledger.csv"
    ledger.write_text("player_id\n")
    result = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger", str(ledger))
    assert result.exit_code == 2
    assert "no campaign reported has a holdout group" in result.output
    missing = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger",
                      str(tmp_path / "none.csv"))  # fmt: skip
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_a_ledger_with_the_free_rounds_costs_the_roi_at_their_winnings(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    """With the campaign's free rounds in the ledger (the sandbox's wallet side beside the
    paid play), ROI is against the winnings they were credited: the real cost, the
    reconciliation's number and the sandbox's truth, not the exposure."""
    applied = _invoke(cli_runner, "campaigns", "apply", str(_plan(tmp_path / "p.json", "25%")),
                      "--now", NOW)  # fmt: skip
    assert applied.exit_code == 0, applied.output
    (record,) = CampaignRegister().campaigns()
    groups = CampaignRegister().holdout_groups(record)
    assert groups is not None
    base = f"{fresh_sandbox.base_url}/_sandbox/campaigns/{record.campaign_id}"
    ask = {"holdout": list(groups.holdout), "seed": 2, "roundsMean": 6}
    paid = loads_wire(httpx.post(f"{base}/paid-play", content=dumps_wire(ask), timeout=30).content)
    wallet = loads_wire(httpx.get(f"{base}/wallet", params={"seed": 3, "wallet_seed": 3},
                                  timeout=30).content)  # fmt: skip
    assert wallet["truth"]["winnings"] > 0
    log = _log(tmp_path / "log.jsonl", [*paid["events"], *wallet["delivered"]])
    ledger = write_paid_ledger(tmp_path / "ledger.csv", [*paid["ledger"], *wallet["rows"]])

    result = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger", str(ledger),
                     "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    (campaign,) = json.loads(result.stdout)["uplift"]["campaigns"]
    assert campaign["cost"] == str(wallet["truth"]["winnings"])
    assert campaign["cost_basis"] == "winnings credited (ledger): the real cost"
    with reconcile(ledger, log, [record]) as rec:
        assert rec.report.winnings() == {record.campaign_id: wallet["truth"]["winnings"]}
        expected = holdout_uplift(rec.results, {record.campaign_id: groups}, ledger=ledger,
                                  cost=rec.report.winnings())  # fmt: skip
    assert json.loads(result.stdout)["uplift"] == json.loads(json.dumps(expected.to_dict()))
