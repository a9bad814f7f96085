"""The campaign plan: what an analyst decides, loaded from Python, JSON or YAML."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gptools import spec
from gptools.campaigns._holdout import HoldoutSplit, default_seed, parse_share, split_players
from gptools.costs import format_money
from gptools.display import html_table
from gptools.errors import GptoolsError
from gptools.models import DisplayOptions, loads_wire


class CampaignType(StrEnum):
    """The plan's campaign types, each its wire text (a member equals its string).
    FREE_ROUNDS is sent as ``Plan.free_rounds_type`` (assumed)."""

    AWARDED_FEATURE = spec.CAMPAIGN_TYPE_AWARDED_FEATURE
    FREE_ROUNDS = spec.FREE_ROUNDS_CAMPAIGN_TYPE


AWARDED_FEATURE = CampaignType.AWARDED_FEATURE
FREE_ROUNDS = CampaignType.FREE_ROUNDS
#: The plan's campaign types, in :class:`CampaignType`'s order.
CAMPAIGN_TYPES: tuple[str, ...] = tuple(CampaignType)


def _exact(value: Any) -> Any:
    # A YAML or Python float: str() is its shortest repr, the digits the user wrote.
    if isinstance(value, float):
        return Decimal(str(value))
    return value


class CurrencyLine(BaseModel):
    """One currency of a plan: the bet, how many players the budget counts, and
    optionally the ids of players to add when the plan is applied.

    For AWARDED_FEATURE the ``bet`` is the total feature cost (base bet × multiplier),
    one of the game's available costs; for free rounds it is the bet per round.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    bet: Decimal
    players: int
    player_ids: tuple[str, ...] = ()

    _bet_exact = field_validator("bet", mode="before")(_exact)


class Plan(BaseModel):
    """A campaign plan: one campaign per currency, with the same games, dates and rounds.

    ``start``/``end`` are wall-clock times (no offset) in the IANA zone ``time_zone``.
    Limits are not enforced when a plan is built: :func:`validate_plan` reports every
    problem at once. ``display_options`` are the brand's promotion display options (the
    document's defaults unless the operator switched one). ``reporting_currency`` and
    ``exchange_rates`` (units of the reporting currency per unit of each currency) give
    the budget in one currency.

    ``holdout`` reserves a share of each currency's ``player_ids`` as a holdout group
    (``"10%"`` or ``0.10``; at most 50 %): those players are not given the campaign, and
    campaign results compare the two groups' paid play (:mod:`gptools.campaigns._holdout`
    holds the split's method). ``holdout_seed`` seeds the split (default: one derived from
    ``name``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    campaign_type: str
    game_ids: tuple[str, ...]
    currencies: dict[str, CurrencyLine]
    bet_number: int
    start: datetime
    end: datetime
    time_zone: str
    rules_url: str | None = None
    external_campaign_id: str | None = None
    brand: int | None = None
    display_options: DisplayOptions = Field(default_factory=DisplayOptions)
    free_rounds_type: str = spec.FREE_ROUNDS_CAMPAIGN_TYPE
    reporting_currency: str | None = None
    exchange_rates: dict[str, Decimal] = Field(default_factory=dict)
    holdout: Decimal | None = None
    holdout_seed: int | None = None

    _holdout_share = field_validator("holdout", mode="before")(parse_share)

    @field_validator("exchange_rates", mode="before")
    @classmethod
    def _rates_exact(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: _exact(v) for k, v in value.items()}
        return value

    @property
    def checks_bets(self) -> bool:
        """Whether a review checks the bets against the available feature costs: an
        AWARDED_FEATURE plan with currencies (its ``bet`` is a feature cost)."""
        return self.campaign_type == AWARDED_FEATURE and bool(self.currencies)

    @property
    def split_seed(self) -> int:
        """The seed of the holdout split: ``holdout_seed``, else one derived from the name."""
        return self.holdout_seed if self.holdout_seed is not None else default_seed(self.name)

    def holdout_split(self, currency: str) -> HoldoutSplit | None:
        """The split of ``currency``'s ``player_ids`` into treatment and holdout, or
        ``None`` when the plan holds no one out."""
        if self.holdout is None:
            return None
        return split_players(self.currencies[currency].player_ids, self.holdout, self.split_seed)

    def treatment_ids(self, currency: str) -> tuple[str, ...]:
        """The ``player_ids`` of ``currency`` the campaign is given to: all of them, less
        the holdout group when the plan has one."""
        split = self.holdout_split(currency)
        return self.currencies[currency].player_ids if split is None else split.treatment

    @property
    def wire_type(self) -> str:
        """The ``type`` sent to the API."""
        return self.free_rounds_type if self.campaign_type == FREE_ROUNDS else self.campaign_type

    def _repr_html_(self) -> str:
        return plan_html(self)


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
        (
            "holdout",
            ""
            if plan.holdout is None
            else f"{plan.holdout * 100:g} % of the player ids (seed {plan.split_seed})",
        ),
    ]
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
        f"{html.escape(v)}</td></tr>"
        for k, v in fields
    )
    lines = pd.DataFrame(
        [
            (c, format_money(line.bet, c), line.players, len(line.player_ids))
            for c, line in plan.currencies.items()
        ],
        columns=["currency", "bet", "players", "player ids listed"],
    )
    first = next(iter(plan.currencies), None)
    view = _player_html(plan, first) if first else ""
    return f"<p><b>Campaign plan</b></p><table>{rows}</table>{html_table(lines)}{view}"


#: What a plan file's top level is, in the words of YAML and JSON (never a Python type).
_JSON_KINDS: dict[type, str] = {
    list: "list",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
}


class PlanFileError(GptoolsError, ValueError):
    """A plan file could not be read or does not describe a plan; names file and field."""


def plan_from_dict(data: Any, *, where: str = "plan") -> Plan:
    """Build a :class:`Plan` from decoded JSON/YAML, every type problem named at once."""
    if not isinstance(data, Mapping):
        got = "an empty document" if data is None else f"a {_JSON_KINDS.get(type(data), 'value')}"
        raise PlanFileError(f"{where}: expected a mapping of plan fields, got {got}")
    try:
        return Plan.model_validate(dict(data))
    except ValidationError as exc:
        lines = [
            f"{where}: field {'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            f" (got {err.get('input')!r})"
            for err in exc.errors(include_url=False)
        ]
        raise PlanFileError(f"{len(lines)} problem(s) in the plan:\n" + "\n".join(lines)) from None


def load_plan(path: str | Path) -> Plan:
    """Read a plan file: JSON (``.json``) or YAML (``.yaml``/``.yml``; anything else tries both).

    Money in JSON is read as exact Decimals; in YAML write amounts as strings (``"2.50"``)
    or plain numbers, which are read from their written digits.
    """
    return plan_from_dict(read_plan_document(path), where=str(path))


def read_plan_document(path: str | Path) -> Any:
    """The decoded content of a plan file (JSON or YAML, as :func:`load_plan` reads it);
    :class:`PlanFileError` names the file (and line) it cannot read."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanFileError(f"{path}: cannot read: {exc}") from None
    suffix = path.suffix.lower()
    data: Any
    try:
        if suffix == ".json":
            data = loads_wire(text)
        elif suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        else:
            try:
                data = loads_wire(text)
            except json.JSONDecodeError:
                data = yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise PlanFileError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise PlanFileError(f"{path}{line}: not valid YAML: {exc}") from None
    return data
