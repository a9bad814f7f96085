"""Compare two feature-cost tables and report every difference between them."""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from enum import StrEnum
from typing import Any

import pandas as pd

from gptools.costs._tables import CostRow, rows_of
from gptools.display import html_table


class Difference(StrEnum):
    """A kind of difference between two cost tables. The members are in the order a report
    lists them; each value is the text the report shows (``"cost differs"``), and a member
    equals its text."""

    GAME_MISSING = "game missing"
    CURRENCY_MISSING = "currency missing"
    BUY_FEATURE_MISSING = "buy feature missing"
    BASE_BET_MISSING = "base bet missing"
    COST_MISSING = "cost missing"
    MULTIPLIER_CHANGED = "multiplier changed"
    COST_DIFFERS = "cost differs"


DIFFERENCE_COLUMNS: tuple[str, ...] = (
    "kind",
    "game_id",
    "currency",
    "buy_feature_type",
    "base_bet",
    "only_in",
    "left",
    "right",
)


@dataclass(frozen=True, slots=True)
class CrossCheck:
    """The differences between two cost tables; ``left``/``right`` name the two sources.

    ``differences`` has one row per difference (:data:`DIFFERENCE_COLUMNS`): ``only_in``
    names the side holding something the other lacks; ``left``/``right`` hold the two
    multipliers or costs where both sides have a value.
    """

    left: str
    right: str
    differences: pd.DataFrame

    @property
    def ok(self) -> bool:
        """True when the two tables agree completely."""
        return self.differences.empty

    def counts(self) -> dict[str, int]:
        """How many differences of each kind (every kind listed, zeros included)."""
        found = self.differences["kind"].value_counts().to_dict()
        return {kind.value: int(found.get(kind.value, 0)) for kind in Difference}

    def summary(self) -> str:
        """One line: agreement, or the count of each kind found."""
        if self.ok:
            return f"{self.left} and {self.right} agree"
        parts = [f"{n} {kind}" for kind, n in self.counts().items() if n]
        return f"{self.left} vs {self.right}: " + ", ".join(parts)

    def _repr_html_(self) -> str:
        head = f"<p><b>Cross-check</b>: {html.escape(self.summary())}</p>"
        if self.ok:
            return head
        table = self.differences.rename(columns={"left": self.left, "right": self.right})
        return head + html_table(table)


@dataclass(frozen=True, slots=True)
class _Where:
    """Where a difference is, as far down as its kind reaches (the rest stays empty)."""

    game: str | None = None
    currency: str | None = None
    feature: str | None = None
    base_bet: Decimal | None = None

    def row(self) -> tuple[Any, ...]:
        return (self.game, self.currency, self.feature, self.base_bet)


class _Diffs:
    def __init__(self, left: str, right: str) -> None:
        self.left, self.right = left, right
        self.rows: list[tuple[Any, ...]] = []

    def only(self, kind: Difference, side: str, where: _Where, value: Any = None) -> None:
        lv, rv = (value, None) if side == self.left else (None, value)
        self.rows.append((kind.value, *where.row(), side, lv, rv))

    def both(self, kind: Difference, where: _Where, lv: Any, rv: Any) -> None:
        self.rows.append((kind.value, *where.row(), None, lv, rv))

    def sides(
        self,
        lset: Iterable[Any],
        rset: Iterable[Any],
        kind: Difference,
        where: _Where,
        item_is: str | None,
    ) -> None:
        """Each item on one side only: it fills ``where``'s field ``item_is``, or with
        ``None`` (a cost, not a key) it is the side's value."""
        ls, rs = set(lset), set(rset)
        for side, mine, other in ((self.left, ls, rs), (self.right, rs, ls)):
            for item in sorted(mine - other):
                if item_is is None:
                    self.only(kind, side, where, value=item)
                else:
                    self.only(kind, side, replace(where, **{item_is: item}))


