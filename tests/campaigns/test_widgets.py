"""The interactive planner, driven through its controls without a browser."""

from __future__ import annotations

import re
from decimal import Decimal

import pandas as pd
import pytest

from gptools.costs import rows_of
from gptools.widgets import (
    CommonCost,
    _feature_types,
    build_ui,
    common_costs,
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


def test_helpers(costs: pd.DataFrame) -> None:
    assert _feature_types(costs, ["viking-raid"]) == ["BONUS_GAME", "FREE_SPINS"]
    assert _feature_types(costs, ["viking-raid", "golden-pharaoh"]) == ["FREE_SPINS"]
    assert _feature_types(costs, ["viking-raid", "classic-sevens"]) == []
    assert levels(costs, ["golden-pharaoh"], "FREE_SPINS", ["EUR", "GBP"]) == 5
    assert levels(costs, ["golden-pharaoh"], "FREE_SPINS", []) == 0
    # x100 and x150: only 15.00 (0.15 x 100 and 0.10 x 150) is a cost of both.
    assert common_costs(rows_of(costs), ["golden-pharaoh", "dragon-pearls"], "FREE_SPINS",
                        "EUR") == [CommonCost(Decimal("15.00"), None)]  # fmt: skip
    assert levels(costs, ["golden-pharaoh", "neon-fruits"], "FREE_SPINS", ["EUR"]) == 0


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
    c["games"].value = ("golden-pharaoh", "neon-fruits")  # x100 and x75.5: no cost in common
    assert c["level"].options == ()
    assert {p.field for p in ui.result.validation.errors} == {
        "currencies.EUR",
        "currencies.GBP",
    }
    assert "golden-pharaoh, neon-fruits share no FREE_SPINS cost in EUR" in ui.output.value

    c["games"].value = ("viking-raid",)
    assert c["feature"].options == ("BONUS_GAME", "FREE_SPINS")
    c["start"].value = "2030-03-31 02:30"  # in Malta's DST gap
    assert [p.field for p in ui.result.validation.errors] == ["start"]


def test_build_ui_needs_costs(costs: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="empty"):
        build_ui(costs.iloc[0:0])


# -- issue 35 item 11 ----------------------------------------------------------------------


def test_several_games_offer_only_the_costs_every_game_has(costs: pd.DataFrame) -> None:
    ui = build_ui(costs, now=NOW, rates=RATES, reporting_currency="EUR")
    c = ui.controls
    c["currencies"].value = ("EUR",)
    c["games"].value = ("dragon-pearls", "golden-pharaoh")  # alphabetically, dragon first
    assert c["feature"].options == ("FREE_SPINS",)  # HOLD_AND_WIN, SUPER_FREE_SPINS: one game's
    assert c["level"].options == (("level 1 (EUR 15.00)", 0),)
    assert ui.result is not None and ui.result.validation.ok
    row = ui.result.table.set_index("currency").loc["EUR"]
    assert row["feature_cost"] == Decimal("15.00")
    assert row["base_bet"] is pd.NA  # 0.10 on one game, 0.15 on the other
    # Without viking-raid's FREE_SPINS the two games have no buy feature in common.
    bonus_only = costs[
        ~((costs.game_id == "viking-raid") & (costs.buy_feature_type == "FREE_SPINS"))
    ]
    ui = build_ui(bonus_only, now=NOW, rates=RATES, reporting_currency="EUR")
    c = ui.controls
    c["games"].value = ("golden-pharaoh", "viking-raid")
    assert c["feature"].options == () and c["level"].options == ()
    assert ui.result is not None
    assert [p.field for p in ui.result.validation.errors] == ["buy_feature_type"]
    assert "golden-pharaoh, viking-raid have no buy feature in common" in ui.output.value


def test_every_problem_is_listed_whatever_else_is_malformed(costs: pd.DataFrame) -> None:
    inputs = planner_inputs(
        currencies=("EUR", "SEK"), start="tomorrow", end="2030-03-31 02:30", bet_number=1501,
        level=6,
    )  # fmt: skip
    result = planner_result(costs, inputs, now=NOW, rates=RATES, reporting_currency="EUR")
    assert result.plan is None and result.review is None
    assert [(p.field, p.value) for p in result.validation.errors] == [
        ("start", "tomorrow"),
        ("bet_number", 1501),
        ("end", "2030-03-31T02:30:00"),  # in Malta's DST gap: its own problem still
        ("currencies.SEK", "SEK"),  # 5 SEK levels: no level 7
    ]
    html = result._repr_html_()
    assert "Input error" not in html and "tomorrow" in html and "a date and time like" in html
    # The exposure does not depend on the dates: still shown (1 x 1501 x 500.00).
    assert result.table.set_index("currency").at["EUR", "max_exposure"] == Decimal("750500.00")


def test_numbers_carry_separators_currencies_and_a_total(costs: pd.DataFrame) -> None:
    inputs = planner_inputs(currencies=("EUR", "JPY"), players=1_000_000, bet_number=1000)
    result = planner_result(costs, inputs, now=NOW, rates=RATES, reporting_currency="EUR")
    html = result._repr_html_()
    # JupyterLab styles tables inside its rendered-HTML class: the output opens one.
    assert html.startswith("<div class='jp-RenderedHTMLCommon'><table class='dataframe'>")
    cells = re.findall(r"<td style='text-align:(\w+)[^']*'>([^<]*)</td>", html)
    assert cells[:7] == [
        ("left", "EUR"), ("right", "EUR 0.10"), ("right", "EUR 10.00"), ("right", "1,000"),
        ("right", "1,000,000"), ("right", "EUR 10,000,000,000.00"),
        ("right", "EUR 10,000,000,000.00"),
    ]  # fmt: skip
    assert cells[7:14] == [
        ("left", "JPY"), ("right", "JPY 10"), ("right", "JPY 1,000"), ("right", "1,000"),
        ("right", "1,000,000"), ("right", "JPY 1,000,000,000,000"),
        ("right", "EUR 6,100,000,000.00"),  # the reporting value names its currency
    ]  # fmt: skip
    assert "Total maximum exposure: <b>EUR 16,100,000,000.00</b>" in html
    # Without a reporting currency nothing is added across currencies.
    plain = planner_result(costs, inputs, now=NOW)._repr_html_()
    assert (
        "Total maximum exposure: <b>EUR 10,000,000,000.00 + JPY 1,000,000,000,000</b> "
        "(no reporting currency to add them in)"
    ) in plain
    # The frame keeps the exact values.
    assert result.table.set_index("currency").at["JPY", "max_exposure"] == Decimal("1000000000000")
