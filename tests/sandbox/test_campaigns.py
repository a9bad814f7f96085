"""Campaign creation: field limits at the boundary, the bet rule, idempotency, ids, legacy path."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest

from gptools import spec
from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox
from tests.sandbox.conftest import assert_error, auth, campaign_body, path

# (field, the largest accepted value, the smallest refused one)
LIMITS: list[tuple[str, Any, Any]] = [
    ("name", "n" * spec.NAME_MAX_LENGTH, "n" * (spec.NAME_MAX_LENGTH + 1)),
    (
        "externalCampaignId",
        "e" * spec.EXTERNAL_CAMPAIGN_ID_MAX_LENGTH,
        "e" * (spec.EXTERNAL_CAMPAIGN_ID_MAX_LENGTH + 1),
    ),
    ("requestId", "r" * spec.REQUEST_ID_MAX_LENGTH, "r" * (spec.REQUEST_ID_MAX_LENGTH + 1)),
    (
        "rulesUrl",
        "https://x.invalid/" + "u" * (spec.RULES_URL_MAX_LENGTH - 18),
        "https://x.invalid/" + "u" * (spec.RULES_URL_MAX_LENGTH - 17),
    ),
    ("betNumber", spec.BET_NUMBER_MAX, spec.BET_NUMBER_MAX + 1),
]


def _post(
    http: httpx.Client,
    body: dict[str, Any],
    *,
    brand: int | None = None,
    key: str = "individual",
    legacy: bool = False,
) -> httpx.Response:
    return http.post(path("campaign", brand, legacy=legacy), json=body, auth=auth(key))


@pytest.mark.parametrize(("field", "ok", "too_much"), LIMITS, ids=[x[0] for x in LIMITS])
def test_field_limit_passes_at_the_limit_and_fails_one_above(
    http: httpx.Client, field: str, ok: Any, too_much: Any
) -> None:
    assert len(ok) if isinstance(ok, str) else ok  # the boundary values are not trivial
    accepted = _post(
        http,
        campaign_body(
            **{field: ok, "requestId": "at-limit"} if field != "requestId" else {field: ok}
        ),
    )
    assert accepted.status_code == 201, accepted.text
    refused = _post(
        http,
        campaign_body(
            **{field: too_much, "requestId": "above-limit"}
            if field != "requestId"
            else {field: too_much}
        ),
    )
    body = assert_error(refused, spec.VALIDATION_ERROR_STATUS, spec.VALIDATION_ERROR_CODE)
    limit = str(len(ok)) if isinstance(ok, str) else str(ok)
    assert field in body["message"] and limit in body["message"], body["message"]
    shown = str(too_much)[:20]
    assert shown in body["message"], body["message"]


def test_field_limits_match_the_document() -> None:
    lengths = {f: (len(ok) if isinstance(ok, str) else ok) for f, ok, _ in LIMITS}
    assert lengths == {
        "name": 255,
        "externalCampaignId": 512,
        "requestId": 36,
        "rulesUrl": 2048,
        "betNumber": 1500,
    }


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"betNumber": 0}, "betNumber 0 is out of range"),
        ({"betNumber": 1}, None),
        ({"betNumber": True}, "betNumber must be an integer"),
        ({"betNumber": 2.5}, "betNumber must be an integer"),
        ({"name": ""}, "name must not be empty"),
        ({"name": 7}, "name must be a string"),
        ({"requestId": ""}, "requestId must not be empty"),
        ({"type": "JACKPOT"}, "type 'JACKPOT' is not a campaign type"),
        ({"gameIds": []}, "gameIds must be a list of at least 1 game id"),
        ({"gameIds": ["nope"]}, "gameIds[0] 'nope' is not a game"),
        (
            {"currencyCode": "KWD", "gameIds": ["viking-raid"], "bet": 1},
            "not offered by viking-raid",
        ),
        ({"bet": "7.55"}, "bet must be a JSON number above 0"),
        ({"bet": 0}, "bet must be a JSON number above 0"),
        ({"bet": 7.555}, "more decimals than EUR allows"),
        ({"bet": 0.10}, "bet 0.1 is not a feature cost of neon-fruits in EUR"),
        ({"startDate": "2026-03-01T00:00:00Z"}, "startDate '2026-03-01T00:00:00Z' is not"),
        ({"endDate": "2026-02-01T00:00:00"}, "endDate '2026-02-01T00:00:00' must be after"),
        ({"timeZone": "Mars/Olympus"}, "timeZone 'Mars/Olympus' is not an IANA time zone"),
        ({"players": ["ok", ""]}, "players[1] '' is empty"),
        ({"type": None}, "type is required"),
        ({"gameIds": None}, "gameIds is required"),
        ({"bet": None}, "bet is required"),
        ({"currencyCode": None}, "currencyCode is required"),
        ({"startDate": None}, "startDate is required"),
        ({"timeZone": None}, "timeZone is required"),
        ({"name": None}, "name is required"),
        ({"betNumber": None}, "betNumber is required"),
        ({"endDate": None}, "endDate is required"),
        ({"timeZone": "+02:00"}, "timeZone '+02:00' is not an IANA time zone"),
        ({"externalCampaignId": None, "rulesUrl": None, "requestId": None}, None),
    ],
)
def test_field_rules(http: httpx.Client, changes: dict[str, Any], fragment: str | None) -> None:
    response = _post(http, campaign_body(**changes))
    if fragment is None:
        assert response.status_code == 201, response.text
        return
    body = assert_error(response, spec.VALIDATION_ERROR_STATUS, spec.VALIDATION_ERROR_CODE)
    assert fragment in body["message"], body["message"]


def test_every_problem_is_reported_at_once(http: httpx.Client) -> None:
    response = _post(http, campaign_body(name="n" * 256, betNumber=1501, rulesUrl=None))
    message = assert_error(response, 400, spec.VALIDATION_ERROR_CODE)["message"]
    assert "name" in message and "betNumber" in message


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b"", b'{"a": NaN'])
def test_body_must_be_a_json_object(http: httpx.Client, body: bytes) -> None:
    response = http.post(
        path("campaign"),
        content=body,
        auth=auth("individual"),
        headers={"content-type": "application/json"},
    )
    assert_error(response, 400, spec.VALIDATION_ERROR_CODE)


# --- The awarded-feature bet rule -----------------------------------------------------


def test_awarded_feature_bet_must_be_a_feature_cost(http: httpx.Client) -> None:
    base_bet = _post(http, campaign_body(bet=0.10, requestId="base"))
    message = assert_error(base_bet, 400, spec.VALIDATION_ERROR_CODE)["message"]
    assert "7.55" in message  # the valid costs are listed
    assert _post(http, campaign_body(bet=11.33, requestId="cost")).status_code == 201
    jpy = _post(
        http,
        campaign_body(gameIds=["dragon-pearls"], currencyCode="JPY", bet=1563, requestId="jpy"),
    )
    assert jpy.status_code == 201, jpy.text
    kwd = _post(http, campaign_body(currencyCode="KWD", bet=3.775, requestId="kwd"))
    assert kwd.status_code == 201, kwd.text


def test_multi_game_bet_must_suit_every_game(http: httpx.Client) -> None:
    # 100 × 0.10 = 10.00 is a cost of golden-pharaoh and sweet-cascade, not of neon-fruits.
    both = _post(
        http, campaign_body(gameIds=["golden-pharaoh", "sweet-cascade"], bet=10, requestId="both")
    )
    assert both.status_code == 201, both.text
    mixed = _post(
        http, campaign_body(gameIds=["golden-pharaoh", "neon-fruits"], bet=10, requestId="mixed")
    )
    message = assert_error(mixed, 400, spec.VALIDATION_ERROR_CODE)["message"]
    assert "neon-fruits" in message and "golden-pharaoh" not in message.split(";")[0]


def test_free_rounds_bet_is_a_base_bet(http: httpx.Client) -> None:
    ok = _post(http, campaign_body(type=spec.FREE_ROUNDS_CAMPAIGN_TYPE, bet=0.20, requestId="fr"))
    assert ok.status_code == 201, ok.text
    refused = _post(
        http, campaign_body(type=spec.FREE_ROUNDS_CAMPAIGN_TYPE, bet=7.55, requestId="fr2")
    )
    assert (
        "not a bet size of neon-fruits"
        in assert_error(refused, 400, spec.VALIDATION_ERROR_CODE)["message"]
    )
    # An assumption (spec.FREE_ROUNDS_BET_IS_BASE_BET), so the sandbox can be told otherwise;
    # the currency's decimals (spec.BET_MAX_DECIMALS) still hold.
    with (
        run_sandbox(SandboxConfig(free_rounds_bet_is_base_bet=False)) as sb,
        httpx.Client(base_url=sb.base_url) as other,
    ):
        free = _post(other, campaign_body(type=spec.FREE_ROUNDS_CAMPAIGN_TYPE, bet=7.55))
        assert free.status_code == 201, free.text
        finer = _post(
            other, campaign_body(type=spec.FREE_ROUNDS_CAMPAIGN_TYPE, bet=7.555, requestId="finer")
        )
        assert "more decimals than EUR" in finer.text


# --- Idempotency, ids, players, legacy path ----------------------------------------


def test_same_request_id_same_body_returns_the_first_campaign(
    http: httpx.Client, fresh_sandbox: RunningSandbox
) -> None:
    first = _post(http, campaign_body())
    again = _post(http, campaign_body())
    assert first.status_code == 201 and again.status_code == 200
    assert first.json() == again.json() == {"campaignId": "CMP-000001", "requestId": "req-1"}
    assert list(fresh_sandbox.state.campaigns) == ["CMP-000001"]


def test_same_request_id_other_body_is_a_conflict(
    http: httpx.Client, fresh_sandbox: RunningSandbox
) -> None:
    assert _post(http, campaign_body()).status_code == 201
    conflict = _post(http, campaign_body(name="Another name"))
    body = assert_error(conflict, spec.IDEMPOTENCY_CONFLICT_STATUS, spec.IDEMPOTENCY_CONFLICT_CODE)
    assert "req-1" in body["message"] and "CMP-000001" in body["message"]
    assert len(fresh_sandbox.state.campaigns) == 1


def test_request_ids_are_scoped_per_brand(
    http: httpx.Client, fresh_sandbox: RunningSandbox
) -> None:
    a = _post(http, campaign_body(), brand=201, key="partner")
    b = _post(http, campaign_body(), brand=202, key="partner")
    assert (a.json()["campaignId"], b.json()["campaignId"]) == ("CMP-000001", "CMP-000002")


def test_without_request_id_every_post_creates(
    http: httpx.Client, fresh_sandbox: RunningSandbox
) -> None:
    ids = [_post(http, campaign_body(requestId=None)).json()["campaignId"] for _ in range(3)]
    assert ids == ["CMP-000001", "CMP-000002", "CMP-000003"]
    stored = fresh_sandbox.state.campaigns["CMP-000002"]
    assert stored.request_id is None and stored.brand_id == 101
    assert stored.body["bet"] == Decimal("7.55")  # kept exact, never a float


def test_ids_start_again_after_reset(http: httpx.Client, fresh_sandbox: RunningSandbox) -> None:
    assert _post(http, campaign_body()).json()["campaignId"] == "CMP-000001"
    fresh_sandbox.reset()
    assert _post(http, campaign_body()).json()["campaignId"] == "CMP-000001"


def test_players_in_the_body_become_participants(
    http: httpx.Client, fresh_sandbox: RunningSandbox
) -> None:
    response = _post(http, campaign_body(players=["p1", "p2", "p1"]))
    assert response.status_code == 201
    assert fresh_sandbox.state.participants("CMP-000001") == {"p1": 2, "p2": 1}


def test_players_limit_is_the_one_the_model_has(http: httpx.Client) -> None:
    """One assumed limit (spec.CAMPAIGN_PLAYERS_MAX_IDS) for the client's model and the
    sandbox, which used to borrow the batch endpoint's figure."""
    limit = SandboxConfig().campaign_players_max_ids
    assert limit == spec.CAMPAIGN_PLAYERS_MAX_IDS
    players = [f"p{i}" for i in range(limit + 1)]
    refused = _post(http, campaign_body(players=players, requestId="many"))
    message = assert_error(refused, 400, spec.VALIDATION_ERROR_CODE)["message"]
    assert f"the limit is {limit}" in message
    assert _post(http, campaign_body(players=players[:limit], requestId="ok")).status_code == 201


