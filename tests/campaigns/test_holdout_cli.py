"""``gptools campaigns results LOG --ledger LEDGER``: the holdout uplift of a campaign
planned with a holdout, the same numbers as the Python function's, and clear refusals."""

from __future__ import annotations

import contextlib
import csv
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from gptools.campaigns import CampaignRegister
from gptools.cli import cli
from gptools.deliverylog import campaign_results, holdout_uplift
from gptools.deliverylog._uplift import COST_BASES
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
    assert campaign["roi"] is not None and campaign["cost_basis"] == COST_BASES["exposure"]

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


def _applied_with_a_bare_ledger(
    cli_runner: CliRunner, tmp_path: Path, holdout: str | None
) -> tuple[Path, Path]:
    """A plan (with ``holdout``) applied, an empty log and a ledger of a header only."""
    applied = _invoke(cli_runner, "campaigns", "apply", str(_plan(tmp_path / "p.json", holdout)),
                      "--now", NOW)  # fmt: skip
    assert applied.exit_code == 0, applied.output
    log = tmp_path / "log.jsonl"
    log.write_text("")
    ledger = tmp_path / "ledger.csv"
    ledger.write_text("player_id\n")
    return log, ledger


def test_a_ledger_without_a_holdout_campaign_is_refused(
    cli_runner: CliRunner, tmp_path: Path
) -> None:
    log, ledger = _applied_with_a_bare_ledger(cli_runner, tmp_path, None)
    result = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger", str(ledger))
    assert result.exit_code == 2
    assert "no campaign reported has a holdout group" in result.output
    missing = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger",
                      str(tmp_path / "none.csv"))  # fmt: skip
    assert missing.exit_code == 2 and "does not exist" in missing.output


def _paid_and_free_play(
    runner: CliRunner, sandbox: RunningSandbox, tmp_path: Path
) -> tuple[Any, Any, Decimal, Path, Path]:
    """A campaign planned with a holdout, its paid play and its free rounds' wallet side
    played at the sandbox: (record, groups, the winnings credited, log, ledger CSV in the
    default layout)."""
    applied = _invoke(runner, "campaigns", "apply", str(_plan(tmp_path / "p.json", "25%")),
                      "--now", NOW)  # fmt: skip
    assert applied.exit_code == 0, applied.output
    (record,) = CampaignRegister().campaigns()
    groups = CampaignRegister().holdout_groups(record)
    assert groups is not None
    base = f"{sandbox.base_url}/_sandbox/campaigns/{record.campaign_id}"
    ask = {"holdout": list(groups.holdout), "seed": 2, "roundsMean": 6}
    paid = loads_wire(httpx.post(f"{base}/paid-play", content=dumps_wire(ask), timeout=30).content)
    wallet = loads_wire(httpx.get(f"{base}/wallet", params={"seed": 3, "wallet_seed": 3},
                                  timeout=30).content)  # fmt: skip
    assert wallet["truth"]["winnings"] > 0
    log = _log(tmp_path / "log.jsonl", [*paid["events"], *wallet["delivered"]])
    ledger = write_paid_ledger(tmp_path / "ledger.csv", [*paid["ledger"], *wallet["rows"]])
    return record, groups, wallet["truth"]["winnings"], log, ledger


