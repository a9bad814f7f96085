"""A multi-brand promotion reported as one: its members with their players and budget,
rolled up per brand and per currency, the brands that failed or are pending named, and the
campaign results' funnel per brand side by side.

Everything is read from the campaign register (:class:`~gptools.campaigns.BrandGroups`
for the group, :class:`~gptools.campaigns.CampaignRegister` for each created campaign and
its players); ``gptools campaigns list/show/results --group NAME`` and the notebooks only
render a :class:`GroupReport`.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

import pandas as pd

from gptools.campaigns._group import BrandGroups, GroupResult
from gptools.campaigns._register import CampaignRecord, CampaignRegister, ParticipantCounts
from gptools.display import html_table

#: The funnel stages of the campaign results shown per brand, in order.
FUNNEL: tuple[str, ...] = ("assigned", "reached", "completed")


@dataclass(frozen=True, slots=True)
class GroupReport:
    """One group: ``members`` (one row per campaign: brand, currency, status, campaign id,
    error, bet, budget, players loaded/rejected/pending), rolled up ``per_brand`` and
    ``per_currency``; ``failed_brands`` and ``pending_brands`` name the brands with a
    campaign not created."""

    group: GroupResult
    members: pd.DataFrame
    per_brand: pd.DataFrame
    per_currency: pd.DataFrame
    records: tuple[CampaignRecord, ...] = field(repr=False)

    @property
    def failed_brands(self) -> tuple[int, ...]:
        """Brands with a campaign the server refused."""
        return self.group.brands_in("failed")

    @property
    def pending_brands(self) -> tuple[int, ...]:
        """Brands with a campaign recorded but never answered (an apply that stopped)."""
        return self.group.brands_in("pending")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: money as exact decimal strings, missing values as null."""
        return {
            "group": self.group.name,
            "server": self.group.server,
            "brands": list(self.group.brands),
            "complete": self.group.complete,
            "failed_brands": list(self.failed_brands),
            "pending_brands": list(self.pending_brands),
            "members": _records(self.members),
            "per_brand": _records(self.per_brand),
            "per_currency": _records(self.per_currency),
        }

    def _repr_html_(self) -> str:
        g = self.group
        state = "complete" if g.complete else (
            f"incomplete: failed brands {list(self.failed_brands)}, pending brands "
            f"{list(self.pending_brands)}"
        )  # fmt: skip
        return (
            f"<p><b>Promotion</b> {html.escape(g.name)} on {len(g.brands)} brand(s), "
            f"{len(g.created)} campaign(s) created; {html.escape(state)}</p>"
            + "<p>Per currency</p>" + html_table(self.per_currency)
            + "<p>Per brand</p>" + html_table(self.per_brand)
        )  # fmt: skip


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return f"{value:f}"
    if value is pd.NA or value is None or (isinstance(value, float) and value != value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): _plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


MEMBER_COLUMNS: tuple[str, ...] = (
    "brand", "currency", "status", "campaign_id", "error", "bet", "budget",
    "loaded", "rejected", "pending",
)  # fmt: skip


def group_report(
    name: str,
    *,
    server: str | None = None,
    register: CampaignRegister | None = None,
    now: datetime | None = None,
) -> GroupReport:
    """The report of the group ``name`` of ``server`` (``None``: the one most recently
    updated) from the campaign ``register`` (default: the default file); ``now`` is not
    used by the roll-ups (it is the campaigns' state's moment, kept for the callers)."""
    del now
    reg = register or CampaignRegister()
    group = BrandGroups(reg.path).group(name, server=server)
    records = {r.campaign_id: r for r in reg.campaigns(server=group.server)}
    counts = reg.participant_counts(server=group.server)
    rows = []
    mine: list[CampaignRecord] = []
    for m in group.members:
        if m.status == "superseded":
            continue
        record = records.get(m.campaign_id or "")
        if record is not None:
            mine.append(record)
        players = counts.get((group.server, m.campaign_id or ""), ParticipantCounts())
        rows.append(
            [m.brand, m.currency, m.status, m.campaign_id, m.error,
             record.bet if record else pd.NA, record.budget if record else pd.NA,
             players.loaded, players.rejected, players.pending]
        )  # fmt: skip
    members = pd.DataFrame(rows, columns=list(MEMBER_COLUMNS), dtype=object)
    return GroupReport(group, members, _per_brand(members, group), _per_currency(members),
                       tuple(mine))  # fmt: skip


def _budgets(frame: pd.DataFrame) -> str:
    parts = [
        f"{cur} {sum((b for b in rows['budget'] if b is not pd.NA), Decimal(0)):f}"
        for cur, rows in frame.groupby("currency", sort=True)
    ]
    return ", ".join(parts)


def _per_brand(members: pd.DataFrame, group: GroupResult) -> pd.DataFrame:
    rows = []
    for brand in group.brands:
        mine = members[members["brand"] == brand]
        created = mine[mine["status"] == "created"]
        rows.append(
            [brand, len(created), int((mine["status"] == "failed").sum()),
             int((mine["status"] == "pending").sum()), int(mine["loaded"].sum()),
             int(mine["rejected"].sum()), int(mine["pending"].sum()), _budgets(created)]
        )  # fmt: skip
    columns = ["brand", "created", "failed", "pending", "players_loaded", "players_rejected",
               "players_pending", "budget"]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def _per_currency(members: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for currency, mine in members.groupby("currency", sort=True):
        created = mine[mine["status"] == "created"]
        rows.append(
            [currency, len(created), int((mine["status"] != "created").sum()),
             int(created["loaded"].sum()), sum(created["budget"], Decimal(0))]
        )  # fmt: skip
    columns = ["currency", "campaigns", "not_created", "players_loaded", "budget"]
    return pd.DataFrame(rows, columns=columns, dtype=object)


def funnel_by_brand(campaigns: Iterable[Mapping[str, Any]], group: GroupResult) -> pd.DataFrame:
    """The campaign results' funnel per brand, side by side: one row per stage of
    :data:`FUNNEL` (players assigned, reached, completed; and the rounds used and granted),
    one column per brand of the group (summed over its currencies), brands without a
    created campaign left out. ``campaigns`` are the results' per-campaign dicts."""
    brand_of = {m.campaign_id: m.brand for m in group.created}
    stages = (*FUNNEL, "rounds_used", "rounds_granted")
    sums: dict[int, dict[str, int]] = {}
    for c in campaigns:
        brand = brand_of.get(str(c["campaign_id"]))
        if brand is None:
            continue
        row = sums.setdefault(brand, dict.fromkeys(stages, 0))
        for stage in stages:
            row[stage] += int(c.get(stage) or 0)
    brands = [b for b in group.brands if b in sums]
    return pd.DataFrame(
        {str(b): [sums[b][s] for s in stages] for b in brands}, index=list(stages)
    ).rename_axis("stage")
