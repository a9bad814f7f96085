"""Housekeeping that stays cheap (issue 34, item 8): the purges find their rows through
an index, as the engines' own plans of the statements the purge ran say (and, with the
tables' indexes dropped, the same plans scan the table: the check tells the two apart);
and one round of purges is done once per store, not once per worker."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from gptools.webhooks import Maintenance, open_store
from gptools.webhooks._records import LogEntry, WriteItem
from tests.webhooks.conftest import PG_DSN, StatementRecorder, event, wire

NOW = datetime(2026, 6, 1, tzinfo=UTC)
#: Rows inside every retention, and rows past them (the purge deletes the latter).
RECENT, OLD = 4000, 40
#: The purges' indexes, by table.
INDEXES = {"delivery_log": "delivery_log_received_at", "webhook_actions": "webhook_actions_done"}


def _fill(url: str) -> None:
    """RECENT actions and log rows inside every retention, OLD ones past them."""
    conn = open_store(url).connect()
    try:
        for at, n in ((NOW - timedelta(days=200), OLD), (NOW - timedelta(hours=1), RECENT)):
            items = []
            for _ in range(n):
                action_id = str(uuid.uuid4())
                body = wire(event(action_id)).decode()
                entry = LogEntry(at, 200, body, action_id, latency_ms=1.0)
                items.append(WriteItem(entry, accept=True))
            for start in range(0, len(items), 500):
                conn.write_batch(items[start : start + 500], state="done")
    finally:
        conn.close()


def _purge_statements(url: str) -> list[tuple[str, tuple[Any, ...]]]:
    """Run both purges and return the reads and deletes they sent."""
    conn = open_store(url).connect()
    recorder = StatementRecorder(conn.raw)
    conn.raw = recorder
    try:
        assert conn.purge(NOW) == OLD
        assert conn.purge_log(NOW).rows == OLD
    finally:
        conn.raw = recorder._raw
        conn.close()
    return [
        (sql, params)
        for sql, params in recorder.statements
        if sql.lstrip().upper().startswith(("SELECT", "DELETE"))
    ]


def _plans(url: str, statements: list[tuple[str, tuple[Any, ...]]]) -> list[tuple[str, str]]:
    """(statement, its plan) for each statement, as the engine would run it."""
    plans = []
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url[len("sqlite:///") :]) as raw:
            for sql, params in statements:
                rows = raw.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
                plans.append((sql, " | ".join(str(r[-1]) for r in rows)))
        return plans
    schema = url.partition("?schema=")[2]
    with psycopg.connect(PG_DSN, autocommit=True) as raw:
        raw.execute(f'SET search_path TO "{schema}"')
        raw.execute("ANALYZE delivery_log")
        raw.execute("ANALYZE webhook_actions")
        for sql, params in statements:
            rows = raw.execute(f"EXPLAIN {sql}", params).fetchall()
            plans.append((sql, " | ".join(str(r[0]) for r in rows)))
    return plans


def _drop_indexes(url: str) -> list[str]:
    """Drop every index of the purged tables but their keys' (the purges' own, and any
    other a later schema version added that could find the same rows, such as version
    2's ``webhook_actions_first_received_at``); return the names dropped."""
    tables = tuple(INDEXES)
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url[len("sqlite:///") :]) as raw:
            names = [
                r[0]
                for r in raw.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
                    " AND tbl_name IN (?, ?)",
                    tables,
                )
            ]
            for name in names:
                raw.execute(f'DROP INDEX "{name}"')
        return names
    with psycopg.connect(PG_DSN, autocommit=True) as raw:
        raw.execute(f'SET search_path TO "{url.partition("?schema=")[2]}"')
        names = [
            r[0]
            for r in raw.execute(
                "SELECT i.relname FROM pg_index x"
                " JOIN pg_class i ON i.oid = x.indexrelid"
                " JOIN pg_class t ON t.oid = x.indrelid"
                " WHERE t.oid IN (%s::regclass, %s::regclass)"
                " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)",
                tables,
            )
        ]
        for name in names:
            raw.execute(f'DROP INDEX "{name}"')
    return names


def _scans(plan: str) -> bool:
    """Whether a plan reads a whole purged table (SQLite's SCAN, PostgreSQL's Seq Scan;
    the scan of a statement's own list of row addresses is no such read)."""
    return any(f"Seq Scan on {t}" in plan or f"SCAN {t}" in plan for t in INDEXES)


def test_the_purges_find_their_rows_through_an_index(store_url: str) -> None:
    _fill(store_url)
    statements = _purge_statements(store_url)
    finds = [(sql, p) for sql, p in statements if sql.lstrip().upper().startswith("SELECT")]
    assert {t for t in INDEXES if any(f"FROM {t} " in sql for sql, _ in finds)} == set(INDEXES)
    for sql, plan in _plans(store_url, statements):
        assert not _scans(plan), f"{sql}\n  scans: {plan}"
        table = next(t for t in INDEXES if f"FROM {t} " in sql)
        if sql.lstrip().upper().startswith("SELECT"):
            assert INDEXES[table] in plan, f"{sql}\n  not by its index: {plan}"
    # The same statements without any index to find their rows by: the check tells.
    assert set(INDEXES.values()) <= set(_drop_indexes(store_url))
    unindexed = _plans(store_url, [(s, p) for s, p in statements if s in dict(finds)])
    assert unindexed and all(_scans(plan) for _, plan in unindexed), unindexed


@pytest.fixture
def maintenances(store_url: str) -> Iterator[list[Maintenance]]:
    """Two workers' maintenance on one store (each with its own store object and link)."""
    clock = [NOW]
    made = [
        Maintenance(open_store(store_url), every=timedelta(hours=1), clock=lambda: clock[0])
        for _ in range(2)
    ]
    yield made
    for m in made:
        m.link.close()


def test_one_worker_purges_each_round_for_the_whole_store(
    store_url: str, maintenances: list[Maintenance]
) -> None:
    _fill(store_url)
    first, second = maintenances
    assert first.run_once() == (OLD, OLD)
    conn = second.link.get()
    recorder = StatementRecorder(conn.raw)
    conn.raw = recorder
    try:
        assert second.run_once() == (0, 0)  # this round is the first worker's
    finally:
        conn.raw = recorder._raw
    assert second.rounds_skipped == 1
    read = [
        sql for sql, _ in recorder.statements if "delivery_log" in sql or "state = 'done'" in sql
    ]
    assert read == [], read  # not a single read of the tables it would purge
    assert first.run_once() == (0, 0) and first.rounds_skipped == 0  # its own lease renews
