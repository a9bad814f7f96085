"""The aggregator (PARTNER, 30 brands) and the supplier (THIRD_PARTY): each brand offers
its own games and currencies, drawn from a fixed seed."""

from __future__ import annotations

import httpx
import pytest

from gptools import spec
from gptools.sandbox import DEMO_ACCOUNTS, RunningSandbox
from gptools.sandbox._accounts import BRANDS
from gptools.sandbox._brand_offers import (
    AGGREGATOR_BRAND_IDS,
    BRAND_OFFERS,
    COMMON_CURRENCY,
    COMMON_GAMES,
    _draw,
    brand_offer,
)
from gptools.sandbox._catalogue import CATALOGUE, CURRENCIES
from tests.sandbox.conftest import assert_error, auth, campaign_body, path


def test_the_aggregator_covers_30_brands_and_the_supplier_a_few() -> None:
    aggregator, supplier = DEMO_ACCOUNTS["aggregator"], DEMO_ACCOUNTS["supplier"]
    assert (aggregator.principal_type, aggregator.brand_ids) == (
        "PARTNER",
        tuple(range(2001, 2031)),
    )
    assert (supplier.principal_type, supplier.brand_ids) == (
        "THIRD_PARTY",
        (2029, 2030, 3001, 3002, 3003, 3004),
    )
    assert len(set(AGGREGATOR_BRAND_IDS)) == 30


def test_offers_are_seeded_and_differ_between_brands() -> None:
    assert _draw() == dict(BRAND_OFFERS)  # the same draw every time
    # A few values pinned: a change of the draw changes what the docs and tests rely on.
    assert BRAND_OFFERS[2001].currencies == ("EUR", "JPY")
    assert BRAND_OFFERS[2004].game_ids == ("golden-pharaoh", "neon-fruits")
    assert BRAND_OFFERS[2007].currencies == ("EUR",)
    assert BRANDS[2001] == "Amber Spins"
    for offer in BRAND_OFFERS.values():
        assert COMMON_CURRENCY in offer.currencies
        assert set(COMMON_GAMES) <= set(offer.game_ids)
    assert len({o.currencies for o in BRAND_OFFERS.values()}) > 10
    assert len({o.game_ids for o in BRAND_OFFERS.values()}) > 10
    # The original brands offer everything.
    everything = brand_offer(201)
    assert everything.game_ids == tuple(g.game_id for g in CATALOGUE)
    assert everything.currencies == CURRENCIES


def test_self_lists_the_aggregators_brands(http: httpx.Client) -> None:
    body = http.get("/api/v1/self", auth=auth("aggregator")).json()
    assert body["principalType"] == "PARTNER"
    assert [b["id"] for b in body["allowedBrands"]] == list(range(2001, 2031))
    assert body["allowedBrands"][0] == {"id": 2001, "name": "Amber Spins"}


def test_a_game_the_brand_does_not_offer_is_not_found_there(http: httpx.Client) -> None:
    # viking-raid: offered on 2001, not on 2002.
    ok = http.get(path("game", 2001), params={"gameId": "viking-raid"}, auth=auth("aggregator"))
    assert ok.status_code == 200
    assert sorted(ok.json()["betSizes"]) == ["EUR", "JPY"]  # 2001's currencies only
    missing = http.get(
        path("game", 2002), params={"gameId": "viking-raid"}, auth=auth("aggregator")
    )
    body = assert_error(missing, spec.GAME_NOT_FOUND_STATUS, spec.GAME_NOT_FOUND_CODE)
    assert "brand 2002" in body["message"]
    listing = http.get(path("game", 2004), auth=auth("aggregator")).json()
    assert [g["gameId"] for g in listing["content"]] == ["golden-pharaoh", "neon-fruits"]


def test_configurations_keep_to_the_brands_currencies(http: httpx.Client) -> None:
    answer = http.get(
        path("awarded-feature-configurations", 2007),
        params={"gameId": "neon-fruits"},
        auth=auth("aggregator"),
    ).json()
    assert {c["currencyCode"] for c in answer["content"]} == {"EUR"}
    none = http.get(
        path("awarded-feature-configurations", 2007),
        params={"gameId": "neon-fruits", "currencyCode": "USD"},
        auth=auth("aggregator"),
    ).json()
    assert none == {"content": []}


def test_a_campaign_in_a_currency_or_game_the_brand_lacks_is_refused(
    http: httpx.Client,
) -> None:
    refused = http.post(
        path("campaign", 2007),
        json=campaign_body(currencyCode="USD", bet=7.55),
        auth=auth("aggregator"),
    )
    body = assert_error(refused, spec.VALIDATION_ERROR_STATUS, spec.VALIDATION_ERROR_CODE)
    assert body["message"] == "currencyCode 'USD' is not used on brand 2007; it uses EUR"
    game = http.post(
        path("campaign", 2002),
        json=campaign_body(gameIds=["golden-pharaoh", "viking-raid"], bet=10.0, requestId="r2"),
        auth=auth("aggregator"),
    )
    body = assert_error(game, spec.VALIDATION_ERROR_STATUS, spec.VALIDATION_ERROR_CODE)
    assert body["message"] == "gameIds[1] 'viking-raid' is not offered on brand 2002"
    created = http.post(path("campaign", 2007), json=campaign_body(), auth=auth("aggregator"))
    assert created.status_code == 201, created.text


def test_the_supplier_acts_on_its_brands_only(http: httpx.Client) -> None:
    assert http.get(path("game", 3001), params={"gameId": "neon-fruits"}, auth=auth("supplier"))
    refused = http.get(path("game", 2001), params={"gameId": "neon-fruits"}, auth=auth("supplier"))
    assert_error(refused, 403, spec.CODE_BRAND_NOT_ALLOWED)
    assert_error(http.get(path("game"), auth=auth("supplier")), 400, spec.CODE_BRAND_REQUIRED)


def test_connect_logs_in_as_the_account_the_environment_names(
    fresh_sandbox: RunningSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gptools import session

    monkeypatch.setenv("GP_BASE_URL", "")
    monkeypatch.setenv(session.SANDBOX_URL_ENV, fresh_sandbox.base_url)
    monkeypatch.setenv(session.SANDBOX_ACCOUNT_ENV, "aggregator")
    session.stop_embedded_sandbox()
    try:
        with session.connect() as client:
            me = client.self()
            assert (me.principal_type, len(me.brand_ids)) == ("PARTNER", 30)
        with session.connect("supplier") as client:
            assert client.self().principal_type == "THIRD_PARTY"
        monkeypatch.delenv(session.SANDBOX_ACCOUNT_ENV)
        with session.connect() as client:
            assert sorted(client.self().brand_ids) == [201, 202, 203]  # partner, as before
    finally:
        session.stop_embedded_sandbox()
