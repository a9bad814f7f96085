"""Plan validation: every problem at once, each naming its field, value and limit."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd

from gptools import spec
from gptools.campaigns._holdout import MAX_SHARE, MIN_GROUP
from gptools.campaigns._plan import AWARDED_FEATURE, CAMPAIGN_TYPES, Plan
from gptools.costs import UnknownCurrencyError, available_costs, currency_exponent
from gptools.display import html_table
from gptools.errors import GptoolsError

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding: the plan ``field`` (a dotted path), its ``value``, the ``limit`` it
    breaks, a sentence saying what to do, and whether it blocks (``error``) or not."""

    field: str
    value: Any
    limit: Any
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return (
            f"{self.severity}: {self.field} = {_text(self.value)}: {self.message} "
            f"(limit: {_text(self.limit)})"
        )


@dataclass(frozen=True, slots=True)
class Validation:
    """The outcome of :func:`validate_plan`: every problem found, errors and warnings."""

    problems: tuple[Problem, ...]

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The problems that block applying the plan."""
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """The problems worth a look that do not block (an atypically short campaign)."""
        return tuple(p for p in self.problems if p.severity == "warning")

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not self.errors

    def to_frame(self) -> pd.DataFrame:
        """One row per problem: severity, field, value, limit, message (text columns)."""
        return pd.DataFrame(
            [
                (p.severity, p.field, _text(p.value), _text(p.limit), p.message)
                for p in self.problems
            ],
            columns=["severity", "field", "value", "limit", "message"],
            dtype=object,
        )

    def raise_for_errors(self) -> None:
        """Raise :class:`PlanInvalidError` listing every error, if there is one."""
        if self.errors:
            raise PlanInvalidError(self)

    def _repr_html_(self) -> str:
        if not self.problems:
            return "<p><b>Validation</b>: no problems.</p>"
        head = (
            f"<p><b>Validation</b>: {len(self.errors)} error(s), "
            f"{len(self.warnings)} warning(s).</p>"
        )
        return head + html_table(self.to_frame())


def _text(value: Any) -> str:
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, list | tuple):
        return ", ".join(_text(v) for v in value)
    return str(value)


class PlanInvalidError(GptoolsError, ValueError):
    """A plan with errors was about to be applied; ``validation`` holds every problem."""

    def __init__(self, validation: Validation) -> None:
        lines = "\n".join(f"  {p}" for p in validation.errors)
        super().__init__(f"the plan has {len(validation.errors)} error(s):\n{lines}")
        self.validation = validation


LocalTimeKind = Literal["ok", "nonexistent", "ambiguous"]


def local_time_kind(wall: datetime, zone: ZoneInfo) -> LocalTimeKind:
    """Whether a wall-clock time exists once in ``zone``, not at all (DST gap) or twice
    (DST overlap), decided by the zone's own rules through ``fold``."""
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return "ok"
    back = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    return "nonexistent" if back != wall.replace(tzinfo=None) else "ambiguous"


def instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of a wall-clock time that exists exactly once in ``zone``.

    In UTC because Python subtracts two datetimes of the same zone as wall-clock times,
    which would miss the hour a DST change adds or removes.
    """
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC)


def validate_plan(
    plan: Plan,
    *,
    now: datetime | None = None,
    costs: pd.DataFrame | None = None,
    unknown_games: Collection[str] = (),
) -> Validation:
    """Check a plan against every documented limit and our own sanity rules, all at once.

    ``now`` (aware; the current time when ``None``) is what "start in the future" means.
    ``costs`` is a feature-cost table (:mod:`gptools.costs`); for AWARDED_FEATURE each
    currency's bet must be one of its available costs for every game, and without
    ``costs`` that check is skipped with a warning. ``unknown_games`` are game ids the
    provider does not know (``GAME_NOT_FOUND`` while fetching the costs): each is one
    problem among the others, and their bets are not checked.
    """
    now = now if now is not None else datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    problems = [
        *_fields(plan),
        *(
            Problem(
                "game_ids",
                game,
                "a game the provider knows",
                "unknown game (the provider answers GAME_NOT_FOUND); check the id",
            )
            for game in plan.game_ids
            if game in unknown_games
        ),
        *_currencies(plan, costs, unknown_games),
        *_dates(plan, now),
        *_rates(plan),
        *_holdout(plan),
    ]
    return Validation(tuple(problems))


def _length(field: str, value: str | None, limit: int, *, required: bool) -> Iterator[Problem]:
    if value is None or value == "":
        if required:
            yield Problem(field, value, f"1..{limit} characters", "is required")
        return
    if len(value) > limit:
        yield Problem(
            field,
            f"{value[:40]}... ({len(value)} characters)",
            f"{limit} characters",
            f"is {len(value)} characters long; the API allows {limit}",
        )


def _fields(plan: Plan) -> Iterator[Problem]:
    yield from _length("name", plan.name, spec.NAME_MAX_LENGTH, required=True)
    yield from _length(
        "external_campaign_id",
        plan.external_campaign_id,
        spec.EXTERNAL_CAMPAIGN_ID_MAX_LENGTH,
        required=False,
    )
    yield from _length("rules_url", plan.rules_url, spec.RULES_URL_MAX_LENGTH, required=False)
    if not spec.BET_NUMBER_MIN <= plan.bet_number <= spec.BET_NUMBER_MAX:
        yield Problem(
            "bet_number",
            plan.bet_number,
            f"{spec.BET_NUMBER_MIN}..{spec.BET_NUMBER_MAX}",
            "rounds or features per player must lie within the limit",
        )
    if plan.campaign_type not in CAMPAIGN_TYPES:
        yield Problem(
            "campaign_type",
            plan.campaign_type,
            " or ".join(CAMPAIGN_TYPES),
            "is not a campaign type",
        )
    if not plan.game_ids:
        yield Problem("game_ids", [], "at least 1 game", "name the games of the campaign")
    seen: set[str] = set()
    for i, game in enumerate(plan.game_ids):
        if not game.strip():
            yield Problem(f"game_ids[{i}]", game, "a game id", "is empty")
        elif game in seen:
            yield Problem(f"game_ids[{i}]", game, "each game once", "is listed twice")
        seen.add(game)


def _currencies(
    plan: Plan, costs: pd.DataFrame | None, unknown_games: Collection[str]
) -> Iterator[Problem]:
    if not plan.currencies:
        yield Problem("currencies", {}, "at least 1 currency", "name the campaign currencies")
    awarded = plan.campaign_type == AWARDED_FEATURE
    if plan.checks_bets and costs is None:
        yield Problem(
            "currencies",
            sorted(plan.currencies),
            "available feature costs",
            "bets were not checked against the available feature costs (pass costs=)",
            "warning",
        )
    for currency, line in plan.currencies.items():
        where = f"currencies.{currency}"
        try:
            exponent = currency_exponent(currency)
        except UnknownCurrencyError as exc:
            yield Problem(where, currency, "an ISO 4217 code", str(exc))
            exponent = None
        if not line.bet.is_finite() or line.bet <= 0:
            yield Problem(f"{where}.bet", line.bet, "> 0", "the bet must be positive")
        elif exponent is not None and line.bet != line.bet.quantize(Decimal(1).scaleb(-exponent)):
            yield Problem(
                f"{where}.bet",
                line.bet,
                f"{exponent} decimals",
                f"{currency} has {exponent} decimal(s); the bet has more",
            )
        elif awarded and costs is not None:
            yield from _bet_available(plan, currency, line.bet, costs, unknown_games)
        if line.players < 1:
            yield Problem(
                f"{where}.players", line.players, ">= 1", "the budget needs the number of players"
            )
        if len(line.player_ids) > line.players:
            yield Problem(
                f"{where}.player_ids",
                f"{len(line.player_ids)} ids",
                f"players = {line.players}",
                "more player ids than the budget counts; raise players",
            )
        yield from _player_ids(where, line.player_ids)


def _bet_available(
    plan: Plan, currency: str, bet: Decimal, costs: pd.DataFrame, unknown_games: Collection[str]
) -> Iterator[Problem]:
    for game in plan.game_ids:
        if game in unknown_games:
            continue
        valid = available_costs(costs, game, currency)
        if not valid:
            yield Problem(
                f"currencies.{currency}.bet",
                bet,
                f"{game} in {currency}",
                f"game {game} offers no awarded feature in {currency}",
            )
        elif bet not in valid:
            yield Problem(
                f"currencies.{currency}.bet",
                bet,
                valid,
                f"not an available feature cost of {game} in {currency}; "
                "choose one of the listed values (base bet × multiplier)",
            )


def _player_ids(where: str, ids: tuple[str, ...]) -> Iterator[Problem]:
    seen: set[str] = set()
    for i, pid in enumerate(ids):
        if not pid or len(pid) > spec.PLAYER_ID_MAX_LENGTH:
            yield Problem(
                f"{where}.player_ids[{i}]",
                pid,
                f"1..{spec.PLAYER_ID_MAX_LENGTH} characters (assumed)",
                "player id length out of range",
            )
        elif pid in seen:
            yield Problem(f"{where}.player_ids[{i}]", pid, "each player once", "is listed twice")
        seen.add(pid)


def _dates(plan: Plan, now: datetime) -> Iterator[Problem]:
    try:
        zone = ZoneInfo(plan.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        yield Problem(
            "time_zone",
            plan.time_zone,
            "an IANA time zone",
            "unknown zone; use a name like 'Europe/Malta'",
        )
        return
    instants: dict[str, datetime] = {}
    for field, wall in (("start", plan.start), ("end", plan.end)):
        if wall.tzinfo is not None:
            yield Problem(
                field,
                wall.isoformat(),
                "a wall-clock time without offset",
                "give the local time and name the zone in time_zone",
            )
            continue
        kind = local_time_kind(wall, zone)
        if kind == "nonexistent":
            yield Problem(
                field,
                wall.isoformat(),
                f"a time that exists in {zone.key}",
                "falls in a daylight-saving gap: the clocks skip it; pick another time",
            )
        elif kind == "ambiguous":
            yield Problem(
                field,
                wall.isoformat(),
                f"a time that occurs once in {zone.key}",
                "occurs twice (clocks go back); pick a time outside the overlap",
            )
        else:
            instants[field] = instant(wall, zone)
    start, end = instants.get("start"), instants.get("end")
    if spec.CAMPAIGN_START_IN_FUTURE and start is not None and start <= now:
        yield Problem(
            "start",
            plan.start.isoformat(),
            f"after {now.astimezone(zone):%Y-%m-%dT%H:%M:%S} ({zone.key}, now)",
            "the campaign must start in the future",
        )
    if start is not None and end is not None:
        if end <= start:
            yield Problem(
                "end",
                plan.end.isoformat(),
                f"after start {plan.start.isoformat()}",
                "the campaign must end after it starts",
            )
        elif end - start < spec.TYPICAL_MIN_CAMPAIGN_DURATION:
            yield Problem(
                "end",
                plan.end.isoformat(),
                f"start + {_hours(spec.TYPICAL_MIN_CAMPAIGN_DURATION)}",
                f"lasts {_hours(end - start)}; the document calls campaigns under "
                "24 hours atypical",
                "warning",
            )


def _hours(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 3600:g} h"


def _rates(plan: Plan) -> Iterator[Problem]:
    if plan.reporting_currency is None:
        if plan.exchange_rates:
            yield Problem(
                "reporting_currency",
                None,
                "a currency code",
                "exchange_rates are given without the currency they convert to",
            )
        return
    try:
        currency_exponent(plan.reporting_currency)
    except UnknownCurrencyError as exc:
        yield Problem("reporting_currency", plan.reporting_currency, "an ISO 4217 code", str(exc))
    for currency in plan.currencies:
        rate = plan.exchange_rates.get(currency)
        if currency == plan.reporting_currency and rate is None:
            continue
        if rate is None:
            yield Problem(
                f"exchange_rates.{currency}",
                None,
                f"{plan.reporting_currency} per {currency}",
                "missing: the budget cannot be converted",
            )
        elif not rate.is_finite() or rate <= 0:
            yield Problem(f"exchange_rates.{currency}", rate, "> 0", "a rate must be positive")


def _holdout(plan: Plan) -> Iterator[Problem]:
    share = plan.holdout
    if share is None:
        return
    if not 0 < share <= MAX_SHARE:
        yield Problem(
            "holdout",
            f"{share * 100:g} %",
            f"more than 0 % and at most {MAX_SHARE * 100:g} %",
            "the holdout share is out of range",
        )
        return
    for currency, line in plan.currencies.items():
        where = f"currencies.{currency}.player_ids"
        if not line.player_ids:
            yield Problem(
                where,
                [],
                "the players to split",
                "a holdout splits the plan's player_ids: list them, or drop holdout",
            )
            continue
        split = plan.holdout_split(currency)
        assert split is not None
        small = min(len(split.treatment), len(split.holdout))
        if small < MIN_GROUP:
            yield Problem(
                where,
                f"{len(split.treatment)} treatment, {len(split.holdout)} holdout",
                f"at least {MIN_GROUP} players in each group",
                "too few players to measure an uplift: results will say so rather than "
                "print a number",
                "warning",
            )
