"""A delivery log of campaign play at any size, written by DuckDB (no Python loop over
rows), and the campaigns it was played in: for the campaign results' memory test and
benchmark, which differ only in size. (``tests/deliverylog/campaign_logs.py`` builds small
logs whose every event knows its campaign, for the results' correctness.)

The log (:func:`write_campaign_log`): ``deliveries - doubled`` actions, the first
``doubled`` delivered twice (a duplicate after a 200, or a retry after a 503). Half of the
actions are campaign play (a participant of one campaign, on one of its games, at its bet,
inside its window, FEATURE for an awarded feature), the rest regular play. Campaign c's
players start at ``c * shift``, so campaigns c and c + 4, which share a game, the
currency, the bet and most of their windows, share players when ``shift`` is below
``players``: some plays are ambiguous.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from gptools.deliverylog import CampaignTerms

#: When the first campaign starts (each next one an hour later); UTC.
START = datetime(2030, 3, 1, tzinfo=UTC)
#: How long each campaign runs.
DAYS = 7


@dataclass(frozen=True, slots=True)
class GeneratedLog:
    """The size of a generated log and of its campaigns (see the module)."""

    deliveries: int
    doubled: int
    campaigns: int
    #: Players of each campaign.
    players: int
    #: Campaign c's players start at ``c * shift``.
    shift: int
    #: How many players the regular play comes from.
    regular_players: int

    @property
    def actions(self) -> int:
        """Actions in the log (each delivery once)."""
        return self.deliveries - self.doubled


def campaign_specs(shape: GeneratedLog) -> list[dict[str, Any]]:
    """Each campaign's terms as JSON values: ``start_h`` hours after :data:`START`, for
    ``days``, its players numbered from ``first_player`` (see :func:`campaign_terms`)."""
    out = []
    for c in range(shape.campaigns):
        awarded = c % 2 == 0
        currency = "EUR" if c % 4 < 2 else "JPY"
        bet = ("20.00" if currency == "EUR" else "2000") if awarded else (
            "0.20" if currency == "EUR" else "20")  # fmt: skip
        out.append(
            {
                "campaign_id": f"CMP-{c:06d}",
                "campaign_type": "AWARDED_FEATURE" if awarded else "FREE_ROUNDS",
                "currency": currency,
                "bet": bet,
                "bet_number": 10,
                "game_ids": [f"game-{c % 10}", f"game-{(c + 4) % 10}"],
                "start_h": c,
                "days": DAYS,
                "first_player": c * shape.shift,
            }
        )
    return out


def campaign_terms(shape: GeneratedLog) -> list[CampaignTerms]:
    """The campaigns of :func:`campaign_specs` as the results take them."""
    out = []
    for c in campaign_specs(shape):
        start = START + timedelta(hours=c["start_h"])
        first = c["first_player"]
        out.append(
            CampaignTerms(
                campaign_id=c["campaign_id"],
                campaign_type=c["campaign_type"],
                currency=c["currency"],
                bet=Decimal(c["bet"]),
                bet_number=c["bet_number"],
                game_ids=tuple(c["game_ids"]),
                start=start,
                end=start + timedelta(days=c["days"]),
                players=tuple(f"p{first + i}" for i in range(shape.players)),
            )
        )
    return out


def write_campaign_log(path: Path, shape: GeneratedLog, *, settings: str = "") -> None:
    """Write the log of ``shape`` to ``path`` (JSON lines) with DuckDB, which first runs
    ``settings`` (``SET threads = 2; ...``)."""
    con = duckdb.connect()
    if settings:
        con.execute(settings)
    rows = ",".join(
        f"({i}, '{c['currency']}', '{c['bet']}', "
        f"{str(c['campaign_type'] == 'AWARDED_FEATURE').lower()}, "
        f"{c['start_h']}, {c['first_player']})"
        for i, c in enumerate(campaign_specs(shape))
    )
    con.execute(
        f"CREATE TABLE camp AS SELECT * FROM (VALUES {rows}) "
        "t(c, currency, bet, awarded, start_h, first_player)"
    )
    start = START.replace(tzinfo=None).isoformat(sep=" ")
    con.execute(
        f"""
        COPY (
          WITH a AS (
            SELECT n, (hash(n) >> 1)::BIGINT AS h, (hash(n * 3) % {shape.campaigns})::INT AS c,
                   hash(n * 5) % 2 = 0 AS campaign_play
            FROM range({shape.actions}) t(n)
          ),
          play AS (
            SELECT a.n, a.h,
              CASE WHEN campaign_play THEN 'p' || (first_player + (h % {shape.players}))::VARCHAR
                   ELSE 'r' || (h % {shape.regular_players})::VARCHAR END AS player,
              CASE WHEN campaign_play THEN 'game-' || ((c + 4 * ((h // 7) % 2)) % 10)::VARCHAR
                   ELSE 'game-' || (h % 12)::VARCHAR END AS game,
              CASE WHEN campaign_play THEN camp.currency ELSE 'EUR' END AS currency,
              CASE WHEN campaign_play THEN camp.bet::DECIMAL(12, 2)
                   ELSE ((h % 50) / 10.0 + 0.1)::DECIMAL(12, 2) END AS bet,
              CASE WHEN campaign_play AND awarded THEN ['FEATURE'] ELSE ['COIN'] END AS events,
              TIMESTAMP '{start}' + to_microseconds(
                CASE WHEN campaign_play
                     THEN start_h * 3600000000 + (h // 11) % ({DAYS} * 86400000000)
                     ELSE (h // 13) % ({DAYS + 1} * 86400000000) END) AS ts
            FROM a JOIN camp USING (c)
          ),
          deliveries AS (
            SELECT n, 0 AS k, h, player, game, currency, bet, events, ts FROM play
            UNION ALL
            SELECT n, 1 AS k, h, player, game, currency, bet, events, ts FROM play
            WHERE n < {shape.doubled}
          )
          SELECT
            strftime(ts + INTERVAL 2 SECOND + to_microseconds(k * 30000000),
                     '%Y-%m-%dT%H:%M:%S.%fZ') AS received_at,
            CASE WHEN k = 0 AND n % 2 = 1 THEN 503 ELSE 200 END AS status,
            (h % 120000) / 100.0 AS latency_ms,
            {{'roundId': 'R' || n::VARCHAR, 'gameId': game, 'playerId': player,
              'timestamp': strftime(ts, '%Y-%m-%dT%H:%M:%S.%f'), 'bet': bet,
              'currencyCode': currency, 'events': events,
              'actionId': md5(n::VARCHAR)::UUID::VARCHAR}} AS payload
          FROM deliveries
        ) TO '{path}' (FORMAT json)
        """
    )
    con.close()
