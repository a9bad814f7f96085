"""Charts of campaign results (matplotlib), each read at a glance; each returns a Figure:
the funnel (assigned → reached → completed), uptake over time per campaign, and the share
of the budget used per campaign, grouped by currency (money is never added across
currencies)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gptools.deliverylog._charts import _chart, _date_axis, _empty, _hours, _legend
from gptools.deliverylog._results import CampaignResults

if TYPE_CHECKING:  # matplotlib is the [notebooks] extra: imported only to draw
    from matplotlib.figure import Figure


def plot_funnel(results: CampaignResults) -> Figure:
    """Per campaign: players assigned, reached (played at least once) and completed (used
    every round), side by side."""
    fig, ax = _chart("Campaign funnel", "campaign", "players")
    rows = results.report.campaigns
    if not rows:
        _empty(ax, "campaign")
        return fig
    x = np.arange(len(rows))
    width = 0.27
    for i, (key, label) in enumerate(
        (("assigned", "assigned"), ("reached", "reached"), ("completed", "completed"))
    ):
        values = [r[key] for r in rows]
        bars = ax.bar(x + (i - 1) * width, values, width, label=label)
        ax.bar_label(bars, fontsize=8)
    ax.set_xticks(x, [f"{r['campaign_id']}\n{r['currency']}" for r in rows])
    _legend(ax)
    return fig


def plot_uptake(results: CampaignResults) -> Figure:
    """Per campaign (its currency in the legend), the running count of players reached,
    each day's count drawn at the end of that day (players who had played by then), from
    zero at the campaign's start."""
    fig, ax = _chart("Uptake: players reached by the end of each day", "time (UTC)",
                     "players reached")  # fmt: skip
    points = uptake_points(results)
    if points.empty:
        _empty(ax, "attributed play")
        return fig
    for label, part in points.groupby("label", sort=True):
        ax.plot(_hours(part["at"]), part["reached"], marker="o", label=str(label))
    _date_axis(ax)
    _legend(ax)
    return fig


def uptake_points(results: CampaignResults) -> pd.DataFrame:
    """What :func:`plot_uptake` draws: per campaign (``label``: its id and currency), the
    players reached (``reached``) at each instant ``at`` (UTC): zero at its start, then
    the count at the end of each day of its window up to its last day of play (the last
    day cut at the campaign's end), days without a new player included."""
    rows: list[tuple[str, datetime, int]] = []
    for cid, part in results.uptake().groupby("campaign_id", sort=True):
        terms = results.campaigns[str(cid)]
        start, end = terms.start.astimezone(UTC), terms.end.astimezone(UTC)
        label = f"{cid} ({terms.currency})"
        by_day = dict(zip(part["day"], part["reached"], strict=True))
        rows.append((label, start, 0))
        reached = 0
        for day in range(int(part["day"].max()) + 1):
            reached = int(by_day.get(day, reached))
            rows.append((label, min(start + timedelta(days=day + 1), end), reached))
    return pd.DataFrame(rows, columns=["label", "at", "reached"])


def plot_budget_used(results: CampaignResults) -> Figure:
    """Per campaign, the share of its budget used (exposure used ÷ budget), grouped by
    currency, each bar labelled with the amounts in that currency."""
    fig, ax = _chart("Budget used", "share of the budget", "")
    rows = sorted(results.report.campaigns, key=lambda r: (r["currency"], r["campaign_id"]))
    if not rows:
        _empty(ax, "campaign")
        return fig
    y = np.arange(len(rows))
    shares = [100 * (r["budget_used"] or 0.0) for r in rows]
    bars = ax.barh(y, shares)
    ax.bar_label(
        bars,
        [f"{r['exposure_used']} of {r['budget']} {r['currency']}" for r in rows],
        fontsize=8,
        padding=3,
    )
    ax.set_yticks(y, [f"{r['campaign_id']} ({r['currency']})" for r in rows])
    ax.invert_yaxis()
    top = max(100.0, *shares)
    # Room on the right for the bars' labels, but ticks only up to the largest share: an
    # axis running to 120 % would suggest a share nobody used.
    ax.set_xlim(0, top * 1.35)
    ax.set_xticks(budget_ticks(top))
    ax.xaxis.set_major_formatter(lambda v, _pos: f"{v:.0f} %")
    ax.axvline(100, color="0.4", linestyle="--", linewidth=1)
    ax.annotate("budget", (100, 1), xycoords=("data", "axes fraction"), xytext=(0, 3),
                textcoords="offset points", ha="center", va="bottom", fontsize=8)  # fmt: skip
    return fig


def budget_ticks(top: float) -> list[float]:
    """The budget axis's ticks: every 20 % from 0 to the largest share (at least 100 %),
    rounded up to the next tick."""
    step = 20.0
    return [step * i for i in range(int(-(-top // step)) + 1)]