def test_a_ledger_with_the_free_rounds_costs_the_roi_at_their_winnings(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    """With the campaign's free rounds in the ledger (the sandbox's wallet side beside the
    paid play), ROI is against the winnings they were credited: the real cost, the
    reconciliation's number and the sandbox's truth, not the exposure."""
    record, groups, winnings, log, ledger = _paid_and_free_play(cli_runner, fresh_sandbox, tmp_path)

    result = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger", str(ledger),
                     "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    (campaign,) = json.loads(result.stdout)["uplift"]["campaigns"]
    assert campaign["cost"] == str(winnings)
    assert campaign["cost_basis"] == "winnings credited (ledger): the real cost"
    with reconcile(ledger, log, [record]) as rec:
        assert rec.report.winnings() == {record.campaign_id: winnings}
        expected = holdout_uplift(rec.results, {record.campaign_id: groups}, ledger=ledger,
                                  cost=rec.report.winnings())  # fmt: skip
    assert json.loads(result.stdout)["uplift"] == json.loads(json.dumps(expected.to_dict()))


#: The ledger's columns renamed as another wallet might name them (field -> column).
RENAMED = {"transaction_id": "tx", "player_id": "account", "amount": "value", "type": "kind",
           "free_round": "bonus", "timestamp": "booked_at"}  # fmt: skip


def _renamed(ledger: Path, target: Path) -> Path:
    """``ledger`` (default layout) with the columns of :data:`RENAMED` renamed, its rows
    and values unchanged."""
    with ledger.open(newline="") as fh:
        rows = list(csv.reader(fh))
    rows[0] = [RENAMED.get(c, c) for c in rows[0]]
    with target.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return target


def test_a_ledger_in_another_layout_gives_the_same_results(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    """``results --ledger`` reads a ledger whose columns --ledger-column names (and a
    database's table --ledger-format/--ledger-table name) as `reconcile` does: the
    reconciliation's cost and the uplift's net gaming revenue are the default layout's."""
    _record, _groups, winnings, log, ledger = _paid_and_free_play(
        cli_runner, fresh_sandbox, tmp_path
    )
    args = ("campaigns", "results", str(log), "--json", "--ledger")

    def numbers(result: Any) -> Any:
        """The document without the ledger's name, which differs by design."""
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        del doc["uplift"]["ledger"]
        return doc

    expected = numbers(_invoke(cli_runner, *args, str(ledger)))
    assert expected["uplift"]["campaigns"][0]["cost"] == str(winnings)
    assert expected["uplift"]["campaigns"][0]["roi"] is not None

    renamed = _renamed(ledger, tmp_path / "other.csv")
    columns = [a for f, c in RENAMED.items() for a in ("--ledger-column", f"{f}={c}")]
    assert numbers(_invoke(cli_runner, *args, str(renamed), *columns)) == expected
    # Without the mapping the renamed ledger is refused, naming what it lacks.
    unmapped = _invoke(cli_runner, *args, str(renamed))
    assert unmapped.exit_code == 2 and "has no column for transaction_id ('transaction_id')" \
        in unmapped.output  # fmt: skip

    database = tmp_path / "wallet.sqlite"
    with renamed.open(newline="") as fh, contextlib.closing(sqlite3.connect(database)) as db:
        header, *rows = list(csv.reader(fh))
        db.execute(f"CREATE TABLE booked ({', '.join(header)})")
        db.executemany(f"INSERT INTO booked VALUES ({', '.join('?' * len(header))})", rows)
        db.commit()
    stored = _invoke(cli_runner, *args, f"sqlite:///{database}", "--ledger-format", "sqlite",
                     "--ledger-table", "booked", *columns)  # fmt: skip
    assert numbers(stored) == expected


def test_a_bad_ledger_column_is_refused_as_reconcile_refuses_it(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    """A --ledger-column value that names no column of a known field: exit 2 and the same
    one line from `results` as from `reconcile`, before any ledger is read."""
    log, ledger = _applied_with_a_bare_ledger(cli_runner, tmp_path, "25%")
    fields = "transaction_id, round_id, player_id, game_id, currency, amount, type, " \
        "free_round, timestamp"  # fmt: skip
    for values, message in [
        (["colour=x"], f"no ledger field colour; the fields are {fields}"),
        (["amount"], "'amount' is not FIELD=NAME"),
        (["amount= "], "'amount= ' is not FIELD=NAME"),
        (["amount=a", "amount=b"], "amount given twice ('a' and 'b')"),
    ]:
        options = [a for v in values for a in ("--ledger-column", v)]
        results = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger", str(ledger),
                          *options)  # fmt: skip
        reconciled = _invoke(cli_runner, "campaigns", "reconcile", str(ledger), "--log",
                             str(log), *options)  # fmt: skip
        assert (results.exit_code, results.output) == (2, f"Error: --ledger-column: {message}\n")
        assert (reconciled.exit_code, reconciled.output) == (results.exit_code, results.output)
    # Ledger options without --ledger would be ignored: refused instead.
    alone = _invoke(cli_runner, "campaigns", "results", str(log), "--ledger-column", "amount=a",
                    "--ledger-table", "booked")  # fmt: skip
    assert (alone.exit_code, alone.output) == (
        2, "Error: --ledger-table, --ledger-column without --ledger: name the ledger they read\n"
    )  # fmt: skip
