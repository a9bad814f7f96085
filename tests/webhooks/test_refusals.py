"""The refusal row budget (``webhooks._refusals``) and what a refused row keeps: unit tests
with a pinned clock, and the receiver's 413 keeping the 1 KB prefix it promises."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from gptools import spec
from gptools.webhooks import ReceiverAuth, WebhookReceiver, export_log, open_store
from gptools.webhooks._records import LogEntry, WriteItem
from gptools.webhooks._refusals import RefusalBudget, body_prefix
from tests.webhooks.conftest import JSON, ReceiverProcess, serve_in_thread

AT = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def test_rows_per_second_per_reason_then_counts() -> None:
    budget = RefusalBudget(rate=3, every=timedelta(seconds=10))
    now = 100.0
    admitted = [budget.admit("unauthorized", 401, now + i * 0.01, AT) for i in range(10)]
    assert admitted == [True] * 3 + [False] * 7
    # Another reason has a budget of its own; a new second a new one.
    assert budget.admit("not_found", 404, now, AT)
    assert budget.admit("unauthorized", 401, now + 1.0, AT)
    # Nothing is due before the interval; then one row per reason, counts reset.
    assert budget.summaries(now + 5, AT) == []
    (row,) = budget.summaries(now + 10, AT + timedelta(seconds=10))
    assert row.status == spec.WEBHOOK_SUMMARY_STATUS
    assert json.loads(row.body) == {
        "suppressed": 7,
        "reason": "unauthorized",
        "status": 401,
        "since": "2026-03-02T10:00:00.000000Z",
        "until": "2026-03-02T10:00:00.000000Z",
    }
    assert row.error is not None and row.error.startswith("suppressed: 7 unauthorized")
    assert budget.summaries(now + 30, AT) == []


def test_a_summary_that_could_not_be_written_is_counted_again() -> None:
    budget = RefusalBudget(rate=0)
    for _ in range(4):
        budget.admit("too_large", 413, 5.0, AT)
    (row,) = budget.summaries(6.0, AT, final=True)
    budget.restore(row)
    budget.admit("too_large", 413, 7.0, AT)
    (again,) = budget.summaries(20.0, AT)
    assert json.loads(again.body)["suppressed"] == 5


def test_a_summary_spans_its_first_suppressed_refusal_to_its_last() -> None:
    budget = RefusalBudget(rate=1, every=timedelta(seconds=10))
    moments = [AT + timedelta(seconds=i) for i in range(4)]
    # The first refusal of the second gets its row; the next three are counted.
    assert [budget.admit("not_found", 404, 50.0, at) for at in moments] == [
        True, False, False, False,
    ]  # fmt: skip
    (row,) = budget.summaries(60.0, AT + timedelta(minutes=1))
    summary = json.loads(row.body)
    assert (summary["suppressed"], summary["since"], summary["until"]) == (
        3, "2026-03-02T10:00:01.000000Z", "2026-03-02T10:00:03.000000Z",
    )  # fmt: skip
    assert row.error == (
        "suppressed: 3 not_found refusals (404) answered without a row of their own, "
        "2026-03-02T10:00:01.000000Z to 2026-03-02T10:00:03.000000Z"
    )
    # Its write failed, and one more refusal was counted meanwhile: the summary counted
    # again keeps its own start, the earlier one.
    assert not budget.admit("not_found", 404, 50.5, AT + timedelta(seconds=5))
    budget.restore(row)
    assert not budget.admit("not_found", 404, 50.5, AT + timedelta(seconds=9))
    (again,) = budget.summaries(120.0, AT + timedelta(minutes=2))
    assert json.loads(again.body) == {
        "suppressed": 5, "reason": "not_found", "status": 404,
        "since": "2026-03-02T10:00:01.000000Z", "until": "2026-03-02T10:00:09.000000Z",
    }  # fmt: skip


def test_rate_zero_keeps_no_row_and_bad_settings_are_refused() -> None:
    assert not RefusalBudget(rate=0).admit("unauthorized", 401, 0.0, AT)
    with pytest.raises(ValueError, match="0 or more"):
        RefusalBudget(rate=-1)
    with pytest.raises(ValueError, match="positive"):
        RefusalBudget(every=timedelta(0))


def test_the_prefix_is_1_kb_whatever_the_body() -> None:
    assert len(body_prefix(b"a" * 70_000).encode()) == spec.WEBHOOK_REFUSED_BODY_PREFIX_BYTES
    # A character cut in two at the end is replaced, never an error.
    cut = body_prefix(b"a" * 1023 + "é".encode())
    assert cut.endswith("\ufffd") and len(cut) == 1024


def test_a_413_keeps_the_prefix_it_promises(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    receiver = WebhookReceiver(f"sqlite:///{db}", auth=ReceiverAuth.none(), max_body_bytes=4096)
    body = b'{"actionId": "' + b"x" * 20_000 + b'"}'
    with serve_in_thread(receiver) as srv:
        r = httpx.post(srv.url, content=body, headers=JSON)
    assert r.status_code == 413
    assert f"first {spec.WEBHOOK_REFUSED_BODY_PREFIX_BYTES} bytes" in r.json()["reason"]
    with sqlite3.connect(db) as conn:
        (kept,) = conn.execute("SELECT body FROM delivery_log").fetchone()
    assert kept.encode() == body[: spec.WEBHOOK_REFUSED_BODY_PREFIX_BYTES]


def test_summary_rows_are_written_at_shutdown(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    receiver = WebhookReceiver(
        f"sqlite:///{db}",
        auth=ReceiverAuth.bearer("k"),
        refused_rows_per_second=0,
        refusal_summary_every=timedelta(hours=1),
    )
    with serve_in_thread(receiver) as srv, httpx.Client() as http:
        for _ in range(5):
            assert http.post(srv.url, content=b"{}", headers=JSON).status_code == 401
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, body FROM delivery_log").fetchall()
    assert [(s, json.loads(b)["suppressed"]) for s, b in rows] == [(0, 5)]


def test_an_export_never_parses_a_deep_refused_prefix(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite3'}"
    prefix = "[" * spec.WEBHOOK_REFUSED_BODY_PREFIX_BYTES
    conn = open_store(url).connect()
    try:
        conn.write_batch([WriteItem(LogEntry(AT, 401, prefix, auth_ok=False, latency_ms=1.0))])
    finally:
        conn.close()
    out = tmp_path / "log.jsonl"
    export_log(open_store(url), out, format="jsonl")
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["body"] == prefix and "payload" not in record


def test_the_serve_option_reaches_every_worker(
    tmp_path: Path, receiver_process: Callable[..., ReceiverProcess]
) -> None:
    db = tmp_path / "s.sqlite3"
    rp = receiver_process(f"sqlite:///{db}", workers=2, args=("--refused-rows-per-second", "0"))
    with httpx.Client(timeout=10) as http:
        for _ in range(6):
            assert http.post(rp.url, content=b"{}", headers=JSON).status_code == 401
    rp.terminate()  # each worker writes its summary row on the way out
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, body FROM delivery_log").fetchall()
    assert {s for s, _ in rows} == {spec.WEBHOOK_SUMMARY_STATUS}
    assert sum(json.loads(b)["suppressed"] for _, b in rows) == 6
