"""A delivery log of campaign play that knows its own attribution.

:class:`CampaignLog` adds game events, each labelled by construction with the campaign it
belongs to (or ``AMBIGUOUS``, or ``None``), delivered once or several times (duplicates,
retries) or with an invalid body; the truth is tallied from those labels, never by running
the results' own queries. :func:`scenario` builds the decoys the issue names.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from gptools.deliverylog import CampaignTerms
from gptools.models import dumps_wire

AMBIGUOUS = "ambiguous"
MALTA = ZoneInfo("Europe/Malta")
US = timedelta(microseconds=1)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _naive(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


@dataclass
class CampaignLog:
    """Deliveries of labelled events; :attr:`truth` is what the results must find."""

    seed: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    #: campaign id -> player -> event times (UTC) of that player's attributed plays.
    plays: dict[str, dict[str, list[datetime]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    labels: Counter[str | None] = field(default_factory=Counter)
    ambiguous_in: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def event(
        self,
        label: str | None,
        *,
        player: str,
        game: str,
        currency: str,
        bet: str,
        at: datetime,
        events: tuple[str, ...] = ("FEATURE",),
        statuses: tuple[int, ...] = (200,),
        invalid: bool = False,
        candidates: tuple[str, ...] = (),
    ) -> None:
        """One action delivered once per status. ``invalid``: every delivery's body lacks
        ``bet`` (so the action has no valid delivery and the label must be ``None``)."""
        action_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        payload: dict[str, Any] = {
            "roundId": f"R-{self.rng.getrandbits(40)}",
            "gameId": game,
            "playerId": player,
            "timestamp": _naive(at),
            "bet": Decimal(bet),
            "currencyCode": currency,
            "events": list(events),
            "actionId": action_id,
        }
        if invalid:
            del payload["bet"]
        received = at + timedelta(seconds=2)
        for i, status in enumerate(statuses):
            self.records.append(
                {
                    "received_at": _iso(received + timedelta(seconds=40 * i)),
                    "status": status,
                    "latency_ms": Decimal("12.5"),
                    "payload": payload,
                }
            )
        self.labels[label] += 1
        if label == AMBIGUOUS:
            for c in candidates:
                self.ambiguous_in[c] += 1
        elif label is not None:
            self.plays[label][player].append(at.astimezone(UTC))

    def invalid_without_id(self, at: datetime) -> None:
        """A delivery whose body is not JSON: outside every action."""
        self.records.append(
            {"received_at": _iso(at), "status": 400, "latency_ms": Decimal(1), "body": "{torn"}
        )

    def write(self, path: Path) -> Path:
        """The log as JSONL with payload objects (exact money)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        order = sorted(range(len(self.records)), key=lambda i: self.records[i]["received_at"])
        with path.open("wb") as fh:
            for i in order:
                fh.write(dumps_wire(self.records[i]) + b"\n")
        return path

    @property
    def actions(self) -> int:
        """Every action (labelled event)."""
        return sum(self.labels.values())


def _at(local: str) -> datetime:
    """A wall-clock time in Malta as an aware instant (fold 0: the first of a repeat)."""
    return datetime.fromisoformat(local).replace(tzinfo=MALTA).astimezone(UTC)


