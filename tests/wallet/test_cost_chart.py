"""The reconciliation's chart draws what the report says: per currency, the exposure and the
winnings as bars of exactly those amounts, the share in the title; no campaign, one panel
that says so. A report's winnings per campaign leave out a campaign the ledger has no free
round of (its cost is not known, not zero)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import matplotlib

from gptools.client import Client
from gptools.sandbox import RunningSandbox
from gptools.wallet import plot_cost, reconcile
from tests.wallet.sandbox_wallet import played_campaigns

matplotlib.use("Agg")


def test_the_cost_chart_is_the_report(
    client: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    import matplotlib.pyplot as plt

    ledger, log, records, truth = played_campaigns(client, fresh_sandbox, tmp_path)
    with reconcile(ledger, log, records) as rec:
        report = rec.report
    rows = report.by_currency()
    assert [r["currency"] for r in rows] == ["EUR", "JPY"]
    fig = plot_cost(report)
    for ax, row in zip(fig.axes, rows, strict=True):
        widths = [p.get_width() for p in ax.patches]
        assert widths == [float(row["exposure_used"]), float(row["winnings"])]
        assert ax.get_title() == f"{row['currency']}: {row['cost_share']:.0%} of the exposure"
    plt.close(fig)
    assert report.winnings() == {cid: t["winnings"] for cid, t in truth.items()}

    # A campaign with no wallet round has no known cost; no campaign at all, no bars.
    first = report.campaigns[0]
    unseen = replace(report, campaigns=({**first, "wallet_rounds": 0}, *report.campaigns[1:]))
    assert first["campaign_id"] not in unseen.winnings()
    empty = plot_cost(replace(report, campaigns=()))
    (ax,) = empty.axes
    assert [t.get_text() for t in ax.texts] == ["no campaign"] and not ax.patches
    plt.close(empty)
