"""What ``webhooks find`` and ``webhooks replay`` add to the store's layout (schema
version 2 of ``_migrations.py``): the indexes a lookup reads, and the replays' tables.

A lookup by player, round or game reads an index on that field of the delivery's body,
so it never scans ``delivery_log``: an expression index, the same expression in the
index and in the query (:func:`field_sql`). The expression never fails, whatever the
body (a refused delivery may be anything): on SQLite a field of a valid JSON object,
else NULL; on PostgreSQL (no ``IS JSON`` before version 16) the string value that
follows the quoted key, found by a regular expression (NULL when there is none). Both
only narrow: every row found is parsed and checked again in Python (``_find.py``), so
a body where the key's text appears elsewhere is never a wrong match. The deliveries
of an action are read by ``delivery_log_action_id``.

``replays`` holds one row per replay (who, when, the filter, the counts);
``replay_items`` one row per action a replay chose, with whether it has been put back in
the processing queue yet (moved in the transaction that queues it, so a replay resumed
after a crash never queues an action twice).
"""

from __future__ import annotations

from typing import Final, Literal

Engine = Literal["sqlite", "postgres"]

#: The payload's fields a lookup finds through an index of its own, by index name.
INDEXED_FIELDS: Final = {
    "playerId": "delivery_log_player_id",
    "roundId": "delivery_log_round_id",
    "gameId": "delivery_log_game_id",
}


def field_sql(engine: Engine, name: str) -> str:
    """The SQL expression of the body's string field ``name``, as its index is built
    (the query must use the very same text for the planner to use the index)."""
    if not name.isalnum():
        raise ValueError(f"field name {name!r} must be letters and digits")
    if engine == "sqlite":
        return f"(CASE WHEN json_valid(body) THEN json_extract(body, '$.{name}') END)"
    return f'(substring(body from \'"{name}"\\s*:\\s*"([^"\\\\]*)"\'))'


def _indexes(engine: Engine) -> tuple[str, ...]:
    fields = tuple(
        f"CREATE INDEX IF NOT EXISTS {index} ON delivery_log ({field_sql(engine, name)})"
        for name, index in INDEXED_FIELDS.items()
    )
    return (
        "CREATE INDEX IF NOT EXISTS delivery_log_action_id ON delivery_log (action_id)",
        *fields,
        # A replay chooses stored actions by time (the purges' indexes are partial).
        "CREATE INDEX IF NOT EXISTS webhook_actions_first_received_at"
        " ON webhook_actions (first_received_at)",
    )


def _tables(ts: str, boolean: str) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE IF NOT EXISTS replays (
        replay_id TEXT PRIMARY KEY,
        created_at {ts} NOT NULL,
        created_by TEXT NOT NULL,
        filter TEXT NOT NULL,
        target TEXT NOT NULL,
        actions INTEGER NOT NULL,
        deliveries INTEGER NOT NULL,
        queued INTEGER NOT NULL DEFAULT 0,
        gone INTEGER NOT NULL DEFAULT 0,
        finished_at {ts}
    )""",
        f"""CREATE TABLE IF NOT EXISTS replay_items (
        replay_id TEXT NOT NULL,
        action_id TEXT NOT NULL,
        queued {boolean} NOT NULL,
        PRIMARY KEY (replay_id, action_id)
    )""",
    )


#: Schema version 2 on SQLite and on PostgreSQL (each statement idempotent).
SQLITE_FIND_DDL: Final = (*_indexes("sqlite"), *_tables("TEXT", "INTEGER"))
PG_FIND_DDL: Final = (*_indexes("postgres"), *_tables("timestamptz", "boolean"))