def scenario(seed: int = 7) -> tuple[CampaignLog, list[CampaignTerms]]:
    """Three EUR campaigns and one JPY campaign with every decoy the issue names.

    ``A`` (awarded feature, 20.00 EUR, games g1/g2, 5 rounds) runs across the spring DST
    change in Malta: 01:30 CET to 03:30 CEST on 2030-03-31, one hour of UTC. ``C`` shares
    game g1, the bet and players p8/p9 with ``A`` and overlaps it (ambiguous plays). ``B``
    (free rounds, 0.20 EUR, games g2/g3) shares players p5..p9 with ``A``. ``J`` is JPY.
    """
    start_a, end_a = _at("2030-03-31T01:30:00"), _at("2030-03-31T03:30:00")
    assert (end_a - start_a) == timedelta(hours=1)  # the DST jump eats an hour
    a = CampaignTerms(
        campaign_id="A", campaign_type="AWARDED_FEATURE", currency="EUR",
        bet=Decimal("20.00"), bet_number=5, game_ids=("g1", "g2"),
        start=start_a, end=end_a, players=tuple(f"p{i}" for i in range(10)),
        time_zone="Europe/Malta",
    )  # fmt: skip
    b = CampaignTerms(
        campaign_id="B", campaign_type="FREE_ROUNDS", currency="EUR", bet=Decimal("0.20"),
        bet_number=3, game_ids=("g2", "g3"), start=start_a, end=start_a + timedelta(days=3),
        players=tuple(f"p{i}" for i in range(5, 15)), time_zone="Europe/Malta",
    )  # fmt: skip
    c = CampaignTerms(
        campaign_id="C", campaign_type="AWARDED_FEATURE", currency="EUR",
        bet=Decimal("20.00"), bet_number=2, game_ids=("g1",),
        start=start_a + timedelta(minutes=30), end=start_a + timedelta(days=2),
        players=("p8", "p9", "p20"), time_zone="Europe/Malta", budget=Decimal("120.00"),
    )  # fmt: skip
    j = CampaignTerms(
        campaign_id="J", campaign_type="FREE_ROUNDS", currency="JPY", bet=Decimal("10"),
        bet_number=4, game_ids=("g1",), start=start_a, end=start_a + timedelta(days=2),
        players=("p0", "p1", "q1"), time_zone="UTC",
    )  # fmt: skip
    log = CampaignLog(seed)
    eur = {"currency": "EUR"}
    feat = {"game": "g1", "bet": "20.00", **eur}
    minute = timedelta(minutes=1)
    # A: p0 completes (5 rounds), each delivered with a duplicate or a retry.
    for k in range(5):
        statuses = ((200, 200), (503, 200), (200,), (500, 503, 200), (200, 200, 200))[k]
        log.event("A", player="p0", at=start_a + (k + 1) * minute, statuses=statuses, **feat)
    # p1 plays 2 on g2 (feature bought: FEATURE with COIN); p2 plays at the very start.
    log.event("A", player="p1", game="g2", bet="20.00", at=start_a + 3 * minute,
              events=("COIN", "FEATURE"), **eur)  # fmt: skip
    log.event("A", player="p1", at=start_a + 4 * minute, **feat)
    log.event("A", player="p2", at=start_a, **feat)
    # p3 plays one microsecond before the end; p4 exactly at the end and just before start.
    log.event("A", player="p3", at=end_a - US, **feat)
    log.event(None, player="p4", at=end_a, **feat)
    log.event(None, player="p4", at=start_a - US, **feat)
    # The zone read wrongly (CET all along: end 02:30 UTC; CEST all along: start 23:30 UTC).
    log.event(None, player="p4", at=end_a + 30 * minute, **feat)
    log.event(None, player="p4", at=start_a - 30 * minute, **feat)
    # Decoys: p0 on another game, at another bet, without FEATURE, in another currency;
    # someone who is not a participant.
    log.event(None, player="p0", game="g9", bet="20.00", at=start_a + 7 * minute, **eur)
    log.event(None, player="p1", game="g1", bet="10.00", at=start_a + 8 * minute, **eur)
    log.event(None, player="p1", at=start_a + 9 * minute, events=("COIN",), **feat)
    log.event(None, player="p1", game="g1", currency="JPY", bet="20", at=start_a + 9 * minute)
    log.event(None, player="x1", at=start_a + 10 * minute, **feat)
    # FEATURE only inside a string of the events array (its quotes escaped in the JSON).
    log.event(None, player="p2", at=start_a + 10 * minute, events=('x","FEATURE',), **feat)
    # An action whose every delivery is invalid (no bet): never counted.
    log.event(None, player="p5", at=start_a + 11 * minute, statuses=(400, 400), invalid=True,
              **feat)  # fmt: skip
    log.invalid_without_id(start_a + 12 * minute)
    # Overlap of A and C (from start + 30 min): p8 and p9 on g1 are ambiguous, duplicates
    # included; p9 on g2 is A's only; after A ends p9 on g1 is C's.
    log.event(AMBIGUOUS, player="p8", at=start_a + 40 * minute, statuses=(200, 200),
              candidates=("A", "C"), **feat)  # fmt: skip
    log.event(AMBIGUOUS, player="p9", at=start_a + 41 * minute, candidates=("A", "C"), **feat)
    log.event("A", player="p9", game="g2", bet="20.00", at=start_a + 42 * minute, **eur)
    log.event("C", player="p9", at=end_a + 5 * minute, **feat)
    log.event("C", player="p9", at=end_a + timedelta(days=1, minutes=5), **feat)
    log.event(None, player="p9", at=start_a + timedelta(days=2), **feat)  # C's end
    # Before C starts, p8 on g1 is A's alone.
    log.event("A", player="p8", at=start_a + 29 * minute, **feat)
    # B: free rounds (COIN), p5 completes over three days' first two, p6 plays one;
    # the same player on A's game at B's bet is a decoy (g1 is not B's).
    for k, day in enumerate((0, 1, 1)):
        log.event("B", player="p5", game="g3", bet="0.20", events=("COIN",),
                  at=start_a + timedelta(days=day, minutes=k), **eur)  # fmt: skip
    log.event("B", player="p6", game="g2", bet="0.20", events=("COIN",),
              at=start_a + timedelta(hours=30), statuses=(503, 503, 200), **eur)  # fmt: skip
    log.event(None, player="p6", game="g1", bet="0.20", events=("COIN",),
              at=start_a + timedelta(hours=31), **eur)  # fmt: skip
    # J: JPY free rounds; q1 plays 4 (completes); p0 one.
    for k in range(4):
        log.event("J", player="q1", game="g1", currency="JPY", bet="10", events=("COIN",),
                  at=start_a + timedelta(hours=k))  # fmt: skip
    log.event("J", player="p0", game="g1", currency="JPY", bet="10.0", events=("COIN",),
              at=start_a + timedelta(hours=5))  # fmt: skip
    # Regular play around it all: nobody's campaign.
    for k in range(40):
        log.event(None, player=f"r{k % 7}", game=log.rng.choice(("g1", "g2", "g3")),
                  currency="EUR", bet=log.rng.choice(("0.20", "20.00", "1.00")),
                  events=log.rng.choice((("COIN",), ("FEATURE",))),
                  at=start_a + timedelta(minutes=3 * k))  # fmt: skip
    return log, [a, b, c, j]


def truth_rows(log: CampaignLog, terms: list[CampaignTerms]) -> dict[str, dict[str, Any]]:
    """Per campaign, what the report must say, tallied from the labels."""
    out: dict[str, dict[str, Any]] = {}
    for t in terms:
        plays = log.plays.get(t.campaign_id, {})
        rounds = sum(len(v) for v in plays.values())
        firsts = [min(v) for v in plays.values()]
        out[t.campaign_id] = {
            "assigned": len(t.players),
            "reached": len(plays),
            "completed": sum(1 for v in plays.values() if len(v) >= t.bet_number),
            "rounds_used": rounds,
            "rounds_granted": len(t.players) * t.bet_number,
            "exposure_used": t.bet * rounds,
            "first_play": min(firsts) if firsts else None,
            "last_play": max(max(v) for v in plays.values()) if plays else None,
            "ambiguous": log.ambiguous_in[t.campaign_id],
            "unreached": sorted(set(t.players) - set(plays)),
        }
    return out


def as_json(path: Path) -> list[Any]:
    """The log's records, decoded (for a look in a failing test)."""
    return [json.loads(line) for line in path.read_text().splitlines()]
