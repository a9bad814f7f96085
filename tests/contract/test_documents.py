"""The two OpenAPI descriptions against the code they describe: gptools.spec's paths,
codes, limits and assumptions, gptools.models' fields, the paths the client really calls,
and what the servers serve (the sandbox at /openapi.json, the receiver next to /metrics)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gptools import models, spec
from gptools.client import Client
from gptools.openapi import (
    ASSUMED,
    OPENAPI_PATH,
    TIMESTAMP_PATTERN,
    provider_openapi,
    receiver_openapi,
    to_json,
)
from gptools.sandbox import DEMO_ACCOUNTS, RunningSandbox
from gptools.webhooks import ReceiverAuth, WebhookReceiver, serve_metrics
from tests.contract.conftest import CONTRACT_CAMPAIGN
from tests.webhooks.conftest import ReceiverProcess, event, serve_in_thread, wire

_METHODS = ("get", "put", "post", "delete", "patch")


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _assumption_names(document: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for node in _walk(document):
        value = node.get(ASSUMED)
        if value is not None:
            names += [value] if isinstance(value, str) else value
    return names


def _validator(document: dict[str, Any], name: str) -> jsonschema.Draft202012Validator:
    """A validator of ``components.schemas[name]`` with its references resolved."""
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("document", [provider_openapi(), receiver_openapi()], ids=["api", "rx"])
def test_every_assumption_a_description_names_is_in_spec(document: dict[str, Any]) -> None:
    names = _assumption_names(document)
    known = {a.name for a in spec.ASSUMPTIONS}
    assert names, "no x-gptools-assumed at all"
    assert set(names) <= known, set(names) - known
    assert document["openapi"].startswith("3.1")


def test_the_provider_description_marks_the_assumptions_of_its_surface() -> None:
    names = set(_assumption_names(provider_openapi()))
    for name in (
        "RATE_LIMIT_STATUS / RATE_LIMIT_CODE",
        "ENDPOINT_WEBHOOK_SUBSCRIPTION",
        "ENDPOINT_BATCH_PARTICIPANT_TEMPLATE",
        "CAMPAIGN_REQUIRED_FIELDS",
        "CAMPAIGN_DATE_FORMAT",
        "CONFIGURATION_FILTERS_OPTIONAL",
        "CAMPAIGN_CREATED_STATUS / CAMPAIGN_REPLAY_STATUS",
        "NOT_FOUND_STATUS / NOT_FOUND_CODE",
    ):
        assert name in names


def test_a_name_outside_assumptions_is_refused_when_the_description_is_built() -> None:
    from gptools.openapi import _assumed

    with pytest.raises(KeyError, match="NO_SUCH_ASSUMPTION"):
        _assumed({}, "NO_SUCH_ASSUMPTION")


# --------------------------------------------------------------------------------------
# The provider's API: paths from spec, bodies from models
# --------------------------------------------------------------------------------------


def _template_regex(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template)) + "$")


def _operation_of(document: dict[str, Any], method: str, path: str) -> str | None:
    """The path template of ``document`` that serves ``method path`` (concrete first)."""
    templates = sorted(document["paths"], key=lambda t: ("{" in t, t))
    for template in templates:
        if _template_regex(template).match(path) and method.lower() in document["paths"][template]:
            return template
    return None


def test_every_path_the_client_calls_is_described(fresh_sandbox: RunningSandbox) -> None:
    document = provider_openapi()
    individual, partner = DEMO_ACCOUNTS["individual"], DEMO_ACCOUNTS["partner"]
    subscription = models.WebhookSubscription(
        callback_url="https://example.invalid/hook", authentication_type="BEARER", api_key="k"
    )
    for account, brand in ((individual, None), (partner, 201)):
        for legacy in (False, True):
            with Client(
                fresh_sandbox.base_url,
                account.username,
                account.password,
                env_file=None,
                brand=brand,
                legacy_campaign_path=legacy,
            ) as client:
                client.self()
                client.game("neon-fruits")
                client.awarded_feature_configurations(game_id="neon-fruits", currency_code="EUR")
                campaign = client.create_campaign(CONTRACT_CAMPAIGN).campaign_id
                client.add_participants(campaign, ["p-1"])
                client.add_participants_batch(campaign, ["p-2"])
                if not legacy:
                    client.create_webhook_subscription(subscription)
                    client.get_webhook_subscription()
                    client.update_webhook_subscription(subscription)
    called = {(r.method, r.path) for r in fresh_sandbox.state.requests}
    undescribed = sorted(c for c in called if _operation_of(document, *c) is None)
    assert not undescribed, undescribed
    # And the other way round: the description holds no operation the client never calls.
    used = {(method.lower(), _operation_of(document, method, path)) for method, path in called}
    described = {(m, t) for t, ops in document["paths"].items() for m in ops if m in _METHODS}
    assert used == described
    assert all(200 <= r.status < 300 for r in fresh_sandbox.state.requests)


def test_every_endpoint_of_spec_is_described_in_both_path_forms() -> None:
    paths = provider_openapi()["paths"]
    assert {"get"} == set(paths[spec.SELF_PATH])
    explicit = spec.BRAND_PREFIX_TEMPLATE.format(brand_id="{brandId}")
    endpoints = {
        spec.ENDPOINT_AWARDED_FEATURE_CONFIGURATIONS: {"get"},
        spec.ENDPOINT_GAME: {"get"},
        spec.ENDPOINT_CAMPAIGN: {"post"},
        spec.ENDPOINT_LEGACY_CAMPAIGN: {"post"},
        spec.ENDPOINT_WEBHOOK_SUBSCRIPTION: {"get", "post", "put"},
    }
    for campaign in (spec.ENDPOINT_CAMPAIGN, spec.ENDPOINT_LEGACY_CAMPAIGN):
        for template in (
            spec.ENDPOINT_PARTICIPANT_TEMPLATE,
            spec.ENDPOINT_BATCH_PARTICIPANT_TEMPLATE,
        ):
            endpoints[template.format(campaign=campaign, campaign_id="{campaignId}")] = {"post"}
    expected = {spec.SELF_PATH} | {
        f"{prefix}/{e}" for e in endpoints for prefix in (spec.API_PREFIX, explicit)
    }
    assert set(paths) == expected
    for endpoint, methods in endpoints.items():
        for prefix in (spec.API_PREFIX, explicit):
            assert set(paths[f"{prefix}/{endpoint}"]) == methods


def test_every_documented_error_code_is_described_with_its_status() -> None:
    document = provider_openapi()
    responses = document["components"]["responses"]
    refs = document["paths"][spec.SELF_PATH]["get"]["responses"]
    for code, status in spec.ERROR_STATUS.items():
        name = refs[str(status)]["$ref"].rsplit("/", 1)[-1]
        assert code in responses[name]["description"], (code, status)
    limited = refs[str(spec.RATE_LIMIT_STATUS)]["$ref"].rsplit("/", 1)[-1]
    assert spec.RATE_LIMIT_CODE in responses[limited]["description"]
    assert "Retry-After" in responses[limited]["headers"]


_MODELS: list[type[BaseModel]] = [
    models.SelfInfo,
    models.ErrorBody,
    models.Game,
    models.AwardedFeatureConfigurations,
    models.CampaignRequest,
    models.CampaignCreated,
    models.ParticipantsAdded,
    models.WebhookSubscription,
]


def _wire_names(model: type[BaseModel]) -> tuple[set[str], set[str]]:
    fields = model.model_fields
    names = {f.alias or n for n, f in fields.items()}
    required = {f.alias or n for n, f in fields.items() if f.is_required()}
    return names, required


@pytest.mark.parametrize("model", _MODELS, ids=lambda m: m.__name__)
def test_the_provider_schemas_have_the_models_fields(model: type[BaseModel]) -> None:
    schema = provider_openapi()["components"]["schemas"][model.__name__]
    names, required = _wire_names(model)
    assert set(schema["properties"]) == names
    assert set(schema.get("required", ())) == required


def test_a_subscription_answer_is_described_as_sent_not_as_kept() -> None:
    # The model keeps flags (apiKeySet, passwordSet) where the wire carries masked secrets.
    schema = provider_openapi()["components"]["schemas"]["WebhookSubscriptionInfo"]
    names, _ = _wire_names(models.WebhookSubscriptionInfo)
    assert set(schema["properties"]) == names - {"apiKeySet", "passwordSet"} | {
        "apiKey",
        "password",
    }


def test_the_receiver_schema_has_the_notifications_fields() -> None:
    schema = receiver_openapi()["components"]["schemas"]["GameEventNotification"]
    names, required = _wire_names(models.GameEventNotification)
    assert set(schema["properties"]) == names == required == set(schema["required"])


def test_limits_and_field_names_come_from_spec() -> None:
    schemas = provider_openapi()["components"]["schemas"]
    campaign = schemas["CampaignRequest"]
    props = campaign["properties"]
    assert set(campaign["required"]) == set(spec.CAMPAIGN_REQUIRED_FIELDS)
    assert props["name"]["maxLength"] == spec.NAME_MAX_LENGTH
    assert props["name"]["minLength"] == spec.NAME_MIN_LENGTH
    assert props["externalCampaignId"]["maxLength"] == spec.EXTERNAL_CAMPAIGN_ID_MAX_LENGTH
    assert props["requestId"]["maxLength"] == spec.REQUEST_ID_MAX_LENGTH
    assert props["rulesUrl"]["maxLength"] == spec.RULES_URL_MAX_LENGTH
    assert (props["betNumber"]["minimum"], props["betNumber"]["maximum"]) == (
        spec.BET_NUMBER_MIN,
        spec.BET_NUMBER_MAX,
    )
    assert props["bet"]["type"] == "number"
    assert props["bet"]["exclusiveMinimum"] == spec.BET_EXCLUSIVE_MIN
    assert props[spec.CAMPAIGN_PLAYERS_FIELD]["maxItems"] == spec.CAMPAIGN_PLAYERS_MAX_IDS
    brand = schemas["Brand"]["properties"]["id"]
    assert (brand["minimum"], brand["maximum"]) == (spec.BRAND_ID_MIN, spec.BRAND_ID_MAX)
    paths = provider_openapi()["paths"]
    single = f"{spec.API_PREFIX}/campaign/{{campaignId}}/participant"
    ids = paths[single]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert ids["properties"][spec.FIELD_PLAYER_IDS]["maxItems"] == spec.PARTICIPANT_MAX_IDS
    item = ids["properties"][spec.FIELD_PLAYER_IDS]["items"]
    assert item["maxLength"] == spec.PLAYER_ID_MAX_LENGTH
    batch = paths[single + "/batch"]["post"]["requestBody"]["content"]["application/json"]
    assert batch["schema"]["properties"][spec.FIELD_PLAYER_IDS]["maxItems"] == (
        spec.BATCH_PARTICIPANT_MAX_IDS
    )


def test_what_gptools_sends_matches_the_request_schemas() -> None:
    document = provider_openapi()
    request = models.CampaignRequest(
        type=spec.CAMPAIGN_TYPE_AWARDED_FEATURE,
        name="n",
        request_id="r-1",
        bet_number=spec.BET_NUMBER_MAX,
        game_ids=["g"],
        bet=Decimal("7.55"),
        currency_code="EUR",
        players=["p"],
        start_date="2030-01-01T00:00:00",
        end_date="2030-01-08T00:00:00",
        time_zone="Europe/Malta",
    )
    campaign = _validator(document, "CampaignRequest")
    campaign.validate(json.loads(request.to_wire()))
    # What the model refuses, the schema refuses: a bet of zero, too many rounds, an
    # offset on a wall-clock date.
    for change in ({"bet": 0}, {"betNumber": spec.BET_NUMBER_MAX + 1}):
        assert not campaign.is_valid({**json.loads(request.to_wire()), **change})
    dated = {**json.loads(request.to_wire()), spec.CAMPAIGN_START_FIELD: "2030-01-01T00:00:00Z"}
    assert not campaign.is_valid(dated)
    subscription = models.WebhookSubscription(
        authentication_type="BASIC", username="u", password="p"
    )
    _validator(document, "WebhookSubscription").validate(json.loads(subscription.to_wire()))


def test_what_the_sandbox_answers_reads_as_the_models_read_it(
    fresh_sandbox: RunningSandbox,
) -> None:
    document = provider_openapi()
    account = DEMO_ACCOUNTS["individual"]
    with httpx.Client(
        base_url=fresh_sandbox.base_url, auth=(account.username, account.password)
    ) as http:
        answers = {
            "SelfInfo": http.get(spec.SELF_PATH),
            "Game": http.get(f"{spec.API_PREFIX}/game", params={"gameId": "neon-fruits"}),
            "AwardedFeatureConfigurations": http.get(
                f"{spec.API_PREFIX}/awarded-feature-configurations"
            ),
            "ErrorBody": http.get(f"{spec.API_PREFIX}/game", params={"gameId": "no-such-game"}),
        }
    for name, answer in answers.items():
        _validator(document, name).validate(answer.json())
        getattr(models, name).model_validate(answer.json())


def test_the_receiver_description_takes_the_notification_as_the_model_does() -> None:
    document = receiver_openapi()
    notification = _validator(document, "GameEventNotification")
    body = json.loads(wire(event()))
    notification.validate(body)
    models.GameEventNotification.model_validate(body)
    for bad in (
        {"actionId": "{" + body["actionId"] + "}"},  # spec.ACTION_ID_FORMAT
        {"timestamp": "2026-03-02T10:15:30Z"},  # naive UTC only
        {"timestamp": "2026-13-02T10:15:30"},
        {"bet": "2.10"},  # money is a JSON number
        {"roundId": ""},
    ):
        changed = {**body, **bad}
        assert not notification.is_valid(changed), bad
        with pytest.raises(ValueError):
            models.GameEventNotification.model_validate(changed)


_CAMPAIGN_DATE = provider_openapi()["components"]["schemas"]["CampaignRequest"]["properties"][
    spec.CAMPAIGN_START_FIELD
]["pattern"]


@settings(max_examples=50, derandomize=True, database=None)
@given(
    st.from_regex(TIMESTAMP_PATTERN, fullmatch=True), st.from_regex(_CAMPAIGN_DATE, fullmatch=True)
)
def test_the_date_patterns_allow_what_the_code_reads(timestamp: str, date: str) -> None:
    # The timestamp pattern narrows the model's layout to valid field ranges, never widens it.
    assert models._NAIVE_TS.match(timestamp), timestamp
    try:
        datetime.strptime(date, spec.CAMPAIGN_DATE_FORMAT)
    except ValueError as exc:  # only a day the month does not have (31 April)
        assert "day is out of range" in str(exc) or date[:4] == "0000", date


def test_the_receiver_description_names_every_answer() -> None:
    document = receiver_openapi(path="/hooks", auth_kind="basic", max_body_bytes=1000)
    post = document["paths"]["/hooks"]["post"]
    assert set(post["responses"]) == {"200", "400", "401", "413", "415", "422", "431", "503"}
    assert post["security"] == [{"basicAuth": []}]
    assert "1000 bytes" in post["responses"]["413"]["description"]
    assert "Retry-After" in post["responses"]["503"]["headers"]
    assert "WWW-Authenticate" in post["responses"]["401"]["headers"]
    for method in ("get", "put", "patch", "delete"):
        assert "405" in document["paths"]["/hooks"][method]["responses"]
    assert "404" not in post["responses"]  # another path: components.responses.NotFound
    assert document["components"]["responses"]["NotFound"]
    assert receiver_openapi(auth_kind="NONE")["paths"][spec.DEFAULT_WEBHOOK_PATH]["post"][
        "security"
    ] == [{}]
    with pytest.raises(ValueError, match="auth_kind"):
        receiver_openapi(auth_kind="digest")


# --------------------------------------------------------------------------------------
# What the servers serve
# --------------------------------------------------------------------------------------


def test_the_sandbox_serves_the_provider_description_without_credentials(
    fresh_sandbox: RunningSandbox,
) -> None:
    answer = httpx.get(fresh_sandbox.base_url + OPENAPI_PATH)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == provider_openapi()
    assert not [r for r in fresh_sandbox.state.requests if r.path == OPENAPI_PATH]


def test_the_receiver_serves_its_description_where_it_serves_metrics(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'r.sqlite3'}"
    auth = ReceiverAuth.basic("u", "p")
    for public in (True, False):
        receiver = WebhookReceiver(store, auth=auth, path="/hooks", metrics_public=public)
        with serve_in_thread(receiver, "/hooks") as server:
            answer = httpx.get(server.base_url + OPENAPI_PATH)
            metrics = httpx.get(server.base_url + "/metrics")
        assert metrics.status_code == answer.status_code == (200 if public else 404)
        if public:
            expected = receiver_openapi(path="/hooks", auth_kind="BASIC")
            assert answer.json() == expected


def test_the_metrics_port_serves_the_description() -> None:
    document = to_json(receiver_openapi(auth_kind="BEARER"))
    server = serve_metrics("127.0.0.1", 0, openapi=document)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        answer = httpx.get(base + OPENAPI_PATH)
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/json"
        assert answer.content == document
        assert httpx.get(base + "/metrics").status_code == 200
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_webhooks_serve_puts_the_description_on_the_metrics_port(
    receiver_process: Any, tmp_path: Path
) -> None:
    from tests.webhooks.conftest import free_port

    metrics_port = free_port()
    rp: ReceiverProcess = receiver_process(
        f"sqlite:///{tmp_path / 'r.sqlite3'}",
        args=("--metrics-port", str(metrics_port), "--max-body-bytes", "2048"),
    )
    served = httpx.get(f"http://127.0.0.1:{metrics_port}{OPENAPI_PATH}")
    assert served.status_code == 200
    assert served.json() == receiver_openapi(auth_kind="BEARER", max_body_bytes=2048)
    assert httpx.get(rp.base_url + OPENAPI_PATH).status_code == 404
