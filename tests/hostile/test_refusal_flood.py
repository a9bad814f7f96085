"""A flood of refused requests from a stranger (wrong key, large bodies) on loopback: the
store grows by a fixed bound whatever the flood's size, every refusal is accounted for
(kept rows plus the counts of summary rows), and real deliveries sent during the flood are
all acknowledged and stored exactly once."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gptools import spec
from gptools.webhooks import ReceiverAuth, WebhookReceiver
from tests.webhooks.conftest import JSON, event, serve_in_thread, wire

KEY = "flood-test-key"
GOOD = {**JSON, "authorization": f"Bearer {KEY}"}
BAD = {**JSON, "authorization": "Bearer not-the-key"}
FLOOD = 400
FLOOD_BODY = 60 * 1024
REAL = 40
RATE = 20
#: The store may grow by this much during the flood (24 MB of refused bodies are sent;
#: the old receiver kept every byte of them).
GROWTH_BOUND = 2 * 1024 * 1024
DEADLINE_S = 20.0


def _store_bytes(db: Path) -> int:
    """What the store keeps: its files once the write-ahead log is checkpointed into the
    database and truncated. Uncheckpointed, the WAL holds every page each commit touched
    (the table's and each of its indexes'), up to SQLite's automatic checkpoint (1,000
    pages) whatever the flood; a WAL that cannot be checkpointed (a reader never done) is
    still counted here, whole."""
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def _suppressed_metric(base_url: str) -> float:
    total = 0.0
    for family in text_string_to_metric_families(httpx.get(f"{base_url}/metrics").text):
        for sample in family.samples:
            if sample.name == "gptools_webhook_refusals_suppressed_total":
                total += sample.value if sample.labels.get("reason") == "unauthorized" else 0
    return total


def test_a_401_flood_costs_a_bounded_store_and_real_deliveries_pass(tmp_path: Path) -> None:
    db = tmp_path / "flood.sqlite3"
    receiver = WebhookReceiver(
        f"sqlite:///{db}",
        auth=ReceiverAuth.bearer(KEY),
        refused_rows_per_second=RATE,
        refusal_summary_every=timedelta(milliseconds=200),
    )
    # A stranger's body that names an actionId in its first kilobyte, then padding.
    stranger = wire(event())[:-1] + b', "pad": "' + b"x" * FLOOD_BODY + b'"}'
    real_ids = [str(uuid.uuid4()) for _ in range(REAL)]
    with serve_in_thread(receiver) as srv:
        before = _store_bytes(db)
        metric_before = _suppressed_metric(srv.base_url)
        started = time.monotonic()
        done = threading.Event()

        def flood(n: int) -> list[int]:
            with httpx.Client(timeout=10) as http:
                return [
                    http.post(srv.url, content=stranger, headers=BAD).status_code for _ in range(n)
                ]

        def real() -> list[int]:
            statuses = []
            with httpx.Client(timeout=10) as http:
                for action_id in real_ids:
                    statuses.append(
                        http.post(srv.url, content=wire(event(action_id)), headers=GOOD).status_code
                    )
            done.set()
            return statuses

        with ThreadPoolExecutor(5) as pool:
            floods = [pool.submit(flood, FLOOD // 4) for _ in range(4)]
            reals = pool.submit(real)
            flood_statuses = [s for f in floods for s in f.result()]
            real_statuses = reals.result()
        elapsed = time.monotonic() - started
        assert flood_statuses == [401] * FLOOD
        assert real_statuses == [200] * REAL

        # Every refusal is accounted for: a kept row, or the count of a summary row.
        deadline = time.monotonic() + DEADLINE_S
        while True:
            with sqlite3.connect(db) as conn:
                kept = conn.execute(
                    "SELECT length(body), action_id FROM delivery_log WHERE status = 401"
                ).fetchall()
                summaries = [
                    json.loads(b)
                    for (b,) in conn.execute(
                        "SELECT body FROM delivery_log WHERE status = ?",
                        (spec.WEBHOOK_SUMMARY_STATUS,),
                    )
                ]
            suppressed = sum(s["suppressed"] for s in summaries)
            if len(kept) + suppressed == FLOOD or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(kept) + suppressed == FLOOD, (len(kept), suppressed)
        # Rows within the budget: RATE a second (the flood's seconds, both ends partial).
        assert len(kept) <= RATE * (int(elapsed) + 2)
        assert suppressed > 0 and {s["reason"] for s in summaries} == {"unauthorized"}
        assert all(s["status"] == 401 for s in summaries)
        # A kept row holds a 1 KB prefix and the actionId the prefix names.
        assert all(n <= spec.WEBHOOK_REFUSED_BODY_PREFIX_BYTES for n, _ in kept)
        assert all(a is not None for _, a in kept)
        growth = _store_bytes(db) - before
        assert growth < GROWTH_BOUND, growth

        # The metric counts what got no row (its flush runs every half second).
        deadline = time.monotonic() + DEADLINE_S
        while _suppressed_metric(srv.base_url) - metric_before < suppressed:
            assert time.monotonic() < deadline, "suppressed refusals not counted"
            time.sleep(0.05)

    # Real deliveries: each stored once, acknowledged once.
    with sqlite3.connect(db) as conn:
        stored = [a for (a,) in conn.execute("SELECT action_id FROM webhook_actions")]
        acked = [
            a for (a,) in conn.execute("SELECT action_id FROM delivery_log WHERE status = 200")
        ]
    assert sorted(stored) == sorted(real_ids)
    assert sorted(acked) == sorted(real_ids)
