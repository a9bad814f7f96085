"""Charts of a delivery-log analysis (matplotlib); each function returns a Figure.

The data behind each chart is aggregated by the engine first (per hour, per log bin), so
a chart of a log of millions of deliveries draws a few hundred points.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gptools.deliverylog._analysis import DeliveryAnalysis
from gptools.errors import import_extra

if TYPE_CHECKING:  # matplotlib is the [notebooks] extra: imported only to draw
    from matplotlib.figure import Figure

FIGSIZE = (9.0, 3.6)


def _hours(col: pd.Series) -> pd.Series:
    """Hour starts as naive UTC (matplotlib's date axis wants one clock)."""
    hours = pd.to_datetime(col)
    return hours.dt.tz_convert("UTC").dt.tz_localize(None) if hours.dt.tz is not None else hours


def _chart(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Any]:
    """A new figure of the common size with its one axes titled and labelled."""
    plt = import_extra("matplotlib.pyplot", "notebooks", "Delivery-log charts")
    fig, ax = plt.subplots(figsize=FIGSIZE, layout="constrained")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return fig, ax


def _date_axis(ax: Any) -> None:
    """Short hour labels (the date once per day), so ticks never run into each other."""
    mdates = import_extra("matplotlib.dates", "notebooks", "Delivery-log charts")
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def _legend(ax: Any, **kwargs: Any) -> None:
    """The legend right of the plot area, never over the data (the constrained layout
    makes room for it)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False,
              **kwargs)  # fmt: skip


def _empty(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} in this log", ha="center", va="center",
            transform=ax.transAxes)  # fmt: skip


def plot_duplicates_and_retries(analysis: DeliveryAnalysis) -> Figure:
    """First attempts, retries and duplicate deliveries per hour."""
    fig, ax = _chart("Deliveries per hour by kind", "hour (UTC)", "deliveries")
    hours = analysis.per_hour()
    if hours.empty:
        _empty(ax, "deliveries")
    else:
        x = _hours(hours.hour)
        ax.plot(x, hours.first_attempts, label="first attempts", color="0.6", lw=1)
        ax.plot(x, hours.retries, label="retries", color="tab:orange", lw=1.5)
        ax.plot(x, hours.duplicates, label="duplicate deliveries", color="tab:purple", lw=1.5)
        _date_axis(ax)
        _legend(ax)
    return fig


def plot_status_mix(analysis: DeliveryAnalysis) -> Figure:
    """Answers per hour stacked by status class (2xx, 4xx, 5xx, other)."""
    fig, ax = _chart("Status mix per hour", "hour (UTC)", "deliveries")
    hours = analysis.per_hour()
    if hours.empty:
        _empty(ax, "deliveries")
    else:
        x = _hours(hours.hour)
        ax.stackplot(
            x,
            hours.status_2xx, hours.status_4xx, hours.status_5xx, hours.status_other,
            labels=["2xx", "4xx", "5xx", "other"],
            colors=["tab:green", "tab:red", "tab:orange", "0.7"],
        )  # fmt: skip
        _date_axis(ax)
        _legend(ax, reverse=True)  # top to bottom, as stacked
    return fig


def plot_retry_gaps(analysis: DeliveryAnalysis) -> Figure:
    """Histogram of retry gaps on a log scale, with the fitted backoff
    (base × factor^(n-1)) marked for each retry number seen."""
    fit = analysis.report.backoff
    title = "Retry gaps"
    if fit["factor"] is not None:
        title += f": fitted gap_n = {fit['base_s']:.1f} s × {fit['factor']:.2f}^(n-1)"
    fig, ax = _chart(title, "seconds since the previous attempt (log scale)", "retries")
    hist = analysis.log_histogram("gap_s")
    if hist.empty:
        _empty(ax, "retries")
    else:
        ax.bar(hist.lo, hist["count"], width=hist.hi - hist.lo, align="edge",
               color="tab:blue", alpha=0.7, label="observed gaps")  # fmt: skip
        ax.set_xscale("log")
        if fit["base_s"] is not None:
            retries = [row["retry"] for row in fit["by_retry"]]
            factor = fit["factor"] or 1.0
            for i, n in enumerate(retries):
                ax.axvline(fit["base_s"] * factor ** (n - 1), color="tab:red", lw=1, ls="--",
                           label="fitted backoff" if i == 0 else None)  # fmt: skip
            _legend(ax)
    return fig


def plot_attempts_per_action(analysis: DeliveryAnalysis) -> Figure:
    """How many actions needed 1, 2, ... attempts (log-scaled counts)."""
    fig, ax = _chart(
        "Attempts per action", "attempts (all deliveries of the action)", "actions (log scale)"
    )
    dist = analysis.attempts_per_action()
    if dist.empty:
        _empty(ax, "actions")
    else:
        ax.bar(dist.attempts.astype(int), dist.actions, color="tab:blue")
        ax.set_yscale("log")
        ax.set_xticks(np.arange(1, int(dist.attempts.max()) + 1))
    return fig


def plot_latency(analysis: DeliveryAnalysis) -> Figure:
    """Acknowledgement latency on a log scale, with the 1-second budget marked."""
    fig, ax = _chart("Acknowledgement latency", "milliseconds (log scale)", "deliveries")
    hist = analysis.log_histogram("latency_ms")
    budget = analysis.report.budget_ms
    if hist.empty:
        _empty(ax, "latencies")
    else:
        over = hist.lo >= budget
        ax.bar(hist.lo, hist["count"], width=hist.hi - hist.lo, align="edge",
               color=np.where(over, "tab:red", "tab:blue"), alpha=0.8)  # fmt: skip
        ax.set_xscale("log")
        label = f"budget {budget:,.0f} ms ({analysis.report.over_budget:,} at or over)"
        ax.axvline(budget, color="black", lw=1.2, ls="--", label=label)
        _legend(ax)
    return fig
