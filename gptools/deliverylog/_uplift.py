"""Did it pay off? A campaign's treatment group against its holdout group, on paid play
after the campaign's start.

A plan with a ``holdout`` share gave its campaign to the treatment group only
(:mod:`gptools.campaigns._holdout`). Both groups then play for money as they would; the
campaign's effect is the difference between the groups' mean paid activity per player
(intention to treat: every treatment player counts, whether or not they used a free round;
players with no paid play count as zero):

- from the delivery log, on the actions no campaign claims (neither attributed nor
  ambiguous under the rule; with a campaign id column, those without an id): **turnover**
  (the sum of their bets, in the campaign's currency) and **active days** (distinct UTC
  days with a paid play), both from the campaign's start (and before ``until``);
- from the wallet ledger when given: **net gaming revenue**, paid debits less paid credits
  less paid rollbacks (free-round rows are the campaign's own cost, not revenue).

The difference per player has a 95 % confidence interval by **Welch's t** (unequal
variances, Welch–Satterthwaite degrees of freedom, the t quantile by its Cornish–Fisher
expansion, within 1e-5 of the exact one for 10 degrees of freedom or more). Nothing is
resampled, so nothing needs a seed. Either group under :data:`MIN_GROUP` players is
refused with a reason rather than given a number. The incremental revenue is the
difference in net gaming revenue per player times the treatment group's size, and
ROI = (incremental revenue - cost) / cost, where the cost is the winnings the free rounds
paid (the ledger's, the real cost), else the exposure (rounds played × bet, labelled so:
the bets' value, not the cost, which may be below or above it, as a free round's win is a
multiple of its bet). Without a ledger the revenue is unknown and no ROI is given.

Pure functions over per-player values; :func:`holdout_uplift` reads them from a
:class:`~gptools.deliverylog.CampaignResults` and, when given, a ledger (the wallet's
reader, :mod:`._ledger`, on the results' engine: the reconciliation reads the same rows the
same way).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from statistics import NormalDist
from typing import Any, Final

import ibis
import ibis.expr.types as ir
import pandas as pd
import pyarrow as pa

from gptools import spec
from gptools._secrets import redact_url
from gptools.deliverylog._contract import CAMPAIGN_ID
from gptools.deliverylog._ledger import LedgerFormat, normalise, open_ledger
from gptools.deliverylog._ledger_layout import (
    CREDIT,
    DEBIT,
    DEFAULT_LEDGER_MAPPING,
    ROLLBACK,
    LedgerMapping,
)
from gptools.deliverylog._results import CampaignResults, _epoch_us
from gptools.display import html_table

#: The fewest players either group needs for an interval (the same bound the plan's
#: validation warns at: ``gptools.campaigns.MIN_GROUP``).
MIN_GROUP: Final = 30
#: The confidence of the interval.
CONFIDENCE: Final = 0.95
#: How the interval is computed, in the report's words.
METHOD: Final = (
    "Welch's t interval (95 %) of the difference of mean paid activity per player, "
    "treatment minus holdout; intention to treat, zeros included"
)
#: The metrics: name -> unit (``None``: the campaign's currency).
METRICS: Final[dict[str, str | None]] = {
    "turnover": None,
    "active_days": "days",
    "ngr": None,
}
#: What each cost basis is called.
COST_BASES: Final = {
    "ledger": "winnings credited (ledger): the real cost",
    "exposure": "exposure (rounds × bet): the bets' value, not the cost (winnings may be "
    "below or above it)",
}
_DAY_US: Final = 86_400_000_000


# --------------------------------------------------------------------------------------
# The statistics
# --------------------------------------------------------------------------------------


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile at probability ``p`` with ``df`` degrees of freedom, by the
    Cornish–Fisher expansion (Abramowitz & Stegun 26.7.5): within 1e-5 of the exact value
    for ``df`` >= 10; the normal quantile when ``df`` is infinite."""
    z = NormalDist().inv_cdf(p)
    if math.isinf(df):
        return z
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@dataclass(frozen=True, slots=True)
class Difference:
    """Treatment minus holdout: the means, their difference and its interval (exact
    Decimals, unrounded), Welch's degrees of freedom."""

    treatment_mean: Decimal
    holdout_mean: Decimal
    difference: Decimal
    low: Decimal
    high: Decimal
    df: float


