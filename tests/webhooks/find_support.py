"""A small store for the find and replay tests: three players' actions, with retries,
a lost action (answered 422 last) and a pending one (answered 503 only)."""

from __future__ import annotations

from datetime import timedelta

from gptools.webhooks import open_store
from gptools.webhooks._records import ActionState, LogEntry, WriteItem
from tests.webhooks.conftest import T0, event, wire

#: action id -> (player, round, game, currency, events, answers in order)
ACTIONS = {
    "00000000-0000-4000-8000-000000000001": ("p-1", "R-1", "g-a", "EUR", ["COIN"], [503, 200]),
    "00000000-0000-4000-8000-000000000002": ("p-1", "R-2", "g-b", "EUR", ["FEATURE"], [200, 200]),
    "00000000-0000-4000-8000-000000000003": ("p-2", "R-3", "g-a", "USD", ["COIN"], [503, 422]),
    "00000000-0000-4000-8000-000000000004": ("p-2", "R-4", "g-a", "USD", ["COIN"], [503]),
    "00000000-0000-4000-8000-000000000005": ("p-3", "R-5", "g-c", "EUR", ["COIN"], [200]),
}


def fill(url: str, *, state: ActionState = "done") -> None:
    """Write :data:`ACTIONS` into the store at ``url``: action n's deliveries n hours
    after T0, a minute apart; acknowledged ones stored with ``state``."""
    conn = open_store(url).connect()
    try:
        for n, (action_id, (player, rnd, game, cur, events, answers)) in enumerate(
            ACTIONS.items(), 1
        ):
            body = wire(
                event(action_id, playerId=player, roundId=rnd, gameId=game,
                      currencyCode=cur, events=events)
            ).decode()  # fmt: skip
            for k, status in enumerate(answers):
                at = T0 + timedelta(hours=n, minutes=k)
                entry = LogEntry(at, status, body, action_id, auth_ok=True, latency_ms=1.5 + k)
                conn.write_batch([WriteItem(entry, accept=status == 200)], state=state)
    finally:
        conn.close()
