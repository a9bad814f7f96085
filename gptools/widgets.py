"""The interactive campaign planner: a thin ipywidgets shell over pure functions.

:func:`planner_result` does all the work (pure: inputs in, table and validation out);
:func:`build_ui` wires controls to it and returns them without displaying anything, so
tests set control values and read :attr:`PlannerUI.result` with no browser.
:func:`build_brands_ui` does the same for a multi-brand plan: a brand picker from ``/self``
and the review (problems per brand, the budget per brand and currency) of the brands picked.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pandas as pd

from gptools.campaigns import (
    ALL_BRANDS,
    BrandChecks,
    BrandsPlan,
    BrandsReview,
    CampaignType,
    CurrencyLine,
    Plan,
    Problem,
    Review,
    Validation,
    review,
    review_brands,
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

    ``level`` picks the bet: the ``level``-th smallest (from 0) of the feature costs that
    every chosen game offers for the feature in each currency (:func:`common_costs`), so
    one choice spans currencies and the bet is valid for every game.
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

    ``validation`` lists every problem at once: the plan's review, the planner's own (no
    feature or cost every chosen game has, a level a currency lacks) and a date that is
    not in the ``2030-03-01 10:00`` form. ``plan`` and ``review`` are ``None`` while a
    date cannot be read (the table still shows the costs and exposure, which do not
    depend on the dates). The table keeps exact values; the HTML shows them with
    thousands separators and currencies, and the total exposure below it.
    """

    table: pd.DataFrame
    plan: Plan | None
    validation: Validation
    review: Review | None = None
    reporting_currency: str | None = None
    total: Decimal | None = None

    def _repr_html_(self) -> str:
        # JupyterLab styles tables inside its rendered-HTML class only; a widget's HTML is
        # outside it, so the planner's output opens one itself.
        parts = [
            "<div class='jp-RenderedHTMLCommon'>",
            html_table(_shown(self.table, self.reporting_currency), numeric=_NUMERIC),
            _total_html(self.table, self.reporting_currency, self.total),
            self.validation._repr_html_(),
            "</div>",
        ]
        return "".join(parts)


#: The planner table's columns shown right-aligned (numbers written as text).
_NUMERIC = frozenset(_PLANNER_COLUMNS) - {"currency"}


def _money_text(amount: Any, currency: str | None) -> Any:
    """An amount with thousands separators and its currency (``EUR 6,250,000.00``)."""
    if not isinstance(amount, Decimal):
        return amount  # missing: shown as such
    digits = f"{amount:,f}"
    return f"{currency} {digits}" if currency else digits


def _shown(table: pd.DataFrame, reporting: str | None) -> pd.DataFrame:
    """The planner table as text for people: money with separators and currency, counts
    with separators (the frame itself keeps the exact values)."""
    out = table.copy()
    for column in ("base_bet", "feature_cost", "max_exposure"):
        out[column] = [
            _money_text(v, c) for v, c in zip(table[column], table["currency"], strict=True)
        ]
    out["reporting_value"] = [_money_text(v, reporting) for v in table["reporting_value"]]
    for column in ("bet_number", "players"):
        out[column] = [f"{v:,}" if isinstance(v, int) else v for v in table[column]]
    return out


def _total_html(table: pd.DataFrame, reporting: str | None, total: Decimal | None) -> str:
    """The plan's total maximum exposure: in the reporting currency, else per currency
    (money is never added across currencies)."""
    if not any(isinstance(v, Decimal) for v in table["max_exposure"]):
        return ""  # nothing planned yet
    if total is not None and reporting:
        text = _money_text(total, reporting)
        return f"<p>Total maximum exposure: <b>{html.escape(text)}</b></p>"
    amounts = [
        _money_text(v, c)
        for v, c in zip(table["max_exposure"], table["currency"], strict=True)
        if isinstance(v, Decimal)
    ]
    shown = html.escape(" + ".join(amounts))
    return f"<p>Total maximum exposure: <b>{shown}</b> (no reporting currency to add them in)</p>"


def _feature_types(costs: pd.DataFrame, game_ids: Sequence[str]) -> list[str]:
    """The buy feature types that every one of ``game_ids`` has, in a cost table with
    the breakdown."""
    rows = rows_of(costs)
    found: set[str] | None = None
    for game in game_ids:
        own = {r.buy_feature_type for r in rows if r.game_id == game and r.buy_feature_type}
        found = own if found is None else found & own
    return sorted(found or ())


