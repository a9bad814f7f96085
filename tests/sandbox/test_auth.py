"""Authentication rules 1-7, both path forms for every user type, and the Errors table."""

from __future__ import annotations

import base64

import httpx
import pytest

from gptools import spec
from gptools.sandbox import DEMO_ACCOUNTS, RunningSandbox
from gptools.sandbox._accounts import BRANDS, UNCOVERED_BRAND_IDS
from tests.sandbox.conftest import assert_error, auth, campaign_body, path

KEYS = ["individual", "partner", "third_party", "internal"]


# --- Rule 1: HTTP Basic on every request; rule 6: 401 NOT_AUTHORIZED ----------------------


def test_rule1_basic_header_authenticates(http: httpx.Client) -> None:
    account = DEMO_ACCOUNTS["partner"]
    token = base64.b64encode(f"{account.username}:{account.password}".encode()).decode()
    response = http.get("/api/v1/self", headers={"Authorization": f"Basic {token}"})
    assert response.status_code == 200
    assert response.json()["principalType"] == "PARTNER"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic " + base64.b64encode(b"demo-partner:wrong").decode()},
        {"Authorization": "Basic " + base64.b64encode(b"nobody:partner-demo-pass").decode()},
        {"Authorization": "Basic " + base64.b64encode(b"demo-partner").decode()},
        {"Authorization": "Basic !!!not-base64"},
        {"Authorization": "Bearer partner-demo-pass"},
    ],
    ids=["missing", "wrong-password", "unknown-user", "no-colon", "garbage", "bearer"],
)
@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/self",
        "/api/v1/brands/201/game?gameId=neon-fruits",
        "/api/v1/campaign/CMP-000001/participant",
    ],
)
def test_rule6_failed_authentication_is_401(
    http: httpx.Client, headers: dict[str, str], url: str
) -> None:
    method = "POST" if url.endswith("participant") else "GET"
    response = http.request(method, url, headers=headers, json={"playerIds": ["p"]})
    assert_error(response, 401, spec.CODE_NOT_AUTHORIZED)


def test_rule6_scheme_is_case_insensitive(http: httpx.Client) -> None:
    token = base64.b64encode(b"demo-individual:individual-demo-pass").decode()
    assert http.get("/api/v1/self", headers={"Authorization": f"basic {token}"}).is_success


# --- Rules 3 and 7: types, brands, self ---------------------------------------------------


@pytest.mark.parametrize("key", KEYS)
def test_rule7_self_lists_type_and_brands_for_every_account(http: httpx.Client, key: str) -> None:
    account = DEMO_ACCOUNTS[key]
    response = http.get("/api/v1/self", auth=auth(key))
    assert response.status_code == 200
    assert response.json() == {
        "allowedBrands": [{"id": b, "name": BRANDS[b]} for b in account.brand_ids],
        "principalType": account.principal_type,
    }


def test_rule3_accounts_are_as_documented() -> None:
    types = {k: (a.principal_type, len(a.brand_ids)) for k, a in DEMO_ACCOUNTS.items()}
    assert types == {
        "individual": ("INDIVIDUAL", 1),
        "partner": ("PARTNER", 3),
        "third_party": ("THIRD_PARTY", 2),
        "internal": ("INTERNAL", 5),
        "aggregator": ("PARTNER", 30),
        "supplier": ("THIRD_PARTY", 6),
    }
    covered = {b for a in DEMO_ACCOUNTS.values() for b in a.brand_ids}
    assert UNCOVERED_BRAND_IDS and not covered & set(UNCOVERED_BRAND_IDS)
    assert set(UNCOVERED_BRAND_IDS) <= set(BRANDS)


def test_self_has_no_explicit_form(http: httpx.Client) -> None:
    assert_error(
        http.get("/api/v1/brands/101/self", auth=auth("individual")), 404, spec.NOT_FOUND_CODE
    )


# --- Both path forms for every user type ------------------------------------------------


@pytest.mark.parametrize("key", KEYS)
def test_explicit_form_works_for_every_type_and_covered_brand(http: httpx.Client, key: str) -> None:
    for brand in DEMO_ACCOUNTS[key].brand_ids:
        response = http.get(path("game", brand), params={"gameId": "neon-fruits"}, auth=auth(key))
        assert response.status_code == 200, (brand, response.text)
        assert http.get(
            path("awarded-feature-configurations", brand),
            auth=auth(key),
            params={"gameId": "neon-fruits", "currencyCode": "EUR"},
        ).is_success


