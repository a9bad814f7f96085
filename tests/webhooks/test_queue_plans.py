"""The processing queue stays fast through a burst (issue 38, item 5): a run's outcome
finds its action by the primary key, never through the partial index of pending actions.

PostgreSQL's statistics lag behind a burst: after ANALYZE saw every action done, 2,000
made pending since still look like none, the pending index looks nearly empty, and a
statement that says ``state = 'pending'`` is planned through it: a scan of every pending
action per outcome (17 ms each at 100,000). The plans of the statements the queue really
sent are asked of PostgreSQL in that state; the same statement with the state condition
put back is planned through the pending index (the check tells the two apart)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg

from gptools.webhooks import ProcessingQueue, open_store
from gptools.webhooks._records import LogEntry, WriteItem
from tests.webhooks.conftest import PG_DSN, StatementRecorder, event, wire

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DONE, BURST = 6000, 2000


def _plan(raw: psycopg.Connection[Any], sql: str, params: tuple[Any, ...]) -> str:
    return " | ".join(str(r[0]) for r in raw.execute(f"EXPLAIN {sql}", params).fetchall())


def test_an_outcome_finds_its_action_by_key_while_statistics_lag(pg_url: str) -> None:
    store = open_store(pg_url)
    conn = store.connect()
    try:
        ids = [str(uuid.UUID(int=k + 1, version=4)) for k in range(DONE + BURST)]
        items = [
            WriteItem(LogEntry(NOW, 200, wire(event(a)).decode(), a, latency_ms=1.0), accept=True)
            for a in ids
        ]
        for start in range(0, DONE, 1000):
            conn.write_batch(items[start : start + 1000], state="done")
    finally:
        conn.close()
    schema = pg_url.partition("?schema=")[2]
    with psycopg.connect(PG_DSN, autocommit=True) as raw:
        raw.execute(f'SET search_path TO "{schema}"')
        raw.execute("ANALYZE webhook_actions")
    conn = store.connect()
    try:
        for start in range(DONE, DONE + BURST, 1000):
            conn.write_batch(items[start : start + 1000], state="pending")
    finally:
        conn.close()

    queue = ProcessingQueue(store, lambda e: None, batch=1, clock=lambda: NOW)
    conn = store.connect()
    recorder = StatementRecorder(conn.raw)
    conn.raw = recorder
    try:
        assert queue.run_due(conn) == 1
    finally:
        conn.raw = recorder._raw
        conn.close()
        queue.stop()
    updates = [(s, p) for s, p in recorder.statements if s.lstrip().startswith("UPDATE")]
    assert len(updates) == 2  # the claim, then the outcome
    outcome_sql, outcome_params = updates[1]
    assert "SET state = " in outcome_sql
    with psycopg.connect(PG_DSN, autocommit=True) as raw:
        raw.execute(f'SET search_path TO "{schema}"')
        plan = _plan(raw, outcome_sql, outcome_params)
        assert "webhook_actions_pkey" in plan and "webhook_actions_pending" not in plan, plan
        with_state = _plan(raw, outcome_sql + " AND state = 'pending'", outcome_params)
        assert "webhook_actions_pending" in with_state, with_state
