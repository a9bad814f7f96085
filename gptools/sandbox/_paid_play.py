"""Seeded paid play of a campaign's treatment and holdout players, with a known true effect.

What a holdout test measures: players play for money whether or not they were given a
campaign, and those given it (the treatment: the campaign's participants) play more, by
a known amount. For each player of either group the model draws once whether they play for
money at all (``active_share``), then a Poisson number of paid rounds before the
campaign's start (mean ``rounds_mean``, the same for both groups: play that must not
count) and after it, until its end (mean ``rounds_mean``, times ``1 + effect`` for the
treatment). Each round is on one of the campaign's games, in its currency, at a bet of the
campaign's bet times one of :data:`BET_MULTIPLIERS` (never the campaign's own bet, so the
attribution rule never takes a paid round for a free one), and wins its bet times one of
:data:`WIN_MULTIPLIERS` (return to player :data:`RTP`).

Per player (intention to treat), the expected difference treatment minus holdout after
the start is therefore exact: rounds ``active_share × rounds_mean × effect``, turnover that
times the mean bet, net gaming revenue that times ``1 - RTP``: :meth:`PaidPlayed.truth`
gives it with every player's realised values. The rounds are game events with no campaign
(the delivery log's paid play) and wallet rows (a paid debit and its credit, the columns of
:mod:`gptools._ledger_columns`). A pure function of (model, campaign, groups).
"""

from __future__ import annotations

import csv
import io
import math
import os
import random
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from gptools import _ledger_columns as L
from gptools._private_files import private_replacement
from gptools.models import GameEventNotification, loads_wire
from gptools.sandbox._events import CampaignPlay
from gptools.sandbox._players import CampaignNotPlayableError

#: A paid round's bet: the campaign's bet times one of these, equally likely.
BET_MULTIPLIERS: Final = (Decimal(2), Decimal(5), Decimal(10), Decimal(20))
#: A round's win: its bet times one of these, equally likely.
WIN_MULTIPLIERS: Final = tuple(Decimal(x) for x in ("0", "0", "0", "0", "0", "0.5", "1", "1",
                                                    "2", "4.5"))  # fmt: skip
#: The model's return to player: the mean of :data:`WIN_MULTIPLIERS`.
RTP: Final = sum(WIN_MULTIPLIERS, Decimal(0)) / len(WIN_MULTIPLIERS)
#: The most players one call plays (treatment and holdout together).
MAX_PLAYERS: Final = 200_000


@dataclass(frozen=True, slots=True)
class PaidPlayModel:
    """How players play for money: ``active_share`` play at all, ``rounds_mean`` rounds
    on average before the start and after it, ``effect`` more after it for the treatment
    (0.25: a quarter more); ``seed`` makes it reproducible."""

    seed: int = 0
    active_share: float = 0.8
    rounds_mean: float = 20.0
    effect: float = 0.25

    def __post_init__(self) -> None:
        if not 0.0 <= self.active_share <= 1.0:
            raise ValueError(f"active_share must be between 0 and 1, got {self.active_share}")
        if not 0.0 < self.rounds_mean <= 200.0:
            raise ValueError(f"rounds_mean must be above 0 and at most 200, got {self.rounds_mean}")
        if not -1.0 < self.effect <= 5.0:
            raise ValueError(f"effect must be above -1 and at most 5, got {self.effect}")


@dataclass(frozen=True, slots=True)
class PaidPlayed:
    """The paid play of one campaign's groups: the events in time order, the ledger rows,
    and per player what they played after the start (the truth an uplift must find)."""

    campaign_id: str
    currency: str
    start: datetime
    model: PaidPlayModel
    expected: Mapping[str, Decimal]
    events: tuple[GameEventNotification, ...] = field(repr=False)
    ledger: tuple[dict[str, Any], ...] = field(repr=False)
    players: Mapping[str, dict[str, Any]] = field(repr=False)

    def truth(self) -> dict[str, Any]:
        """JSON-ready (money as Decimals): the model, the expected difference per player
        (``trueEffect``: rounds, turnover, ngr) and each player's group, rounds, turnover,
        wins, ngr and active days after the start."""
        return {
            "campaignId": self.campaign_id,
            "currency": self.currency,
            "start": self.start.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "model": {
                "seed": self.model.seed,
                "activeShare": Decimal(repr(self.model.active_share)),
                "roundsMean": Decimal(repr(self.model.rounds_mean)),
                "effect": Decimal(repr(self.model.effect)),
                "rtp": RTP,
            },
            "trueEffect": dict(self.expected),
            "players": {p: dict(v) for p, v in self.players.items()},
        }

    def to_json(self) -> dict[str, Any]:
        """The truth with the events (wire bodies) and the ledger rows."""
        return {
            **self.truth(),
            "events": [loads_wire(e.to_wire()) for e in self.events],
            "ledger": [dict(r) for r in self.ledger],
        }


