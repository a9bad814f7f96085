"""``gptools campaigns reconcile``: the same numbers as the Python function, one CSV per
exception kind, bad input named."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from click.testing import CliRunner

from gptools.cli import cli
from gptools.client import Client
from gptools.sandbox import RunningSandbox
from gptools.wallet import EXCEPTION_KINDS
from tests.wallet.sandbox_wallet import played_campaigns


def test_reconcile_command(
    client: Client, fresh_sandbox: RunningSandbox, cli_runner: CliRunner, tmp_path: Path
) -> None:
    ledger, log, _records, truth = played_campaigns(client, fresh_sandbox, tmp_path)
    out = tmp_path / "exceptions"
    args = ["campaigns", "reconcile", str(ledger), "--log", str(log), "--json", "--all-servers"]
    result = cli_runner.invoke(cli, [*args, "--exceptions-out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["check"]["holds"] is True
    for entry in doc["campaigns"]:
        assert entry["winnings"] == str(truth[entry["campaign_id"]]["winnings"])
    for kind in EXCEPTION_KINDS:
        with (out / f"{kind}.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        key = "player_id" if kind == "players_over_bet_number" else "round_id"
        expected = sorted(x for t in truth.values() for x in t["exceptions"][kind])
        assert sorted(r[key] for r in rows) == expected, kind
    # The files exist now: refused without --force, written with it.
    again = cli_runner.invoke(cli, [*args, "--exceptions-out", str(out)])
    assert again.exit_code == 2
    forced = cli_runner.invoke(cli, [*args, "--exceptions-out", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    one = cli_runner.invoke(cli, [*args, "--campaign", doc["campaigns"][0]["campaign_id"]])
    assert [c["campaign_id"] for c in json.loads(one.stdout)["campaigns"]] == [
        doc["campaigns"][0]["campaign_id"]
    ]


def test_bad_ledger_input_is_named(
    client: Client, fresh_sandbox: RunningSandbox, cli_runner: CliRunner, tmp_path: Path
) -> None:
    ledger, log, _records, _truth = played_campaigns(client, fresh_sandbox, tmp_path)
    base = ["campaigns", "reconcile", str(ledger), "--log", str(log), "--all-servers"]
    wrong = cli_runner.invoke(cli, [*base, "--ledger-column", "amount=value"])
    assert wrong.exit_code == 2
    assert "amount ('value')" in wrong.output
    unknown = cli_runner.invoke(cli, [*base, "--ledger-column", "colour=x"])
    assert unknown.exit_code == 2 and "no ledger field colour" in unknown.output
    missing = cli_runner.invoke(cli, [*base[:2], str(tmp_path / "none.csv"), *base[3:]])
    assert missing.exit_code == 2 and "no such file" in missing.output
    nothing = cli_runner.invoke(cli, [*base, "--campaign", "CMP-999999"])
    assert nothing.exit_code == 2 and "CMP-999999" in nothing.output