def _mean_var(values: Sequence[Decimal]) -> tuple[Decimal, Decimal]:
    n = len(values)
    mean = sum(values, Decimal(0)) / n
    var = sum(((v - mean) ** 2 for v in values), Decimal(0)) / (n - 1)
    return mean, var


def welch_difference(
    treatment: Sequence[Decimal], holdout: Sequence[Decimal], confidence: float = CONFIDENCE
) -> Difference:
    """The difference of means ``treatment - holdout`` with its Welch t interval (each
    group needs two values at least)."""
    if len(treatment) < 2 or len(holdout) < 2:
        raise ValueError("each group needs at least two players")
    m1, v1 = _mean_var(treatment)
    m2, v2 = _mean_var(holdout)
    a, b = v1 / len(treatment), v2 / len(holdout)
    se2 = a + b
    diff = m1 - m2
    if se2 == 0:
        return Difference(m1, m2, diff, diff, diff, math.inf)
    df = float(se2**2 / (a**2 / (len(treatment) - 1) + b**2 / (len(holdout) - 1)))
    half = Decimal(repr(t_quantile(0.5 + confidence / 2, df))) * se2.sqrt()
    return Difference(m1, m2, diff, diff - half, diff + half, df)


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------


def _round(value: Decimal | None, unit: str) -> Decimal | None:
    """An estimate at the unit's precision: a currency's exponent, or 2 decimals."""
    if value is None:
        return None
    places = 2 if unit == "days" else (spec.currency_decimals(unit) or 0)
    return value.quantize(Decimal(1).scaleb(-places), ROUND_HALF_EVEN)


@dataclass(frozen=True, slots=True)
class MetricUplift:
    """One metric of one campaign: group sizes, and when both are large enough the means,
    the difference per player and its interval (rounded to the unit); else ``refused``
    says why."""

    metric: str
    unit: str
    treatment_players: int
    holdout_players: int
    difference: Difference | None = None
    refused: str | None = None

    def row(self) -> dict[str, Any]:
        """The metric's values, rounded to its unit."""
        d = self.difference
        return {
            "metric": self.metric,
            "unit": self.unit,
            "treatment_players": self.treatment_players,
            "holdout_players": self.holdout_players,
            "treatment_mean": _round(d.treatment_mean, self.unit) if d else None,
            "holdout_mean": _round(d.holdout_mean, self.unit) if d else None,
            "difference": _round(d.difference, self.unit) if d else None,
            "low": _round(d.low, self.unit) if d else None,
            "high": _round(d.high, self.unit) if d else None,
            "refused": self.refused,
        }


def metric_uplift(
    metric: str,
    unit: str,
    treatment: Sequence[Decimal],
    holdout: Sequence[Decimal],
    *,
    min_group: int = MIN_GROUP,
) -> MetricUplift:
    """The uplift of one metric from the per-player values of each group, or a refusal
    when a group has fewer than ``min_group`` players."""
    n1, n2 = len(treatment), len(holdout)
    if min(n1, n2) < max(min_group, 2):
        small = "holdout" if n2 < n1 else "treatment"
        return MetricUplift(
            metric, unit, n1, n2,
            refused=f"too small a group to measure: {small} has {min(n1, n2)} players, "
            f"at least {max(min_group, 2)} are needed",
        )  # fmt: skip
    return MetricUplift(metric, unit, n1, n2, welch_difference(treatment, holdout))


