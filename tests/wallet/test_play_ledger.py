"""`sandbox play --ledger`: the players play, their events go through a real receiver, the
wallet's ledger is written, and `campaigns reconcile` finds exactly the wallet's truth."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from click.testing import CliRunner

from gptools.wallet import EXCEPTION_KINDS
from tests.campaigns.test_loop import (  # noqa: F401  (receiver is a fixture)
    AFTER,
    _applied_and_loaded,
    _json,
    _run,
    receiver,
)
from tests.webhooks.conftest import ThreadServer


def test_play_keeps_the_wallet_and_reconcile_finds_its_truth(
    cli_runner: CliRunner,
    receiver: tuple[ThreadServer, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    server, store = receiver
    _applied_and_loaded(cli_runner)
    ledger = tmp_path / "ledger.csv"
    played = _json(cli_runner, "sandbox", "play", "--url", server.url, "--now", AFTER,
                   "--seed", "3", "--ledger", str(ledger), "--wallet-seed", "4")  # fmt: skip
    assert played["delivered"] == played["events"] > 0
    wallet = {w["campaignId"]: w for w in played["wallet"]}
    assert ledger.stat().st_mode & 0o777 == 0o600
    doc = _json(cli_runner, "campaigns", "reconcile", str(ledger), "--log", store,
                "--exceptions-out", str(tmp_path / "exc"))  # fmt: skip
    assert doc["check"]["holds"] and doc["rejected"] == 0
    assert doc["rows"] == sum(w["ledgerRows"] for w in wallet.values())
    for entry in doc["campaigns"]:
        t = wallet[entry["campaign_id"]]
        assert entry["game_events"] == t["gameEvents"]
        assert entry["wallet_rounds"] == t["walletRounds"]
        assert entry["delivered_rounds"] == t["deliveredRounds"]
        assert Decimal(entry["winnings"]) == Decimal(t["winnings"])
        assert Decimal(entry["debited"]) == Decimal(t["debited"])
    for kind in EXCEPTION_KINDS:
        expected = sum(len(w["exceptions"][kind]) for w in wallet.values())
        assert doc["exceptions"][kind] == expected, kind
    again = _run(cli_runner, "sandbox", "play", "--url", server.url, "--now", AFTER,
                 "--ledger", str(ledger))  # fmt: skip
    assert again.exit_code == 2 and "--ledger" in again.output
