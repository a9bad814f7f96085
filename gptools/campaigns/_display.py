"""Readable HTML for plans, including what the player sees given the display options."""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from gptools.campaigns._budget import Budget, budget
from gptools.campaigns._plan import AWARDED_FEATURE, Plan
from gptools.campaigns._requests import campaign_request
from gptools.campaigns._validate import Validation, validate_plan
from gptools.costs import format_money
from gptools.display import html_table
from gptools.models import DisplayOptions


def player_view(plan: Plan, currency: str) -> pd.DataFrame:
    """What a player of the ``currency`` campaign is shown, per display option.

    One row per option that applies to the campaign type (the bet value is an awarded
    feature option): ``item``, ``shown`` (bool) and ``what`` the pop-up or counter says.
    """
    line = plan.currencies[currency]
    options = plan.display_options
    awarded = plan.campaign_type == AWARDED_FEATURE
    unit = "features" if awarded else "free rounds"
    total = format_money(line.bet * plan.bet_number, currency)
    what = {
        "show_value_of_promotion": f"{plan.bet_number} {unit}, worth {total}",
        "show_final_winning_value": "the total won, when the promotion completes",
        "show_player_expiry_time": f"ends {plan.end:%Y-%m-%d %H:%M} ({plan.time_zone})",
        "show_play_later_button": "a Play Later button to postpone the promotion",
        "show_bet_value": f"{format_money(line.bet, currency)} per feature",
        "show_opt_out": "an Opt-Out button (handled by the provider)",
    }
    rows = [
        (label, bool(getattr(options, field)), what[field])
        for field, label in DisplayOptions.LABELS.items()
        if awarded or field != "show_bet_value"
    ]
    return pd.DataFrame(rows, columns=["item", "shown", "what"])


def _player_html(plan: Plan, currency: str) -> str:
    items = [
        f"<li>{html.escape(str(what))}</li>"
        for _, shown, what in player_view(plan, currency).itertuples(index=False)
        if shown
    ]
    return f"<p>The player sees ({html.escape(currency)}):</p><ul>{''.join(items)}</ul>"


def plan_html(plan: Plan) -> str:
    """The plan as HTML: its fields, one row per currency, and the player's view."""
    fields = [
        ("name", plan.name),
        ("campaign type", f"{plan.campaign_type} (sent as {plan.wire_type})"),
        ("games", ", ".join(plan.game_ids)),
        ("rounds/features per player (betNumber)", str(plan.bet_number)),
        ("start", f"{plan.start:%Y-%m-%d %H:%M} {plan.time_zone}"),
        ("end", f"{plan.end:%Y-%m-%d %H:%M} {plan.time_zone}"),
        ("rules URL", plan.rules_url or ""),
        ("external campaign id", plan.external_campaign_id or ""),
        ("brand", "" if plan.brand is None else str(plan.brand)),
    ]
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
        f"{html.escape(v)}</td></tr>" for k, v in fields
    )
    lines = pd.DataFrame(
        [(c, format_money(line.bet, c), line.players, len(line.player_ids))
         for c, line in plan.currencies.items()],
        columns=["currency", "bet", "players", "player ids listed"],
    )
    first = next(iter(plan.currencies), None)
    view = _player_html(plan, first) if first else ""
    return (f"<p><b>Campaign plan</b></p><table>{rows}</table>"
            f"{html_table(lines)}{view}")


@dataclass(frozen=True, slots=True)
class Review:
    """A plan with its validation, budget and requests, for display before applying.

    ``budget`` is ``None`` when it cannot be computed (a missing exchange rate, which the
    validation names); ``requests`` is empty while the plan has errors.
    """

    plan: Plan
    validation: Validation
    budget: Budget | None
    requests: pd.DataFrame

    def _repr_html_(self) -> str:
        parts = [plan_html(self.plan), self.validation._repr_html_()]
        if self.budget is not None:
            parts.append(self.budget._repr_html_())
        if not self.requests.empty:
            parts.append("<p><b>Requests</b> (one campaign per currency)</p>"
                         + html_table(self.requests))
        return "".join(parts)


def review(
    plan: Plan,
    *,
    now: datetime | None = None,
    costs: pd.DataFrame | None = None,
) -> Review:
    """Validate ``plan``, compute its budget and, when valid, the requests it will send."""
    validation = validate_plan(plan, now=now, costs=costs)
    try:
        plan_budget: Budget | None = budget(plan)
    except ValueError:
        plan_budget = None
    rows = []
    if validation.ok:
        for currency in plan.currencies:
            req = campaign_request(plan, currency)
            rows.append((currency, req.request_id, f"{req.bet:f}", req.type))
    requests = pd.DataFrame(rows, columns=["currency", "request_id", "bet", "type"])
    return Review(plan, validation, plan_budget, requests)
