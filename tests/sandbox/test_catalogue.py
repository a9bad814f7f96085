"""The game and awarded-feature-configuration endpoints and the catalogue behind them."""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest

from gptools import spec
from gptools.models import loads_wire
from gptools.sandbox import CATALOGUE, CURRENCIES
from gptools.sandbox._catalogue import feature_cost
from tests.sandbox.conftest import assert_error, auth, path


def test_catalogue_is_as_large_as_the_issue_asks() -> None:
    assert len(CATALOGUE) >= 6
    multipliers = {f.price_multiplier for g in CATALOGUE for f in g.buy_features}
    assert len(multipliers) >= 4 and any(m != m.to_integral_value() for m in multipliers)
    assert len(CURRENCIES) >= 6 and {"JPY", "KWD"} <= set(CURRENCIES)


def test_game_answers_one_game_with_exact_numbers(http: httpx.Client) -> None:
    response = http.get(path("game"), params={"gameId": "neon-fruits"}, auth=auth("individual"))
    assert response.status_code == 200
    # Exact digits on the wire: 0.10 stays 0.10, KWD keeps three decimals.
    assert '"priceMultiplier":75.5' in response.text
    assert '"EUR":[0.10,0.15,' in response.text
    assert '"KWD":[0.050,0.100,' in response.text
    assert '"JPY":[10,20,' in response.text
    game = loads_wire(response.content)
    assert game["gameId"] == "neon-fruits"
    assert game["buyFeatures"] == [
        {"buyFeatureType": "FREE_SPINS", "priceMultiplier": Decimal("75.5")}
    ]
    assert set(game["betSizes"]) == set(CURRENCIES)


def test_game_without_game_id_lists_every_game(http: httpx.Client) -> None:
    response = http.get(path("game", 201), auth=auth("partner"))
    assert response.status_code == 200
    assert [g["gameId"] for g in response.json()["content"]] == [g.game_id for g in CATALOGUE]


@pytest.mark.parametrize("endpoint", ["game", "awarded-feature-configurations"])
def test_unknown_game_is_game_not_found(http: httpx.Client, endpoint: str) -> None:
    response = http.get(
        path(endpoint, 201), params={"gameId": "no-such-game"}, auth=auth("partner")
    )
    body = assert_error(response, spec.GAME_NOT_FOUND_STATUS, spec.GAME_NOT_FOUND_CODE)
    assert "no-such-game" in body["message"]


def test_configurations_derive_from_the_game(http: httpx.Client) -> None:
    # "One entry per available feature cost": equal costs of two features or base bets
    # (golden-pharaoh: 100 × 0.20 = 200 × 0.10) are one entry, not a repeated one.
    products = [
        (g.game_id, feature_cost(b, f.price_multiplier, currency), currency)
        for g in CATALOGUE
        for currency, bets in g.bet_sizes.items()
        for f in g.buy_features
        for b in bets
    ]
    assert len(set(products)) < len(products)  # the catalogue has such coincidences
    expected = [
        {"gameId": g, "bet": bet, "currencyCode": c} for g, bet, c in dict.fromkeys(products)
    ]
    response = http.get(path("awarded-feature-configurations"), auth=auth("individual"))
    content = loads_wire(response.content)["content"]
    assert content == expected
    triples = [(e["gameId"], e["bet"], e["currencyCode"]) for e in content]
    assert len(triples) == len(set(triples))
    for entry in expected:
        places = {"JPY": 0, "KWD": 3}.get(entry["currencyCode"], 2)
        assert entry["bet"].as_tuple().exponent == -places
    for game in CATALOGUE:
        response = http.get(
            path("awarded-feature-configurations"),
            params={"gameId": game.game_id, "currencyCode": "KWD"},
            auth=auth("individual"),
        )
        assert loads_wire(response.content)["content"] == [
            e for e in expected if e["gameId"] == game.game_id and e["currencyCode"] == "KWD"
        ]


@pytest.mark.parametrize(
    ("game_id", "currency", "expected"),
    [
        ("neon-fruits", "EUR", "11.33"),  # 0.15 × 75.5 = 11.325, half up
        ("dragon-pearls", "JPY", "1563"),  # 25 × 62.5 = 1562.5, half up, no decimals
        ("neon-fruits", "KWD", "3.775"),  # 0.050 × 75.5, three decimals
        ("golden-pharaoh", "KWD", "200.000"),  # 1.000 × 200 keeps KWD's three decimals
    ],
)
def test_feature_costs_round_to_the_currency(
    http: httpx.Client, game_id: str, currency: str, expected: str
) -> None:
    response = http.get(
        path("awarded-feature-configurations"),
        params={"gameId": game_id, "currencyCode": currency},
        auth=auth("individual"),
    )
    assert f'"bet":{expected},' in response.text


def test_configurations_filters_are_optional(http: httpx.Client) -> None:
    everything = http.get(path("awarded-feature-configurations"), auth=auth("individual"))
    by_currency = http.get(
        path("awarded-feature-configurations"),
        params={"currencyCode": "JPY"},
        auth=auth("individual"),
    )
    all_entries = everything.json()["content"]
    jpy = by_currency.json()["content"]
    assert jpy == [e for e in all_entries if e["currencyCode"] == "JPY"]
    assert {e["gameId"] for e in all_entries} == {g.game_id for g in CATALOGUE if g.buy_features}


def test_game_without_buy_feature_or_currency_has_no_configurations(http: httpx.Client) -> None:
    for game_id, currency in [
        ("classic-sevens", "EUR"),
        ("viking-raid", "KWD"),
        ("neon-fruits", "XXX"),
    ]:
        response = http.get(
            path("awarded-feature-configurations"),
            params={"gameId": game_id, "currencyCode": currency},
            auth=auth("individual"),
        )
        assert response.json() == {"content": []}
