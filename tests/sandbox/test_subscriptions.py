"""The assumed webhook-subscription endpoint: read, create, update; validation; no secret echo."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from gptools import spec
from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox
from tests.sandbox.conftest import assert_error, auth, path

ENDPOINT = spec.ENDPOINT_WEBHOOK_SUBSCRIPTION
BEARER = {
    "callbackUrl": "https://hooks.example.invalid/gp",
    "authenticationType": "BEARER",
    "apiKey": "s3cret-key",
}


@pytest.mark.parametrize(
    ("key", "brand"),
    [
        ("individual", None),
        ("individual", 101),
        ("partner", 202),
        ("third_party", 301),
        ("internal", 203),
    ],
)
def test_create_read_update(
    http: httpx.Client, fresh_sandbox: RunningSandbox, key: str, brand: int | None
) -> None:
    url = path(ENDPOINT, brand)
    brand_id = brand if brand is not None else 101
    assert_error(http.get(url, auth=auth(key)), spec.NOT_FOUND_STATUS, spec.NOT_FOUND_CODE)
    created = http.post(url, json=BEARER, auth=auth(key))
    assert created.status_code == 201, created.text
    assert created.json() == {
        **BEARER,
        "apiKey": "****",
        "brandId": brand_id,
        "deliveryUrl": BEARER["callbackUrl"],
    }
    assert "s3cret" not in http.get(url, auth=auth(key)).text
    assert fresh_sandbox.state.subscriptions[brand_id]["apiKey"] == "s3cret-key"

    basic = {"authenticationType": "BASIC", "username": "u", "password": "pw-secret"}
    updated = http.put(url, json=basic, auth=auth(key))
    assert updated.status_code == 200, updated.text
    assert updated.json()["password"] == "****" and "pw-secret" not in updated.text
    assert http.get(url, auth=auth(key)).json()["authenticationType"] == "BASIC"
    assert fresh_sandbox.state.subscriptions[brand_id] == basic


def test_create_twice_is_a_conflict_and_update_needs_one(http: httpx.Client) -> None:
    url = path(ENDPOINT, 201)
    assert_error(http.put(url, json=BEARER, auth=auth("partner")), 404, spec.NOT_FOUND_CODE)
    assert http.post(url, json=BEARER, auth=auth("partner")).status_code == 201
    assert_error(
        http.post(url, json=BEARER, auth=auth("partner")),
        spec.SUBSCRIPTION_EXISTS_STATUS,
        spec.SUBSCRIPTION_EXISTS_CODE,
    )
    # Subscriptions are per brand.
    assert http.get(path(ENDPOINT, 202), auth=auth("partner")).status_code == 404


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"callbackUrl": "http://hooks.example.invalid/gp"}, "callbackUrl must be an HTTPS URL"),
        ({"callbackUrl": "http://127.0.0.1:9/gp"}, "callbackUrl must be an HTTPS URL"),
        ({"callbackUrl": "https://"}, "callbackUrl must be an HTTPS URL"),
        ({"callbackUrl": 5}, "callbackUrl must be an HTTPS URL"),
        ({"authenticationType": "BEARER"}, "BEARER requires apiKey"),
        ({"authenticationType": "BEARER", "apiKey": ""}, "BEARER requires apiKey"),
        ({"authenticationType": "BASIC", "username": "u"}, "BASIC requires password"),
        ({"authenticationType": "BASIC", "password": "p"}, "BASIC requires username"),
        ({"authenticationType": "OAUTH"}, "authenticationType 'OAUTH' is not one of"),
        ({}, "authenticationType is required"),
        ({"callbackUrl": "https://hooks.example.invalid/gp"}, "authenticationType is required"),
        (
            {"callbackUrl": "https:///gp", "authenticationType": "NONE"},
            "callbackUrl must be an HTTPS URL",
        ),
        ({"authenticationType": "NONE", "apiKey": 7}, "apiKey must be a string"),
    ],
)
def test_validation(http: httpx.Client, body: dict[str, Any], fragment: str) -> None:
    response = http.post(path(ENDPOINT), json=body, auth=auth("individual"))
    message = assert_error(response, 400, spec.VALIDATION_ERROR_CODE)["message"]
    assert fragment in message, message


def test_none_without_callback_goes_to_the_wallet() -> None:
    config = SandboxConfig(wallet_url="https://wallet.example.invalid/")
    with run_sandbox(config) as sb, httpx.Client(base_url=sb.base_url) as http:
        response = http.post(
            path(ENDPOINT), json={"authenticationType": "NONE"}, auth=auth("individual")
        )
        assert response.status_code == 201, response.text
        assert response.json() == {
            "authenticationType": "NONE",
            "brandId": 101,
            "deliveryUrl": "https://wallet.example.invalid/v1/game-action-events",
        }
        assert sb.state.wallet_url == "https://wallet.example.invalid/"


def test_insecure_loopback_callbacks_only_when_allowed() -> None:
    config = SandboxConfig(allow_insecure_callbacks=True)
    with run_sandbox(config) as sb, httpx.Client(base_url=sb.base_url) as http:
        ok = http.post(
            path(ENDPOINT),
            json={"callbackUrl": "http://127.0.0.1:9/hook", "authenticationType": "NONE"},
            auth=auth("individual"),
        )
        assert ok.status_code == 201, ok.text
        remote = http.put(
            path(ENDPOINT),
            json={"callbackUrl": "http://example.invalid/hook", "authenticationType": "NONE"},
            auth=auth("individual"),
        )
        assert "loopback" in assert_error(remote, 400, spec.VALIDATION_ERROR_CODE)["message"]
