"""Exact feature-cost arithmetic and currency exponents."""

from __future__ import annotations

import decimal
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gptools import spec
from gptools.costs import (
    UnknownCurrencyError,
    currency_exponent,
    feature_cost,
    minor_unit,
    round_money,
)
from gptools.costs._money import parse_decimal


@pytest.mark.parametrize(
    ("currency", "exponent"),
    [("JPY", 0), ("EUR", 2), ("KWD", 3), ("GBP", 2), ("BHD", 3), ("ISK", 0)],
)
def test_exponents_come_from_babel(currency: str, exponent: int) -> None:
    assert currency_exponent(currency) == exponent
    assert minor_unit(currency) == Decimal(1).scaleb(-exponent)


def test_unknown_currency_is_refused_with_the_override_named() -> None:
    with pytest.raises(UnknownCurrencyError, match=r"'XBT'.*exponents=\{'XBT': 8\}"):
        currency_exponent("XBT")
    assert currency_exponent("XBT", overrides={"XBT": 8}) == 8
    assert feature_cost(Decimal("0.0001"), Decimal("3"), "XBT", overrides={"XBT": 8}) == Decimal(
        "0.00030000"
    )


@pytest.mark.parametrize(
    ("base", "mult", "currency", "expected"),
    [
        ("0.15", "75.5", "EUR", "11.33"),  # 11.325 lands on a half: rounded up
        ("25", "62.5", "JPY", "1563"),  # 1562.5 -> 1563 (JPY has no minor unit)
        ("0.050", "62.5", "KWD", "3.125"),  # exact in KWD's 3 decimals
        ("0.20", "100", "EUR", "20.00"),
        ("0.10", "0.1", "EUR", "0.01"),
    ],
)
def test_feature_cost_is_exact_and_rounded_by_the_currency(
    base: str, mult: str, currency: str, expected: str
) -> None:
    cost = feature_cost(Decimal(base), Decimal(mult), currency)
    assert isinstance(cost, Decimal)
    assert str(cost) == expected  # the digits too: 20.00, not 20 or 20.0


def test_rounding_mode_is_the_spec_assumption_and_overridable() -> None:
    assert spec.FEATURE_COST_ROUNDING == decimal.ROUND_HALF_UP
    assert any(a.name == "FEATURE_COST_ROUNDING" for a in spec.ASSUMPTIONS)
    cost = feature_cost(Decimal("0.15"), Decimal("75.5"), "EUR", rounding=decimal.ROUND_HALF_EVEN)
    assert cost == Decimal("11.32")
    assert round_money(Decimal("2.005"), "EUR") == Decimal("2.01")


@pytest.mark.parametrize("bad", [0.2, 1, "0.2"])
def test_floats_and_non_decimals_are_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="must be a Decimal"):
        feature_cost(bad, Decimal("10"), "EUR")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["0", "-1", "NaN", "Infinity"])
def test_non_positive_or_non_finite_inputs_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="positive finite"):
        feature_cost(Decimal(bad), Decimal("10"), "EUR")


def test_parse_decimal() -> None:
    assert parse_decimal(" 0.20 ") == Decimal("0.20")
    for bad in ("abc", "", "NaN"):
        with pytest.raises(ValueError, match=repr(bad) if bad else "''"):
            parse_decimal(bad)


@given(
    base=st.decimals(min_value=Decimal("0.001"), max_value=Decimal("10000"), places=3),
    mult=st.decimals(min_value=Decimal("0.5"), max_value=Decimal("500"), places=1),
    currency=st.sampled_from(["EUR", "JPY", "KWD"]),
)
def test_cost_is_the_exact_product_within_half_a_minor_unit(
    base: Decimal, mult: Decimal, currency: str
) -> None:
    cost = feature_cost(base, mult, currency)
    exact = base * mult
    unit = minor_unit(currency)
    assert abs(cost - exact) <= unit / 2
    assert cost.as_tuple().exponent == -currency_exponent(currency)
