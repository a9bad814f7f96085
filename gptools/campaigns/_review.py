"""One campaign review: validation, budget, requests and player view, computed once.

The notebook (``_repr_html_``), the CLI (``gptools campaigns plan``, via :meth:`Review.to_dict`)
and the planner widget only render a :class:`Review`; none of them recomputes a part of it.
:func:`offered_costs` fetches what a review checks the bets against, unknown games apart.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pandas as pd

from gptools.campaigns._budget import Budget, budget
from gptools.campaigns._plan import Plan, plan_html, player_view
from gptools.campaigns._requests import campaign_request
from gptools.campaigns._validate import Validation, validate_plan
from gptools.display import html_table
from gptools.errors import GameNotFoundError
from gptools.models import CampaignRequest

if TYPE_CHECKING:
    from gptools.costs import CostBook


def _plain(value: Any) -> Any:
    # JSON-ready: Decimals as their exact digits, pandas' NA as null.
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if value is pd.NA:
        return None
    return value


@dataclass(frozen=True, slots=True)
class Review:
    """A plan with its validation, budget, requests and player view, before applying.

    ``budget`` is ``None`` when it cannot be computed (a missing exchange rate, which the
    validation names); ``campaign_requests`` (currency -> request) is empty while the plan
    has errors; ``player_views`` holds what a player sees, per currency.
    """

    plan: Plan
    validation: Validation
    budget: Budget | None
    # Left out of the repr: the HTML and to_dict() show them, a repr of frames would not.
    campaign_requests: Mapping[str, CampaignRequest] = field(repr=False)
    player_views: Mapping[str, pd.DataFrame] = field(repr=False)

    @property
    def requests(self) -> pd.DataFrame:
        """One row per request: currency, request_id, bet (exact text), type."""
        rows = [
            (currency, req.request_id, f"{req.bet:f}", req.type)
            for currency, req in self.campaign_requests.items()
        ]
        return pd.DataFrame(rows, columns=["currency", "request_id", "bet", "type"])

    def to_dict(self) -> dict[str, Any]:
        """The review as JSON-ready data (money as exact decimal strings)."""
        plan_budget: dict[str, Any] | None = None
        if self.budget is not None:
            plan_budget = {
                "reporting_currency": self.budget.reporting_currency,
                "total": _plain(self.budget.total),
                "rows": [_plain(row) for row in self.budget.table.to_dict(orient="records")],
            }
        return {
            "plan": self.plan.name,
            "ok": self.validation.ok,
            "problems": [
                {
                    "severity": p.severity,
                    "field": p.field,
                    "value": _plain(p.value),
                    "limit": _plain(p.limit),
                    "message": p.message,
                }
                for p in self.validation.problems
            ],
            "budget": plan_budget,
            "requests": [
                {
                    "currency": currency,
                    "requestId": req.request_id,
                    "body": _plain(req.model_dump(mode="python", by_alias=True, exclude_none=True)),
                }
                for currency, req in self.campaign_requests.items()
            ],
            "player_view": {
                currency: view.to_dict(orient="records")
                for currency, view in self.player_views.items()
            },
        }

    def _repr_html_(self) -> str:
        parts = [plan_html(self.plan), self.validation._repr_html_()]
        if self.budget is not None:
            parts.append(self.budget._repr_html_())
        if self.campaign_requests:
            parts.append(
                "<p><b>Requests</b> (one campaign per currency)</p>" + html_table(self.requests)
            )
        return "".join(parts)


def review(
    plan: Plan,
    *,
    now: datetime | None = None,
    costs: pd.DataFrame | None = None,
    unknown_games: Collection[str] = (),
) -> Review:
    """Validate ``plan``, compute its budget, player view and, when valid, its requests
    (``unknown_games``: as :func:`~gptools.campaigns.validate_plan` takes them)."""
    validation = validate_plan(plan, now=now, costs=costs, unknown_games=unknown_games)
    try:
        plan_budget: Budget | None = budget(plan)
    except ValueError:
        plan_budget = None
    requests = (
        {currency: campaign_request(plan, currency) for currency in plan.currencies}
        if validation.ok
        else {}
    )
    views = {currency: player_view(plan, currency) for currency in plan.currencies}
    return Review(plan, validation, plan_budget, requests, views)


def offered_costs(book: CostBook, plan: Plan) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The feature costs a review checks ``plan``'s bets against (the configurations
    endpoint's, the document's source of the ``bet`` value, in the plan's currencies) and
    the plan's games the provider does not know, for :func:`review`'s ``costs`` and
    ``unknown_games``.

    Each game is asked alone first: an unknown one (``GAME_NOT_FOUND``) is then one problem
    of the plan, listed with the others, instead of an error that hides every cost. The
    ``book`` caches, so the known games' costs are fetched once. Meant for a plan that
    :attr:`~Plan.checks_bets`; the CLI's ``campaigns plan`` calls it."""
    currencies = list(plan.currencies)
    unknown: list[str] = []
    for game in plan.game_ids:
        try:
            book.table([game], currencies, source="configurations")
        except GameNotFoundError:
            unknown.append(game)
    known = [g for g in plan.game_ids if g not in unknown]
    return book.table(known, currencies, source="configurations"), tuple(unknown)