@dataclass(frozen=True, slots=True)
class CommonCost:
    """A feature cost every chosen game offers in a currency, and the base bet it comes
    from when it is the same for every game (``None`` when the games differ)."""

    feature_cost: Decimal
    base_bet: Decimal | None


def common_costs(
    rows: Sequence[CostRow], game_ids: Sequence[str], feature: str, currency: str
) -> list[CommonCost]:
    """The feature costs of ``feature`` in ``currency`` that every one of ``game_ids``
    offers, smallest first: the bets a campaign on all of them can have."""
    per_game: list[dict[Decimal, set[Decimal | None]]] = []
    for game in game_ids:
        costs: dict[Decimal, set[Decimal | None]] = {}
        for r in rows:
            if (r.game_id, r.buy_feature_type, r.currency) == (game, feature, currency):
                costs.setdefault(r.feature_cost, set()).add(r.base_bet)
        per_game.append(costs)
    if not per_game:
        return []
    shared = set.intersection(*(set(costs) for costs in per_game))
    out = []
    for cost in sorted(shared):
        bases = set.union(*(costs[cost] for costs in per_game))
        out.append(CommonCost(cost, next(iter(bases)) if len(bases) == 1 else None))
    return out


def levels(
    costs: pd.DataFrame, game_ids: Sequence[str], feature: str, currencies: Sequence[str]
) -> int:
    """How many levels (feature costs every one of ``game_ids`` offers) every one of
    ``currencies`` has for the feature."""
    rows = rows_of(costs)
    counts = [len(common_costs(rows, game_ids, feature, c)) for c in currencies]
    return min(counts) if counts else 0


def _parse_date(field_name: str, text: str) -> datetime | Problem:
    try:
        return datetime.strptime(text.strip(), _DATE_FORMAT)
    except ValueError:
        return Problem(
            field_name, text, "a date and time like 2030-03-01 10:00", "cannot be read as one"
        )


def planner_result(
    costs: pd.DataFrame,
    inputs: PlannerInputs,
    *,
    now: datetime | None = None,
    rates: Mapping[str, Decimal] | None = None,
    reporting_currency: str | None = None,
) -> PlannerResult:
    """Cost and maximum exposure per currency for the inputs, and the plan's validation.

    The bet of each currency is the feature cost at the chosen level among those every
    chosen game offers (:func:`common_costs`). Every problem is listed at once: a date
    that cannot be read is one problem among the others, never a reason to hide them.
    """
    rows = rows_of(costs)
    games, feature = inputs.game_ids, inputs.buy_feature_type
    lines: dict[str, CurrencyLine] = {}
    table_rows: list[list[Any]] = []
    shared = feature in _feature_types(costs, games) if games else True
    own: list[Problem] = [] if shared else [_no_feature(inputs)]
    for currency in inputs.currencies:
        ladder = common_costs(rows, games, feature, currency)
        if not 0 <= inputs.level < len(ladder):
            table_rows.append(
                [currency, pd.NA, pd.NA, inputs.bet_number, inputs.players, pd.NA, pd.NA]
            )
            if shared:
                own.append(_no_level(currency, ladder, inputs))
            continue
        chosen = ladder[inputs.level]
        lines[currency] = CurrencyLine(bet=chosen.feature_cost, players=inputs.players)
        base = chosen.base_bet if chosen.base_bet is not None else pd.NA
        row = [currency, base, chosen.feature_cost, inputs.bet_number, inputs.players]
        table_rows.append([*row, pd.NA, pd.NA])
    start, end = _parse_date("start", inputs.start), _parse_date("end", inputs.end)
    unread = [p for p in (start, end) if isinstance(p, Problem)]
    plan = Plan(
        name=inputs.name,
        campaign_type=CampaignType.AWARDED_FEATURE,
        game_ids=games,
        currencies=lines,
        bet_number=inputs.bet_number,
        # A date that cannot be read stands in for by one that raises no problem of its
        # own; the problems about it are dropped below and its own is listed instead.
        start=start if isinstance(start, datetime) else _stand_in(end, -1, now),
        end=end if isinstance(end, datetime) else _stand_in(start, 1, now),
        time_zone=inputs.time_zone,
        reporting_currency=reporting_currency,
        exchange_rates=dict(rates or {}),
    )
    planned = review(plan, now=now, costs=costs)
    # The review's own words for what the planner explains better: a date it could not
    # read, and "no currency" when the chosen ones have no cost to plan with.
    dropped = {p.field for p in unread} | ({"currencies"} if inputs.currencies else set())
    problems = [
        *unread,
        *(p for p in planned.validation.problems if p.field not in dropped),
        *own,
    ]
    plan_budget = None if planned.budget is None else planned.budget.table.set_index("currency")
    for table_row in table_rows:
        if plan_budget is not None and table_row[0] in plan_budget.index:
            table_row[5] = plan_budget.at[table_row[0], "max_exposure"]
            table_row[6] = plan_budget.at[table_row[0], "reporting_value"]
    table = pd.DataFrame(table_rows, columns=list(_PLANNER_COLUMNS), dtype=object)
    budget = planned.budget
    return PlannerResult(
        table,
        None if unread else plan,
        Validation(tuple(problems)),
        None if unread else planned,
        reporting_currency=budget.reporting_currency if budget is not None else None,
        total=budget.total if budget is not None else None,
    )


