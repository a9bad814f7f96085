"""The register file's tables, and the migration of a register written before loads were
recorded in it.

Version 1 (``PRAGMA user_version`` 0) held the ``campaigns`` table alone: the players of a
campaign were the plan's ``player_ids`` when apply had sent them (``players_sent``), the
rest lived only in the participant loader's journals. Version 2 adds ``loads`` (one row
per participant load: its counts) and ``players`` (who was loaded into each campaign, once
each), so that the register alone answers who is in a campaign. Migrating copies what
version 1 knew (apply's players) into the new tables; a register that cannot be written
is read as it is (:func:`has_loads`).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Final

#: The version of the register's layout this code writes.
VERSION: Final = 2
#: The load key of the players ``apply_plan(add_participants=True)`` sent itself (not
#: through the loader, which names each load by its journal's identity).
APPLY_LOAD: Final = "apply"

CAMPAIGNS: Final = """
CREATE TABLE IF NOT EXISTS campaigns (
    server TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    brand INTEGER,
    plan_name TEXT NOT NULL,
    plan_hash TEXT NOT NULL,
    plan_json TEXT NOT NULL,
    campaign_type TEXT NOT NULL,
    currency TEXT NOT NULL,
    bet TEXT NOT NULL,
    bet_number INTEGER NOT NULL,
    game_ids TEXT NOT NULL,
    start_local TEXT NOT NULL,
    end_local TEXT NOT NULL,
    time_zone TEXT NOT NULL,
    players_sent INTEGER NOT NULL DEFAULT 0,
    recorded_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (server, campaign_id)
)
"""

LOADS: Final = """
CREATE TABLE IF NOT EXISTS loads (
    server TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    load_key TEXT NOT NULL,
    brand INTEGER,
    source TEXT NOT NULL,
    rows INTEGER NOT NULL,
    loaded INTEGER NOT NULL,
    rejected INTEGER NOT NULL,
    duplicate INTEGER NOT NULL,
    pending INTEGER NOT NULL,
    rejected_by_reason TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (server, campaign_id, load_key)
)
"""

PLAYERS: Final = """
CREATE TABLE IF NOT EXISTS players (
    server TEXT NOT NULL,
    campaign_id TEXT NOT NULL,
    player_id TEXT NOT NULL,
    load_key TEXT NOT NULL,
    PRIMARY KEY (server, campaign_id, player_id)
) WITHOUT ROWID
"""

#: Columns of ``loads``, in order (for inserts).
LOAD_COLUMNS: Final = (
    "server", "campaign_id", "load_key", "brand", "source", "rows", "loaded", "rejected",
    "duplicate", "pending", "rejected_by_reason", "recorded_at", "updated_at",
)  # fmt: skip

#: Insert or replace a load's counts; its first ``recorded_at`` is kept.
UPSERT_LOAD: Final = (
    f"INSERT INTO loads ({', '.join(LOAD_COLUMNS)}) VALUES ({', '.join('?' * len(LOAD_COLUMNS))}) "
    "ON CONFLICT (server, campaign_id, load_key) DO UPDATE SET "
    + ", ".join(
        f"{c} = excluded.{c}" for c in LOAD_COLUMNS if c not in ("server", "campaign_id",
                                                                 "load_key", "recorded_at")
    )
)  # fmt: skip

#: Add a player once per campaign (the first load that acknowledged it keeps it).
INSERT_PLAYER: Final = (
    "INSERT OR IGNORE INTO players (server, campaign_id, player_id, load_key) VALUES (?,?,?,?)"
)


def version(db: sqlite3.Connection) -> int:
    """The layout version of the register open in ``db`` (0: a new or version-1 file)."""
    return int(db.execute("PRAGMA user_version").fetchone()[0])


def tables(db: sqlite3.Connection) -> set[str]:
    """The names of the tables of the register open in ``db``."""
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def has_loads(db: sqlite3.Connection) -> bool:
    """Whether the register open in ``db`` has the ``loads`` and ``players`` tables (a
    version-1 register read as it is has not)."""
    return {"loads", "players"} <= tables(db)


def migrate(db: sqlite3.Connection) -> None:
    """Bring the register open in ``db`` (inside the caller's write transaction) to
    :data:`VERSION`: create what is missing, and copy the players apply sent in a
    version-1 register into ``players``, as the load :data:`APPLY_LOAD`."""
    if version(db) >= VERSION:
        return
    for statement in (CAMPAIGNS, LOADS, PLAYERS):
        db.execute(statement)
    rows = db.execute(
        "SELECT server, campaign_id, brand, plan_json, currency, players_sent, recorded_at, "
        "updated_at FROM campaigns WHERE players_sent > 0"
    ).fetchall()
    for server, campaign_id, brand, plan_json, currency, sent, recorded, updated in rows:
        line = json.loads(plan_json).get("currencies", {}).get(currency, {})
        ids = [str(p) for p in line.get("player_ids", ())][:sent]
        db.executemany(INSERT_PLAYER, ((server, campaign_id, p, APPLY_LOAD) for p in ids))
        db.execute(
            UPSERT_LOAD,
            (server, campaign_id, APPLY_LOAD, brand, "the plan's player_ids", len(ids),
             len(ids), 0, 0, 0, "{}", recorded, updated),
        )  # fmt: skip
    db.execute(f"PRAGMA user_version = {VERSION}")
