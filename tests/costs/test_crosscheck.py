"""The cross-check catches each kind of difference, and only real ones."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pytest

from gptools.costs import (
    CostRow,
    Difference,
    cross_check,
    rows_of,
)
from gptools.costs._tables import cost_table

D = Decimal


def _row(
    game: str, cur: str, feature: str | None, base: str | None, mult: str | None, cost: str
) -> CostRow:
    return CostRow(
        game,
        cur,
        feature,
        None if base is None else D(base),
        None if mult is None else D(mult),
        D(cost),
    )


BASE = [
    _row("g1", "EUR", "FS", "0.10", "100", "10.00"),
    _row("g1", "EUR", "FS", "0.20", "100", "20.00"),
    _row("g1", "EUR", "BONUS", "0.10", "50", "5.00"),
    _row("g1", "EUR", "BONUS", "0.20", "50", "10.00"),
    _row("g1", "JPY", "FS", "10", "100", "1000"),
    _row("g2", "EUR", "FS", "0.10", "80", "8.00"),
]


def _table(rows: list[CostRow], source: str) -> pd.DataFrame:
    return cost_table(rows, source=source)


def _only(check_rows: list[CostRow], kind: str) -> pd.DataFrame:
    check = cross_check(_table(BASE, "game"), _table(check_rows, "stored"))
    assert not check.ok
    kinds = set(check.differences["kind"])
    assert kinds == {kind}, check.differences
    return check.differences


def test_identical_tables_agree() -> None:
    check = cross_check(_table(BASE, "game"), _table(list(reversed(BASE)), "stored"))
    assert check.ok
    assert check.summary() == "game and stored agree"
    assert set(check.counts()) == set(list(Difference)) and sum(check.counts().values()) == 0


def test_cost_differs() -> None:
    rows = [*BASE[:1], _row("g1", "EUR", "FS", "0.20", "100", "20.01"), *BASE[2:]]
    diff = _only(rows, Difference.COST_DIFFERS)
    assert len(diff) == 1
    row = diff.iloc[0]
    assert (row["game_id"], row["currency"], row["buy_feature_type"], row["base_bet"]) == (
        "g1",
        "EUR",
        "FS",
        D("0.20"),
    )
    assert (row["left"], row["right"]) == (D("20.00"), D("20.01"))


def test_currency_missing_on_either_side() -> None:
    diff = _only([r for r in BASE if r.currency != "JPY"], Difference.CURRENCY_MISSING)
    assert list(zip(diff["currency"], diff["only_in"], strict=True)) == [("JPY", "game")]
    extra = [*BASE, _row("g1", "KWD", "FS", "0.100", "100", "10.000")]
    diff = _only(extra, Difference.CURRENCY_MISSING)
    assert list(zip(diff["currency"], diff["only_in"], strict=True)) == [("KWD", "stored")]


def test_base_bet_missing() -> None:
    rows = [
        r
        for r in BASE
        if not (r.currency == "EUR" and r.base_bet == D("0.20") and r.game_id == "g1")
    ]
    diff = _only(rows, Difference.BASE_BET_MISSING)
    assert len(diff) == 1  # once per game and currency, not once per feature
    assert (diff.iloc[0]["base_bet"], diff.iloc[0]["only_in"]) == (D("0.20"), "game")


def test_multiplier_changed_is_reported_once_per_feature_and_currency() -> None:
    rows = [
        _row(r.game_id, r.currency, r.buy_feature_type, str(r.base_bet), "90", str(r.base_bet * 90))
        if (r.game_id, r.buy_feature_type) == ("g1", "FS") and r.currency == "EUR"
        else r
        for r in BASE
    ]
    diff = _only(rows, Difference.MULTIPLIER_CHANGED)
    assert len(diff) == 1
    assert (diff.iloc[0]["left"], diff.iloc[0]["right"]) == (D("100"), D("90"))


def test_buy_feature_and_game_missing() -> None:
    diff = _only([r for r in BASE if r.buy_feature_type != "BONUS"], Difference.BUY_FEATURE_MISSING)
    assert list(diff["buy_feature_type"]) == ["BONUS"]
    diff = _only([r for r in BASE if r.game_id != "g2"], Difference.GAME_MISSING)
    assert list(zip(diff["game_id"], diff["only_in"], strict=True)) == [("g2", "game")]


def test_costs_only_source_is_compared_by_cost() -> None:
    configs = [_row(r.game_id, r.currency, None, None, None, str(r.feature_cost)) for r in BASE]
    assert cross_check(_table(BASE, "game"), _table(configs, "configurations")).ok
    configs[0] = _row("g1", "EUR", None, None, None, "10.50")
    check = cross_check(_table(BASE, "game"), _table(configs, "configurations"))
    diff = check.differences
    assert set(diff["kind"]) == {Difference.COST_MISSING}
    # 10.00 is still offered by BONUS 0.20, so only the new 10.50 is unmatched
    assert list(zip(diff["only_in"], diff["right"], strict=True)) == [
        ("configurations", D("10.50"))
    ]
    assert "1 cost missing" in check.summary()


def test_every_kind_at_once_and_html() -> None:
    rows = [
        _row("g1", "EUR", "FS", "0.10", "100", "10.01"),  # cost differs
        _row("g1", "EUR", "BONUS", "0.10", "55", "5.50"),  # multiplier changed
        _row("g1", "EUR", "BONUS", "0.20", "55", "11.00"),
        _row("g1", "EUR", "FS", "0.50", "100", "50.00"),  # base bet only here
        _row("g1", "EUR", "BONUS", "0.50", "55", "27.50"),
        _row("g1", "EUR", "FS", "0.20", "100", "20.00"),
        _row("g1", "EUR", "EXTRA", "0.10", "10", "1.00"),  # feature only here
        _row("g1", "EUR", "EXTRA", "0.20", "10", "2.00"),
        _row("g1", "EUR", "EXTRA", "0.50", "10", "5.00"),
        _row("g3", "EUR", "FS", "0.10", "80", "8.00"),  # game only here
        _row("g2", "EUR", "FS", "0.10", "80", "8.00"),
    ]  # g1 JPY missing here
    check = cross_check(_table(BASE, "game"), _table(rows, "stored"))
    counts = check.counts()
    assert counts == {
        Difference.GAME_MISSING: 1,
        Difference.CURRENCY_MISSING: 1,
        Difference.BUY_FEATURE_MISSING: 1,
        Difference.BASE_BET_MISSING: 1,
        Difference.COST_MISSING: 0,
        Difference.MULTIPLIER_CHANGED: 1,
        Difference.COST_DIFFERS: 1,
    }
    assert list(check.differences["kind"]) == [k for k in list(Difference) if counts[k]]
    html = check._repr_html_()
    assert "multiplier changed" in html and ">stored</th>" in html


def test_same_source_names_are_told_apart() -> None:
    check = cross_check(_table(BASE, "game"), _table(BASE[:-1], "game"))
    assert (check.left, check.right) == ("game (left)", "game (right)")
    assert list(check.differences["only_in"]) == ["game (left)"]


def test_rows_of_refuses_a_table_without_the_columns() -> None:
    with pytest.raises(ValueError, match="columns"):
        rows_of(pd.DataFrame({"x": [1]}))


def test_the_kinds_keep_their_texts_in_report_order() -> None:
    """The texts appear in outputs (``counts()``, the ``kind`` column, the summary line)."""
    assert [kind.value for kind in Difference] == [
        "game missing",
        "currency missing",
        "buy feature missing",
        "base bet missing",
        "cost missing",
        "multiplier changed",
        "cost differs",
    ]
    assert Difference.COST_DIFFERS == "cost differs"
