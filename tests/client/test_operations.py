"""Every operation, the path form per principal type, local brand checks and typed errors,
against the sandbox over loopback; each case runs with the sync and the async client."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from gptools import errors, spec
from gptools.client import AsyncClient, Client
from gptools.models import CampaignRequest, WebhookSubscription
from gptools.sandbox import CATALOGUE, FaultRule, RunningSandbox
from gptools.sandbox._catalogue import feature_costs
from tests._support import campaigns
from tests.client.conftest import FAST_BACKOFF, MakeClient, async_options

GAME = next(g for g in CATALOGUE if g.buy_features and "KWD" in g.bet_sizes)


def free_rounds(**overrides: Any) -> CampaignRequest:
    """A valid FREE_ROUNDS campaign on :data:`GAME` (with ``overrides``)."""
    return campaigns.free_rounds(
        **{"game_ids": [GAME.game_id], "bet": GAME.bet_sizes["EUR"][0], **overrides}
    )


def paths(sb: RunningSandbox) -> list[str]:
    return [f"{r.method} {r.path}" for r in sb.state.requests]


# --------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------


def test_self_is_cached_and_lists_brands(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner")
    info = c.self()
    assert info.principal_type == spec.PRINCIPAL_PARTNER
    assert sorted(info.brand_ids) == sorted(sb.accounts["partner"].brand_ids)
    c.self()
    c.brand(201).game(GAME.game_id)
    assert paths(sb) == [f"GET {spec.SELF_PATH}", "GET /api/v1/brands/201/game"]
    c.self(refresh=True)
    assert len(sb.state.requests) == 3


def test_catalogue_operations_return_exact_models(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner").brand(202)
    game = c.game(GAME.game_id)
    assert game.bet_sizes["KWD"] == list(GAME.bet_sizes["KWD"])
    assert all(isinstance(b, Decimal) for b in game.bet_sizes["KWD"])
    assert [f.price_multiplier for f in game.buy_features] == [
        f.price_multiplier for f in GAME.buy_features
    ]
    confs = c.awarded_feature_configurations(GAME.game_id, "KWD")
    expected = [cost for _, cost, _ in feature_costs(GAME.game_id, "KWD")]
    assert [x.bet for x in confs.content] == expected
    assert str(confs.content[0].bet) == str(expected[0])  # digits kept, e.g. 5.000 for KWD
    assert sb.state.requests[-1].query == {"gameId": GAME.game_id, "currencyCode": "KWD"}


def test_campaign_and_participants(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner")
    created = c.create_campaign(free_rounds(), brand=201)
    stored = sb.state.campaigns[created.campaign_id]
    assert stored.brand_id == 201
    # A requestId was generated: a UUID4, exactly 36 characters.
    assert stored.request_id is not None and len(stored.request_id) == 36
    assert uuid.UUID(stored.request_id).version == 4
    assert stored.body["bet"] == GAME.bet_sizes["EUR"][0]
    added = c.add_participants(created.campaign_id, ["p-1", "p-2"], brand=201)
    assert added.retries == 0 and added.campaign_id == created.campaign_id
    batch = c.add_participants_batch(
        created.campaign_id, [f"b-{i}" for i in range(2500)], brand=201
    )
    assert batch.model_extra is not None
    assert len(sb.state.participants(created.campaign_id)) == 2502
    assert sb.state.requests[-1].path.endswith(f"/campaign/{created.campaign_id}/participant/batch")
    # A caller's own requestId is sent as given.
    mine = c.create_campaign(free_rounds(request_id="order-42"), brand=201)
    assert sb.state.campaigns[mine.campaign_id].request_id == "order-42"


def test_participant_input_is_checked_locally(make: MakeClient, sb: RunningSandbox) -> None:
    client = make("partner")
    client.self()
    c = client.brand(201)
    before = len(sb.state.requests)
    with pytest.raises(TypeError, match="not a single string"):
        c.add_participants("CMP-000001", "p-1")
    with pytest.raises(ValueError, match="empty"):
        c.add_participants("CMP-000001", [])
    with pytest.raises(ValueError, match=r"player_ids\[1\]"):
        c.add_participants("CMP-000001", ["ok", ""])
    with pytest.raises(ValueError, match="the limit is 3"):
        c.add_participants_batch("CMP-000001", ["a", "b", "c", "d"], max_ids=3)
    assert len(sb.state.requests) == before


def test_legacy_campaign_path(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("individual", legacy_campaign_path=True)
    created = c.create_campaign(free_rounds())
    c.add_participants(created.campaign_id, ["p-1"])
    assert paths(sb)[1:] == [
        "POST /api/v1/freeround/campaign",
        f"POST /api/v1/freeround/campaign/{created.campaign_id}/participant",
    ]
    # The legacy path serves free rounds (spec.LEGACY_CAMPAIGN_TYPES, assumed): an awarded
    # feature is refused before sending, as the sandbox would refuse it.
    awarded = free_rounds(
        type=spec.CAMPAIGN_TYPE_AWARDED_FEATURE,
        bet=Decimal("7.55"),
        game_ids=["neon-fruits"],
        currency_code="EUR",
    )
    with pytest.raises(ValueError, match="legacy"):
        c.create_campaign(awarded)
    assert len(paths(sb)) == 3
    assert make("individual").create_campaign(awarded).campaign_id


def test_webhook_subscription(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("third_party").brand(301)
    sub = WebhookSubscription(
        callback_url="https://hooks.example.com/gp", authentication_type="BEARER", api_key="k-123"
    )
    created = c.create_webhook_subscription(sub)
    assert created.callback_url == "https://hooks.example.com/gp"
    assert sb.state.subscriptions[301]["apiKey"] == "k-123"
    read = c.get_webhook_subscription()
    assert read.authentication_type == "BEARER" and read.api_key_set
    assert "k-123" not in repr(read) and "****" not in repr(read)
    # Read-then-update never sends the answer's mask back as the key.
    with pytest.raises(TypeError, match="real secrets"):
        c.update_webhook_subscription(read)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="masked secret"):
        read.to_subscription(api_key="****")
    assert [r.method for r in sb.state.requests[1:]] == ["POST", "GET"]
    basic = WebhookSubscription(authentication_type="BASIC", username="u", password="pw")
    c.update_webhook_subscription(basic)
    assert sb.state.subscriptions[301]["authenticationType"] == "BASIC"
    assert [r.method for r in sb.state.requests[1:]] == ["POST", "GET", "PUT"]
    # Creating again is refused (assumed 409) and, not being idempotent, not retried.
    with pytest.raises(errors.ConflictError):
        c.create_webhook_subscription(sub)
    assert len(sb.state.requests) == 5


# --------------------------------------------------------------------------------------
# Path form by principal type (read back from the sandbox's record)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("account", "brand", "expected_path"),
    [
        ("individual", None, "/api/v1/game"),
        ("individual", 101, "/api/v1/brands/101/game"),
        ("partner", 203, "/api/v1/brands/203/game"),
        ("third_party", 301, "/api/v1/brands/301/game"),
        ("internal", 201, "/api/v1/brands/201/game"),
    ],
)
def test_path_form_per_principal(
    make: MakeClient, sb: RunningSandbox, account: str, brand: int | None, expected_path: str
) -> None:
    c = make(account)
    c.game(GAME.game_id, brand=brand)
    last = sb.state.requests[-1]
    assert last.path == expected_path
    assert last.status == 200
    assert last.brand_id == (brand or sb.accounts[account].brand_ids[0])


def test_internal_sends_what_was_asked(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("internal")
    # INTERNAL is not checked locally: the server decides (the sandbox wants a brand) ...
    with pytest.raises(errors.BrandRequiredError) as required:
        c.game(GAME.game_id)
    assert required.value.sent and required.value.status == 400
    with pytest.raises(errors.BrandNotAllowedError) as foreign:
        c.game(GAME.game_id, brand=901)
    assert foreign.value.sent and foreign.value.status == 403
    assert paths(sb)[1:] == ["GET /api/v1/game", "GET /api/v1/brands/901/game"]


def test_brand_outside_int32_is_refused_locally(make: MakeClient, sb: RunningSandbox) -> None:
    """Brand ids are "integer, int32": a larger one is refused before sending, even for an
    INTERNAL account whose brands the client leaves to the server; the sandbox answers such
    a path segment 403 BRAND_NOT_ALLOWED (spec.BRAND_ID_NOT_INT32, assumed)."""
    c = make("internal")
    c.self()
    before = len(sb.state.requests)
    with pytest.raises(ValueError, match="int32"):
        c.game(GAME.game_id, brand=2**31)
    assert len(sb.state.requests) == before
    response = httpx.get(
        f"{sb.base_url}/api/v1/brands/{2**31}/game",
        params={"gameId": GAME.game_id},
        auth=(sb.accounts["internal"].username, sb.accounts["internal"].password),
    )
    assert (response.status_code, response.json()["code"]) == spec.BRAND_ID_NOT_INT32


@pytest.mark.parametrize(
    ("account", "brand", "error", "code"),
    [
        ("partner", None, errors.BrandRequiredError, spec.CODE_BRAND_REQUIRED),
        ("third_party", None, errors.BrandRequiredError, spec.CODE_BRAND_REQUIRED),
        ("partner", 301, errors.BrandNotAllowedError, spec.CODE_BRAND_NOT_ALLOWED),
        ("third_party", 201, errors.BrandNotAllowedError, spec.CODE_BRAND_NOT_ALLOWED),
        ("individual", 201, errors.BrandNotAllowedError, spec.CODE_BRAND_NOT_ALLOWED),
    ],
)
def test_brand_errors_raised_locally_before_sending(
    make: MakeClient,
    sb: RunningSandbox,
    account: str,
    brand: int | None,
    error: type[errors.ApiError],
    code: str,
) -> None:
    c = make(account)
    c.self()
    before = len(sb.state.requests)
    attempts: list[Callable[[], object]] = [
        lambda: c.game(GAME.game_id, brand=brand),
        lambda: c.create_campaign(free_rounds(), brand=brand),
        lambda: c.add_participants("CMP-000001", ["p"], brand=brand),
    ]
    for attempt in attempts:
        with pytest.raises(error) as caught:
            attempt()
        assert caught.value.sent is False and caught.value.status is None
        assert caught.value.code == code and type(caught.value) is error
        assert "allowed" in caught.value.message
    assert len(sb.state.requests) == before  # zero requests went out
    assert c.stats.requests == 1


# --------------------------------------------------------------------------------------
# Every error code gives its class
# --------------------------------------------------------------------------------------


def test_not_authorized(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner", password="wrong-password")
    with pytest.raises(errors.NotAuthorizedError) as caught:
        c.self()
    e = caught.value
    assert (e.status, e.code, e.path) == (401, spec.CODE_NOT_AUTHORIZED, spec.SELF_PATH)
    assert e.server_timestamp is not None and e.server_timestamp.endswith("Z")
    assert (e.method, e.url) == ("GET", f"{sb.base_url}{spec.SELF_PATH}")
    assert e.retries == 0
    assert len(sb.state.requests) == 1  # 401 is never retried


def test_invalid_campaign_id(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner").brand(201)
    with pytest.raises(errors.InvalidRequestError) as caught:
        c.add_participants("CMP-424242", ["p-1"])
    assert caught.value.status == 403
    assert "CMP-424242" in caught.value.message
    assert caught.value.url.endswith("/api/v1/brands/201/campaign/CMP-424242/participant")
    assert paths(sb).count("POST /api/v1/brands/201/campaign/CMP-424242/participant") == 1


@pytest.mark.parametrize(
    ("rule", "error", "status", "code"),
    [
        (FaultRule("other", status=500), errors.UnknownServerError, 500, spec.CODE_UNKNOWN_ERROR),
        (FaultRule("other", status=504), errors.GatewayTimeoutError, 504, spec.CODE_TIMEOUT),
        (
            FaultRule("other", status=503, code="MAINTENANCE"),
            errors.ServerError,
            503,
            "MAINTENANCE",
        ),
        (
            FaultRule("other", status=400, code=spec.VALIDATION_ERROR_CODE),
            errors.CampaignValidationError,
            400,
            spec.VALIDATION_ERROR_CODE,
        ),
        (
            FaultRule("other", status=418, code="I_AM_A_TEAPOT"),
            errors.ApiError,
            418,
            "I_AM_A_TEAPOT",
        ),
    ],
)
def test_error_classes_from_injected_faults(
    make: MakeClient,
    sb: RunningSandbox,
    rule: FaultRule,
    error: type[errors.ApiError],
    status: int,
    code: str,
) -> None:
    c = make("partner", max_retries=0)
    c.self()
    sb.faults.add(rule)
    with pytest.raises(error) as caught:
        c.game(GAME.game_id, brand=201)
    e = caught.value
    assert type(e) is error
    assert (e.status, e.code, e.path) == (status, code, "/api/v1/brands/201/game")
    assert e.body is None  # the documented JSON body was parsed, not kept raw


def test_game_not_found_and_validation(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner").brand(201)
    with pytest.raises(errors.GameNotFoundError) as missing:
        c.game("no-such-game")
    assert missing.value.status == 404
    with pytest.raises(errors.CampaignValidationError) as invalid:
        c.create_campaign(free_rounds(bet=Decimal("0.11")))
    assert "bet 0.11" in invalid.value.message
    with pytest.raises(errors.IdempotencyConflictError):
        c.create_campaign(free_rounds(request_id="same-key"))
        c.create_campaign(free_rounds(request_id="same-key", name="Another body"))
    assert [r.status for r in sb.state.requests[1:]] == [404, 400, 201, 409]


# --------------------------------------------------------------------------------------
# A non-JSON error body (a proxy in front of the API), served by a real HTTP server
# --------------------------------------------------------------------------------------


class _ProxyHandler(BaseHTTPRequestHandler):
    """/api/v1/self answers like the provider; everything else is a proxy's HTML 502."""

    def do_GET(self) -> None:
        if self.path == spec.SELF_PATH:
            body = json.dumps(
                {"principalType": "INDIVIDUAL", "allowedBrands": [{"id": 1, "name": "B"}]}
            ).encode()
            self._answer(200, "application/json", body)
        else:
            self._answer(502, "text/html", b"<html><body>502 Bad Gateway</body></html>")

    def _answer(self, status: int, ctype: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return


@pytest.fixture
def proxy_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ProxyHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_non_json_error_body_is_kept(
    kind: str, proxy_url: str, loop: asyncio.AbstractEventLoop
) -> None:
    options: dict[str, Any] = {
        "base_url": proxy_url,
        "username": "u",
        "password": "p",
        "env_file": None,
        "max_retries": 1,
        **FAST_BACKOFF,
    }
    if kind == "sync":
        with Client(**options) as c, pytest.raises(errors.ServerError) as caught:
            c.game("g")
    else:

        async def main() -> None:
            async with AsyncClient(**options, **async_options(kind)) as c:
                await c.game("g")

        with pytest.raises(errors.ServerError) as caught:
            loop.run_until_complete(main())
    e = caught.value
    assert e.status == 502 and e.code is None
    assert e.body is not None and "502 Bad Gateway" in e.body
    assert "502 Bad Gateway" in str(e)
    assert e.retries == 1  # a 5xx is retried even without the documented body


class _OtherShapeHandler(_ProxyHandler):
    """A server whose game and configurations answers have another shape than documented."""

    def do_GET(self) -> None:
        if self.path == spec.SELF_PATH:
            super().do_GET()
        elif self.path.startswith("/api/v1/game"):
            self._answer(
                200,
                "application/json",
                b'{"gameId": "g", "features": [{"type": "FS", "multiplier": 100}]}',
            )
        else:
            self._answer(200, "application/json", b'{"items": []}')


def test_an_answer_of_another_shape_fails_loudly_naming_the_endpoint() -> None:
    """Missing ``buyFeatures``/``betSizes`` (or ``content``) is an error that names the
    endpoint and what was expected, never an empty game and a silently empty cost table."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OtherShapeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with Client(f"http://127.0.0.1:{server.server_address[1]}", "u", "p", env_file=None) as c:
            with pytest.raises(errors.ApiError) as game:
                c.game("g")
            with pytest.raises(errors.ApiError) as confs:
                c.awarded_feature_configurations("g", "EUR")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    text = str(game.value)
    assert "GET /api/v1/game" in text and "buyFeatures" in text and "betSizes" in text
    assert "Field required" in text and game.value.status == 200
    assert "GET /api/v1/awarded-feature-configurations" in str(confs.value)
    assert "'content'" in str(confs.value)


# --------------------------------------------------------------------------------------
# Inside a running event loop (a Jupyter kernel), and the three-line start
# --------------------------------------------------------------------------------------


def test_sync_client_works_inside_a_running_loop(sb: RunningSandbox) -> None:
    acct = sb.accounts["individual"]

    async def kernel_cell() -> str:
        # A notebook cell runs while the kernel's loop is running: no asyncio.run inside.
        with Client(sb.base_url, acct.username, acct.password, env_file=None) as c:
            return c.self().principal_type

    assert asyncio.run(kernel_cell()) == spec.PRINCIPAL_INDIVIDUAL


def test_three_lines_from_the_environment(
    kind: str, sb: RunningSandbox, monkeypatch: pytest.MonkeyPatch, loop: asyncio.AbstractEventLoop
) -> None:
    acct = sb.accounts["partner"]
    monkeypatch.setenv("GP_BASE_URL", sb.base_url)
    monkeypatch.setenv("GP_USERNAME", acct.username)
    monkeypatch.setenv("GP_PASSWORD", acct.password)
    if kind == "sync":
        from gptools.client import Client as C

        client = C(env_file=None)
        brands = [b.id for b in client.self().allowed_brands]
        client.close()
    else:

        async def cell() -> list[int]:
            async with AsyncClient(env_file=None, **async_options(kind)) as ac:
                return [b.id for b in (await ac.self()).allowed_brands]

        brands = loop.run_until_complete(cell())
    assert brands == list(acct.brand_ids)


def test_campaign_field_names_rename_the_assumed_fields_on_the_wire(
    make: MakeClient, sb: RunningSandbox
) -> None:
    c = make("partner", campaign_field_names={spec.CAMPAIGN_START_FIELD: "validFrom"})
    # The sandbox reads the assumed name, so the renamed body is refused for lacking it:
    # proof that the rename reached the wire and that nothing else was changed.
    with pytest.raises(errors.CampaignValidationError) as info:
        c.brand(201).create_campaign(free_rounds())
    assert spec.CAMPAIGN_START_FIELD in info.value.message
    sent = json.loads(sb.state.requests[-1].body)
    assert "validFrom" in sent and spec.CAMPAIGN_START_FIELD not in sent
    assert sent[spec.CAMPAIGN_END_FIELD] == "2026-03-08T00:00:00"