def _no_feature(inputs: PlannerInputs) -> Problem:
    """The planner's problem for a feature that not every chosen game has."""
    games = ", ".join(inputs.game_ids)
    if not inputs.buy_feature_type:
        reason = f"{games} have no buy feature in common; choose other games"
    else:
        reason = f"not every one of {games} has it; choose another feature or other games"
    return Problem("buy_feature_type", inputs.buy_feature_type, "a feature every game has", reason)


def _no_level(currency: str, ladder: Sequence[CommonCost], inputs: PlannerInputs) -> Problem:
    """The planner's problem for a currency without the chosen level."""
    games = ", ".join(inputs.game_ids)
    if not ladder:
        has = f"{games} share" if len(inputs.game_ids) > 1 else f"{games} offers"
        return Problem(
            f"currencies.{currency}",
            currency,
            f"a {inputs.buy_feature_type} cost every chosen game offers",
            f"{has} no {inputs.buy_feature_type} cost in {currency}; choose other games or "
            "another currency",
        )
    return Problem(
        f"currencies.{currency}",
        currency,
        f"level {inputs.level + 1}",
        f"{currency} has {len(ladder)} {inputs.buy_feature_type} cost(s) every chosen game "
        f"offers ({games})",
    )


def _stand_in(other: datetime | Problem, direction: int, now: datetime | None) -> datetime:
    """A date for one that cannot be read: 30 days from the other date (in
    ``direction``), or from ``now`` when neither can be read."""
    if isinstance(other, datetime):
        return other + direction * timedelta(days=30)
    base = (now or datetime.now(UTC)).replace(tzinfo=None)
    return base + timedelta(days=30 if direction < 0 else 60)


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
        "level": widgets.Dropdown(description="Feature cost"),
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
            chosen_games = c["games"].value or (games[0],)
            types = _feature_types(costs, chosen_games)
            if tuple(c["feature"].options) != tuple(types):
                c["feature"].options = types
            if c["feature"].value not in types:
                c["feature"].value = types[0] if types else None
            feature = c["feature"].value or ""
            chosen = c["currencies"].value
            first = common_costs(rows, chosen_games, feature, chosen[0]) if chosen else []
            count = levels(costs, chosen_games, feature, chosen)
            options = [
                (f"level {i + 1} ({chosen[0]} {cost.feature_cost:,f})", i)
                for i, cost in enumerate(first[:count])
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


@dataclass
class BrandsPlannerUI:
    """The multi-brand planner's widgets: ``root`` to display, ``controls`` (``brands``, the
    picker; ``all``, every brand of the account), ``output`` (HTML: problems per brand, the
    budget per brand and per currency, the display options per brand) and ``result``, the
    latest :class:`~gptools.campaigns.BrandsReview` (updated on every change)."""

    root: widgets.VBox
    controls: dict[str, widgets.Widget]
    output: widgets.HTML
    result: BrandsReview | None = None
    _compute: Any = field(default=None, repr=False)

    def plan(self) -> BrandsPlan:
        """The plan with the brands the controls choose."""
        result: BrandsPlan = self._compute(None)
        return result

    def refresh(self, *_: Any) -> None:
        """Review the plan again for the chosen brands and redraw the output."""
        self.result = self._compute(self.plan())
        self.output.value = self.result._repr_html_()


def build_brands_ui(
    plan: BrandsPlan, checks: BrandChecks, *, now: datetime | None = None
) -> BrandsPlannerUI:
    """Build (not display) the multi-brand planner: a brand picker over the account's
    brands (``checks``, from :func:`~gptools.campaigns.fetch_brand_checks`: ``GET /self``
    and each brand's games, currencies and costs, fetched once) and the plan's review for
    the brands picked, with no request per change. ``brands: all`` in the plan starts with
    every brand picked."""
    names = dict(checks.names)
    chosen = tuple(names) if plan.brands == ALL_BRANDS else tuple(plan.brands)
    c: dict[str, widgets.Widget] = {
        "all": widgets.Checkbox(value=plan.brands == ALL_BRANDS, description="Every brand"),
        "brands": widgets.SelectMultiple(
            options=[(f"{b} {n}", b) for b, n in names.items()],
            value=tuple(b for b in chosen if b in names),
            description="Brands",
            rows=min(10, max(2, len(names))),
        ),
    }
    output = widgets.HTML()
    ui = BrandsPlannerUI(widgets.VBox([widgets.HBox([c["brands"], c["all"]]), output]), c, output)

    def compute(picked: BrandsPlan | None) -> BrandsPlan | BrandsReview:
        if picked is None:  # the plan the controls describe
            brands: Any = ALL_BRANDS if c["all"].value else tuple(c["brands"].value)
            per_brand = {b: o for b, o in plan.per_brand.items()
                         if brands == ALL_BRANDS or b in brands}  # fmt: skip
            return plan.model_copy(update={"brands": brands, "per_brand": per_brand})
        return review_brands(picked, now=now, **checks.review_args())

    ui._compute = compute
    c["brands"].disabled = bool(c["all"].value)

    def on_all(*_: Any) -> None:
        c["brands"].disabled = bool(c["all"].value)
        ui.refresh()

    c["all"].observe(on_all, names="value")
    c["brands"].observe(ui.refresh, names="value")
    ui.refresh()
    return ui


__all__ = [
    "BrandsPlannerUI",
    "CommonCost",
    "FindUI",
    "PlannerInputs",
    "PlannerResult",
    "PlannerUI",
    "build_brands_ui",
    "build_find_ui",
    "build_ui",
    "common_costs",
    "levels",
    "planner_result",
]


@dataclass
class FindUI:
    """The lookup widget of ``webhooks find``: ``root`` to display, ``controls`` by filter
    name (``action_id``, ``round_id``, ``player_id``, ``game_id``, ``currency``,
    ``event_type``), ``output`` (HTML) and, after :meth:`search`, ``result`` (a
    :class:`gptools.webhooks.FindResult`) with ``actions`` and ``deliveries`` frames."""

    root: widgets.VBox
    controls: dict[str, widgets.Text]
    output: widgets.HTML
    source: Any
    limit: int
    result: Any = None
    actions: pd.DataFrame | None = None
    deliveries: pd.DataFrame | None = None

    def search(self, *_: Any) -> None:
        """Look up what the controls say (empty ones are no term) and show it."""
        from gptools.webhooks import FindFilter, Store, find_actions
        from gptools.webhooks._find_log import find_in_log

        terms = {k: (c.value.strip() or None) for k, c in self.controls.items()}
        try:
            wanted = FindFilter(**terms)
        except ValueError as exc:
            self.output.value = f"<p>{html.escape(str(exc))}</p>"
            return
        if isinstance(self.source, Store):
            self.result = find_actions(self.source, wanted, limit=self.limit)
        else:
            self.result = find_in_log(self.source, wanted, limit=self.limit)
        self.actions, self.deliveries = self.result.frames()
        self.output.value = f"<pre>{html.escape(str(self.result))}</pre>"


def build_find_ui(source: Any, *, limit: int = 20) -> FindUI:
    """Build (not display) a lookup over a store (a :class:`gptools.webhooks.Store`) or a
    delivery log (a path the analyser reads); display ``ui.root`` in a notebook."""
    names = ("player_id", "round_id", "action_id", "game_id", "currency", "event_type")
    controls = {n: widgets.Text(description=n.replace("_", " ")) for n in names}
    button = widgets.Button(description="Find")
    output = widgets.HTML()
    ui = FindUI(widgets.VBox([*controls.values(), button, output]), controls, output, source, limit)
    button.on_click(ui.search)
    return ui