def cross_check(
    left: pd.DataFrame,
    right: pd.DataFrame,
    *,
    left_name: str | None = None,
    right_name: str | None = None,
) -> CrossCheck:
    """Report every difference between two cost tables of any sources.

    Found: a game or currency on one side only; where both sides give the breakdown, a buy
    feature or base bet on one side only, a price multiplier that changed (one row per
    game, currency and feature; the costs it moves are not listed again) and a cost that
    differs for the same base bet; where a side gives costs only (the configurations
    endpoint), each cost present on one side only.
    """
    lname = left_name or str(left.attrs.get("source", "left"))
    rname = right_name or str(right.attrs.get("source", "right"))
    if lname == rname:
        lname, rname = f"{lname} (left)", f"{rname} (right)"
    diffs = _Diffs(lname, rname)
    lrows, rrows = _index(rows_of(left)), _index(rows_of(right))
    diffs.sides(lrows, rrows, Difference.GAME_MISSING, _Where(), "game")
    for game in sorted(lrows.keys() & rrows.keys()):
        lcur, rcur = lrows[game], rrows[game]
        diffs.sides(lcur, rcur, Difference.CURRENCY_MISSING, _Where(game), "currency")
        for currency in sorted(lcur.keys() & rcur.keys()):
            _compare_currency(diffs, game, currency, lcur[currency], rcur[currency])
    order = {k.value: i for i, k in enumerate(Difference)}
    ordered = sorted(diffs.rows, key=lambda row: (order[row[0]], _sortable(row)))
    data = [[pd.NA if v is None else v for v in row] for row in ordered]
    frame = pd.DataFrame(data, columns=list(DIFFERENCE_COLUMNS), dtype=object)
    return CrossCheck(lname, rname, frame)


def _sortable(row: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple("" if v is None else str(v) for v in row[1:5])


def _index(rows: list[CostRow]) -> dict[str, dict[str, list[CostRow]]]:
    out: dict[str, dict[str, list[CostRow]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        out[r.game_id][r.currency].append(r)
    return out


def _detailed(rows: list[CostRow]) -> bool:
    return all(r.buy_feature_type is not None and r.base_bet is not None for r in rows)


def _compare_currency(
    diffs: _Diffs, game: str, currency: str, lrows: list[CostRow], rrows: list[CostRow]
) -> None:
    here = _Where(game, currency)
    if not (_detailed(lrows) and _detailed(rrows)):
        diffs.sides(
            (r.feature_cost for r in lrows),
            (r.feature_cost for r in rrows),
            Difference.COST_MISSING,
            here,
            None,
        )
        return
    diffs.sides(
        (r.base_bet for r in lrows),
        (r.base_bet for r in rrows),
        Difference.BASE_BET_MISSING,
        here,
        "base_bet",
    )
    lfeat, rfeat = _by_feature(lrows), _by_feature(rrows)
    diffs.sides(lfeat, rfeat, Difference.BUY_FEATURE_MISSING, here, "feature")
    for feature in sorted(lfeat.keys() & rfeat.keys()):
        lmult = {r.price_multiplier for r in lfeat[feature]}
        rmult = {r.price_multiplier for r in rfeat[feature]}
        if lmult != rmult:
            diffs.both(
                Difference.MULTIPLIER_CHANGED,
                _Where(game, currency, feature),
                _one(lmult),
                _one(rmult),
            )
            continue
        lcost = {r.base_bet: r.feature_cost for r in lfeat[feature]}
        rcost = {r.base_bet: r.feature_cost for r in rfeat[feature]}
        for base in sorted(lcost.keys() & rcost.keys(), key=_dec):
            if lcost[base] != rcost[base]:
                diffs.both(
                    Difference.COST_DIFFERS,
                    _Where(game, currency, feature, base),
                    lcost[base],
                    rcost[base],
                )


def _dec(value: Decimal | None) -> Decimal:
    return value if value is not None else Decimal(0)


def _by_feature(rows: list[CostRow]) -> dict[str, list[CostRow]]:
    out: dict[str, list[CostRow]] = defaultdict(list)
    for r in rows:
        assert r.buy_feature_type is not None
        out[r.buy_feature_type].append(r)
    return out


def _one(values: set[Decimal | None]) -> Any:
    clean = sorted(_dec(v) for v in values)
    return clean[0] if len(clean) == 1 else ", ".join(f"{v:f}" for v in clean)
