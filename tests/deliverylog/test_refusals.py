"""Refusals in the delivery log, as the receiver writes them (issue 22 item 1, issue 23
item 11): a summary row (status 0) is never a delivery or an action, its count is
reported as refusals the analysis cannot see; a 401'd delivery whose kept prefix is a
whole notification is an attempt of its action, which is lost; a refusal before
authentication or routing keeps its one name as the invalid reason; a bet that is no
sane amount is ``out_of_range:bet``. The same on DuckDB and Spark, and through the
receiver's own export."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gptools import spec
from gptools.deliverylog import analyze
from gptools.webhooks import export_log, open_store
from gptools.webhooks._records import LogEntry, WriteItem
from gptools.webhooks._refusals import RefusalBudget

AT = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
LOST = "7d3c43f2-34b4-4f3e-9d8a-2d1b0e0c7a11"
STORED = "0b9f3c1e-2a8d-4c6b-8f1e-5d4a3b2c1d0e"


def _body(action_id: str, bet: str = "2.10") -> str:
    return (
        '{"roundId":"R-1","gameId":"golden-pharaoh","playerId":"p-1",'
        f'"timestamp":"2026-03-02T09:59:59.000001","bet":{bet},"currencyCode":"EUR",'
        f'"events":["COIN"],"actionId":"{action_id}"}}'
    )


def _summary(count: int) -> LogEntry:
    budget = RefusalBudget(rate=0)
    for _ in range(count):
        assert not budget.admit("unauthorized", 401, 0.0, AT)
    (entry,) = budget.summaries(1e9, AT)
    return entry


def _entries() -> list[LogEntry]:
    """A stored action, a provider's delivery answered 401 (its key was rotated), 150
    refusals counted in one summary row, refusals of each kind before routing, and bets
    that are no sane amount."""
    e = [
        LogEntry(AT, 200, _body(STORED), STORED, latency_ms=3.0),
        LogEntry(AT, 401, _body(LOST), LOST, auth_ok=False, error="unauthorized: x"),
        _summary(150),
        LogEntry(AT, 404, "", error="not_found: x", latency_ms=0.5),
        LogEntry(AT, 405, "", error="method_not_allowed: x", latency_ms=0.5),
        LogEntry(AT, 413, '{"pad":"aaaa', error="too_large: x", latency_ms=0.5),
        LogEntry(AT, 415, "a=1", error="unsupported_media_type: x", latency_ms=0.5),
    ]
    for i, bet in enumerate(("1e400", "-0", "-0.0", "2.123456789", "-3")):
        action_id = f"00000000-0000-4000-8000-{i:012d}"
        e.append(LogEntry(AT, 422, _body(action_id, bet), error="invalid: x", latency_ms=1.0))
    for entry in e:
        entry.latency_ms = entry.latency_ms if entry.latency_ms is not None else 1.0
    return e


def _store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'refusals.sqlite3'}"
    conn = open_store(url).connect()
    try:
        conn.write_batch([WriteItem(e, accept=e.status == 200) for e in _entries()])
    finally:
        conn.close()
    return url


def _check(report: dict[str, Any], lost: list[str]) -> None:
    assert report["refusals_suppressed"] == 150
    # The summary row is no delivery: 11 rows of deliveries, the 12th a count.
    assert report["deliveries"] == 11
    assert "0" not in report["status_counts"]
    assert report["invalid_by_reason"] == {
        "not_found": 1,
        "method_not_allowed": 1,
        "too_large": 1,
        "unsupported_media_type": 1,
        "out_of_range:bet": 5,
    }
    assert report["actions"] == 7 and report["lost_actions"] == 6
    assert LOST in lost
    assert report["check"]["holds"]
    assert any("150 refusals" in w for w in report["warnings"])


def test_refusals_in_the_store_and_its_exports(tmp_path: Path) -> None:
    url = _store(tmp_path)
    with analyze(url) as a:
        _check(a.report.to_dict(), [str(x) for x in a.lost_actions().action_id])
        assert ("Refusals not logged one by one", "150") in a.report.headline()
    for fmt in ("jsonl", "parquet"):
        out = tmp_path / f"log.{fmt}"
        export_log(open_store(url), out, format=fmt)  # type: ignore[arg-type]
        with analyze(out) as a:
            _check(a.report.to_dict(), [str(x) for x in a.lost_actions().action_id])
    # A summary row is recognisable in an export: status 0 and its count.
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    (summary,) = [x for x in lines if x["status"] == spec.WEBHOOK_SUMMARY_STATUS]
    assert summary["payload"]["suppressed"] == 150 and summary["error"].startswith("suppressed")
    # -0 keeps its sign in the export: the body stays text.
    assert sum('"bet":-0,' in x.get("body", "") for x in lines) == 1


def test_refusals_are_the_same_on_both_engines(tmp_path: Path, spark: Any) -> None:
    url = _store(tmp_path)
    out = tmp_path / "log.jsonl"
    export_log(open_store(url), out, format="jsonl")
    with analyze(out) as duck, analyze(out, engine="spark", spark=spark) as sp:
        one, two = duck.report.to_dict(), sp.report.to_dict()
        for r, a in ((one, duck), (two, sp)):
            _check(r, [str(x) for x in a.lost_actions().action_id])
        one.pop("source"), two.pop("source")
        assert one == two


def test_a_kept_refusal_row_names_its_action() -> None:
    from gptools.webhooks._refusals import action_id_in

    action_id = str(uuid.uuid4())
    body = _body(action_id.upper()).encode()
    assert action_id_in(body) == action_id
    assert action_id_in(b'{"actionId": "' + action_id.encode() + b'"') == action_id
    assert action_id_in(b"x" * 1100 + body) is None  # past the kept prefix
    assert action_id_in(b'{"actionId":"nope"}') is None
