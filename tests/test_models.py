"""gptools.models and gptools.errors: limits at the boundary, tolerance of unknown values,
strict webhook payloads, subscription rules, display defaults, exact wire numbers."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from gptools import errors, spec
from gptools.models import (
    AwardedFeatureConfigurations,
    CampaignCreated,
    CampaignRequest,
    DisplayOptions,
    ErrorBody,
    Game,
    GameEventNotification,
    PrincipalType,
    SelfInfo,
    WebhookSubscription,
    WebhookSubscriptionInfo,
    dumps_wire,
    loads_wire,
)
from tests._support.campaigns import free_rounds


def campaign(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "AWARDED_FEATURE",
        "name": "n",
        "betNumber": 1,
        "gameIds": ["g"],
        "bet": Decimal("7.55"),
        "currencyCode": "EUR",
        "startDate": "2026-03-01T00:00:00",
        "endDate": "2026-03-08T00:00:00",
        "timeZone": "Europe/Malta",
    }
    data.update(changes)
    return data


LIMITS = [
    ("name", "n" * 255, "n" * 256),
    ("externalCampaignId", "e" * 512, "e" * 513),
    ("requestId", "r" * 36, "r" * 37),
    ("rulesUrl", "u" * 2048, "u" * 2049),
    ("betNumber", 1500, 1501),
    ("betNumber", 1, 0),
    # Assumed limits, the sandbox's too (spec.CAMPAIGN_PLAYERS_MAX_IDS, NAME_MIN_LENGTH ...)
    ("players", ["p"] * spec.CAMPAIGN_PLAYERS_MAX_IDS, ["p"] * (spec.CAMPAIGN_PLAYERS_MAX_IDS + 1)),
    ("name", "n" * spec.NAME_MIN_LENGTH, ""),
    ("gameIds", ["g"] * spec.GAME_IDS_MIN, []),
    ("timeZone", "America/Sao_Paulo", "+02:00"),
]


@pytest.mark.parametrize(("field", "ok", "bad"), LIMITS)
def test_campaign_limits_at_the_boundary(field: str, ok: Any, bad: Any) -> None:
    CampaignRequest.model_validate(campaign(**{field: ok}))
    with pytest.raises(ValidationError) as info:
        CampaignRequest.model_validate(campaign(**{field: bad}))
    assert info.value.errors()[0]["loc"] == (field,)


@pytest.mark.parametrize(
    "changes",
    [
        {"betNumber": True},
        {"betNumber": "5"},
        {"bet": Decimal("NaN")},
        {"bet": 0},
        {"gameIds": []},
        {"timeZone": "Mars/Olympus"},
        {"startDate": "2026-03-01T00:00:00+01:00"},
        {"type": ""},
        {"requestId": ""},
    ],
)
def test_campaign_refuses_bad_values(changes: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CampaignRequest.model_validate(campaign(**changes))


def test_campaign_wire_is_exact_and_camel_case() -> None:
    request = CampaignRequest.model_validate(campaign(bet=7.55, promo="kept"))
    assert request.bet == Decimal("7.55")
    wire = request.to_wire()
    assert b'"bet":7.55' in wire and b'"betNumber":1' in wire
    assert b'"startDate":"2026-03-01T00:00:00"' in wire and b'"promo":"kept"' in wire
    assert free_rounds(bet=Decimal("2.10")).to_wire().count(b"2.10") == 1


@pytest.mark.parametrize("kind", ["INDIVIDUAL", "PARTNER", "THIRD_PARTY", "INTERNAL"])
def test_known_principal_types(kind: str) -> None:
    info = SelfInfo.model_validate(
        {"allowedBrands": [{"id": 7, "name": "B"}], "principalType": kind}
    )
    assert info.principal is PrincipalType(kind)
    assert info.brand_ids == {7}


def test_unknown_principal_type_and_fields_are_kept() -> None:
    info = SelfInfo.model_validate_json(
        b'{"allowedBrands":[{"id":1,"name":"A","region":"EU"}],"principalType":"SUPERVISOR",'
        b'"tier":"gold"}'
    )
    assert info.principal_type == "SUPERVISOR" and info.principal is None
    assert info.model_extra == {"tier": "gold"}
    assert info.allowed_brands[0].model_extra == {"region": "EU"}


def event(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "roundId": "r1",
        "gameId": "g",
        "playerId": "p",
        "timestamp": "2026-11-21T10:15:30.123",
        "bet": Decimal("1.50"),
        "currencyCode": "EUR",
        "events": ["COIN"],
        "actionId": "5f0c6a44-7c1e-4c55-9d55-0d7c8b1e2f3a",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def test_event_parses_and_keeps_unknown_events() -> None:
    parsed = GameEventNotification.model_validate(event(events=["COIN", "JACKPOT"]))
    assert parsed.timestamp == datetime(2026, 11, 21, 10, 15, 30, 123000, tzinfo=UTC)
    assert parsed.action_id == uuid.UUID("5f0c6a44-7c1e-4c55-9d55-0d7c8b1e2f3a")
    assert parsed.unknown_events == ["JACKPOT"]
    assert b'"timestamp":"2026-11-21T10:15:30.123000"' in parsed.to_wire()


@pytest.mark.parametrize(
    "field",
    ["roundId", "gameId", "playerId", "timestamp", "bet", "currencyCode", "events", "actionId"],
)
def test_event_fields_are_all_required(field: str) -> None:
    with pytest.raises(ValidationError):
        GameEventNotification.model_validate(event(**{field: None}))


@pytest.mark.parametrize(
    "changes",
    [
        {"actionId": "not-a-uuid"},
        {"actionId": 12},
        {"timestamp": "2026-11-21T10:15:30Z"},
        {"actionId": "{a8098c1a-f86e-11da-bd1a-00112444be1e}"},
        {"actionId": "urn:uuid:a8098c1a-f86e-11da-bd1a-00112444be1e"},
        {"actionId": "a8098c1af86e11dabd1a00112444be1e"},
        {"actionId": "a8098c1a-f86e-11da-bd1a-00112444be1e\n"},
        {"timestamp": "2026-11-21T10:15:30+00:00"},
        {"timestamp": "yesterday"},
        {"bet": "1.50"},
        {"bet": True},
        {"roundId": 5},
        {"events": "COIN"},
        {"playerId": ""},
    ],
)
def test_event_is_strict(changes: dict[str, Any]) -> None:
    """Also the actionId's spellings outside the canonical 8-4-4-4-12 form."""
    with pytest.raises(ValidationError):
        GameEventNotification.model_validate(event(**changes))


