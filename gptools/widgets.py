"""The interactive campaign planner: a thin ipywidgets shell over pure functions.

:func:`planner_result` does all the work (pure: inputs in, table and validation out);
:func:`build_ui` wires controls to it and returns them without displaying anything, so
tests set control values and read :attr:`PlannerUI.result` with no browser.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pandas as pd

from gptools.campaigns import (
    AWARDED_FEATURE,
    CurrencyLine,
    Plan,
    Problem,
    Review,
    Validation,
    review,
)
from gptools.costs import CostRow, rows_of
from gptools.display import html_table
from gptools.errors import import_extra

if TYPE_CHECKING:
    import ipywidgets as widgets
else:  # the [notebooks] extra: one line naming it when missing
    widgets = import_extra("ipywidgets", "notebooks", "The campaign planner widgets")

_DATE_FORMAT = "%Y-%m-%d %H:%M"

_PLANNER_COLUMNS: tuple[str, ...] = (
    "currency",
    "base_bet",
    "feature_cost",
    "bet_number",
    "players",
    "max_exposure",
    "reporting_value",
)


@dataclass(frozen=True, slots=True)
class PlannerInputs:
    """The planner's inputs, as plain values (what the controls hold).

    ``level`` picks the base bet: the ``level``-th smallest base bet (from 0) of the
    first game's feature in each currency, so one choice spans currencies.
    """

    game_ids: tuple[str, ...]
    currencies: tuple[str, ...]
    buy_feature_type: str
    level: int
    bet_number: int
    players: int
    start: str
    end: str
    time_zone: str = "Europe/Malta"
    name: str = "Planned campaign"


@dataclass(frozen=True, slots=True)
class PlannerResult:
    """The planner's output: per-currency costs and exposure, the plan and its validation.

    ``review`` is the plan's :class:`~gptools.campaigns.Review` (the table renders its
    budget); ``validation`` is the review's plus the planner's own finding (a base-bet
    level a currency lacks). ``error`` holds an input that could not even be read (a
    malformed date); then ``plan``, ``validation`` and ``review`` are ``None``.
    """

    table: pd.DataFrame
    plan: Plan | None
    validation: Validation | None
    error: str | None = None
    review: Review | None = None

    def _repr_html_(self) -> str:
        parts = [html_table(self.table)]
        if self.error:
            # The error quotes what the user typed: it must stay text.
            parts.append(f"<p><b>Input error</b>: {html.escape(self.error)}</p>")
        if self.validation is not None:
            parts.append(self.validation._repr_html_())
        return "".join(parts)


def _feature_types(costs: pd.DataFrame, game_id: str) -> list[str]:
    """The buy feature types of ``game_id`` in a cost table with the breakdown."""
    return sorted(
        {
            r.buy_feature_type
            for r in rows_of(costs)
            if r.game_id == game_id and r.buy_feature_type is not None
        }
    )


def _ladder(rows: Sequence[CostRow], game: str, feature: str, currency: str) -> list[CostRow]:
    found = [
        r
        for r in rows
        if (r.game_id, r.buy_feature_type, r.currency) == (game, feature, currency)
        and r.base_bet is not None
    ]
    return sorted(found, key=lambda r: r.base_bet or Decimal(0))


def levels(costs: pd.DataFrame, game_id: str, feature: str, currencies: Sequence[str]) -> int:
    """How many base-bet levels every one of ``currencies`` offers for the feature."""
    rows = rows_of(costs)
    counts = [len(_ladder(rows, game_id, feature, c)) for c in currencies]
    return min(counts) if counts else 0


def planner_result(
    costs: pd.DataFrame,
    inputs: PlannerInputs,
    *,
    now: datetime | None = None,
    rates: Mapping[str, Decimal] | None = None,
    reporting_currency: str | None = None,
) -> PlannerResult:
    """Cost and maximum exposure per currency for the inputs, and the plan's validation.

    The bet of each currency is the feature cost at the chosen base-bet level of the
    first game; the validation checks it against every selected game.
    """
    rows = rows_of(costs)
    lines: dict[str, CurrencyLine] = {}
    table_rows: list[list[Any]] = []
    game = inputs.game_ids[0] if inputs.game_ids else ""
    for currency in inputs.currencies:
        ladder = _ladder(rows, game, inputs.buy_feature_type, currency)
        if not 0 <= inputs.level < len(ladder):
            table_rows.append(
                [currency, pd.NA, pd.NA, inputs.bet_number, inputs.players, pd.NA, pd.NA]
            )
            continue
        chosen = ladder[inputs.level]
        lines[currency] = CurrencyLine(bet=chosen.feature_cost, players=inputs.players)
        table_rows.append(
            [
                currency,
                chosen.base_bet,
                chosen.feature_cost,
                inputs.bet_number,
                inputs.players,
                pd.NA,
                pd.NA,
            ]
        )
    try:
        start = datetime.strptime(inputs.start.strip(), _DATE_FORMAT)
        end = datetime.strptime(inputs.end.strip(), _DATE_FORMAT)
    except ValueError:
        table = pd.DataFrame(table_rows, columns=list(_PLANNER_COLUMNS), dtype=object)
        return PlannerResult(
            table,
            None,
            None,
            f"dates must look like 2030-03-01 10:00, got {inputs.start!r} and {inputs.end!r}",
        )
    plan = Plan(
        name=inputs.name,
        campaign_type=AWARDED_FEATURE,
        game_ids=inputs.game_ids,
        currencies=lines,
        bet_number=inputs.bet_number,
        start=start,
        end=end,
        time_zone=inputs.time_zone,
        reporting_currency=reporting_currency,
        exchange_rates=dict(rates or {}),
    )
    planned = review(plan, now=now, costs=costs)
    validation = planned.validation
    plan_budget = None if planned.budget is None else planned.budget.table.set_index("currency")
    for row in table_rows:
        if plan_budget is not None and row[0] in plan_budget.index:
            row[5] = plan_budget.at[row[0], "max_exposure"]
            row[6] = plan_budget.at[row[0], "reporting_value"]
    missing = [c for c in inputs.currencies if c not in lines]
    if missing:
        validation = Validation(
            (
                *validation.problems,
                Problem(
                    "currencies",
                    missing,
                    f"base-bet level {inputs.level}",
                    f"no base bet at this level for {inputs.buy_feature_type} of {game}",
                ),
            )
        )
    table = pd.DataFrame(table_rows, columns=list(_PLANNER_COLUMNS), dtype=object)
    return PlannerResult(table, plan, validation, review=planned)


@dataclass
class PlannerUI:
    """The planner's widgets: ``root`` to display, ``controls`` by name, ``output`` (HTML)
    and ``result``, the latest :class:`PlannerResult` (updated on every change)."""

    root: widgets.VBox
    controls: dict[str, widgets.Widget]
    output: widgets.HTML
    result: PlannerResult | None = None
    _compute: Any = field(default=None, repr=False)

    def inputs(self) -> PlannerInputs:
        """The current control values as :class:`PlannerInputs`."""
        c = self.controls
        return PlannerInputs(
            game_ids=tuple(c["games"].value),
            currencies=tuple(c["currencies"].value),
            buy_feature_type=c["feature"].value or "",
            level=int(c["level"].value or 0),
            bet_number=int(c["bet_number"].value),
            players=int(c["players"].value),
            start=c["start"].value,
            end=c["end"].value,
            time_zone=c["time_zone"].value,
            name=c["name"].value,
        )

    def refresh(self, *_: Any) -> None:
        """Recompute from the controls and redraw the output."""
        self.result = self._compute(self.inputs())
        self.output.value = self.result._repr_html_()


def build_ui(
    costs: pd.DataFrame,
    *,
    now: datetime | None = None,
    rates: Mapping[str, Decimal] | None = None,
    reporting_currency: str | None = None,
    start: str = "2030-03-01 10:00",
    end: str = "2030-03-31 22:00",
    time_zone: str = "Europe/Malta",
) -> PlannerUI:
    """Build (not display) the planner over a cost table with the breakdown (game source).

    Returns a :class:`PlannerUI`; display ``ui.root`` in a notebook.
    """
    rows = rows_of(costs)
    games = sorted({r.game_id for r in rows})
    currencies = sorted({r.currency for r in rows})
    if not games:
        raise ValueError("the cost table is empty: nothing to plan")
    c: dict[str, widgets.Widget] = {
        "name": widgets.Text(value="Planned campaign", description="Name"),
        "games": widgets.SelectMultiple(options=games, value=(games[0],), description="Games"),
        "currencies": widgets.SelectMultiple(
            options=currencies, value=tuple(currencies[:3]), description="Currencies"
        ),
        "feature": widgets.Dropdown(description="Feature"),
        "level": widgets.Dropdown(description="Base bet"),
        "bet_number": widgets.IntText(value=10, description="betNumber"),
        "players": widgets.IntText(value=100, description="Players"),
        "start": widgets.Text(value=start, description="Start"),
        "end": widgets.Text(value=end, description="End"),
        "time_zone": widgets.Text(value=time_zone, description="Time zone"),
    }
    output = widgets.HTML()
    ui = PlannerUI(
        widgets.VBox(
            [
                widgets.HBox([c["games"], c["currencies"]]),
                *[
                    c[k]
                    for k in (
                        "feature",
                        "level",
                        "bet_number",
                        "players",
                        "start",
                        "end",
                        "time_zone",
                        "name",
                    )
                ],
                output,
            ]
        ),
        c,
        output,
    )
    ui._compute = lambda inputs: planner_result(
        costs, inputs, now=now, rates=rates, reporting_currency=reporting_currency
    )

    busy = False

    def update_choices(*_: Any) -> None:
        # Setting options fires value observers; one refresh at the end is enough.
        nonlocal busy
        if busy:
            return
        busy = True
        try:
            game = c["games"].value[0] if c["games"].value else games[0]
            types = _feature_types(costs, game)
            if tuple(c["feature"].options) != tuple(types):
                c["feature"].options = types
            if c["feature"].value not in types:
                c["feature"].value = types[0] if types else None
            feature = c["feature"].value or ""
            chosen = c["currencies"].value
            first = _ladder(rows, game, feature, chosen[0]) if chosen else []
            count = levels(costs, game, feature, chosen)
            options = [
                (f"level {i + 1} ({r.currency} {r.base_bet})", i)
                for i, r in enumerate(first[:count])
            ]
            if list(c["level"].options) != options:
                old = c["level"].value
                c["level"].options = options
                c["level"].value = (
                    old if old is not None and old < count else (0 if count else None)
                )
        finally:
            busy = False
        ui.refresh()

    for name in ("games", "currencies", "feature"):
        c[name].observe(update_choices, names="value")

    def refresh(*_: Any) -> None:
        if not busy:
            ui.refresh()

    for name in ("level", "bet_number", "players", "start", "end", "time_zone", "name"):
        c[name].observe(refresh, names="value")
    update_choices()
    return ui


__all__ = [
    "PlannerInputs",
    "PlannerResult",
    "PlannerUI",
    "build_ui",
    "levels",
    "planner_result",
]
