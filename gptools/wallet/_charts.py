"""The reconciliation's chart (matplotlib), read at a glance: per currency, what the free
rounds really cost (the winnings the wallet credited) against the exposure (rounds played ×
bet, all the delivery log alone can give: the bets' value, which the winnings may fall below
or exceed). One panel per currency: amounts of different currencies never share an axis."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gptools.deliverylog._charts import FIGSIZE
from gptools.errors import import_extra
from gptools.wallet._reconcile import ReconciliationReport

if TYPE_CHECKING:  # matplotlib is the [notebooks] extra: imported only to draw
    from matplotlib.figure import Figure


def plot_cost(report: ReconciliationReport) -> Figure:
    """Per currency, two bars: the exposure and the winnings credited (the real cost),
    each labelled with its amount; the winnings' share of the exposure in the title. A
    report with no campaign draws one empty panel that says so."""
    plt = import_extra("matplotlib.pyplot", "notebooks", "The reconciliation's chart")
    rows = report.by_currency()
    fig: Figure
    fig, axes = plt.subplots(1, max(len(rows), 1), figsize=(FIGSIZE[0], 2.6),
                             layout="constrained", squeeze=False)  # fmt: skip
    fig.suptitle("What the free rounds cost: winnings credited against the exposure")
    if not rows:
        axes[0][0].text(0.5, 0.5, "no campaign", ha="center", va="center")
        axes[0][0].set_axis_off()
        return fig
    for ax, row in zip(axes[0], rows, strict=True):
        amounts = [row["exposure_used"], row["winnings"]]
        bars = ax.barh([0, 1], [float(a) for a in amounts], color=["0.75", "tab:blue"])
        ax.bar_label(bars, labels=[f"{a:,}" for a in amounts], padding=3, fontsize=8)
        ax.set_yticks([0, 1], ["exposure\n(rounds × bet)", "winnings\n(real cost)"])
        share = row["cost_share"]
        shown = "no exposure" if share is None else f"{share:.0%} of the exposure"
        ax.set_title(f"{row['currency']}: {shown}", fontsize=10)
        ax.set_xlabel(row["currency"])
        ax.margins(x=0.25)
    return fig
