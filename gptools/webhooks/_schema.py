"""The store's tables, as each engine writes them, and the statements both engines share.

Five tables:

- ``delivery_log``: one row per delivery attempt. Its columns are a contract that the log
  analyser reads (docs/design.md, "The delivery-log fields"): ``received_at``, ``status``,
  ``latency_ms``, ``body``, ``action_id``, ``duplicate``, ``auth_ok``, ``error``,
  ``remote_addr``.
- ``webhook_actions``: one row per distinct ``actionId``; its primary key is the durable
  dedupe key, and the same row is the action's entry in the processing queue (``state``
  pending / done / dead, ``attempts``, ``next_attempt_at``, ``lease_until``,
  ``lease_owner``).
- ``log_export_marks``: per export target, the ``received_at`` up to which the log has
  been exported; the log's retention purge never deletes past it.
- ``unacknowledged_actions``: the actions answered only 5xx so far (by an authenticated
  request), with the first such ``received_at``: fed in the transaction that writes their
  5xx rows, cleared in the background once the action is stored (acknowledged), so the
  oldest is one index read whatever the size of the log (``_outage_store.py``).
- ``spool_replay_marks``: per outage spool file, how many of its rows are in
  ``delivery_log``, moved in the transaction that writes them, so a replay that a crash
  interrupted never writes a row twice (``_outage_store.py``).
- ``webhook_leases``: who does a store-wide job this round (the purge), so that one
  worker of all those sharing the store does it, not every one.
- ``webhook_schema_version``: one row per migration applied (``_migrations.py``); the
  highest ``version`` is the store's, ``compatible_from`` the oldest version whose code
  still runs on it.

The DDL lists below are the layout at the current schema version: migration 1 of
``_migrations.py`` runs them (every statement idempotent, ``IF NOT EXISTS``). Until a
release has shipped version 1, a new table or index goes into these lists; after that,
into a new migration.
"""

from __future__ import annotations

#: The columns of ``delivery_log``, in order (the contract of docs/design.md).
LOG_COLUMNS: tuple[str, ...] = (
    "received_at",
    "status",
    "latency_ms",
    "body",
    "action_id",
    "duplicate",
    "auth_ok",
    "error",
    "remote_addr",
)

#: The version table's name (read by every connection, written by migrations).
VERSION_TABLE = "webhook_schema_version"

#: Only pending actions are ever looked up by due time, so only they are indexed: most
#: actions are done at once and then cost the index nothing. (The first layout indexed
#: every row on (state, next_attempt_at); migration 1 replaces it.) Dead letters have
#: a partial index of their own, in the order they are listed: with the pending one, the
#: queue's counts for the metrics (``queue_depth``) read only these actions.
QUEUE_INDEX_DDL = (
    "DROP INDEX IF EXISTS webhook_actions_due",
    "CREATE INDEX IF NOT EXISTS webhook_actions_pending ON webhook_actions (next_attempt_at)"
    " WHERE state = 'pending'",
    "CREATE INDEX IF NOT EXISTS webhook_actions_dead ON webhook_actions (first_received_at)"
    " WHERE state = 'dead'",
)

#: The oldest unacknowledged action is read by this index (one step, whatever the size).
OUTAGE_INDEX_DDL = (
    "CREATE INDEX IF NOT EXISTS unacknowledged_actions_first_received_at"
    " ON unacknowledged_actions (first_received_at)",
)
#: The purges find their rows by these, never by a scan of the table: the log's by
#: ``received_at``; the dedupe keys' by ``first_received_at``, among processed actions
#: only (the only ones the purge deletes).
PURGE_INDEX_DDL = (
    "CREATE INDEX IF NOT EXISTS delivery_log_received_at ON delivery_log (received_at)",
    "CREATE INDEX IF NOT EXISTS webhook_actions_done ON webhook_actions (first_received_at)"
    " WHERE state = 'done'",
)