@dataclass(frozen=True, slots=True)
class CampaignUplift:
    """A campaign's uplift: its metrics, the incremental revenue (net gaming revenue per
    player × treatment players, with its interval), the cost and its basis, and ROI."""

    campaign_id: str
    currency: str
    since: datetime
    until: datetime | None
    metrics: tuple[MetricUplift, ...]
    cost: Decimal | None = None
    cost_basis: str | None = None

    def metric(self, name: str) -> MetricUplift | None:
        """The metric called ``name``, if measured."""
        return next((m for m in self.metrics if m.metric == name), None)

    @property
    def incremental_revenue(self) -> tuple[Decimal, Decimal, Decimal] | None:
        """Net gaming revenue the campaign added (estimate, low, high), at the currency's
        exponent; ``None`` without a ledger or with a refused group."""
        ngr = self.metric("ngr")
        if ngr is None or ngr.difference is None:
            return None
        d, n = ngr.difference, ngr.treatment_players
        out = tuple(_round(v * n, self.currency) for v in (d.difference, d.low, d.high))
        return out  # type: ignore[return-value]

    @property
    def roi(self) -> tuple[float, float, float] | None:
        """(incremental revenue - cost) / cost, at the estimate and at the interval's
        ends; ``None`` without a revenue or a positive cost."""
        rev = self.incremental_revenue
        if rev is None or self.cost is None or self.cost <= 0:
            return None
        r = tuple(float((v - self.cost) / self.cost) for v in rev)
        return r  # type: ignore[return-value]

    @property
    def refused(self) -> str | None:
        """Why no number is given, when a group is too small."""
        return next((m.refused for m in self.metrics if m.refused), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: money and estimates as strings (every digit kept)."""
        rev, roi = self.incremental_revenue, self.roi
        return {
            "campaign_id": self.campaign_id,
            "currency": self.currency,
            "since": _iso(self.since),
            "until": _iso(self.until) if self.until else None,
            "metrics": [
                {k: (str(v) if isinstance(v, Decimal) else v) for k, v in m.row().items()}
                for m in self.metrics
            ],
            "incremental_revenue": None
            if rev is None
            else {"estimate": str(rev[0]), "low": str(rev[1]), "high": str(rev[2])},
            "cost": None if self.cost is None else str(self.cost),
            "cost_basis": self.cost_basis,
            "roi": None if roi is None else {"estimate": roi[0], "low": roi[1], "high": roi[2]},
            "refused": self.refused,
        }


@dataclass(frozen=True)
class UpliftReport:
    """The uplift of every campaign with a holdout group (:func:`holdout_uplift`)."""

    campaigns: tuple[CampaignUplift, ...]
    ledger: str | None = None
    method: str = METHOD
    min_group: int = MIN_GROUP
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the method, the minimum group, the ledger's source, per campaign."""
        return {
            "method": self.method,
            "confidence": CONFIDENCE,
            "min_group": self.min_group,
            "ledger": self.ledger,
            "notes": list(self.notes),
            "campaigns": [c.to_dict() for c in self.campaigns],
        }

    def frame(self) -> pd.DataFrame:
        """One row per campaign and metric (estimates as Decimals at the unit)."""
        rows = [
            {"campaign_id": c.campaign_id, "currency": c.currency, **m.row()}
            for c in self.campaigns
            for m in c.metrics
        ]
        return pd.DataFrame(rows, columns=list(FRAME_COLUMNS))

    def roi_frame(self) -> pd.DataFrame:
        """One row per campaign: incremental revenue (and interval), cost, its basis, ROI
        (a ratio, to 3 decimals; :meth:`to_dict` keeps every digit)."""
        rows = []
        for c in self.campaigns:
            rev = c.incremental_revenue
            roi = None if c.roi is None else tuple(round(v, 3) for v in c.roi)
            rows.append(
                (c.campaign_id, c.currency, *(rev or (None, None, None)), c.cost, c.cost_basis,
                 *(roi or (None, None, None)), c.refused)
            )  # fmt: skip
        return pd.DataFrame(rows, columns=list(ROI_COLUMNS))

    def _repr_html_(self) -> str:
        head = f"<p><b>Holdout uplift</b> ({html.escape(self.method)})</p>"
        return head + html_table(self.frame()) + html_table(self.roi_frame())


#: The columns of :meth:`UpliftReport.frame`.
FRAME_COLUMNS: Final = (
    "campaign_id", "currency", "metric", "unit", "treatment_players", "holdout_players",
    "treatment_mean", "holdout_mean", "difference", "low", "high", "refused",
)  # fmt: skip
#: The columns of :meth:`UpliftReport.roi_frame`.
ROI_COLUMNS: Final = (
    "campaign_id", "currency", "incremental_revenue", "revenue_low", "revenue_high", "cost",
    "cost_basis", "roi", "roi_low", "roi_high", "refused",
)  # fmt: skip


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# --------------------------------------------------------------------------------------
# Per-player values: from the delivery log, from a ledger
# --------------------------------------------------------------------------------------


def unclaimed_plays(results: CampaignResults) -> ir.Table:
    """Per action no campaign claims (neither attributed nor ambiguous; with the log's
    campaign id column, one without an id): its first valid delivery's player, currency,
    bet and time (epoch microseconds). Paid play, as far as the log can tell."""
    p, a = results._plays, results._a  # the same package's relations, not copied
    valid = p.filter(p.reason.isnull() & p.action_id.notnull())
    first = a.filter(a.valid).select("action_id", "first_key")
    j = valid.inner_join(first, [valid.action_id == first.action_id, valid.key == first.first_key])
    by_id = CAMPAIGN_ID in p.columns and results.campaign_id_column is not None
    j = j.select(
        "action_id", "player_id", "currency_code", "bet", "ts_us",
        *([CAMPAIGN_ID] if by_id else []),
    )  # fmt: skip
    if by_id:
        j = j.filter(j[CAMPAIGN_ID].isnull())
    return j.anti_join(results._attr, "action_id")


def paid_activity(plays: ir.Table, groups: ir.Table) -> ir.Table:
    """Per campaign and group player with paid play in the period: rounds, turnover (sum
    of bets) and active days (distinct UTC days). ``groups``: ``campaign_id``,
    ``player_id``, ``currency_code``, ``since_us``, ``until_us`` (NULL: no end)."""
    j = plays.inner_join(groups, ["player_id", "currency_code"])
    j = j.filter((j.ts_us >= j.since_us) & (j.until_us.isnull() | (j.ts_us < j.until_us)))
    return j.group_by(["campaign_id", "player_id"]).aggregate(
        rounds=j.count(),
        turnover=j.bet.sum(),
        active_days=(j.ts_us // _DAY_US).nunique(),
    )


def ledger_ngr(
    results: CampaignResults,
    ledger: str | Path,
    groups: pd.DataFrame,
    *,
    mapping: LedgerMapping = DEFAULT_LEDGER_MAPPING,
    format: LedgerFormat = "auto",
    table: str = "wallet_ledger",
) -> pd.DataFrame:
    """Per campaign and group player with paid ledger rows in the period: paid debits,
    credits, rollbacks and ``ngr`` = debits - credits - rollbacks (exact Decimals).

    ``ledger`` is read by the wallet's reader (:func:`._ledger.open_ledger`: CSV, JSONL,
    Parquet or a database URL's ``table``, in ``mapping``'s layout) on ``results``'
    engine, as the reconciliation reads it (``format`` as there); the rows
    it rejects are counted in ``rejected`` (a frame attribute), by reason in
    ``rejected_by_reason``. ``groups`` as for :func:`paid_activity`."""
    log = results.log
    source = open_ledger(log, ledger, format=format, mapping=mapping, table=table)
    try:
        rows = normalise(source.raw, mapping)
        bad = rows.filter(rows.reason.notnull())
        rejected = log.execute(bad.group_by("reason").aggregate(rows=bad.count()))
        used = rows.filter(rows.reason.isnull() & ~rows.free_round)
        used = used.select(
            "player_id", "currency_code", "amount", "kind", ts_us=results.x.epoch_us(used.ts)
        )
        view = log.con.create_view(
            f"gp_uplift_ledger_groups_{log.tag}",
            ibis.memtable(pa.Table.from_pandas(groups, preserve_index=False)),
            overwrite=True,
        )
        j = used.inner_join(view, ["player_id", "currency_code"])
        j = j.filter((j.ts_us >= j.since_us) & (j.until_us.isnull() | (j.ts_us < j.until_us)))
        zero = ibis.literal(0).cast(j.amount.type())
        df: pd.DataFrame = log.execute(
            j.group_by(["campaign_id", "player_id"])
            .aggregate(
                **{
                    f"{kind}s": ibis.ifelse(j.kind == kind, j.amount, zero).sum()
                    for kind in (DEBIT, CREDIT, ROLLBACK)
                }
            )
            .order_by(["campaign_id", "player_id"])
        )
    finally:
        source.close()
    for column in ("debits", "credits", "rollbacks"):
        df[column] = df[column].map(_amount)
    df["ngr"] = df.debits - df.credits - df.rollbacks
    by_reason = {str(r): int(n) for r, n in zip(rejected.reason, rejected.rows, strict=True)}
    df.attrs["rejected"] = sum(by_reason.values())
    df.attrs["rejected_by_reason"] = dict(sorted(by_reason.items()))
    return df


def _groups_frame(
    results: CampaignResults, groups: Mapping[str, Any], until: datetime | None
) -> pd.DataFrame:
    rows = []
    for cid, g in groups.items():
        terms = results.campaigns[cid]
        since, end = _epoch_us(terms.start), None if until is None else _epoch_us(until)
        for arm in ("treatment", "holdout"):
            for pid in getattr(g, arm):
                rows.append((cid, str(pid), arm, terms.currency, since, end))
    return pd.DataFrame(
        rows,
        columns=["campaign_id", "player_id", "arm", "currency_code", "since_us", "until_us"],
    ).astype({"since_us": "int64", "until_us": "Int64"})


def player_values(
    results: CampaignResults,
    groups: Mapping[str, Any],
    *,
    until: datetime | None = None,
    ledger: str | Path | None = None,
    ledger_mapping: LedgerMapping = DEFAULT_LEDGER_MAPPING,
    ledger_format: LedgerFormat = "auto",
    ledger_table: str = "wallet_ledger",
) -> pd.DataFrame:
    """Per campaign and player of either group: ``arm``, ``rounds``, ``turnover``,
    ``active_days`` (from the log's unclaimed plays) and, with a ``ledger``, ``ngr``; zero
    for a player with no paid play. ``groups`` maps campaign id -> an object with
    ``treatment`` and ``holdout`` player ids (a register's ``HoldoutGroups``)."""
    frame = _groups_frame(results, groups, until)
    keys = frame[["campaign_id", "player_id", "currency_code", "since_us", "until_us"]]
    table = pa.Table.from_pandas(keys, preserve_index=False)
    view = results.log.con.create_view(
        f"gp_uplift_groups_{results.log.tag}", ibis.memtable(table), overwrite=True
    )
    activity = results._df(paid_activity(unclaimed_plays(results), view))
    out = frame[["campaign_id", "player_id", "arm"]].merge(
        activity, on=["campaign_id", "player_id"], how="left"
    )
    out["rounds"] = out["rounds"].fillna(0).astype("int64")
    out["active_days"] = out["active_days"].fillna(0).astype("int64")
    out["turnover"] = out["turnover"].map(_amount)
    if ledger is not None:
        ngr = ledger_ngr(
            results, ledger, frame, mapping=ledger_mapping, format=ledger_format,
            table=ledger_table,
        )  # fmt: skip
        out = out.merge(ngr[["campaign_id", "player_id", "ngr"]], how="left",
                        on=["campaign_id", "player_id"])  # fmt: skip
        out["ngr"] = out["ngr"].map(_amount)
        out.attrs["ledger_rejected"] = ngr.attrs["rejected_by_reason"]
    return out.sort_values(["campaign_id", "arm", "player_id"]).reset_index(drop=True)


def _amount(value: Any) -> Decimal:
    """An engine's decimal as a Decimal; a missing one (no paid play) as zero."""
    return value if isinstance(value, Decimal) else Decimal(0) if pd.isna(value) else Decimal(value)


def holdout_uplift(
    results: CampaignResults,
    groups: Mapping[str, Any],
    *,
    until: datetime | None = None,
    ledger: str | Path | None = None,
    ledger_mapping: LedgerMapping = DEFAULT_LEDGER_MAPPING,
    ledger_format: LedgerFormat = "auto",
    ledger_table: str = "wallet_ledger",
    cost: Mapping[str, Decimal | None] | None = None,
    min_group: int = MIN_GROUP,
) -> UpliftReport:
    """The uplift of each campaign in ``groups`` (campaign id -> its treatment and holdout
    ids) on paid play from its start (to ``until``): turnover and active days from the
    log, net gaming revenue from the ``ledger`` when given, ROI against ``cost``.

    ``cost`` maps a **campaign id** to its real cost in its currency (the winnings the
    ledger credited to its free rounds: ``Reconciliation.report.winnings()``), or
    ``None``; a campaign without one is costed at its exposure (rounds played × bet, from
    ``results``), labelled as such: the bets' value, not the cost, which may be below or
    above it. The ledger is read in ``ledger_mapping``'s layout
    (:class:`gptools.wallet.LedgerMapping`), ``ledger_format`` and ``ledger_table`` as
    :func:`gptools.wallet.reconcile` takes them."""
    values = player_values(
        results, groups, until=until, ledger=ledger, ledger_mapping=ledger_mapping,
        ledger_format=ledger_format, ledger_table=ledger_table,
    )  # fmt: skip
    entries = {e["campaign_id"]: e for e in results.report.campaigns}
    notes = []
    rejected: dict[str, int] = values.attrs.get("ledger_rejected") or {}
    if rejected:
        reasons = ", ".join(f"{reason} {n:,}" for reason, n in rejected.items())
        notes.append(f"{sum(rejected.values()):,} ledger rows rejected, not used ({reasons})")
    out = []
    for cid in groups:
        terms = results.campaigns[cid]
        mine = values[values.campaign_id == cid]
        metrics = []
        for name in ("turnover", "active_days", "ngr"):
            if name not in mine.columns:
                continue
            unit = METRICS[name] or terms.currency
            t = [Decimal(v) for v in mine.loc[mine.arm == "treatment", name]]
            h = [Decimal(v) for v in mine.loc[mine.arm == "holdout", name]]
            metrics.append(metric_uplift(name, unit, t, h, min_group=min_group))
        given = (cost or {}).get(cid)
        if given is not None:
            amount, basis = _round(given, terms.currency), COST_BASES["ledger"]
        else:
            amount, basis = entries[cid]["exposure_used"], COST_BASES["exposure"]
        out.append(
            CampaignUplift(cid, terms.currency, terms.start.astimezone(UTC), until,
                           tuple(metrics), amount, basis)
        )  # fmt: skip
    return UpliftReport(
        tuple(out),
        # A database URL's password is never part of the report (it is printed as JSON).
        ledger=None if ledger is None else redact_url(str(ledger)),
        min_group=min_group,
        notes=tuple(notes),
    )
