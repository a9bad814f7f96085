"""Every reconciled number is exactly the sandbox's truth: two campaigns played with
their wallet (rollbacks, lost deliveries, and the decoys: a debit with no credit, a credit
with no debit, a debit of another amount, a player over betNumber, a game event with no
wallet round, a free round of another campaign, paid rows, a round delivered twice)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from gptools.client import Client
from gptools.sandbox import RunningSandbox
from gptools.wallet import EXCEPTION_KINDS, reconcile
from tests.wallet.sandbox_wallet import played_campaigns


def test_reconciled_numbers_are_the_truth(
    client: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    ledger, log, records, truth = played_campaigns(client, fresh_sandbox, tmp_path)
    with reconcile(ledger, log, records) as rec:
        report = rec.report
        frames = {k: rec.exceptions(k) for k in EXCEPTION_KINDS}
    assert report.identity_holds
    assert report.rejected == 0
    assert report.rows == sum(t["ledgerRows"] for t in truth.values())
    assert report.free_round_rows == sum(t["freeRoundRows"] for t in truth.values())
    assert report.paid_rows == 2 * len(truth)
    for entry in report.campaigns:
        t = truth[entry["campaign_id"]]
        assert entry["rounds_granted"] == t["roundsGranted"]
        assert entry["game_events"] == t["gameEvents"]
        assert entry["wallet_rounds"] == t["walletRounds"]
        assert entry["settled_rounds"] == t["settledRounds"]
        assert entry["delivered_rounds"] == t["deliveredRounds"]
        assert entry["debited"] == t["debited"]
        assert entry["winnings"] == t["winnings"]
        assert entry["cost_share"] == float(t["winnings"] / entry["exposure_used"])
        assert isinstance(entry["winnings"], Decimal)
    for kind in EXCEPTION_KINDS:
        expected = sorted(x for t in truth.values() for x in t["exceptions"][kind])
        key = "player_id" if kind == "players_over_bet_number" else "round_id"
        assert sorted(frames[kind][key]) == expected, kind
        assert report.exceptions[kind] == len(expected)
    # Every decoy is there at least once, so none of the lists is checked empty only.
    assert all(report.exceptions[k] >= 1 for k in EXCEPTION_KINDS)
    assert report.unattributed_rounds == 2 * len(truth)  # the foreign round, the orphan credit