def test_required_fields_are_the_assumed_ones() -> None:
    """Which body fields are required is not shown: spec.CAMPAIGN_REQUIRED_FIELDS says it,
    the sandbox refuses a body without one of them, and the model requires the same set."""
    from gptools.models import CampaignRequest

    required = {
        f.alias or name for name, f in CampaignRequest.model_fields.items() if f.is_required()
    }
    required = {to_wire_name(n) for n in required}
    assert required == set(spec.CAMPAIGN_REQUIRED_FIELDS)


def to_wire_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


@pytest.mark.parametrize(
    "key,brand",
    [
        ("individual", None),
        ("individual", 101),
        ("partner", 203),
        ("third_party", 301),
        ("internal", 101),
    ],
)
def test_legacy_path_creates_the_same_way(
    http: httpx.Client, fresh_sandbox: RunningSandbox, key: str, brand: int | None
) -> None:
    """The legacy path serves free rounds (spec.LEGACY_CAMPAIGN_TYPES, assumed) in both path
    forms; awarded features are refused there and go to the unified path."""
    free = campaign_body(type=spec.FREE_ROUNDS_CAMPAIGN_TYPE, bet=0.20)
    refused = _post(http, campaign_body(), brand=brand, key=key, legacy=True)
    message = assert_error(refused, 400, spec.VALIDATION_ERROR_CODE)["message"]
    assert "legacy" in message and "AWARDED_FEATURE" in message
    legacy = _post(http, free, brand=brand, key=key, legacy=True)
    assert legacy.status_code == 201, legacy.text
    # The unified path sees the campaign the legacy one created (same requestId, same body).
    unified = _post(http, free, brand=brand, key=key)
    assert unified.json()["campaignId"] == legacy.json()["campaignId"]
    campaign_id = legacy.json()["campaignId"]
    added = http.post(
        path(f"campaign/{campaign_id}/participant", brand, legacy=True),
        json={"playerIds": ["p1"]},
        auth=auth(key),
    )
    assert added.status_code == 200, added.text
    assert fresh_sandbox.state.participants(campaign_id) == {"p1": 1}