def test_action_id_canonical_form_either_case_stored_lower() -> None:
    upper = "A8098C1A-F86E-11DA-BD1A-00112444BE1E"
    parsed = GameEventNotification.model_validate(event(actionId=upper))
    assert str(parsed.action_id) == upper.lower()
    assert spec.canonical_action_id(upper) == upper.lower()
    for bad in ("{" + upper + "}", "urn:uuid:" + upper, upper.replace("-", ""), None):
        with pytest.raises(ValueError, match="canonical"):
            spec.canonical_action_id(bad)


def test_timestamp_without_fraction_is_accepted_by_assumption() -> None:
    """The document's type is "date-time with fractional seconds"; a value without them is
    accepted (spec.TIMESTAMP_FRACTION_OPTIONAL) rather than answered 4xx and lost."""
    assert spec.assumption("TIMESTAMP_FRACTION_OPTIONAL").value is True
    parsed = GameEventNotification.model_validate(event(timestamp="2026-11-21T10:15:30"))
    assert parsed.timestamp.microsecond == 0


@pytest.mark.parametrize(
    ("brand_id", "ok"),
    [
        (0, True),
        (2**31 - 1, True),
        (-(2**31), True),
        (2**31, False),
        (-(2**31) - 1, False),
        ("201", False),
        (True, False),
    ],
)
def test_brand_id_is_an_int32(brand_id: Any, ok: bool) -> None:
    data = {"allowedBrands": [{"id": brand_id, "name": "B"}], "principalType": "PARTNER"}
    if ok:
        assert SelfInfo.model_validate(data).brand_ids == {brand_id}
    else:
        with pytest.raises(ValidationError):
            SelfInfo.model_validate(data)
    assert spec.is_brand_id(brand_id) is ok


