"""Validation of request bodies, with messages that name the field, the value and the limit.

Every failure is a :class:`~gptools.sandbox._refusal.Refusal` with the assumed 400
VALIDATION_ERROR; all problems of one body are reported together.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from babel.numbers import get_currency_precision

from gptools import spec
from gptools.models import loads_wire
from gptools.sandbox._catalogue import GAMES, feature_costs, minor_unit_exponent
from gptools.sandbox._refusal import Refusal

#: Campaign types the sandbox accepts: the documented one and the assumed free-round one.
CAMPAIGN_TYPES = (spec.CAMPAIGN_TYPE_AWARDED_FEATURE, spec.FREE_ROUNDS_CAMPAIGN_TYPE)

_CONTROL = re.compile(spec.PLAYER_ID_CONTROL_PATTERN)  # spec.PLAYER_ID_FORBIDDEN, assumed
_SHOWN_PROBLEMS = 10


def _refuse(problems: list[str]) -> Refusal:
    shown = problems[:_SHOWN_PROBLEMS]
    more = len(problems) - len(shown)
    tail = f"; and {more} more" if more > 0 else ""
    return Refusal(
        spec.VALIDATION_ERROR_STATUS, spec.VALIDATION_ERROR_CODE, "; ".join(shown) + tail
    )


def _show(value: Any) -> str:
    """A short, safe rendering of a value for a message."""
    if isinstance(value, str) and len(value) > 40:
        return f"{value[:20]!r}... ({len(value)} characters)"
    return repr(value)


def parse_json_object(body: bytes, what: str) -> dict[str, Any]:
    """The body as a JSON object (numbers as exact Decimals), or a refusal saying why not."""
    try:
        data = loads_wire(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _refuse([f"the {what} body is not valid JSON: {exc}"]) from None
    if not isinstance(data, dict):
        raise _refuse([f"the {what} body must be a JSON object, got {type(data).__name__}"])
    return data


def _text(
    data: dict[str, Any],
    name: str,
    problems: list[str],
    *,
    required: bool,
    min_len: int = 1,
    max_len: int | None = None,
) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            problems.append(f"{name} is required")
        return None
    if not isinstance(value, str):
        problems.append(f"{name} must be a string, got {_show(value)}")
        return None
    if len(value) < min_len:
        problems.append(f"{name} must not be empty")
    elif max_len is not None and len(value) > max_len:
        problems.append(
            f"{name} {_show(value)} is {len(value)} characters long; "
            f"the limit is {max_len} characters"
        )
    return value


def player_id_problems(ids: Iterable[Any], field: str, max_length: int) -> list[str]:
    """What is wrong with each invalid player id, naming its index and value."""
    problems = []
    for i, pid in enumerate(ids):
        where = f"{field}[{i}]"
        if not isinstance(pid, str):
            problems.append(f"{where} must be a string, got {_show(pid)}")
        elif not pid.strip():
            problems.append(f"{where} {pid!r} is empty")
        elif len(pid) > max_length:
            problems.append(
                f"{where} {_show(pid)} is {len(pid)} characters long; "
                f"the limit is {max_length} characters"
            )
        elif _CONTROL.search(pid):
            problems.append(f"{where} {pid!r} contains a control character")
    return problems


def _date(data: dict[str, Any], name: str, problems: list[str]) -> datetime | None:
    value = data.get(name)
    if value is None:
        if _required(name):
            problems.append(f"{name} is required")
        return None
    try:
        if not isinstance(value, str):
            raise TypeError
        return datetime.strptime(value, spec.CAMPAIGN_DATE_FORMAT)
    except (TypeError, ValueError):
        problems.append(
            f"{name} {_show(value)} is not a wall-clock date-time like "
            f"2026-03-01T00:00:00 (no offset; the zone is timeZone)"
        )
        return None


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return None
    number = Decimal(value)
    return number if number.is_finite() else None


def _list(values: Iterable[Decimal]) -> str:
    return ", ".join(str(v) for v in values)


def _required(name: str) -> bool:
    return name in spec.CAMPAIGN_REQUIRED_FIELDS


def validate_campaign(
    data: dict[str, Any],
    player_id_max_length: int,
    players_max: int,
    *,
    types: tuple[str, ...] = CAMPAIGN_TYPES,
    free_rounds_bet_is_base_bet: bool = spec.FREE_ROUNDS_BET_IS_BASE_BET,
) -> None:
    """Check a campaign creation body against every documented limit and assumption.

    Which fields are required, and the minima the document does not publish, come from
    :mod:`gptools.spec` (``CAMPAIGN_REQUIRED_FIELDS``, ``NAME_MIN_LENGTH``,
    ``GAME_IDS_MIN``, ``BET_EXCLUSIVE_MIN``, ``TIME_ZONE_FORMAT``, all assumed), as the
    client's model reads them. ``types`` are the campaign types the path accepts (the legacy
    path: ``spec.LEGACY_CAMPAIGN_TYPES``); ``free_rounds_bet_is_base_bet`` requires a
    FREE_ROUNDS bet to be one of the game's base bets (``spec.FREE_ROUNDS_BET_IS_BASE_BET``).
    """
    problems: list[str] = []
    kind = _text(data, "type", problems, required=_required("type"))
    if kind is not None and kind and kind not in types:
        if kind in CAMPAIGN_TYPES:
            problems.append(
                f"type {_show(kind)} is not served on the legacy "
                f"{spec.ENDPOINT_LEGACY_CAMPAIGN} path (accepted: "
                f"{', '.join(types)}); use the unified {spec.ENDPOINT_CAMPAIGN} path"
            )
        else:
            problems.append(f"type {_show(kind)} is not a campaign type; known: {', '.join(types)}")
    _text(
        data,
        "name",
        problems,
        required=_required("name"),
        min_len=spec.NAME_MIN_LENGTH,
        max_len=spec.NAME_MAX_LENGTH,
    )
    _text(
        data,
        "externalCampaignId",
        problems,
        required=_required("externalCampaignId"),
        min_len=0,
        max_len=spec.EXTERNAL_CAMPAIGN_ID_MAX_LENGTH,
    )
    _text(
        data,
        "requestId",
        problems,
        required=_required("requestId"),
        max_len=spec.REQUEST_ID_MAX_LENGTH,
    )
    _text(
        data,
        "rulesUrl",
        problems,
        required=_required("rulesUrl"),
        min_len=0,
        max_len=spec.RULES_URL_MAX_LENGTH,
    )

    bet_number = data.get("betNumber")
    if bet_number is None:
        if _required("betNumber"):
            problems.append("betNumber is required")
    elif isinstance(bet_number, bool) or not isinstance(bet_number, int):
        problems.append(f"betNumber must be an integer, got {_show(bet_number)}")
    elif not spec.BET_NUMBER_MIN <= bet_number <= spec.BET_NUMBER_MAX:
        problems.append(
            f"betNumber {bet_number} is out of range; "
            f"allowed {spec.BET_NUMBER_MIN}..{spec.BET_NUMBER_MAX}"
        )

    games: list[str] = []
    game_ids = data.get("gameIds")
    if game_ids is None:
        if _required("gameIds"):
            problems.append("gameIds is required")
    elif not isinstance(game_ids, list) or len(game_ids) < spec.GAME_IDS_MIN:
        problems.append(
            f"gameIds must be a list of at least {spec.GAME_IDS_MIN} game id(s), "
            f"got {_show(game_ids)}"
        )
    else:
        for i, gid in enumerate(game_ids):
            if not isinstance(gid, str) or gid not in GAMES:
                problems.append(
                    f"gameIds[{i}] {_show(gid)} is not a game; known: {', '.join(GAMES)}"
                )
            else:
                games.append(gid)

    currency = _text(data, "currencyCode", problems, required=_required("currencyCode"))
    if currency:
        missing = [g for g in games if currency not in GAMES[g].bet_sizes]
        if missing:
            problems.append(f"currencyCode {currency!r} is not offered by {', '.join(missing)}")
            currency = None

    raw_bet = data.get("bet")
    bet = _number(raw_bet)
    if raw_bet is None:
        if _required("bet"):
            problems.append("bet is required")
    elif bet is None or bet <= spec.BET_EXCLUSIVE_MIN:
        problems.append(
            f"bet must be a JSON number above {spec.BET_EXCLUSIVE_MIN}, got {_show(raw_bet)}"
        )
    elif currency and games and kind in types:
        problems.extend(_bet_problems(kind, bet, currency, games, free_rounds_bet_is_base_bet))

    start, end = (
        _date(data, spec.CAMPAIGN_START_FIELD, problems),
        _date(data, spec.CAMPAIGN_END_FIELD, problems),
    )
    if start is not None and end is not None and end <= start:
        problems.append(
            f"{spec.CAMPAIGN_END_FIELD} {data[spec.CAMPAIGN_END_FIELD]!r} must be "
            f"after {spec.CAMPAIGN_START_FIELD} {data[spec.CAMPAIGN_START_FIELD]!r}"
        )
    zone = _text(
        data,
        spec.CAMPAIGN_TIME_ZONE_FIELD,
        problems,
        required=_required(spec.CAMPAIGN_TIME_ZONE_FIELD),
    )
    if zone:
        problem = spec.time_zone_problem(zone)
        if problem is not None:
            problems.append(f"{spec.CAMPAIGN_TIME_ZONE_FIELD} {problem}")

    players = data.get(spec.CAMPAIGN_PLAYERS_FIELD)
    if players is not None:
        field = spec.CAMPAIGN_PLAYERS_FIELD
        if not isinstance(players, list):
            problems.append(f"{field} must be a list of player ids, got {_show(players)}")
        elif len(players) > players_max:
            problems.append(f"{field} has {len(players)} ids; the limit is {players_max}")
        else:
            problems.extend(player_id_problems(players, field, player_id_max_length))
    if problems:
        raise _refuse(problems)


def _bet_problems(
    kind: str, bet: Decimal, currency: str, games: list[str], free_rounds_bet_is_base_bet: bool
) -> list[str]:
    # spec.BET_MAX_DECIMALS (assumed): no finer than the currency's minor unit.
    quantum = minor_unit_exponent(currency)
    if bet != bet.quantize(quantum):
        return [
            f"bet {bet} has more decimals than {currency} allows "
            f"({get_currency_precision(currency)} decimals)"
        ]
    if kind != spec.CAMPAIGN_TYPE_AWARDED_FEATURE and not free_rounds_bet_is_base_bet:
        return []
    problems = []
    for gid in dict.fromkeys(games):
        if kind == spec.CAMPAIGN_TYPE_AWARDED_FEATURE:
            valid = sorted({cost for _, cost, _ in feature_costs(gid, currency)})
            if bet not in valid:
                hint = (
                    f"valid feature costs (base bet × price multiplier): {_list(valid)}"
                    if valid
                    else "the game has no buy feature"
                )
                problems.append(f"bet {bet} is not a feature cost of {gid} in {currency}; {hint}")
        else:
            sizes = GAMES[gid].bet_sizes[currency]
            if bet not in sizes:
                problems.append(
                    f"bet {bet} is not a bet size of {gid} in {currency}; valid: {_list(sizes)}"
                )
    return problems


def validate_player_ids(
    data: dict[str, Any], max_ids: int, max_length: int, batch: bool
) -> list[str]:
    """The ``playerIds`` of a participant body, or a refusal naming the offending ids."""
    field = spec.FIELD_PLAYER_IDS
    ids = data.get(field)
    if ids is None:
        raise _refuse([f"{field} is required"])
    if not isinstance(ids, list) or not ids:
        raise _refuse([f"{field} must be a non-empty list of player ids, got {_show(ids)}"])
    if len(ids) > max_ids:
        hint = "" if batch else "; use the batch participant endpoint for large lists"
        raise _refuse([f"{field} has {len(ids)} ids; the limit is {max_ids} per request{hint}"])
    problems = player_id_problems(ids, field, max_length)
    if problems:
        raise _refuse(problems)
    return ids


def validate_subscription(data: dict[str, Any], allow_insecure: bool) -> dict[str, Any]:
    """A webhook subscription body, checked as :class:`gptools.models.WebhookSubscription`
    checks it: the same callback URL rule (:func:`gptools.spec.callback_url_problem`) and
    ``authenticationType`` required (``spec.WEBHOOK_AUTH_TYPE_REQUIRED``, assumed)."""
    problems: list[str] = []
    url = data.get("callbackUrl")
    if url is not None:
        problem = spec.callback_url_problem(url, allow_insecure_loopback=allow_insecure)
        if problem is not None:
            problems.append(problem)
    kind = data.get("authenticationType")
    if kind is None:
        if spec.WEBHOOK_AUTH_TYPE_REQUIRED:
            problems.append(
                f"authenticationType is required: one of "
                f"{', '.join(spec.WEBHOOK_AUTH_TYPES)} (NONE is not recommended "
                f"for production)"
            )
        kind = "NONE"
    elif kind not in spec.WEBHOOK_AUTH_TYPES:
        problems.append(
            f"authenticationType {_show(kind)} is not one of {', '.join(spec.WEBHOOK_AUTH_TYPES)}"
        )
    required = {"BEARER": ("apiKey",), "BASIC": ("username", "password")}.get(kind, ())
    for name in ("apiKey", "username", "password"):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            problems.append(f"{name} must be a string")
        elif name in required and not value:
            problems.append(f"authentication type {kind} requires {name}")
    if problems:
        raise _refuse(problems)
    return {**data, "authenticationType": kind}
