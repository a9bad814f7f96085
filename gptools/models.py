"""Typed models of the provider's resources and of the webhook payload (pydantic v2).

Field names are snake_case in Python and camelCase on the wire (``game_ids`` is sent as
``gameIds``); both spellings are accepted on input. Response models keep fields they do
not know (``model_extra``), so a newer server never loses data on its way through us.

Money is :class:`~decimal.Decimal` end to end. On the wire it is a JSON number written from
the Decimal's own digits: use :func:`dumps_wire` to encode and :func:`loads_wire` to decode
(a float never sits in between).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from gptools import spec

# --------------------------------------------------------------------------------------
# Wire JSON: Decimal in, Decimal out, never through float
# --------------------------------------------------------------------------------------


def _encode(obj: Any, out: list[str]) -> None:
    if isinstance(obj, Decimal):
        if not obj.is_finite():
            raise ValueError(f"money must be finite, got {obj}")
        out.append(format(obj, "f"))
    elif isinstance(obj, Mapping):
        out.append("{")
        for i, (key, value) in enumerate(obj.items()):
            if i:
                out.append(",")
            out.append(json.dumps(str(key)))
            out.append(":")
            _encode(value, out)
        out.append("}")
    elif isinstance(obj, list | tuple):
        out.append("[")
        for i, value in enumerate(obj):
            if i:
                out.append(",")
            _encode(value, out)
        out.append("]")
    elif isinstance(obj, float):
        raise TypeError(f"float {obj!r} on the wire; money and multipliers must be Decimal")
    else:
        out.append(json.dumps(obj, ensure_ascii=False, allow_nan=False))


def dumps_wire(obj: Any) -> bytes:
    """Encode ``obj`` as JSON, writing every Decimal as a number from its own digits.

    A float is refused: it would have lost digits before it got here.
    """
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="python", by_alias=True, exclude_none=True)
    out: list[str] = []
    _encode(obj, out)
    return "".join(out).encode()


def loads_wire(data: str | bytes) -> Any:
    """Decode JSON with every non-integer number as an exact :class:`Decimal` (and ``-0``
    as ``Decimal("-0")``: an int would lose its sign)."""
    return json.loads(data, parse_float=Decimal, parse_int=_wire_int)


def _wire_int(text: str) -> int | Decimal:
    return Decimal(text) if text == "-0" else int(text)


# --------------------------------------------------------------------------------------
# Base classes
# --------------------------------------------------------------------------------------


#: The wire's shape for every model of the API: camelCase names (snake_case accepted too)
#: and fields the document does not list kept, not refused.
_WIRE_CONFIG = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")


def sane_bet(value: Decimal) -> Decimal:
    """``value`` when it is a sane amount of money for a bet, else ValueError saying why:
    finite, not negative (``-0`` neither), at most ``spec.BET_MAX_INTEGER_DIGITS`` digits
    before the decimal point and ``spec.BET_MAX_FRACTION_DIGITS`` after it (trailing
    zeros apart). The analyser applies the same rule (its reason ``out_of_range:bet``)."""
    if not value.is_finite():
        raise ValueError("bet must be a finite number")
    if value.is_signed():
        raise ValueError("bet must not be negative")
    if value and value.adjusted() + 1 > spec.BET_MAX_INTEGER_DIGITS:
        raise ValueError(f"bet has more than {spec.BET_MAX_INTEGER_DIGITS} integer digits")
    exponent = value.normalize().as_tuple().exponent
    if isinstance(exponent, int) and -exponent > spec.BET_MAX_FRACTION_DIGITS:
        raise ValueError(f"bet has more than {spec.BET_MAX_FRACTION_DIGITS} decimal places")
    return value


def _exact_number(value: Any) -> Any:
    # str() of a float is its shortest round-trip repr: the digits the user typed.
    return Decimal(str(value)) if isinstance(value, float) else value


def _id_as_text(value: Any) -> Any:
    # Ids are text; a server may send a number (never a bool, which is an int too).
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class ApiModel(BaseModel):
    """Base of the response models: camelCase aliases, unknown fields kept."""

    model_config = ConfigDict(**_WIRE_CONFIG, frozen=True)

    #: What a valid answer looks like, for the error raised on an unexpected one.
    EXPECTED: ClassVar[str] = ""

    # Set by the client on the models it returns; private so it never reaches the wire.
    _retries: int = PrivateAttr(default=0)

    @property
    def retries(self) -> int:
        """How many times the client retried the request that returned this (0: first try)."""
        return self._retries

    def to_wire(self) -> bytes:
        """This model as the JSON body the API expects (camelCase, exact numbers)."""
        return dumps_wire(self)


# --------------------------------------------------------------------------------------
# Accounts
# --------------------------------------------------------------------------------------


class PrincipalType(StrEnum):
    """The principal (user) types the document names; a server may send others."""

    INDIVIDUAL = spec.PRINCIPAL_INDIVIDUAL
    PARTNER = spec.PRINCIPAL_PARTNER
    THIRD_PARTY = spec.PRINCIPAL_THIRD_PARTY
    INTERNAL = spec.PRINCIPAL_INTERNAL


class Brand(ApiModel):
    """A brand the account may act on; ``id`` is the ``brandId`` of the explicit path
    (an integer within int32, as the document types it)."""

    id: int = Field(strict=True, ge=spec.BRAND_ID_MIN, le=spec.BRAND_ID_MAX)
    name: str


class SelfInfo(ApiModel):
    """The answer of ``GET /api/v1/self``: the account's principal type and brands.

    ``principal_type`` is kept as the server's string, whatever it is;
    :attr:`principal` gives the recognised :class:`PrincipalType` or ``None``.
    """

    allowed_brands: list[Brand] = Field(default_factory=list)
    principal_type: str

    @property
    def principal(self) -> PrincipalType | None:
        """The recognised principal type, or ``None`` for a name the document does not list."""
        try:
            return PrincipalType(self.principal_type)
        except ValueError:
            return None

    @property
    def brand_ids(self) -> frozenset[int]:
        """The ids of :attr:`allowed_brands`."""
        return frozenset(b.id for b in self.allowed_brands)

    def default_brand(self) -> int | None:
        """The brand a request acts on when none is named: none for an account whose brand
        is implicit (``spec.IMPLICIT_ALLOWED_PRINCIPALS``), the only allowed brand of any
        other; ``ValueError`` listing the choices when there are several (or none)."""
        if self.principal_type in spec.IMPLICIT_ALLOWED_PRINCIPALS:
            return None
        ids = sorted(self.brand_ids)
        if len(ids) == 1:
            return ids[0]
        raise ValueError(f"the account ({self.principal_type}) may act on brands {ids}")


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class ErrorBody(ApiModel):
    """The documented error body. Every field is optional here so that a partial or
    unexpected body still parses; what the server sent is kept."""

    code: str | None = None
    message: str | None = None
    timestamp: str | None = None
    path: str | None = None


# --------------------------------------------------------------------------------------
# Games and feature costs
# --------------------------------------------------------------------------------------


class BuyFeature(ApiModel):
    """A buy feature of a game: its type and the price multiplier of the base bet."""

    buy_feature_type: str
    price_multiplier: Decimal


class Game(ApiModel):
    """The game configuration (``GET /api/v1/game``): buy features and bet sizes.

    ``buy_features`` and ``bet_sizes`` are required: an answer of another shape is an error,
    never an empty game (which would make an empty cost table look like a success); a game
    without buy features answers ``"buyFeatures": []``. ``bet_sizes`` maps a currency code
    to the allowed base bets, as Decimals. ``game_id`` is not a documented field; it is kept
    when the server sends it.
    """

    EXPECTED: ClassVar[str] = (
        "a game configuration object with 'buyFeatures' (a list) and "
        "'betSizes' (currency -> base bets)"
    )

    game_id: str | None = None
    buy_features: list[BuyFeature]
    bet_sizes: dict[str, list[Decimal]]


class AwardedFeatureConfiguration(ApiModel):
    """One available feature cost: ``bet`` is base bet × price multiplier, pre-calculated."""

    game_id: str
    bet: Decimal
    currency_code: str


class AwardedFeatureConfigurations(ApiModel):
    """The answer of ``GET /api/v1/awarded-feature-configurations``; ``content`` is
    required (an answer without it is an error, not "no feature costs")."""

    EXPECTED: ClassVar[str] = "an object with 'content', a list of {gameId, bet, currencyCode}"

    content: list[AwardedFeatureConfiguration]


# --------------------------------------------------------------------------------------
# Campaigns
# --------------------------------------------------------------------------------------


def _check_zone(name: str) -> str:
    problem = spec.time_zone_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


class CampaignRequest(BaseModel):
    """The body of campaign creation, with every documented limit enforced.

    Which fields are required and the minima the document does not publish are the
    assumptions of :mod:`gptools.spec` (``CAMPAIGN_REQUIRED_FIELDS``, ``NAME_MIN_LENGTH``,
    ``GAME_IDS_MIN``, ``BET_EXCLUSIVE_MIN``, ``CAMPAIGN_PLAYERS_MAX_IDS``,
    ``TIME_ZONE_FORMAT``), the ones the sandbox checks too.

    ``start_date`` and ``end_date`` are wall-clock times in ``time_zone`` (an IANA name);
    they are naive on purpose, the zone gives them meaning. Their JSON names and format
    are assumptions, see :mod:`gptools.spec`. For ``AWARDED_FEATURE`` campaigns ``bet`` is
    the total feature cost (base bet × price multiplier), never the base bet.
    Fields the document does not list may be added and are sent as given.
    """

    model_config = _WIRE_CONFIG

    type: str = Field(min_length=1)
    name: str = Field(min_length=spec.NAME_MIN_LENGTH, max_length=spec.NAME_MAX_LENGTH)
    external_campaign_id: str | None = Field(
        default=None, max_length=spec.EXTERNAL_CAMPAIGN_ID_MAX_LENGTH
    )
    request_id: str | None = Field(
        default=None, min_length=1, max_length=spec.REQUEST_ID_MAX_LENGTH
    )
    rules_url: str | None = Field(default=None, max_length=spec.RULES_URL_MAX_LENGTH)
    bet_number: int = Field(ge=spec.BET_NUMBER_MIN, le=spec.BET_NUMBER_MAX, strict=True)
    game_ids: list[str] = Field(min_length=spec.GAME_IDS_MIN)
    bet: Decimal = Field(gt=spec.BET_EXCLUSIVE_MIN, allow_inf_nan=False)
    currency_code: str = Field(min_length=1)
    players: list[str] | None = Field(
        default=None, alias=spec.CAMPAIGN_PLAYERS_FIELD, max_length=spec.CAMPAIGN_PLAYERS_MAX_IDS
    )
    start_date: datetime = Field(alias=spec.CAMPAIGN_START_FIELD)
    end_date: datetime = Field(alias=spec.CAMPAIGN_END_FIELD)
    time_zone: str = Field(alias=spec.CAMPAIGN_TIME_ZONE_FIELD)

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        return _check_zone(value)

    @field_validator("start_date", "end_date")
    @classmethod
    def _naive(cls, value: datetime) -> datetime:
        if value.tzinfo is not None:
            raise ValueError(
                "campaign dates are wall-clock times: give them without an offset "
                "and name the zone in time_zone"
            )
        return value

    _bet_exact = field_validator("bet", mode="before")(_exact_number)

    @field_serializer("start_date", "end_date")
    def _fmt_date(self, value: datetime) -> str:
        return value.strftime(spec.CAMPAIGN_DATE_FORMAT)

    def to_wire(self, *, rename: Mapping[str, str] | None = None) -> bytes:
        """The JSON body for ``POST /campaign`` (camelCase, exact numbers).

        ``rename`` maps our JSON names to others (for example
        ``{"startDate": "validFrom"}``) for a server whose names differ from the assumed ones.
        """
        data = self.model_dump(mode="python", by_alias=True, exclude_none=True)
        if rename:
            data = {rename.get(key, key): value for key, value in data.items()}
        return dumps_wire(data)


class CampaignCreated(ApiModel):
    """The answer of campaign creation: ``campaign_id`` (an integer id is kept as text)."""

    campaign_id: str

    _campaign_id_text = field_validator("campaign_id", mode="before")(_id_as_text)


class ParticipantsAdded(ApiModel):
    """The acknowledgement of participant addition. Its fields are not documented, so all
    are optional and whatever the server sends is kept."""

    campaign_id: str | None = None
    added: int | None = None

    _campaign_id_text = field_validator("campaign_id", mode="before")(_id_as_text)


# --------------------------------------------------------------------------------------
# Webhooks
# --------------------------------------------------------------------------------------

_NAIVE_TS = re.compile(spec.EVENT_TIMESTAMP_PATTERN)
# RE2's "$" (the spec's patterns) is the text's very end; Python's "\Z" is.
_ZONE_SUFFIX = re.compile(spec.EVENT_TIMESTAMP_ZONE_PATTERN.removesuffix("$") + r"\Z")


def parse_event_timestamp(value: str) -> datetime:
    """Parse the webhook ``timestamp`` (naive UTC, fractional seconds) as an aware UTC time.

    A zone suffix (``Z`` or an offset) is refused: the document says the value has none,
    so one would mean the sender is not the provider we know. Digits beyond microseconds
    are truncated. The layout is ``spec.EVENT_TIMESTAMP_PATTERN``.
    """
    if not isinstance(value, str) or not _NAIVE_TS.fullmatch(value):
        raise ValueError(
            f"timestamp {value!r} is not a naive UTC date-time like 2026-11-21T10:15:30.123456"
        )
    head, _, frac = value.partition(".")
    micro = (frac + "000000")[:6] if frac else "000000"
    # fromisoformat is several times faster than strptime; the regex above already fixed
    # the layout, and both refuse out-of-range fields with ValueError.
    return datetime.fromisoformat(f"{head}.{micro}").replace(tzinfo=UTC)


def _refused(check: str, reason: str) -> PydanticCustomError:
    """A validation error whose type is the declared check (``spec.CHECK_*``)."""
    return PydanticCustomError(check, "{reason}", {"reason": reason})


#: The declaration every check of a notification follows (``spec.GAME_EVENT_FIELDS``).
_FIELD = spec.GAME_EVENT_FIELD


class GameEventNotification(ApiModel):
    """The webhook payload. Every field is required and strictly typed; ``timestamp`` is
    stored as an aware UTC datetime (a value without fractional seconds is accepted,
    ``spec.TIMESTAMP_FRACTION_OPTIONAL``); ``events`` accepts values beyond COIN and
    FEATURE; ``actionId`` must be the canonical 8-4-4-4-12 hexadecimal UUID text, either
    case (:func:`gptools.spec.canonical_action_id`)."""

    round_id: str = Field(strict=True, min_length=_FIELD["roundId"].min_length)
    game_id: str = Field(strict=True, min_length=_FIELD["gameId"].min_length)
    player_id: str = Field(strict=True, min_length=_FIELD["playerId"].min_length)
    timestamp: datetime
    bet: Decimal = Field(allow_inf_nan=False)
    currency_code: str = Field(strict=True, min_length=_FIELD["currencyCode"].min_length)
    events: list[str] = Field(strict=True)
    action_id: uuid.UUID

    @field_validator("timestamp", mode="before")
    @classmethod
    def _ts(cls, value: Any) -> Any:
        if isinstance(value, datetime):
            if value.tzinfo is None:
                return value.replace(tzinfo=UTC)
            return value.astimezone(UTC)
        if not isinstance(value, str):
            raise _refused(spec.CHECK_WRONG_TYPE, "timestamp must be a string")
        try:
            return parse_event_timestamp(value)
        except ValueError as exc:
            check = spec.CHECK_HAS_ZONE if _ZONE_SUFFIX.search(value) else spec.CHECK_BAD_FORMAT
            raise _refused(check, str(exc)) from None

    @field_validator("bet", mode="before")
    @classmethod
    def _bet_is_number(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            raise _refused(spec.CHECK_WRONG_TYPE, "bet must be a JSON number")
        try:
            return sane_bet(Decimal(_exact_number(value)))
        except ValueError as exc:
            raise _refused(spec.CHECK_OUT_OF_RANGE, str(exc)) from None

    @field_validator("action_id", mode="before")
    @classmethod
    def _uuid_text(cls, value: Any) -> Any:
        if isinstance(value, uuid.UUID):
            return value
        if not isinstance(value, str):
            raise _refused(spec.CHECK_WRONG_TYPE, "actionId must be a UUID string")
        # "string, format uuid": the canonical 8-4-4-4-12 form only (spec.ACTION_ID_FORMAT)
        try:
            return uuid.UUID(spec.canonical_action_id(value))
        except ValueError as exc:
            raise _refused(spec.CHECK_NOT_A_UUID, str(exc)) from None

    @field_serializer("timestamp")
    def _fmt_ts(self, value: datetime) -> str:
        return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")

    @field_serializer("action_id")
    def _fmt_uuid(self, value: uuid.UUID) -> str:
        return str(value)

    @property
    def unknown_events(self) -> list[str]:
        """Event types outside the values the document has seen (COIN, FEATURE)."""
        return [e for e in self.events if e not in spec.KNOWN_EVENT_TYPES]


#: A notification field's wire name by its Python name (errors may name either).
_WIRE_NAMES = {
    name: info.alias or name for name, info in GameEventNotification.model_fields.items()
}


def event_refusal_reason(error: ValidationError) -> str:
    """The reason a :class:`GameEventNotification` was refused, as the declaration names
    it (``spec.GAME_EVENT_REASONS``, e.g. ``out_of_range:bet``): the first failing check
    of the first failing field, in ``spec.GAME_EVENT_FIELDS``' order. The analyser gives
    the same reason for the same body."""
    by_field: dict[str, set[str]] = {}
    for err in error.errors(include_url=False):
        loc = err["loc"]
        name = _WIRE_NAMES.get(str(loc[0]), str(loc[0])) if loc else ""
        field = _FIELD.get(name)
        if field is None:
            continue
        kind = err["type"]
        if kind == "missing" or (len(loc) == 1 and err.get("input", "") is None):
            check = spec.CHECK_MISSING  # absent or JSON null
        elif kind in field.checks:
            check = kind
        elif kind == "string_too_short":
            check = spec.CHECK_EMPTY
        else:  # pydantic's own type errors (string_type, list_type, ...)
            check = spec.CHECK_WRONG_TYPE
        by_field.setdefault(name, set()).add(check)
    for field in spec.GAME_EVENT_FIELDS:
        for check in field.checks:
            if check in by_field.get(field.name, ()):
                return field.reason(check)
    raise ValueError(f"not a refusal of a game event notification: {error}")


WebhookAuthType = Literal["BEARER", "BASIC", "NONE"]

_MASKED = re.compile(r"^\*+$")


def _check_callback_url(value: str | None) -> str | None:
    if value is not None:
        problem = spec.callback_url_problem(value)
        if problem is not None:
            raise ValueError(problem)
    return value


class WebhookSubscription(ApiModel):
    """A webhook subscription to create or update: where the provider delivers and how it
    authenticates (the request body).

    ``authentication_type`` is required (``spec.WEBHOOK_AUTH_TYPE_REQUIRED``, assumed: the
    document lists it without "Optional" and calls NONE not recommended for production, so
    NONE is only sent when asked for). BEARER needs ``api_key``; BASIC needs ``username``
    and ``password``. ``callback_url`` is any HTTPS URL with a host
    (:func:`gptools.spec.callback_url_problem`, the sandbox's check too); without it
    deliveries go to ``{wallet_url}/v1/game-action-events`` with the wallet's credentials.
    Secrets are :class:`~pydantic.SecretStr`; a masked value (``****``, as answers show
    them) is refused, so a read-then-update never sends the mask back as the key.
    :meth:`to_wire` is the one place that reveals them, to send them to the provider.
    """

    callback_url: str | None = None
    authentication_type: WebhookAuthType
    api_key: SecretStr | None = None
    username: str | None = None
    password: SecretStr | None = None

    @field_validator("callback_url")
    @classmethod
    def _https(cls, value: str | None) -> str | None:
        return _check_callback_url(value)

    @field_validator("api_key", "password")
    @classmethod
    def _not_masked(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and _MASKED.match(value.get_secret_value()):
            raise ValueError(
                "a masked secret ('****', as a subscription answer shows it) "
                "cannot be sent back: give the real secret"
            )
        return value

    @model_validator(mode="after")
    def _credentials(self) -> Self:
        kind = self.authentication_type
        if kind == "BEARER" and not (self.api_key and self.api_key.get_secret_value()):
            raise ValueError("authentication type BEARER requires apiKey")
        if kind == "BASIC" and not (
            self.username and self.password and self.password.get_secret_value()
        ):
            raise ValueError("authentication type BASIC requires username and password")
        return self

    def to_wire(self) -> bytes:
        """The JSON body for the subscription endpoint, secrets revealed for sending."""
        data = self.model_dump(mode="python", by_alias=True, exclude_none=True)
        for key in ("apiKey", "password"):
            if isinstance(data.get(key), SecretStr):
                data[key] = data[key].get_secret_value()
        return dumps_wire(data)


class WebhookSubscriptionInfo(ApiModel):
    """A webhook subscription as a server answers it: every field optional, because a server
    may leave any of them out (secrets above all), and no secret kept: whatever the answer
    carries for ``apiKey``/``password`` (usually a mask) is dropped, only
    :attr:`api_key_set`/:attr:`password_set` say whether one was shown. Other fields the
    server sends (``brandId``, ``deliveryUrl`` in the sandbox) are kept in ``model_extra``.

    To change a subscription, build a :class:`WebhookSubscription` with the real secrets
    (:meth:`to_subscription` copies the rest).
    """

    callback_url: str | None = None
    authentication_type: str | None = None
    username: str | None = None
    api_key_set: bool = False
    password_set: bool = False

    @model_validator(mode="before")
    @classmethod
    def _drop_secrets(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            for wire, flag in (("apiKey", "apiKeySet"), ("password", "passwordSet")):
                secret = data.pop(wire, None)
                data[flag] = bool(secret)
            for snake in ("api_key", "password"):
                data.pop(snake, None)
        return data

    def to_subscription(
        self, *, api_key: str | None = None, password: str | None = None
    ) -> WebhookSubscription:
        """A :class:`WebhookSubscription` with this one's URL, type and username and the
        secrets given here (an answer never carries them)."""
        return WebhookSubscription.model_validate(
            {
                "callbackUrl": self.callback_url,
                "authenticationType": self.authentication_type,
                "username": self.username,
                "apiKey": api_key,
                "password": password,
            }
        )


# --------------------------------------------------------------------------------------
# Brand-level promotion display options
# --------------------------------------------------------------------------------------


class DisplayOptions(BaseModel):
    """What the promotion pop-ups and counters show, per brand (switched by the operator).

    Defaults are the document's. ``show_bet_value`` applies to awarded features only.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    show_value_of_promotion: bool = True
    show_final_winning_value: bool = True
    show_player_expiry_time: bool = False
    show_play_later_button: bool = True
    show_bet_value: bool = False
    show_opt_out: bool = False

    #: The document's label for each option.
    LABELS: ClassVar[dict[str, str]] = {
        "show_value_of_promotion": "Value of Promotion",
        "show_final_winning_value": "Final Winning Value",
        "show_player_expiry_time": "Campaign/Feature Player Expiry Time",
        "show_play_later_button": "Play Later Button",
        "show_bet_value": "Bet Value (Awarded Feature only)",
        "show_opt_out": "Opt-Out Button and Function",
    }

    def shown(self, campaign_type: str) -> list[str]:
        """The labels of what a player sees for a campaign of ``campaign_type``."""
        out = []
        for field, label in self.LABELS.items():
            if field == "show_bet_value" and campaign_type != spec.CAMPAIGN_TYPE_AWARDED_FEATURE:
                continue
            if getattr(self, field):
                out.append(label)
        return out


__all__ = [
    "ApiModel",
    "AwardedFeatureConfiguration",
    "AwardedFeatureConfigurations",
    "Brand",
    "BuyFeature",
    "CampaignCreated",
    "CampaignRequest",
    "DisplayOptions",
    "ErrorBody",
    "Game",
    "GameEventNotification",
    "ParticipantsAdded",
    "PrincipalType",
    "SelfInfo",
    "WebhookAuthType",
    "WebhookSubscription",
    "WebhookSubscriptionInfo",
    "dumps_wire",
    "event_refusal_reason",
    "loads_wire",
    "parse_event_timestamp",
    "sane_bet",
]
