"""The sandbox's game catalogue, and the awarded-feature configurations derived from it.

Seven games, seven currencies (EUR, USD, GBP, SEK, BRL with 2 decimals, JPY with 0, KWD
with 3), buy features with price multipliers from 50 to 200 including fractional ones
(62.5, 75.5). ``classic-sevens`` has no buy feature and ``viking-raid`` is not offered in
KWD, so empty answers are exercised too.

A feature cost is base bet × price multiplier rounded to the currency's minor units
(the exponent comes from Babel: JPY 0, EUR 2, KWD 3) half up, see
:data:`gptools.spec.FEATURE_COST_ROUNDING`. Some pairs land exactly on a half
(75.5 × EUR 0.15 = 11.325 -> 11.33; 62.5 × JPY 25 = 1562.5 -> 1563), so the rounding rule
is visible.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from types import MappingProxyType
from typing import Any

from babel.numbers import get_currency_precision

from gptools import spec


@dataclass(frozen=True, slots=True)
class CatalogueBuyFeature:
    """A buy feature: its type name and the price multiplier of the base bet."""

    buy_feature_type: str
    price_multiplier: Decimal


@dataclass(frozen=True, slots=True)
class CatalogueGame:
    """A game of the catalogue: id, display name, buy features and base bets per currency."""

    game_id: str
    name: str
    buy_features: tuple[CatalogueBuyFeature, ...]
    bet_sizes: Mapping[str, tuple[Decimal, ...]]

    def to_json(self) -> dict[str, Any]:
        """The game object of ``GET /api/v1/game`` (Decimals stay Decimals)."""
        return {
            "gameId": self.game_id,
            "name": self.name,
            "buyFeatures": [
                {"buyFeatureType": f.buy_feature_type, "priceMultiplier": f.price_multiplier}
                for f in self.buy_features
            ],
            "betSizes": {cur: list(bets) for cur, bets in self.bet_sizes.items()},
        }


def _d(*values: str) -> tuple[Decimal, ...]:
    return tuple(Decimal(v) for v in values)


_STANDARD_BETS: Mapping[str, tuple[Decimal, ...]] = MappingProxyType(
    {
        "EUR": _d("0.10", "0.15", "0.20", "0.50", "1.00", "2.00", "5.00"),
        "USD": _d("0.10", "0.20", "0.50", "1.00", "2.00", "5.00"),
        "GBP": _d("0.10", "0.20", "0.40", "1.00", "2.00"),
        "SEK": _d("1", "2", "5", "10", "20"),
        "BRL": _d("0.50", "1.00", "2.50", "5.00"),
        "JPY": _d("10", "20", "25", "50", "100", "200"),
        "KWD": _d("0.050", "0.100", "0.250", "0.500", "1.000"),
    }
)


def _bf(kind: str, multiplier: str) -> CatalogueBuyFeature:
    return CatalogueBuyFeature(kind, Decimal(multiplier))


#: The games of the sandbox, in a fixed order.
CATALOGUE: tuple[CatalogueGame, ...] = (
    CatalogueGame(
        "golden-pharaoh",
        "Golden Pharaoh",
        (_bf("FREE_SPINS", "100"), _bf("SUPER_FREE_SPINS", "200")),
        _STANDARD_BETS,
    ),
    CatalogueGame("neon-fruits", "Neon Fruits", (_bf("FREE_SPINS", "75.5"),), _STANDARD_BETS),
    CatalogueGame(
        "viking-raid",
        "Viking Raid",
        (_bf("BONUS_GAME", "50"), _bf("FREE_SPINS", "120")),
        MappingProxyType({k: v for k, v in _STANDARD_BETS.items() if k != "KWD"}),
    ),
    CatalogueGame(
        "dragon-pearls",
        "Dragon Pearls",
        (_bf("HOLD_AND_WIN", "62.5"), _bf("FREE_SPINS", "150")),
        _STANDARD_BETS,
    ),
    CatalogueGame(
        "sweet-cascade",
        "Sweet Cascade",
        (_bf("FREE_SPINS", "100"), _bf("ANTE_FREE_SPINS", "120")),
        _STANDARD_BETS,
    ),
    CatalogueGame("wild-safari", "Wild Safari", (_bf("FREE_SPINS", "80"),), _STANDARD_BETS),
    CatalogueGame("classic-sevens", "Classic Sevens", (), _STANDARD_BETS),
)

#: The games by id.
GAMES: Mapping[str, CatalogueGame] = MappingProxyType({g.game_id: g for g in CATALOGUE})

#: Every currency some game offers, sorted.
CURRENCIES: tuple[str, ...] = tuple(sorted({c for g in CATALOGUE for c in g.bet_sizes}))


@cache
def minor_unit_exponent(currency_code: str) -> Decimal:
    """The quantum of a currency's minor unit (``Decimal('0.01')`` for EUR, ``1`` for JPY)."""
    return Decimal(1).scaleb(-get_currency_precision(currency_code))


def feature_cost(base_bet: Decimal, multiplier: Decimal, currency_code: str) -> Decimal:
    """Base bet × price multiplier, rounded half up to the currency's minor units."""
    return (base_bet * multiplier).quantize(
        minor_unit_exponent(currency_code), rounding=spec.FEATURE_COST_ROUNDING
    )


def feature_costs(
    game_id: str | None = None, currency_code: str | None = None
) -> Iterator[tuple[str, Decimal, str]]:
    """Every ``(game id, feature cost, currency)`` of the catalogue, filters optional.

    "One entry per available feature cost": two buy features or base bets that give the
    same cost (100 × 0.20 and 200 × 0.10) give one entry, at its first appearance in
    catalogue order (buy feature, then base bet).
    """
    games = CATALOGUE if game_id is None else tuple(g for g in CATALOGUE if g.game_id == game_id)
    for game in games:
        for currency, bets in game.bet_sizes.items():
            if currency_code is not None and currency != currency_code:
                continue
            costs = dict.fromkeys(
                feature_cost(base, feature.price_multiplier, currency)
                for feature in game.buy_features
                for base in bets
            )
            for cost in costs:
                yield game.game_id, cost, currency
