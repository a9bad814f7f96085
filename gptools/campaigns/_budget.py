"""A plan's budget: the maximum exposure per currency, and in one reporting currency."""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

import pandas as pd

from gptools.campaigns._plan import Plan
from gptools.costs import UnknownCurrencyError, format_money, minor_unit, round_money
from gptools.display import html_table

BUDGET_COLUMNS: tuple[str, ...] = (
    "currency",
    "bet",
    "bet_number",
    "players",
    "max_exposure",
    "rate",
    "reporting_value",
)


@dataclass(frozen=True, slots=True)
class Budget:
    """The maximum exposure of a plan.

    ``table`` has one row per currency: bet, betNumber, players, ``max_exposure``
    (players × betNumber × bet, exact, in that currency) and, with a reporting currency,
    the ``rate`` used and the ``reporting_value`` rounded to the reporting currency's minor
    units. ``total`` is the sum of those rounded values (so the table adds up), or ``None``
    without a reporting currency. Money columns hold Decimals (object columns).
    """

    table: pd.DataFrame
    reporting_currency: str | None
    total: Decimal | None

    def exposure(self, currency: str) -> Decimal:
        """The maximum exposure in ``currency``."""
        rows = self.table.loc[self.table["currency"] == currency, "max_exposure"]
        if rows.empty:
            raise KeyError(f"the plan has no currency {currency}")
        value: Decimal = rows.iloc[0]
        return value

    def _repr_html_(self) -> str:
        total = ""
        if self.total is not None and self.reporting_currency:
            money = html.escape(format_money(self.total, self.reporting_currency))
            total = f"<p>Total maximum exposure: <b>{money}</b></p>"
        return "<p><b>Budget</b> (maximum exposure)</p>" + html_table(self.table) + total


def _in_minor_units(amount: Decimal, currency: str) -> Decimal:
    # Written with the currency's decimals (EUR 20 -> 20.00) only when that is exact.
    try:
        quantized = amount.quantize(minor_unit(currency))
    except UnknownCurrencyError:
        return amount
    return quantized if quantized == amount else amount


def budget(
    plan: Plan,
    *,
    rates: Mapping[str, Decimal] | None = None,
    reporting_currency: str | None = None,
) -> Budget:
    """The maximum exposure of ``plan`` per currency and, with rates, in one currency.

    ``rates`` (units of ``reporting_currency`` per unit of each currency) and
    ``reporting_currency`` default to the plan's own. A missing rate raises
    :class:`ValueError` naming the currency; the reporting currency converts at 1. A
    negative number of players or rounds raises :class:`ValueError` (no exposure is
    negative).
    """
    for currency, line in plan.currencies.items():
        if line.players < 0:
            raise ValueError(
                f"currencies.{currency}.players = {line.players}: a number of "
                "players cannot be negative"
            )
    if plan.bet_number < 0:
        raise ValueError(f"bet_number = {plan.bet_number}: cannot be negative")
    rates = plan.exchange_rates if rates is None else rates
    reporting = reporting_currency or plan.reporting_currency
    rows = []
    total = Decimal(0) if reporting else None
    for currency, line in plan.currencies.items():
        exposure = _in_minor_units(line.bet * plan.bet_number * line.players, currency)
        rate: Decimal | None = None
        value: Decimal | None = None
        if reporting:
            rate = rates.get(currency, Decimal(1) if currency == reporting else None)
            if rate is None:
                raise ValueError(
                    f"no exchange rate {reporting} per {currency}; rates has {sorted(rates)}"
                )
            value = round_money(exposure * rate, reporting)
            total = (total or Decimal(0)) + value
        rows.append(
            [
                currency,
                _in_minor_units(line.bet, currency),
                plan.bet_number,
                line.players,
                exposure,
                pd.NA if rate is None else rate,
                pd.NA if value is None else value,
            ]
        )
    table = pd.DataFrame(rows, columns=list(BUDGET_COLUMNS), dtype=object)
    return Budget(table, reporting, total)
