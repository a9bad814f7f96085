"""The campaign attribution rule (:data:`gptools.spec.CAMPAIGN_ATTRIBUTION`) has two
implementations: ``webhooks find``'s, in Python per action (it says why an action fits
no campaign), and the analyser's, on the engine over a whole log. This test ties them
together: actions generated around every term's boundary (player, game, currency, the
bet's value written two ways and a cent off, the feature event, the window's first and
last instant and one past it), attributed by both, must get the same campaign each."""

from __future__ import annotations

import itertools
import random
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from gptools.deliverylog import CampaignResults, CampaignTerms, open_log
from gptools.webhooks import FindFilter, export_log, find_actions, open_store
from gptools.webhooks._records import LogEntry, WriteItem
from tests.webhooks.conftest import T0, event, wire

END = T0 + timedelta(days=2)
CAMPAIGNS = [
    CampaignTerms("C-1", "FREE_ROUNDS", "EUR", Decimal("2.10"), 10, ("g-a",), T0, END,
                  players=("p-1", "p-2")),
    # Overlaps C-1 from its second day on: an action there fits both (ambiguous).
    CampaignTerms("C-2", "FREE_ROUNDS", "EUR", Decimal("2.10"), 10, ("g-a", "g-b"),
                  T0 + timedelta(days=1), END + timedelta(days=1), players=("p-1",)),
    CampaignTerms("C-3", "AWARDED_FEATURE", "USD", Decimal("5.00"), 3, ("g-a",), T0, END,
                  players=("p-3",)),
]  # fmt: skip
PLAYERS = ("p-1", "p-2", "p-3", "p-9")
GAMES = ("g-a", "g-b")
CURRENCIES = ("EUR", "USD")
BETS = (Decimal("2.10"), Decimal("2.1"), Decimal("2.11"), Decimal("5.00"), Decimal("5"))
EVENTS = (["COIN"], ["FEATURE"], ["COIN", "FEATURE"])
MOMENTS = (
    T0 - timedelta(microseconds=1),
    T0,
    T0 + timedelta(days=1) - timedelta(microseconds=1),
    T0 + timedelta(days=1),
    END - timedelta(microseconds=1),
    END,
)


def _bodies(n: int) -> list[dict[str, object]]:
    rng = random.Random(3837)
    grid = list(itertools.product(PLAYERS, GAMES, CURRENCIES, BETS, EVENTS, MOMENTS))
    out = []
    for k, (player, game, cur, bet, events, moment) in enumerate(rng.sample(grid, n)):
        stamp = moment.replace(tzinfo=None).isoformat(timespec="microseconds")
        out.append(
            event(str(uuid.UUID(int=k + 1, version=4)), playerId=player, gameId=game,
                  currencyCode=cur, bet=bet, events=events, timestamp=stamp, roundId=f"R-{k}")
        )  # fmt: skip
    return out


def test_find_and_the_analyser_attribute_every_action_alike(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    bodies = _bodies(400)
    conn = open_store(url).connect()
    try:
        for k, body in enumerate(bodies):
            entry = LogEntry(T0 + timedelta(seconds=k), 200, wire(body).decode(),
                             str(body["actionId"]), auth_ok=True, latency_ms=1.0)  # fmt: skip
            conn.write_batch([WriteItem(entry, accept=True)], state="done")
    finally:
        conn.close()
    store = open_store(url, create=False)
    found = find_actions(
        store,
        FindFilter(since=T0 - timedelta(days=1), until=T0 + timedelta(days=1)),
        campaigns=CAMPAIGNS,
        limit=1000,
    )
    by_find = {a.action_id: a.campaign_id for a in found.actions}
    log = tmp_path / "log.jsonl"
    export_log(store, log, format="jsonl")
    with CampaignResults(open_log(log), CAMPAIGNS, round_ids=True) as results:
        frame = results._df(results.event_rounds())
    by_engine = {
        str(a): (c if isinstance(c, str) else None)
        for a, c in zip(frame.action_id, frame.campaign_id, strict=True)
    }
    assert len(by_find) == len(bodies)
    assert by_find == by_engine
    # Not vacuous: every campaign gets actions, and some fit none or two.
    reasons = [a.attribution or "" for a in found.actions]
    assert {c for c in by_find.values() if c} == {"C-1", "C-2", "C-3"}
    assert sum(r.startswith("ambiguous") for r in reasons) > 0
    assert sum(c is None and not r.startswith("ambiguous")
               for c, r in zip(by_find.values(), reasons, strict=True)) > 0  # fmt: skip