SQLITE_DDL = (
    """CREATE TABLE IF NOT EXISTS delivery_log (
        received_at TEXT NOT NULL,
        status INTEGER NOT NULL,
        latency_ms REAL NOT NULL,
        body TEXT NOT NULL,
        action_id TEXT,
        duplicate INTEGER NOT NULL,
        auth_ok INTEGER NOT NULL,
        error TEXT,
        remote_addr TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS webhook_actions (
        action_id TEXT PRIMARY KEY,
        first_received_at TEXT NOT NULL,
        body TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT NOT NULL,
        lease_until TEXT,
        last_error TEXT,
        lease_owner TEXT
    )""",  # a rowid table: with the body inline, WITHOUT ROWID made inserts 2.5x slower
    """CREATE TABLE IF NOT EXISTS log_export_marks (
        target TEXT PRIMARY KEY,
        exported_through TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS webhook_leases (
        name TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        held_until TEXT NOT NULL
    )""",
    f"""CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
        version INTEGER PRIMARY KEY,
        compatible_from INTEGER NOT NULL,
        description TEXT NOT NULL,
        applied_at TEXT NOT NULL,
        applied_by TEXT NOT NULL
    )""",
    *QUEUE_INDEX_DDL,
    """CREATE TABLE IF NOT EXISTS unacknowledged_actions (
        action_id TEXT PRIMARY KEY,
        first_received_at TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS spool_replay_marks (
        spool TEXT PRIMARY KEY,
        replayed_rows INTEGER NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    *OUTAGE_INDEX_DDL,
    *PURGE_INDEX_DDL,
)

PG_DDL = (
    """CREATE TABLE IF NOT EXISTS delivery_log (
        received_at timestamptz NOT NULL,
        status integer NOT NULL,
        latency_ms double precision NOT NULL,
        body text NOT NULL,
        action_id text,
        duplicate boolean NOT NULL,
        auth_ok boolean NOT NULL,
        error text,
        remote_addr text
    )""",
    """CREATE TABLE IF NOT EXISTS webhook_actions (
        action_id text PRIMARY KEY,
        first_received_at timestamptz NOT NULL,
        body text NOT NULL,
        state text NOT NULL DEFAULT 'pending',
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL,
        lease_until timestamptz,
        last_error text,
        lease_owner text
    )""",
    # Stores made before leases had owners get the column (a no-op on new ones).
    "ALTER TABLE webhook_actions ADD COLUMN IF NOT EXISTS lease_owner text",
    """CREATE TABLE IF NOT EXISTS log_export_marks (
        target text PRIMARY KEY,
        exported_through timestamptz NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS webhook_leases (
        name text PRIMARY KEY,
        holder text NOT NULL,
        held_until timestamptz NOT NULL
    )""",
    f"""CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
        version integer PRIMARY KEY,
        compatible_from integer NOT NULL,
        description text NOT NULL,
        applied_at timestamptz NOT NULL,
        applied_by text NOT NULL
    )""",
    *QUEUE_INDEX_DDL,
    """CREATE TABLE IF NOT EXISTS unacknowledged_actions (
        action_id text PRIMARY KEY,
        first_received_at timestamptz NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS spool_replay_marks (
        spool text PRIMARY KEY,
        replayed_rows bigint NOT NULL,
        updated_at timestamptz NOT NULL
    )""",
    *OUTAGE_INDEX_DDL,
    *PURGE_INDEX_DDL,
)

INSERT_LOG = (
    f"INSERT INTO delivery_log ({', '.join(LOG_COLUMNS)})"
    f" VALUES ({', '.join('?' for _ in LOG_COLUMNS)})"
)
#: A plain insert: a key that exists already would be a bug, and fails the whole batch.
SQLITE_INSERT_ACTION = (
    "INSERT INTO webhook_actions (action_id, first_received_at, body, next_attempt_at, state)"
    " VALUES (?, ?, ?, ?, ?)"
)
SQLITE_EXISTING = (
    "SELECT action_id FROM webhook_actions WHERE action_id IN (SELECT value FROM json_each(?))"
)
#: A batch's actions in ONE statement (one round trip, not one per action), which also
#: reads the transaction id: RETURNING names the keys that were new. The rows go in
#: ordered by key, so two processes' batches lock shared keys in the same order and
#: cannot deadlock; a key repeated in the batch is inserted at its first occurrence.
PG_INSERT_ACTIONS = (
    "WITH inserted AS ("
    "INSERT INTO webhook_actions (action_id, first_received_at, body, next_attempt_at, state)"
    " SELECT a, t, b, t, %s"
    " FROM unnest(%s::text[], %s::timestamptz[], %s::text[]) WITH ORDINALITY AS batch(a, t, b, n)"
    " ORDER BY a, n ON CONFLICT (action_id) DO NOTHING RETURNING action_id)"
    " SELECT txid_current(), ARRAY(SELECT action_id FROM inserted)"
)
#: An action answered 5xx by an authenticated request (action_id, received_at): kept with
#: its earliest such answer (one acknowledged already is cleared by the next refresh).
NOTE_UNACKNOWLEDGED = (
    "INSERT INTO unacknowledged_actions (action_id, first_received_at) VALUES (?, ?)"
    " ON CONFLICT (action_id) DO UPDATE SET first_received_at = excluded.first_received_at"
    " WHERE excluded.first_received_at < unacknowledged_actions.first_received_at"
)