@pytest.mark.parametrize(
    ("data", "ok"),
    [
        ({}, False),  # the authentication type is required (assumed), NONE is never a default
        ({"authenticationType": "NONE"}, True),
        ({"callbackUrl": "https://x.invalid/h", "authenticationType": "NONE"}, True),
        ({"callbackUrl": "HTTPS://x.invalid/h", "authenticationType": "NONE"}, True),
        ({"callbackUrl": "http://x.invalid/h", "authenticationType": "NONE"}, False),
        ({"callbackUrl": "https://", "authenticationType": "NONE"}, False),
        ({"callbackUrl": "https:///path", "authenticationType": "NONE"}, False),
        ({"authenticationType": "BEARER", "apiKey": "****"}, False),  # a mask, not a key
        ({"authenticationType": "BASIC", "username": "u", "password": "**"}, False),
        ({"authenticationType": "BEARER"}, False),
        ({"authenticationType": "BEARER", "apiKey": "k"}, True),
        ({"authenticationType": "BASIC", "username": "u"}, False),
        ({"authenticationType": "BASIC", "password": "p"}, False),
        ({"authenticationType": "BASIC", "username": "u", "password": "p"}, True),
        ({"authenticationType": "OAUTH"}, False),
    ],
)
def test_subscription_rules(data: dict[str, Any], ok: bool) -> None:
    if ok:
        WebhookSubscription.model_validate(data)
    else:
        with pytest.raises(ValidationError):
            WebhookSubscription.model_validate(data)


@pytest.mark.parametrize(
    "answer",
    [
        {"callbackUrl": "https://x.invalid/h", "authenticationType": "BEARER"},  # no secret
        {"authenticationType": "BASIC", "username": "u", "password": "****"},
        {"deliveryUrl": "https://wallet.invalid/v1/game-action-events", "brandId": 7},
    ],
)
def test_subscription_answers_parse_without_their_secrets(answer: dict[str, Any]) -> None:
    """A server usually leaves the secret out of its answer (or masks it): the answer model
    is tolerant, keeps no secret, and never turns into a body with the mask in it."""
    info = WebhookSubscriptionInfo.model_validate(answer)
    assert info.authentication_type == answer.get("authenticationType")
    assert info.password_set == ("password" in answer)
    assert "****" not in repr(info) and "****" not in str(info.model_dump())
    if info.authentication_type == "BEARER":
        with pytest.raises(ValidationError, match="masked secret"):
            info.to_subscription(api_key="****")
        body = info.to_subscription(api_key="real-key").to_wire()
        assert b'"apiKey":"real-key"' in body


#: Callback URLs and whether the document's rule ("Any HTTPS URL") takes them.
CALLBACK_VERDICTS = [
    ("https://h.example/x", True),
    ("https://h.example", True),
    ("HTTPS://h.example/x", True),
    ("https://127.0.0.1:9/hook", True),
    ("https://", False),
    ("https://:443/x", False),
    ("http://h.example/x", False),
    ("http://127.0.0.1:9/hook", False),  # http only with the sandbox's insecure option
    ("ftp://h.example/x", False),
    (" https://h.example/x", False),
    ("https:/x", False),
    ("https://[::1/x", False),
    ("", False),
]


@pytest.mark.parametrize(("url", "ok"), CALLBACK_VERDICTS)
def test_callback_url_check_is_one_rule_for_model_and_sandbox(url: str, ok: bool) -> None:
    from gptools.sandbox._validation import Refusal, validate_subscription

    try:
        WebhookSubscription(callback_url=url, authentication_type="NONE")
        model_ok = True
    except ValidationError:
        model_ok = False
    try:
        validate_subscription({"callbackUrl": url, "authenticationType": "NONE"}, False)
        sandbox_ok = True
    except Refusal:
        sandbox_ok = False
    assert (model_ok, sandbox_ok) == (ok, ok), url


def test_the_sandbox_takes_http_on_loopback_only_when_told() -> None:
    from gptools.sandbox._validation import Refusal, validate_subscription

    body = {"callbackUrl": "http://127.0.0.1:9/h", "authenticationType": "NONE"}
    assert validate_subscription(body, True)["callbackUrl"] == body["callbackUrl"]
    with pytest.raises(Refusal):
        validate_subscription({**body, "callbackUrl": "http://10.0.0.1/h"}, True)


def test_subscription_secrets_stay_hidden_until_sent() -> None:
    sub = WebhookSubscription.model_validate(
        {"authenticationType": "BASIC", "username": "u", "password": "pw-secret"}
    )
    assert "pw-secret" not in repr(sub) and "pw-secret" not in str(sub.model_dump())
    assert b'"password":"pw-secret"' in sub.to_wire()