def _poisson(rng: random.Random, mean: float) -> int:
    # Knuth's method: exact, and quick for the means the model allows.
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def expected_effect(model: PaidPlayModel, bet: Decimal) -> dict[str, Decimal]:
    """The expected difference per player, treatment minus holdout, after the start."""
    rounds = Decimal(repr(model.active_share)) * Decimal(repr(model.rounds_mean))
    rounds *= Decimal(repr(model.effect))
    mean_bet = bet * sum(BET_MULTIPLIERS, Decimal(0)) / len(BET_MULTIPLIERS)
    return {"rounds": rounds, "turnover": rounds * mean_bet, "ngr": rounds * mean_bet * (1 - RTP)}


def play_paid(
    campaign_id: str,
    body: Mapping[str, Any],
    treatment: Iterable[str],
    holdout: Iterable[str],
    model: PaidPlayModel = PaidPlayModel(),
) -> PaidPlayed:
    """The paid play of a stored campaign's (its request ``body``) ``treatment`` (its
    participants) and ``holdout`` players. A player in both counts as treatment."""
    play = CampaignPlay.from_body(campaign_id, body)
    if play is None or play.start is None or play.end is None or play.end <= play.start:
        raise CampaignNotPlayableError(
            f"campaign {campaign_id} cannot be played: it needs gameIds, currencyCode, a "
            "numeric bet and a window (startDate, endDate, timeZone)"
        )
    arms = {p: "holdout" for p in holdout}
    arms.update({p: "treatment" for p in treatment})
    if len(arms) > MAX_PLAYERS:
        raise ValueError(f"{len(arms):,} players, more than {MAX_PLAYERS:,} at once")
    window = play.end - play.start
    events: list[GameEventNotification] = []
    ledger: list[dict[str, Any]] = []
    players: dict[str, dict[str, Any]] = {}
    for player in sorted(arms):
        rng = random.Random(f"paid:{model.seed}:{campaign_id}:{player}")
        arm = arms[player]
        active = rng.random() < model.active_share
        lift = 1 + model.effect if arm == "treatment" else 1.0
        before = _poisson(rng, model.rounds_mean) if active else 0
        after = _poisson(rng, model.rounds_mean * lift) if active else 0
        turnover, wins = Decimal(0), Decimal(0)
        days: set[int] = set()
        for i in range(before + after):
            offset = window * rng.random()
            moment = play.start - window + offset if i < before else play.start + offset
            bet = play.bet * rng.choice(BET_MULTIPLIERS)
            win = bet * rng.choice(WIN_MULTIPLIERS)
            round_id = f"P-{rng.getrandbits(48):012x}"
            game = rng.choice(play.game_ids)
            events.append(
                GameEventNotification(
                    round_id=round_id, game_id=game, player_id=player, timestamp=moment,
                    bet=bet, currency_code=play.currency_code, events=["COIN"],
                    action_id=uuid.UUID(int=rng.getrandbits(128), version=4),
                )
            )  # fmt: skip
            for kind, amount in ((L.DEBIT, bet), (L.CREDIT, win)):
                ledger.append(
                    {L.TRANSACTION_ID: f"T-{rng.getrandbits(64):016x}", L.ROUND_ID: round_id,
                     L.PLAYER_ID: player, L.GAME_ID: game, L.CURRENCY: play.currency_code,
                     L.AMOUNT: amount, L.KIND: kind, L.FREE_ROUND: False,
                     L.TIMESTAMP: moment.astimezone(UTC).isoformat().replace("+00:00", "Z")}
                )  # fmt: skip
            if i >= before:
                turnover += bet
                wins += win
                days.add((moment.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)).days)
        players[player] = {"group": arm, "rounds": after, "turnover": turnover, "wins": wins,
                           "ngr": turnover - wins, "activeDays": len(days)}  # fmt: skip
    events.sort(key=lambda e: (e.timestamp, str(e.action_id)))
    ledger.sort(key=lambda r: (r[L.TIMESTAMP], r[L.TRANSACTION_ID]))
    return PaidPlayed(
        campaign_id, play.currency_code, play.start, model, expected_effect(model, play.bet),
        tuple(events), tuple(ledger), players,
    )  # fmt: skip


def write_paid_ledger(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write ledger rows as CSV in the columns of :mod:`gptools._ledger_columns` (amounts
    as their digits, the flag ``true``/``false``), owner-only and whole or not at all."""
    text = io.StringIO()
    out = csv.writer(text, lineterminator="\n")
    out.writerow(L.LEDGER_COLUMNS)
    for row in rows:
        out.writerow(
            ("true" if row[c] else "false") if isinstance(row[c], bool) else str(row[c])
            for c in L.LEDGER_COLUMNS
        )
    with private_replacement(path) as fh:
        fh.write(text.getvalue().encode())
    return Path(path)
