"""The review of a multi-brand plan: every problem named with its brand, the budget per
brand and currency and in total per currency (and in one currency with exchange rates),
the requests, and the brands' display options as planning notes.

Each brand's plan is reviewed by :func:`~gptools.campaigns.review`, the single-brand rules
unchanged; this module adds what only the whole promotion shows: which brands the account
covers (:func:`~gptools.campaigns._brands.expand_brands`), which games each brand offers
and which currencies it uses (:class:`BrandCatalogue`, from ``GET game`` on each brand),
and the sums over brands. :func:`check_brands` fetches all of that through a client.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

import pandas as pd

from gptools.campaigns._brands import BrandsPlan, Expansion, expand_brands
from gptools.campaigns._budget import BUDGET_COLUMNS, budget
from gptools.campaigns._plan import AWARDED_FEATURE, Plan, player_view
from gptools.campaigns._review import Review, _plain, review
from gptools.campaigns._validate import Problem, Validation
from gptools.costs import COLUMNS as COST_COLUMNS
from gptools.costs import CatalogueClient, cost_book, format_money, round_money
from gptools.display import html_table
from gptools.errors import GameNotFoundError
from gptools.models import CampaignRequest, DisplayOptions, SelfInfo

#: The per-brand budget's columns: the brand, then a single-brand budget's.
BRAND_BUDGET_COLUMNS: tuple[str, ...] = ("brand", *BUDGET_COLUMNS)
#: The budget's roll-up per currency.
CURRENCY_TOTAL_COLUMNS: tuple[str, ...] = (
    "currency", "brands", "players", "max_exposure", "reporting_value",
)  # fmt: skip


class BrandsClient(CatalogueClient, Protocol):
    """What checking a multi-brand plan needs: :class:`gptools.client.Client`."""

    def self(self) -> SelfInfo:
        """``GET /api/v1/self``: the account's principal type and brands."""


@dataclass(frozen=True, slots=True)
class BrandCatalogue:
    """What one brand offers of a plan's games: those it does not offer (``GAME_NOT_FOUND``
    on that brand) and, per game it offers, the currencies of its ``betSizes``."""

    brand: int
    missing_games: tuple[str, ...] = ()
    currencies: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def uses(self, currency: str) -> bool:
        """Whether every offered game of the plan has bet sizes in ``currency`` there."""
        return all(currency in c for c in self.currencies.values())


def fetch_catalogue(client: CatalogueClient, plan: Plan) -> BrandCatalogue:
    """``GET game`` of each of ``plan``'s games on its brand (the client keeps the rate
    tiers of the account as a whole: one user, whatever the brand)."""
    assert plan.brand is not None
    missing: list[str] = []
    currencies: dict[str, frozenset[str]] = {}
    for game in plan.game_ids:
        try:
            answer = client.game(game, brand=plan.brand)
        except GameNotFoundError:
            missing.append(game)
            continue
        currencies[game] = frozenset(answer.bet_sizes)
    return BrandCatalogue(plan.brand, tuple(missing), currencies)


def catalogue_problems(plan: Plan, catalogue: BrandCatalogue) -> list[Problem]:
    """A game the brand does not offer, a currency it does not use: one problem each,
    named with the brand."""
    brand = catalogue.brand
    out = [
        Problem(f"brands.{brand}.game_ids", game, f"a game brand {brand} offers",
                f"brand {brand} does not offer {game} (GAME_NOT_FOUND there)")
        for game in catalogue.missing_games
    ]  # fmt: skip
    for currency in plan.currencies:
        lacking = sorted(g for g, c in catalogue.currencies.items() if currency not in c)
        if lacking:
            out.append(
                Problem(f"brands.{brand}.currencies.{currency}", currency,
                        f"a currency brand {brand} uses",
                        f"brand {brand} does not use {currency} ({', '.join(lacking)} "
                        f"{'has' if len(lacking) == 1 else 'have'} no bet sizes in it there)")
            )  # fmt: skip
    return out


