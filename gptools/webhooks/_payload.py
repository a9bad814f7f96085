"""A delivery's body checked: the fast check that vouches for the common, certainly valid
body at about half the model's cost (:func:`fast_action_id`), and the model's full check
that alone decides and explains a refusal (:func:`parse`)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from gptools import spec
from gptools.models import GameEventNotification, event_refusal_reason, loads_wire

#: The wire names of a notification's fields (``spec.GAME_EVENT_FIELDS``); a body with
#: exactly these keys may take the fast check below, anything else (extra fields,
#: snake_case names) goes to the model.
_FIELDS = frozenset(spec.GAME_EVENT_FIELD)
#: The declared string fields with a minimum length, and that length.
_STRINGS = tuple(
    (f.name, f.min_length or 0) for f in spec.GAME_EVENT_FIELDS if f.json_type == "string"
)
_ACTION_ID = spec.GAME_EVENT_FIELD["actionId"]
_BET = spec.GAME_EVENT_FIELD["bet"]
#: The one actionId rule (its declared pattern, as spec.canonical_action_id applies it).
_CANONICAL_UUID = re.compile(_ACTION_ID.pattern or "")
#: A bet the fast check vouches for: a plain non-negative number within the declared
#: digits (no sign, exponent or -0: those are the model's to judge).
_SANE_BET = re.compile(
    rf"(0|[1-9][0-9]{{0,{(_BET.max_integer_digits or 1) - 1}}})"
    rf"(\.[0-9]{{1,{_BET.max_fraction_digits}}})?"
)


class _Number(str):
    """A JSON number's own text (the fast check reads the bet's digits, not a float's)."""

    __slots__ = ()


_PLAIN_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}")


def fast_action_id(body: bytes) -> str | None:
    """The canonical ``actionId`` of a body the model certainly accepts, else None
    (:func:`fast_check`'s first half)."""
    checked = fast_check(body)
    return None if checked is None else checked[0]


def fast_check(body: bytes) -> tuple[str, dict[str, Any]] | None:
    """The canonical ``actionId`` of a body the model certainly accepts and the body's
    JSON object (numbers as their text), else None.

    A strict subset of :class:`~gptools.models.GameEventNotification`'s rules, about half
    its cost: exactly the eight fields, no escape sequences, plain ASCII-digit timestamp
    with microseconds, canonical UUID (``spec.ACTION_ID_PATTERN``, either case; returned
    lower-case, as stored). Whatever it does not vouch for goes to
    the model, which alone decides (and explains) a refusal; so the two can only differ
    in speed. ``tests/webhooks/test_fast_check.py`` holds it to that.
    """
    if b"\\" in body:  # escapes (lone surrogates, ...) are the model's business
        return None
    try:
        # Numbers stay text (a _Number, which no check of a string field takes for a
        # str); NaN and Infinity parse as floats, which no check below lets through.
        data = json.loads(body.decode(), parse_int=_Number, parse_float=_Number)
    except ValueError:  # also UnicodeDecodeError and JSONDecodeError
        return None
    if type(data) is not dict or data.keys() != _FIELDS:
        return None
    action_id = data["actionId"]
    timestamp = data["timestamp"]
    bet = data["bet"]
    events = data["events"]
    for name, min_length in _STRINGS:
        value = data[name]
        if type(value) is not str or len(value) < min_length:
            return None
    if (
        type(action_id) is not str
        or not _CANONICAL_UUID.fullmatch(action_id)
        or type(timestamp) is not str
        or not _PLAIN_TIMESTAMP.fullmatch(timestamp)
        or type(bet) is not _Number
        or not _SANE_BET.fullmatch(bet)
        or type(events) is not list
        or any(type(e) is not str for e in events)
    ):
        return None
    try:
        datetime.fromisoformat(timestamp)  # the model's range check (month 13, ...)
    except ValueError:
        return None
    return action_id.lower(), data


def parse(
    body: bytes,
) -> tuple[GameEventNotification | None, int, str, list[dict[str, str]] | None]:
    """Validate a body: (event, 0, "", None) or (None, status, reason, field errors).

    A refused notification's reason ends with the declared reason of its first failing
    check (``: out_of_range:bet``, :func:`gptools.models.event_refusal_reason`), the
    analyser's reason for the same body."""
    try:
        # pydantic's own JSON parser first (for what fast_action_id left). It reads numbers
        # as floats, which is harmless here: the raw body is what gets stored, and the
        # processing queue decodes it again with exact Decimals. Anything it refuses gets
        # the slower, exact decoding below, which also explains the refusal. It reads -0
        # as 0, so a body that may hold one goes to the exact decoding at once.
        if b"-0" not in body:
            return GameEventNotification.model_validate_json(body), 0, "", None
    except ValidationError:
        pass
    if not body.strip():
        return None, 400, "empty body", None
    try:
        data = loads_wire(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, 400, f"body is not UTF-8: {exc.reason} at byte {exc.start}", None
    except json.JSONDecodeError as exc:
        return None, 400, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", None
    except ValueError as exc:  # e.g. an integer longer than Python's digit limit
        return None, 400, f"invalid JSON: {exc}", None
    if not isinstance(data, dict):
        return None, 422, f"body must be a JSON object, got {type(data).__name__}", None
    try:
        return GameEventNotification.model_validate(data), 0, "", None
    except ValidationError as exc:
        fields = [
            {"field": ".".join(str(p) for p in err["loc"]) or "(body)", "reason": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)
        ]
        names = ", ".join(f["field"] for f in fields)
        declared = event_refusal_reason(exc)
        if any(_is_bad_action_id(err) for err in exc.errors(include_url=False)):
            # The delivery's identity is unreadable (braces, urn:uuid:, no dashes, ...):
            # a bad request, like unreadable JSON, not merely a bad field.
            return (
                None,
                400,
                "actionId must be a UUID in the canonical 8-4-4-4-12 hexadecimal form "
                f"({names}): {declared}",
                fields,
            )
        return None, 422, f"not a valid game event notification ({names}): {declared}", fields


def _is_bad_action_id(error: Any) -> bool:
    """Whether a validation error is a present but non-canonical ``actionId``."""
    return tuple(error["loc"]) == ("actionId",) and error["type"] != "missing"
