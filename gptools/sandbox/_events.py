"""A seeded generator of game event notifications, drawn from the sandbox's catalogue.

Regular play: a pool of players, each with a home currency; a game of the catalogue that
offers that currency; a base bet from the game's bet sizes. Most actions are plain spins
(``["COIN"]``), some trigger a feature (``["COIN", "FEATURE"]``) and some buy one
(``["FEATURE"]`` with the bet as base bet × price multiplier). Campaign play: while a
campaign is active, a share of the actions are its free rounds or awarded features, by
its players, on its games, in its currency, at its bet.

Timestamps advance by exponential gaps (a Poisson stream) from ``start``; they are aware
UTC inside and go on the wire as naive UTC with microseconds, as the document says.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gptools import spec
from gptools.models import GameEventNotification
from gptools.sandbox._catalogue import CATALOGUE, CatalogueGame, feature_cost


@dataclass(frozen=True, slots=True)
class CampaignPlay:
    """What the generator needs of a campaign: games, currency, bet, players, window.

    ``start``/``end`` are aware; ``None`` means unbounded. ``players`` empty means any
    player of the pool may play it.
    """

    campaign_id: str
    campaign_type: str
    game_ids: tuple[str, ...]
    currency_code: str
    bet: Decimal
    players: tuple[str, ...] = ()
    start: datetime | None = None
    end: datetime | None = None

    def active(self, moment: datetime) -> bool:
        """Whether the campaign runs at ``moment``."""
        return (self.start is None or self.start <= moment) and (
            self.end is None or moment < self.end
        )

    @classmethod
    def from_body(cls, campaign_id: str, body: Mapping[str, Any]) -> CampaignPlay | None:
        """Read a stored campaign request body; ``None`` when it lacks games, currency or
        a numeric bet (the generator cannot play it)."""
        games = body.get("gameIds")
        currency = body.get("currencyCode")
        try:
            bet = Decimal(str(body.get("bet")))
        except InvalidOperation:
            return None
        if not isinstance(games, list) or not games or not isinstance(currency, str):
            return None
        players = body.get(spec.CAMPAIGN_PLAYERS_FIELD)
        return cls(
            campaign_id=campaign_id,
            campaign_type=str(body.get("type", spec.CAMPAIGN_TYPE_AWARDED_FEATURE)),
            game_ids=tuple(str(g) for g in games),
            currency_code=currency,
            bet=bet,
            players=tuple(str(p) for p in players) if isinstance(players, list) else (),
            start=_wall_clock(body.get(spec.CAMPAIGN_START_FIELD), body),
            end=_wall_clock(body.get(spec.CAMPAIGN_END_FIELD), body),
        )


def _wall_clock(value: object, body: Mapping[str, Any]) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        zone = ZoneInfo(str(body.get(spec.CAMPAIGN_TIME_ZONE_FIELD, "UTC")))
        naive = datetime.strptime(value, spec.CAMPAIGN_DATE_FORMAT)
    except (ValueError, ZoneInfoNotFoundError):
        return None
    return naive.replace(tzinfo=zone).astimezone(UTC)


class EventGenerator:
    """Seeded game events: the same arguments give the same events, in the same order.

    ``players`` is the pool size (ids ``player-00001`` ...), ``mean_gap`` the mean time
    between actions, ``feature_trigger_share``/``feature_buy_share`` how often an action
    triggers or buys a feature, ``campaign_share`` how often an action is a campaign's
    while one is active.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        start: datetime,
        games: Sequence[CatalogueGame] = CATALOGUE,
        players: int = 500,
        campaigns: Sequence[CampaignPlay] = (),
        mean_gap: timedelta = timedelta(seconds=60),
        feature_trigger_share: float = 0.06,
        feature_buy_share: float = 0.03,
        campaign_share: float = 0.2,
    ) -> None:
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        if players < 1:
            raise ValueError(f"players must be at least 1, got {players}")
        self._rng = random.Random(seed)
        self._games = [g for g in games if g.bet_sizes]
        if not self._games:
            raise ValueError("no game with bet sizes to play")
        currencies = sorted({c for g in self._games for c in g.bet_sizes})
        self._players = [
            (f"player-{i:05d}", currencies[self._rng.randrange(len(currencies))])
            for i in range(1, players + 1)
        ]
        self._campaigns = list(campaigns)
        self._now = start.astimezone(UTC)
        self._mean_gap = mean_gap.total_seconds()
        self._trigger = feature_trigger_share
        self._buy = feature_buy_share
        self._campaign_share = campaign_share

    def __iter__(self) -> Iterator[GameEventNotification]:
        return self

    def __next__(self) -> GameEventNotification:
        self._now += timedelta(seconds=self._rng.expovariate(1.0 / self._mean_gap))
        active = [c for c in self._campaigns if c.active(self._now)]
        if active and self._rng.random() < self._campaign_share:
            return self._campaign_event(self._rng.choice(active))
        return self._regular_event()

    def take(self, n: int) -> list[GameEventNotification]:
        """The next ``n`` events."""
        return [next(self) for _ in range(n)]

    def _ids(self) -> tuple[str, uuid.UUID]:
        round_id = f"R-{self._rng.getrandbits(48):012x}"
        return round_id, uuid.UUID(int=self._rng.getrandbits(128), version=4)

    def _regular_event(self) -> GameEventNotification:
        player, currency = self._rng.choice(self._players)
        games = [g for g in self._games if currency in g.bet_sizes]
        game = self._rng.choice(games)
        base = self._rng.choice(game.bet_sizes[currency])
        roll = self._rng.random()
        if roll < self._buy and game.buy_features:
            feature = self._rng.choice(game.buy_features)
            bet = feature_cost(base, feature.price_multiplier, currency)
            events = ["FEATURE"]
        elif roll < self._buy + self._trigger:
            bet, events = base, ["COIN", "FEATURE"]
        else:
            bet, events = base, ["COIN"]
        return self._event(game.game_id, player, bet, currency, events)

    def _campaign_event(self, campaign: CampaignPlay) -> GameEventNotification:
        if campaign.players:
            player = self._rng.choice(campaign.players)
        else:
            player = self._rng.choice(self._players)[0]
        game_id = self._rng.choice(campaign.game_ids)
        awarded = campaign.campaign_type == spec.CAMPAIGN_TYPE_AWARDED_FEATURE
        events = ["FEATURE"] if awarded else ["COIN"]
        return self._event(game_id, player, campaign.bet, campaign.currency_code, events)

    def _event(
        self, game_id: str, player: str, bet: Decimal, currency: str, events: list[str]
    ) -> GameEventNotification:
        round_id, action_id = self._ids()
        return GameEventNotification(
            round_id=round_id,
            game_id=game_id,
            player_id=player,
            timestamp=self._now,
            bet=bet,
            currency_code=currency,
            events=events,
            action_id=action_id,
        )


def events_before(
    now: datetime, count: int, *, seed: int = 0, gap: timedelta = timedelta(seconds=1)
) -> tuple[datetime, list[GameEventNotification]]:
    """``count`` seeded events that have all happened by ``now``, about ``gap`` apart, and
    the moment their series starts (where a simulated clock delivering them begins).

    A receiver stamps its own (real) time on a delivery, so events delivered now must have
    happened already, or their delivery lag would read negative: they are spread over
    roughly the last ``count`` gaps, and moved back as a whole when the random gaps add up
    to more (the last one then happened at ``now``). What ``gptools sandbox deliver`` sends.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    start = now - count * gap
    events = EventGenerator(seed=seed, start=start, mean_gap=gap).take(count)
    overshoot = max((e.timestamp for e in events), default=now) - now
    if overshoot > timedelta(0):
        start -= overshoot
        events = EventGenerator(seed=seed, start=start, mean_gap=gap).take(count)
    return start, events
