"""Charts of a holdout uplift (matplotlib), each read at a glance: the difference per
player with its 95 % interval against zero (one panel per metric, as their units differ),
and the money: incremental revenue (with its interval) next to the cost, per campaign in
its own currency."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gptools.deliverylog._charts import FIGSIZE, _legend
from gptools.deliverylog._uplift import COST_BASES, UpliftReport
from gptools.errors import import_extra

if TYPE_CHECKING:  # matplotlib is the [notebooks] extra: imported only to draw
    from matplotlib.figure import Figure

_LABELS = {"turnover": "paid turnover", "active_days": "active days", "ngr": "net gaming revenue"}


def plot_uplift(
    report: UpliftReport, *, truth: Mapping[tuple[str, str], Decimal] | None = None
) -> Figure:
    """Per metric, per campaign: the difference per player (treatment minus holdout) as a
    dot with its 95 % interval as a bar, the zero line (no effect) dashed; a refused
    campaign is named, without a number. ``truth`` ((campaign id, metric) -> value, the
    sandbox's true effect) is drawn as a cross where given."""
    plt = import_extra("matplotlib.pyplot", "notebooks", "Uplift charts")
    names = [n for n in _LABELS if any(c.metric(n) for c in report.campaigns)] or ["turnover"]
    fig: Figure
    fig, axes = plt.subplots(1, len(names), figsize=(FIGSIZE[0], 3.2), layout="constrained",
                             squeeze=False)  # fmt: skip
    fig.suptitle("Difference per player, treatment minus holdout (95 % interval)")
    drawn, marked = None, False
    for ax, name in zip(axes[0], names, strict=True):
        labels: list[str] = []
        for y, c in enumerate(report.campaigns):
            m = c.metric(name)
            labels.append(f"{c.campaign_id}\n{c.currency}")
            if m is None or m.difference is None:
                ax.text(0.5, y, "too few players", ha="center", va="center", fontsize=8,
                        transform=ax.get_yaxis_transform())  # fmt: skip
                continue
            d = m.difference
            lo, mid, hi = float(d.low), float(d.difference), float(d.high)
            ax.errorbar([mid], [y], xerr=[[mid - lo], [hi - mid]], fmt="o", color="tab:blue",
                        capsize=4, label="estimate" if not marked else None)  # fmt: skip
            if truth is not None and (c.campaign_id, name) in truth:
                ax.plot([float(truth[(c.campaign_id, name)])], [y], "x", color="tab:red",
                        ms=9, label="true effect" if not marked else None)  # fmt: skip
            if not marked:
                drawn, marked = ax, True
        ax.axvline(0, color="0.4", ls="--", lw=1)
        ax.set_yticks(range(len(labels)), labels)
        ax.set_ylim(-0.7, len(labels) - 0.3)
        unit = "days" if name == "active_days" else "currency units"
        ax.set_title(_LABELS[name], fontsize=10)
        ax.set_xlabel(f"per player ({unit})")
    if drawn is not None:
        handles, names_ = drawn.get_legend_handles_labels()
        fig.legend(handles, names_, loc="outside lower center", ncols=2, frameon=False)
    return fig


def plot_roi(report: UpliftReport) -> Figure:
    """Per campaign (in its own currency): the incremental revenue with its interval and
    the cost it is set against (hatched when it is the exposure: the bets' value, not the
    cost), with the ROI written above; a campaign without revenue (no ledger, or too few
    players) says so."""
    plt = import_extra("matplotlib.pyplot", "notebooks", "Uplift charts")
    rows = report.campaigns
    fig: Figure
    fig, axes = plt.subplots(1, max(len(rows), 1), figsize=FIGSIZE, layout="constrained",
                             squeeze=False)  # fmt: skip
    fig.suptitle("Did it pay off? Incremental revenue against cost")
    drawn = None
    for ax, c in zip(axes[0], rows, strict=False):
        ax.set_title(f"{c.campaign_id} ({c.currency})", fontsize=10)
        rev = c.incremental_revenue
        if rev is None or c.cost is None:
            why = c.refused or "no net gaming revenue (no ledger)"
            ax.text(0.5, 0.5, why, ha="center", va="center", wrap=True, fontsize=8,
                    transform=ax.transAxes)  # fmt: skip
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        est, lo, hi = (float(v) for v in rev)
        ax.bar([0], [est], color="tab:green", yerr=[[est - lo], [hi - est]], capsize=6,
               label="incremental revenue")  # fmt: skip
        exposure = c.cost_basis == COST_BASES["exposure"]
        label = "cost: exposure (rounds × bet)" if exposure else "cost: winnings paid"
        ax.bar([1], [float(c.cost)], color="tab:red", alpha=0.6,
               hatch="//" if exposure else None, label=label)  # fmt: skip
        ax.axhline(0, color="0.4", lw=0.8)
        ax.set_xticks([0, 1], ["revenue", "cost"])
        ax.set_ylabel(c.currency)
        drawn = drawn or ax
        roi: Any = c.roi
        if roi is not None:
            ax.set_title(f"{c.campaign_id} ({c.currency}): ROI {roi[0]:+.0%} "
                         f"[{roi[1]:+.0%}, {roi[2]:+.0%}]", fontsize=10)  # fmt: skip
    if drawn is not None:
        _legend(drawn, fontsize=8)
    return fig
