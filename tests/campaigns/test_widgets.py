"""The interactive planner, driven through its controls without a browser."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pytest

from gptools.widgets import (
    _feature_types,
    build_ui,
    levels,
    planner_result,
)
from tests.campaigns.conftest import NOW, planner_inputs

RATES = {"BRL": Decimal("0.17"), "GBP": Decimal("1.15"), "JPY": Decimal("0.0061")}


def test_pure_result_for_inputs(costs: pd.DataFrame) -> None:
    inputs = planner_inputs(
        currencies=("EUR", "JPY"), buy_feature_type="SUPER_FREE_SPINS", level=1, players=20
    )
    result = planner_result(costs, inputs, now=NOW, rates=RATES, reporting_currency="EUR")
    assert result.validation is not None and result.validation.ok
    rows = {r["currency"]: r for r in result.table.to_dict(orient="records")}
    assert rows["EUR"]["base_bet"] == Decimal("0.15")
    assert rows["EUR"]["feature_cost"] == Decimal("30.00")  # 0.15 x 200
    assert rows["EUR"]["max_exposure"] == Decimal("3000.00")  # 20 x 5 x 30.00
    assert rows["JPY"]["feature_cost"] == Decimal("4000")  # 20 x 200
    assert rows["JPY"]["reporting_value"] == Decimal("2440.00")  # 400000 x 0.0061
    assert not any(isinstance(v, float) for col in result.table for v in result.table[col])


def test_bad_dates_are_an_input_error(costs: pd.DataFrame) -> None:
    inputs = planner_inputs(start="tomorrow")
    result = planner_result(costs, inputs, now=NOW)
    assert result.plan is None and result.error is not None and "2030-03-01 10:00" in result.error


def test_helpers(costs: pd.DataFrame) -> None:
    assert _feature_types(costs, "viking-raid") == ["BONUS_GAME", "FREE_SPINS"]
    assert levels(costs, "golden-pharaoh", "FREE_SPINS", ["EUR", "GBP"]) == 5
    assert levels(costs, "golden-pharaoh", "FREE_SPINS", []) == 0


def test_controls_drive_the_table(costs: pd.DataFrame) -> None:
    ui = build_ui(costs, now=NOW, rates=RATES, reporting_currency="EUR")
    c = ui.controls
    c["games"].value = ("golden-pharaoh",)
    c["currencies"].value = ("EUR", "GBP")
    assert c["feature"].value == "FREE_SPINS"
    c["level"].value = 2
    c["players"].value = 10
    c["bet_number"].value = 3
    assert ui.result is not None
    table = ui.result.table.set_index("currency")
    assert table.at["EUR", "feature_cost"] == Decimal("20.00")  # 0.20 x 100
    assert table.at["GBP", "feature_cost"] == Decimal("40.00")  # 0.40 x 100
    assert table.at["EUR", "max_exposure"] == Decimal("600.00")
    assert "600.00" in ui.output.value

    c["bet_number"].value = 1501
    assert ui.result.validation is not None
    assert [p.field for p in ui.result.validation.errors] == ["bet_number"]
    assert "bet_number" in ui.output.value

    c["bet_number"].value = 3
    c["games"].value = ("golden-pharaoh", "neon-fruits")  # 20.00 is not a neon-fruits cost
    assert {p.field for p in ui.result.validation.errors} == {
        "currencies.EUR.bet",
        "currencies.GBP.bet",
    }

    c["games"].value = ("viking-raid",)
    assert c["feature"].options == ("BONUS_GAME", "FREE_SPINS")
    c["start"].value = "2030-03-31 02:30"  # in Malta's DST gap
    assert [p.field for p in ui.result.validation.errors] == ["start"]


def test_build_ui_needs_costs(costs: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="empty"):
        build_ui(costs.iloc[0:0])