def test_display_defaults_are_the_documents() -> None:
    options = DisplayOptions()
    assert options.model_dump() == {
        "show_value_of_promotion": True,
        "show_final_winning_value": True,
        "show_player_expiry_time": False,
        "show_play_later_button": True,
        "show_bet_value": False,
        "show_opt_out": False,
    }
    assert options.shown("AWARDED_FEATURE") == [
        "Value of Promotion",
        "Final Winning Value",
        "Play Later Button",
    ]
    with_bet = DisplayOptions(show_bet_value=True)
    assert "Bet Value (Awarded Feature only)" in with_bet.shown("AWARDED_FEATURE")
    assert "Bet Value (Awarded Feature only)" not in with_bet.shown("FREE_ROUNDS")
    with pytest.raises(ValidationError):
        DisplayOptions(show_everything=True)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (Decimal("2.10"), b"2.10"),
        (Decimal("0.000001"), b"0.000001"),
        (Decimal("1E+2"), b"100"),
        (Decimal("-3.775"), b"-3.775"),
        (10**20, b"100000000000000000000"),
        ({"a": [Decimal("1.0"), None, True, "é"]}, '{"a":[1.0,null,true,"é"]}'.encode()),
    ],
)
def test_dumps_wire_writes_exact_digits(value: Any, wire: bytes) -> None:
    assert dumps_wire(value) == wire


@pytest.mark.parametrize("value", [1.5, {"bet": 0.1}, Decimal("NaN"), Decimal("Infinity")])
def test_dumps_wire_refuses_floats_and_non_finite(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        dumps_wire(value)


def test_loads_wire_gives_decimals_and_models_keep_them() -> None:
    data = loads_wire(b'{"bet": 0.10, "n": 3}')
    assert data == {"bet": Decimal("0.10"), "n": 3} and str(data["bet"]) == "0.10"
    game = Game.model_validate(
        loads_wire(
            b'{"buyFeatures":[{"buyFeatureType":"F","priceMultiplier":75.5}],'
            b'"betSizes":{"KWD":[0.050]}}'
        )
    )
    assert game.bet_sizes["KWD"] == [Decimal("0.050")]
    assert game.buy_features[0].price_multiplier == Decimal("75.5")
    configs = AwardedFeatureConfigurations.model_validate(
        loads_wire(b'{"content":[{"gameId":"g","bet":3.775,"currencyCode":"KWD"}]}')
    )
    assert str(configs.content[0].bet) == "3.775"
    assert CampaignCreated.model_validate({"campaignId": 42}).campaign_id == "42"
    assert ErrorBody.model_validate({"message": "partial"}).code is None


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (400, "BRAND_REQUIRED", errors.BrandRequiredError),
        (401, "NOT_AUTHORIZED", errors.NotAuthorizedError),
        (403, "BRAND_NOT_ALLOWED", errors.BrandNotAllowedError),
        (403, "INVALID_REQUEST", errors.InvalidRequestError),
        (500, "UNKNOWN_ERROR", errors.UnknownServerError),
        (504, "TIMEOUT", errors.GatewayTimeoutError),
        (400, spec.VALIDATION_ERROR_CODE, errors.CampaignValidationError),
        (404, spec.GAME_NOT_FOUND_CODE, errors.GameNotFoundError),
        (409, spec.IDEMPOTENCY_CONFLICT_CODE, errors.IdempotencyConflictError),
        (429, spec.RATE_LIMIT_CODE, errors.RateLimitedError),
        (429, None, errors.RateLimitedError),
        (429, "UNKNOWN_ERROR", errors.RateLimitedError),
        (503, spec.RATE_LIMIT_CODE, errors.RateLimitedError),
        (400, "SOMETHING_NEW", errors.BadRequestError),
        (403, None, errors.ForbiddenError),
        (404, spec.NOT_FOUND_CODE, errors.NotFoundError),
        (409, spec.SUBSCRIPTION_EXISTS_CODE, errors.ConflictError),
        (503, None, errors.ServerError),
        (418, None, errors.ApiError),
        (None, None, errors.ApiError),
    ],
)
def test_error_class(status: int | None, code: str | None, expected: type[errors.ApiError]) -> None:
    assert errors.error_class(status, code) is expected


def test_from_body_keeps_an_unknown_code() -> None:
    body = ErrorBody(code="BRAND_NEW", message="m", timestamp="2026-01-01T00:00:00Z", path="/p")
    exc = errors.ApiError.from_body(418, body, raw=None, method="GET", url="http://h/p")
    assert type(exc) is errors.ApiError and exc.code == "BRAND_NEW" and exc.status == 418
    assert "BRAND_NEW" in str(exc) and "m" in str(exc)