def test_individual_implicit_form_resolves_its_brand(
    http: httpx.Client, fresh_sandbox: RunningSandbox
) -> None:
    response = http.post(path("campaign"), json=campaign_body(), auth=auth("individual"))
    assert response.status_code == 201, response.text
    assert fresh_sandbox.state.campaigns["CMP-000001"].brand_id == 101
    assert fresh_sandbox.state.requests[-1].brand_id == 101


def test_individual_explicit_form_is_the_same_brand(
    http: httpx.Client, fresh_sandbox: RunningSandbox
) -> None:
    response = http.post(path("campaign", 101), json=campaign_body(), auth=auth("individual"))
    assert response.status_code == 201, response.text
    # Same brand, same requestId: the implicit form finds the campaign the explicit one made.
    again = http.post(path("campaign"), json=campaign_body(), auth=auth("individual"))
    assert again.json()["campaignId"] == response.json()["campaignId"]
    assert len(fresh_sandbox.state.campaigns) == 1


# --- Rule 4: BRAND_REQUIRED -----------------------------------------------------------


@pytest.mark.parametrize("key", ["partner", "third_party", "internal"])
@pytest.mark.parametrize(
    ("method", "endpoint"),
    [
        ("GET", "game?gameId=neon-fruits"),
        ("GET", "awarded-feature-configurations?gameId=neon-fruits&currencyCode=EUR"),
        ("POST", "campaign"),
        ("POST", "freeround/campaign"),
        ("POST", "campaign/CMP-000001/participant"),
        ("GET", "webhook-subscription"),
    ],
)
def test_rule4_implicit_form_needs_a_brand(
    http: httpx.Client, key: str, method: str, endpoint: str
) -> None:
    response = http.request(method, f"/api/v1/{endpoint}", auth=auth(key), json=campaign_body())
    body = assert_error(response, 400, spec.CODE_BRAND_REQUIRED)
    assert "/api/v1/brands/" in body["message"]


# --- Rule 5: BRAND_NOT_ALLOWED --------------------------------------------------------


@pytest.mark.parametrize("key", KEYS)
def test_rule5_uncovered_brand_is_refused(http: httpx.Client, key: str) -> None:
    covered = set(DEMO_ACCOUNTS[key].brand_ids)
    for brand in [*UNCOVERED_BRAND_IDS, *(b for b in BRANDS if b not in covered), 999999]:
        response = http.get(path("game", brand), params={"gameId": "neon-fruits"}, auth=auth(key))
        assert_error(response, 403, spec.CODE_BRAND_NOT_ALLOWED)


@pytest.mark.parametrize("brand", ["abc", "-1", "201x", "0201 "])
def test_rule5_non_integer_brand_is_refused(http: httpx.Client, brand: str) -> None:
    response = http.get(path("game", brand), params={"gameId": "neon-fruits"}, auth=auth("partner"))
    assert_error(response, 403, spec.CODE_BRAND_NOT_ALLOWED)


def test_third_party_shares_a_brand_with_the_partner(
    http: httpx.Client, fresh_sandbox: RunningSandbox
) -> None:
    created = http.post(path("campaign", 202), json=campaign_body(), auth=auth("partner"))
    assert created.status_code == 201
    campaign_id = created.json()["campaignId"]
    added = http.post(
        path(f"campaign/{campaign_id}/participant", 202),
        json={"playerIds": ["p1"]},
        auth=auth("third_party"),
    )
    assert added.status_code == 200, added.text
    # The partner's campaign is not visible through another brand, even a covered one.
    elsewhere = http.post(
        path(f"campaign/{campaign_id}/participant", 201),
        json={"playerIds": ["p1"]},
        auth=auth("partner"),
    )
    assert_error(elsewhere, 403, spec.CODE_INVALID_REQUEST)


# --- The rest of the Errors table ----------------------------------------------------


def test_errors_invalid_request_for_unknown_campaign(http: httpx.Client) -> None:
    response = http.post(
        path("campaign/CMP-999999/participant", 201),
        json={"playerIds": ["p1"]},
        auth=auth("partner"),
    )
    body = assert_error(response, 403, spec.CODE_INVALID_REQUEST)
    assert "CMP-999999" in body["message"]
    assert "invalid or does not exist" in body["message"]


def test_errors_unknown_path_and_method(http: httpx.Client) -> None:
    assert_error(
        http.get("/api/v1/nothing-here", auth=auth("individual")), 404, spec.NOT_FOUND_CODE
    )
    assert_error(http.delete("/api/v1/self", auth=auth("individual")), 405, "METHOD_NOT_ALLOWED")
