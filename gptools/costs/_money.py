"""Exact feature-cost arithmetic: Decimal in, Decimal out, rounded by the currency's exponent."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from gptools import spec
from gptools.errors import GptoolsError


class UnknownCurrencyError(GptoolsError, ValueError):
    """A currency code that Babel's ISO 4217 data does not know and no override names."""


def currency_exponent(currency: str, *, overrides: Mapping[str, int] | None = None) -> int:
    """The number of minor-unit digits of ``currency`` (JPY 0, EUR 2, KWD 3).

    ISO 4217 codes as :func:`gptools.spec.currency_decimals` reads them (Babel's CLDR
    data). A code it does not know (a crypto or house currency) must be named in
    ``overrides``; guessing 2 for it could misprice a campaign.
    """
    if overrides and currency in overrides:
        return overrides[currency]
    decimals = spec.currency_decimals(currency)
    if decimals is None:
        raise UnknownCurrencyError(
            f"currency {currency!r} is not an ISO 4217 code known to Babel; "
            f"pass its number of decimals, e.g. exponents={{{currency!r}: 8}}"
        )
    return decimals


#: ISO 4217 codes of metals, funds and tests: never what a mistyped currency meant.
_NOT_MONEY = frozenset(
    {"XAG", "XAU", "XBA", "XBB", "XBC", "XBD", "XDR", "XPD", "XPT", "XSU", "XTS", "XUA", "XXX"}
)


def currency_suggestions(text: str, *, limit: int = 3) -> list[str]:
    """The ISO 4217 money codes a mistyped currency most likely meant (up to ``limit``,
    closest first; none when nothing is close): codes with the same first letter (a typo
    keeps it far more often than not; other matches mislead), metals, funds and test
    codes left out."""
    from babel.numbers import list_currencies

    code = text.strip().upper()
    money = sorted(c for c in list_currencies() if c not in _NOT_MONEY and c[:1] == code[:1])
    return difflib.get_close_matches(code, money, n=limit, cutoff=0.6)


def minor_unit(currency: str, *, overrides: Mapping[str, int] | None = None) -> Decimal:
    """The smallest amount of ``currency`` as a Decimal (``Decimal('0.01')`` for EUR)."""
    return Decimal(1).scaleb(-currency_exponent(currency, overrides=overrides))


def round_money(
    amount: Decimal,
    currency: str,
    *,
    overrides: Mapping[str, int] | None = None,
    rounding: str | None = None,
) -> Decimal:
    """``amount`` rounded to the minor units of ``currency``.

    ``rounding`` is a :mod:`decimal` rounding mode; by default ``spec.FEATURE_COST_ROUNDING``
    (an assumption: the document gives no rule).
    """
    return amount.quantize(
        minor_unit(currency, overrides=overrides),
        rounding=rounding or spec.FEATURE_COST_ROUNDING,
    )


def feature_cost(
    base_bet: Decimal,
    price_multiplier: Decimal,
    currency: str,
    *,
    overrides: Mapping[str, int] | None = None,
    rounding: str | None = None,
) -> Decimal:
    """Feature Cost = Base Bet × Price Multiplier, exact, rounded to the currency's minor units.

    For an AWARDED_FEATURE campaign this total, never the base bet, is the ``bet``.
    Floats are refused: they would have lost digits before they got here.
    """
    for name, value in (("base bet", base_bet), ("price multiplier", price_multiplier)):
        if not isinstance(value, Decimal):
            raise TypeError(f"{name} must be a Decimal, got {type(value).__name__} {value!r}")
        if not value.is_finite() or value <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {value}")
    return round_money(
        base_bet * price_multiplier, currency, overrides=overrides, rounding=rounding
    )


def parse_decimal(text: str) -> Decimal:
    """Parse a decimal written as text (``"0.20"``), refusing NaN, infinities and blanks."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a decimal number") from None
    if not value.is_finite():
        raise ValueError(f"{text!r} is not a finite number")
    return value


def format_money(amount: Decimal, currency: str) -> str:
    """``amount`` as text with the currency code, all its digits kept (``"EUR 2.50"``)."""
    return f"{currency} {amount:f}"
