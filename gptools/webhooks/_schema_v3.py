"""The tables of schema version 3 (issue 38): the contract watcher's first sightings and
the forwarding stage's per-destination state, as each engine writes them.

- ``webhook_first_seen``: one row per value first seen in a field whose set the provider's
  document leaves open (``kind``: event_type, field, currency, game), with when and in
  which action it was first seen, and whether the receiver refused it (a kind set to
  refuse). Its primary key makes the first sighting unique across workers and hosts:
  the row goes in with an insert that does nothing on conflict, and only the worker
  whose insert took counts and logs it (``_first_seen.py``).
- ``webhook_forwards``: one row per action and destination, the forwarding stage's
  queue (``_forward_store.py``): ``state`` pending / done / dead, ``attempts``,
  ``next_attempt_at``, the lease (``lease_until``, ``lease_owner``), ``last_error``,
  the body forwarded (the stored body, as it arrived) and ``forwarded_at``. A replay
  re-enqueues an action by setting its rows pending again
  (:meth:`~gptools.webhooks._forward_store.ForwardOperations.requeue_forwards`).

Kept apart from ``_schema.py`` (the layout of version 1) so that the migration that
lays these out is one step of ``_migrations.py``, whatever number it ends up with.
"""

from __future__ import annotations

#: The pending forwards are looked up by due time only: a partial index, like the queue's.
_FORWARD_INDEXES = (
    "CREATE INDEX IF NOT EXISTS webhook_forwards_pending ON webhook_forwards"
    " (next_attempt_at) WHERE state = 'pending'",
    "CREATE INDEX IF NOT EXISTS webhook_forwards_dead ON webhook_forwards"
    " (first_received_at) WHERE state = 'dead'",
    # The forwarding loop's purge finds the done rows past the log's retention by this.
    "CREATE INDEX IF NOT EXISTS webhook_forwards_done ON webhook_forwards"
    " (forwarded_at) WHERE state = 'done'",
)

SQLITE_V3_DDL = (
    """CREATE TABLE IF NOT EXISTS webhook_first_seen (
        kind TEXT NOT NULL,
        value TEXT NOT NULL,
        first_seen_at TEXT NOT NULL,
        first_action_id TEXT NOT NULL,
        refused INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (kind, value)
    )""",
    """CREATE TABLE IF NOT EXISTS webhook_forwards (
        action_id TEXT NOT NULL,
        destination TEXT NOT NULL,
        first_received_at TEXT NOT NULL,
        body TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT NOT NULL,
        lease_until TEXT,
        lease_owner TEXT,
        last_error TEXT,
        forwarded_at TEXT,
        PRIMARY KEY (action_id, destination)
    )""",
    *_FORWARD_INDEXES,
)

PG_V3_DDL = (
    """CREATE TABLE IF NOT EXISTS webhook_first_seen (
        kind text NOT NULL,
        value text NOT NULL,
        first_seen_at timestamptz NOT NULL,
        first_action_id text NOT NULL,
        refused boolean NOT NULL DEFAULT false,
        PRIMARY KEY (kind, value)
    )""",
    """CREATE TABLE IF NOT EXISTS webhook_forwards (
        action_id text NOT NULL,
        destination text NOT NULL,
        first_received_at timestamptz NOT NULL,
        body text NOT NULL,
        state text NOT NULL DEFAULT 'pending',
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL,
        lease_until timestamptz,
        lease_owner text,
        last_error text,
        forwarded_at timestamptz,
        PRIMARY KEY (action_id, destination)
    )""",
    *_FORWARD_INDEXES,
)