@dataclass(frozen=True, slots=True)
class BrandsBudget:
    """The maximum exposure of a multi-brand plan.

    ``table``: one row per brand and currency (:data:`BRAND_BUDGET_COLUMNS`);
    ``per_currency``: per currency over every brand, how many brands, players and the
    exposure (and its value in the reporting currency); ``total``: the sum of the
    reporting values, ``None`` without a reporting currency. Money columns hold Decimals.
    """

    table: pd.DataFrame
    per_currency: pd.DataFrame
    reporting_currency: str | None
    total: Decimal | None

    def exposure(self, currency: str, brand: int | None = None) -> Decimal:
        """The maximum exposure in ``currency``, over every brand or of one."""
        rows = self.table[self.table["currency"] == currency]
        if brand is not None:
            rows = rows[rows["brand"] == brand]
        if rows.empty:
            raise KeyError(f"no {currency} campaign" + (f" on brand {brand}" if brand else ""))
        return sum(rows["max_exposure"], Decimal(0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: money as exact decimal strings."""
        return {
            "reporting_currency": self.reporting_currency,
            "total": _plain(self.total),
            "rows": [_plain(r) for r in self.table.to_dict(orient="records")],
            "per_currency": [_plain(r) for r in self.per_currency.to_dict(orient="records")],
        }

    def _repr_html_(self) -> str:
        total = ""
        if self.total is not None and self.reporting_currency:
            money = html.escape(format_money(self.total, self.reporting_currency))
            total = f"<p>Total maximum exposure: <b>{money}</b></p>"
        return (
            "<p><b>Budget per brand</b> (maximum exposure)</p>"
            + html_table(self.table)
            + "<p><b>Per currency</b> (every brand)</p>"
            + html_table(self.per_currency)
            + total
        )


def brands_budget(plans: Mapping[int, Plan], reporting_currency: str | None) -> BrandsBudget:
    """The budget of every brand's plan, per brand and currency and summed per currency.

    Exposures are always given in each currency. With a ``reporting_currency`` each row
    has its value in it too; a brand whose rates are missing (its validation names them)
    has none, and then there is no ``total``: a total that silently left a brand out
    would understate the promotion. A brand whose budget cannot be computed at all (a
    negative count, which its validation names) is left out."""
    frames = []
    complete = True
    for brand, plan in plans.items():
        try:
            table = budget(plan).table
        except ValueError:
            complete = False
            try:
                table = budget(plan.model_copy(update={"reporting_currency": None})).table
            except ValueError:
                continue
        frames.append(table.assign(brand=brand)[list(BRAND_BUDGET_COLUMNS)])
    table = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=list(BRAND_BUDGET_COLUMNS), dtype=object)
    )
    rows = []
    for currency in dict.fromkeys(table["currency"]):
        mine = table[table["currency"] == currency]
        values = [v for v in mine["reporting_value"] if v is not pd.NA]
        value = (
            sum(values, Decimal(0)) if reporting_currency and len(values) == len(mine) else pd.NA
        )
        rows.append(
            [currency, len(mine), int(sum(mine["players"])),
             sum(mine["max_exposure"], Decimal(0)), value]
        )  # fmt: skip
    per_currency = pd.DataFrame(rows, columns=list(CURRENCY_TOTAL_COLUMNS), dtype=object)
    total: Decimal | None = None
    if reporting_currency and complete:
        total = round_money(sum(table["reporting_value"], Decimal(0)), reporting_currency)
    return BrandsBudget(table, per_currency, reporting_currency, total)


@dataclass(frozen=True, slots=True)
class BrandsReview:
    """A multi-brand plan reviewed: ``validation`` holds every problem of every brand
    (each field starts ``brands.ID`` or names the plan-wide key), ``reviews`` each brand's
    single-brand :class:`Review`, ``budget`` the sums, ``notes`` each brand's display
    options (planning notes: the operator switches them per brand)."""

    plan: BrandsPlan
    expansion: Expansion
    validation: Validation
    reviews: Mapping[int, Review] = field(repr=False)
    budget: BrandsBudget = field(repr=False)

    @property
    def brand_ids(self) -> tuple[int, ...]:
        """The brands the plan runs on."""
        return self.expansion.brand_ids

    @property
    def plans(self) -> Mapping[int, Plan]:
        """Each brand's single-brand plan."""
        return self.expansion.plans

    @property
    def campaign_requests(self) -> dict[tuple[int, str], CampaignRequest]:
        """(brand, currency) -> request; empty while the plan has an error."""
        if not self.validation.ok:
            return {}
        return {
            (brand, currency): request
            for brand, r in self.reviews.items()
            for currency, request in r.campaign_requests.items()
        }

    @property
    def requests(self) -> pd.DataFrame:
        """One row per request: brand, currency, request_id, bet (exact text), type."""
        rows = [
            (brand, currency, req.request_id, f"{req.bet:f}", req.type)
            for (brand, currency), req in self.campaign_requests.items()
        ]
        return pd.DataFrame(rows, columns=["brand", "currency", "request_id", "bet", "type"])

    @property
    def notes(self) -> pd.DataFrame:
        """Each brand's display options as planning notes: one row per brand, one column
        per option the campaign type shows (True: shown)."""
        awarded = self.plan.base.campaign_type == AWARDED_FEATURE
        labels = [
            (f, label)
            for f, label in DisplayOptions.LABELS.items()
            if f != "show_bet_value" or awarded
        ]
        rows = [
            [brand, *(bool(getattr(options, f)) for f, _ in labels)]
            for brand, options in self.expansion.notes.items()
        ]
        return pd.DataFrame(rows, columns=["brand", *(label for _, label in labels)])

    def player_view(self, brand: int, currency: str) -> pd.DataFrame:
        """What a player of one brand's ``currency`` campaign is shown."""
        return player_view(self.plans[brand], currency)

    def to_dict(self) -> dict[str, Any]:
        """The review as JSON-ready data (money as exact decimal strings)."""
        return {
            "plan": self.plan.name,
            "brands": list(self.brand_ids),
            "ok": self.validation.ok,
            "problems": [
                {
                    "brand": _brand_of(p),
                    "severity": p.severity,
                    "field": p.field,
                    "value": _plain(p.value),
                    "limit": _plain(p.limit),
                    "message": p.message,
                }
                for p in self.validation.problems
            ],
            "budget": self.budget.to_dict(),
            "requests": [
                {
                    "brand": brand,
                    "currency": currency,
                    "requestId": req.request_id,
                    "body": _plain(req.model_dump(mode="python", by_alias=True, exclude_none=True)),
                }
                for (brand, currency), req in self.campaign_requests.items()
            ],
            "notes": {
                str(brand): options.model_dump() for brand, options in self.expansion.notes.items()
            },
        }

    def problems_frame(self) -> pd.DataFrame:
        """One row per problem with its brand (empty for a plan-wide one) first."""
        frame = self.validation.to_frame()
        frame.insert(0, "brand", [_brand_of(p) for p in self.validation.problems])
        return frame

    def _repr_html_(self) -> str:
        base = self.plan.base
        head = (
            f"<p><b>Campaign plan</b> {html.escape(base.name)} on {len(self.brand_ids)} "
            f"brand(s): {html.escape(', '.join(str(b) for b in self.brand_ids))}</p>"
        )
        problems = (
            "<p><b>Validation</b>: no problems.</p>"
            if not self.validation.problems
            else f"<p><b>Validation</b>: {len(self.validation.errors)} error(s), "
            f"{len(self.validation.warnings)} warning(s).</p>" + html_table(self.problems_frame())
        )
        parts = [head, problems, self.budget._repr_html_()]
        if not self.notes.empty:
            parts.append("<p><b>Display options per brand</b> (planning notes)</p>")
            parts.append(html_table(self.notes))
        if self.campaign_requests:
            parts.append("<p><b>Requests</b> (one campaign per brand and currency)</p>")
            parts.append(html_table(self.requests))
        return "".join(parts)


def _brand_of(problem: Problem) -> int | None:
    head, _, rest = problem.field.partition(".")
    if head in ("brands", "per_brand"):
        number = rest.partition(".")[0]
        if number.isdigit():
            return int(number)
    if head.startswith("brands[") and isinstance(problem.value, int):
        return problem.value
    return None


def _prefixed(
    brand: int, validation: Validation, catalogue: BrandCatalogue | None
) -> list[Problem]:
    unused = set()
    missing: set[str] = set()
    if catalogue is not None:
        missing = set(catalogue.missing_games)
        unused = {c for c in validation_currencies(validation) if not catalogue.uses(c)}
    out = []
    for p in validation.problems:
        if p.field == "game_ids" and p.value in missing:
            continue  # said once, as the brand's own problem
        if any(p.field.startswith(f"currencies.{c}.bet") for c in unused):
            continue
        out.append(Problem(f"brands.{brand}.{p.field}", p.value, p.limit, p.message, p.severity))
    return out


def validation_currencies(validation: Validation) -> set[str]:
    """The currencies a validation's problems name (``currencies.CUR...`` fields)."""
    return {
        p.field.split(".")[1]
        for p in validation.problems
        if p.field.startswith("currencies.") and p.field.count(".") >= 1
    }


def review_brands(
    plan: BrandsPlan,
    *,
    allowed: Collection[int] | None = None,
    now: datetime | None = None,
    catalogues: Mapping[int, BrandCatalogue] | None = None,
    costs: Mapping[int, pd.DataFrame] | None = None,
    players: Mapping[int | None, Mapping[str | None, tuple[str, ...]]] | None = None,
    expansion: Expansion | None = None,
) -> BrandsReview:
    """Review a multi-brand plan offline or with what :func:`check_brands` fetched.

    ``allowed``: the account's brands (``None``: coverage not checked; ``brands: all``
    then is a problem); ``catalogues`` and ``costs``: per brand, what it offers and its
    feature costs (a brand without them is reviewed as an offline single plan is);
    ``players``: as :func:`~gptools.campaigns._brands.expand_brands` takes them;
    ``expansion``: the plan already expanded (its files read once)."""
    if expansion is None:
        expansion = expand_brands(plan, allowed=allowed, players=players)
    problems = list(expansion.problems)
    reviews: dict[int, Review] = {}
    for brand, brand_plan in expansion.plans.items():
        if allowed is not None and brand not in allowed:
            continue  # one problem says so; nothing of it can be created
        catalogue = (catalogues or {}).get(brand)
        missing = catalogue.missing_games if catalogue is not None else ()
        reviews[brand] = review(
            brand_plan, now=now, costs=(costs or {}).get(brand), unknown_games=missing
        )
        if catalogue is not None:
            problems.extend(catalogue_problems(brand_plan, catalogue))
        problems.extend(_prefixed(brand, reviews[brand].validation, catalogue))
    validation = Validation(tuple(problems))
    covered = {b: p for b, p in expansion.plans.items() if b in reviews}
    return BrandsReview(
        plan, expansion, validation, reviews, brands_budget(covered, plan.base.reporting_currency)
    )


@dataclass(frozen=True, slots=True)
class BrandChecks:
    """What the server says about a multi-brand plan's brands, fetched once: the account's
    brands (``names``: id -> name, from ``GET /self``), and per brand what it offers of the
    plan's games (:class:`BrandCatalogue`) and, for AWARDED_FEATURE, its feature costs.
    :func:`review_brands` takes them (``**checks.review_args()``), so a planner can review
    any choice of those brands again without a request."""

    names: Mapping[int, str]
    catalogues: Mapping[int, BrandCatalogue]
    costs: Mapping[int, pd.DataFrame] = field(repr=False)

    def review_args(self) -> dict[str, Any]:
        """The keyword arguments of :func:`review_brands` these checks give."""
        return {
            "allowed": frozenset(self.names),
            "catalogues": self.catalogues,
            "costs": self.costs,
        }


def fetch_brand_checks(
    client: BrandsClient, plan: BrandsPlan, *, expansion: Expansion | None = None
) -> BrandChecks:
    """Fetch :class:`BrandChecks` for ``plan``'s brands (``expansion``: the plan already
    expanded against the account's brands). The client's rate limiting holds for the
    account as a whole, whatever the brand."""
    info = client.self()
    allowed = info.brand_ids
    if expansion is None:
        expansion = expand_brands(plan, allowed=allowed)
    catalogues: dict[int, BrandCatalogue] = {}
    costs: dict[int, pd.DataFrame] = {}
    for brand, brand_plan in expansion.plans.items():
        if brand not in allowed:
            continue
        catalogue = catalogues[brand] = fetch_catalogue(client, brand_plan)
        if brand_plan.checks_bets:
            known = [g for g in brand_plan.game_ids if g not in catalogue.missing_games]
            used = [c for c in brand_plan.currencies if catalogue.uses(c)]
            costs[brand] = (
                cost_book(client, brand=brand).table(known, used, source="configurations")
                if known and used
                else pd.DataFrame(columns=list(COST_COLUMNS), dtype=object)  # nothing offered
            )
    names = {b.id: b.name for b in sorted(info.allowed_brands, key=lambda b: b.id)}
    return BrandChecks(names, catalogues, costs)


def check_brands(
    client: BrandsClient, plan: BrandsPlan, *, now: datetime | None = None
) -> BrandsReview:
    """Review ``plan`` against the server: the account's brands (``GET /self``), each
    brand's games and currencies (``GET game`` there) and, for AWARDED_FEATURE, its feature
    costs (the configurations endpoint there); see :func:`fetch_brand_checks`."""
    expansion = expand_brands(plan, allowed=client.self().brand_ids)
    checks = fetch_brand_checks(client, plan, expansion=expansion)
    return review_brands(plan, now=now, expansion=expansion, **checks.review_args())
