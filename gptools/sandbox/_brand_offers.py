"""What each sandbox brand offers: its games and its currencies.

The original brands (101, 201-203, 301 and the uncovered 901-903) offer the whole
catalogue. The aggregator's 30 brands (:data:`AGGREGATOR_BRAND_IDS`, 2001-2030) and the
supplier's (:data:`SUPPLIER_BRAND_IDS`, 3001-3004) each offer their own part of it, drawn
once from a fixed seed (:data:`BRAND_OFFER_SEED`), so every run and every machine sees the
same brands:

- every such brand uses EUR and offers ``golden-pharaoh`` and ``neon-fruits``, so a plan
  over all of them has something in common;
- each adds 0-3 more currencies of the catalogue's and each other game with probability
  3/5; a game a brand does not offer is ``GAME_NOT_FOUND`` on that brand, and a currency
  it does not use is missing from the game's ``betSizes`` and configurations there.

The document says nothing of brands offering different games or currencies; the sandbox
does it so that a multi-brand plan meets the differences a real aggregator meets.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from gptools.sandbox._catalogue import CATALOGUE, CURRENCIES

#: The seed every brand offer is drawn from (fixed: the brands are part of the sandbox).
BRAND_OFFER_SEED = 39
#: The aggregator's (PARTNER) brands.
AGGREGATOR_BRAND_IDS: tuple[int, ...] = tuple(range(2001, 2031))
#: The supplier's (THIRD_PARTY) brands.
SUPPLIER_BRAND_IDS: tuple[int, ...] = (3001, 3002, 3003, 3004)
#: What every brand with an offer of its own has.
COMMON_GAMES: tuple[str, ...] = ("golden-pharaoh", "neon-fruits")
COMMON_CURRENCY = "EUR"

_PLACES = (
    "Amber", "Baltic", "Cobalt", "Delta", "Ember", "Fjord", "Granite", "Harbor", "Ivory",
    "Jade", "Krona", "Lotus", "Meridian", "Nimbus", "Onyx", "Pampas", "Quartz", "Rio",
    "Sakura", "Tundra", "Umber", "Vega", "Willow", "Xenon", "Yukon", "Zephyr", "Atlas",
    "Boreal", "Coral", "Dune", "Echo", "Flint", "Gale", "Halo",
)  # fmt: skip
_KINDS = ("Casino", "Slots", "Spins", "Play", "Bet", "Games")


@dataclass(frozen=True, slots=True)
class BrandOffer:
    """One brand's name, games (catalogue order) and currencies (sorted)."""

    brand_id: int
    name: str
    game_ids: tuple[str, ...]
    currencies: tuple[str, ...]

    def offers(self, game_id: str) -> bool:
        """Whether the brand offers the game."""
        return game_id in self.game_ids

    def uses(self, currency: str) -> bool:
        """Whether the brand uses the currency."""
        return currency in self.currencies


def _draw() -> dict[int, BrandOffer]:
    rng = random.Random(BRAND_OFFER_SEED)
    others = [c for c in CURRENCIES if c != COMMON_CURRENCY]
    offers: dict[int, BrandOffer] = {}
    for i, brand in enumerate((*AGGREGATOR_BRAND_IDS, *SUPPLIER_BRAND_IDS)):
        extra = rng.sample(others, rng.randint(0, 3))
        games = tuple(
            g.game_id for g in CATALOGUE if g.game_id in COMMON_GAMES or rng.random() < 0.6
        )
        name = f"{_PLACES[i]} {rng.choice(_KINDS)}"
        offers[brand] = BrandOffer(brand, name, games, tuple(sorted({COMMON_CURRENCY, *extra})))
    return offers


#: Brand id -> its offer, for the brands that offer only part of the catalogue.
BRAND_OFFERS: Mapping[int, BrandOffer] = MappingProxyType(_draw())


def brand_offer(brand_id: int, name: str = "") -> BrandOffer:
    """What ``brand_id`` offers: its own offer, or the whole catalogue."""
    own = BRAND_OFFERS.get(brand_id)
    if own is not None:
        return own
    return BrandOffer(brand_id, name, tuple(g.game_id for g in CATALOGUE), CURRENCIES)
