"""A seeded model of how a campaign's participants play it.

Each participant accepts the campaign with probability ``accept_share``; one who accepts
either finishes (uses all ``betNumber`` rounds, the document's per-player maximum) with
probability ``finish_share`` or stops early after 1 to ``betNumber - 1`` of them. The first
play falls early in the window more often than late (most uptake comes in the first
days), the later ones anywhere between it and the end; every play is inside the window.
Events are the campaign's: one of its games, its currency, its bet, ``FEATURE`` for an
awarded feature (``COIN`` for a free round).

The model is a pure function of (seed, campaign, participants): the same arguments give
the same plays, so the truth of what was played is available again at any time
(``GET /_sandbox/campaigns/{id}/play``) and tests can check results exactly.
"""

from __future__ import annotations

import os
import random
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gptools import spec
from gptools._private_files import private_replacement
from gptools.errors import GptoolsError
from gptools.models import GameEventNotification, dumps_wire, loads_wire
from gptools.sandbox._events import CampaignPlay

#: The model's defaults: how many participants play at all, and how many of those finish.
DEFAULT_ACCEPT_SHARE = 0.7
DEFAULT_FINISH_SHARE = 0.5


class CampaignNotPlayableError(GptoolsError, ValueError):
    """The stored campaign lacks what playing it needs (games, currency, bet, window,
    betNumber)."""


@dataclass(frozen=True, slots=True)
class PlayerModel:
    """How participants behave: ``accept_share`` play at all, ``finish_share`` of those use
    every round; ``seed`` makes it reproducible."""

    seed: int = 0
    accept_share: float = DEFAULT_ACCEPT_SHARE
    finish_share: float = DEFAULT_FINISH_SHARE

    def __post_init__(self) -> None:
        for name in ("accept_share", "finish_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")


@dataclass(frozen=True, slots=True)
class CampaignPlayed:
    """What the model played for one campaign: the events in time order and, per player
    who played, how many rounds (the truth a results report must find)."""

    campaign_id: str
    bet_number: int
    participants: int
    events: tuple[GameEventNotification, ...] = field(repr=False)
    rounds: Mapping[str, int] = field(repr=False)

    def before(self, moment: datetime) -> CampaignPlayed:
        """What had been played before ``moment`` (aware): its events, and per player who
        had played, the rounds so far (the truth at that time)."""
        events = tuple(e for e in self.events if e.timestamp < moment)
        rounds = Counter(e.player_id for e in events)
        return CampaignPlayed(
            self.campaign_id, self.bet_number, self.participants, events, dict(rounds)
        )

    def summary(self) -> dict[str, Any]:
        """The truth's counts and each player's rounds, as JSON-ready data (no events)."""
        return {
            "campaignId": self.campaign_id,
            "betNumber": self.bet_number,
            "participants": self.participants,
            "reached": len(self.rounds),
            "completed": sum(1 for n in self.rounds.values() if n >= self.bet_number),
            "roundsUsed": sum(self.rounds.values()),
            "rounds": dict(self.rounds),
        }

    def to_json(self) -> dict[str, Any]:
        """The truth as JSON-ready data (money as Decimals, for ``dumps_wire``): players'
        rounds, counts, and the events as their wire bodies."""
        return {
            **self.summary(),
            "events": [loads_wire(e.to_wire()) for e in self.events],
        }


def write_truth(
    path: str | os.PathLike[str],
    played: Sequence[CampaignPlayed],
    *,
    seed: int,
    until: datetime,
) -> Path:
    """Write what ``played`` holds (each campaign's :meth:`CampaignPlayed.summary`, as played
    by ``until`` with the model's ``seed``) to ``path`` as one JSON document, money as its
    digits: ``{"seed", "until", "campaigns"}``, ``until`` in UTC with a ``Z``. What
    ``gptools sandbox play --truth`` writes, to compare campaign results with.

    The file is owner-only and whole or not at all: written beside ``path`` and renamed
    over it, so a symbolic link at ``path`` is replaced, never written through."""
    document = {
        "seed": seed,
        "until": until.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "campaigns": [p.summary() for p in played],
    }
    with private_replacement(path) as fh:
        fh.write(dumps_wire(document))
    return Path(path)


def play_campaign(
    campaign_id: str,
    body: Mapping[str, Any],
    participants: Iterable[str],
    model: PlayerModel = PlayerModel(),
) -> CampaignPlayed:
    """The plays of a stored campaign (its request ``body``) by its ``participants``."""
    play = CampaignPlay.from_body(campaign_id, body)
    bet_number = body.get("betNumber")
    if play is None or play.start is None or play.end is None or not isinstance(bet_number, int):
        raise CampaignNotPlayableError(
            f"campaign {campaign_id} cannot be played: it needs gameIds, currencyCode, a "
            "numeric bet, betNumber and a window (startDate, endDate, timeZone)"
        )
    if bet_number < 1 or play.end <= play.start:
        raise CampaignNotPlayableError(
            f"campaign {campaign_id} cannot be played: betNumber {bet_number}, window "
            f"{play.start.isoformat()} to {play.end.isoformat()}"
        )
    rng = random.Random(f"{model.seed}:{campaign_id}")
    window_us = (play.end - play.start) // timedelta(microseconds=1)
    awarded = play.campaign_type == spec.CAMPAIGN_TYPE_AWARDED_FEATURE
    events: list[GameEventNotification] = []
    rounds: dict[str, int] = {}
    players = sorted(set(participants))
    for player in players:
        if rng.random() >= model.accept_share:
            continue
        n = bet_number if rng.random() < model.finish_share else rng.randint(1, bet_number - 1)
        if bet_number == 1:
            n = 1
        # Early uptake: the first play's place in the window is a squared uniform draw.
        first = int(window_us * rng.random() ** 2)
        offsets = [first] + [first + int((window_us - first) * rng.random()) for _ in range(n - 1)]
        for offset in offsets:
            moment = play.start + timedelta(microseconds=min(offset, window_us - 1))
            events.append(
                GameEventNotification(
                    round_id=f"R-{rng.getrandbits(48):012x}",
                    game_id=rng.choice(play.game_ids),
                    player_id=player,
                    timestamp=moment,
                    bet=play.bet,
                    currency_code=play.currency_code,
                    events=[spec.FEATURE_EVENT] if awarded else ["COIN"],
                    action_id=uuid.UUID(int=rng.getrandbits(128), version=4),
                )
            )
        rounds[player] = n
    events.sort(key=lambda e: (e.timestamp, str(e.action_id)))
    return CampaignPlayed(campaign_id, bet_number, len(players), tuple(events), rounds)
