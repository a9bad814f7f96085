"""Every reader gives the same metrics on the same data; bad logs get clear errors."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gptools.deliverylog import ColumnMapping, DeliveryLogError, analyze
from tests.deliverylog.conftest import PG_DSN, START, LogBuilder, random_log, write_json_lines


def _doc(source: Any, **kw: Any) -> dict[str, Any]:
    """The report without its source, floats to 9 significant digits (parallel sums may
    differ in the last bits)."""
    with analyze(source, **kw) as analysis:
        doc = analysis.report.to_dict()
    doc.pop("source")
    return _rounded(doc)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


@pytest.fixture(scope="module")
def builder() -> LogBuilder:
    return random_log(7, n_actions=200)


@pytest.fixture(scope="module")
def reference(builder: LogBuilder, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _doc(builder.write_jsonl(tmp_path_factory.mktemp("ref") / "log.jsonl"))


def test_reference_is_the_truth(builder: LogBuilder, reference: dict[str, Any]) -> None:
    assert reference["deliveries"] == builder.truth.deliveries
    assert reference["lost_actions"] == builder.truth.lost
    assert reference["invalid_deliveries"] == builder.truth.invalid > 0


def test_jsonl_with_body_text(
    builder: LogBuilder, reference: dict[str, Any], tmp_path: Path
) -> None:
    assert _doc(builder.write_jsonl(tmp_path / "b.jsonl", as_body=True)) == reference


def test_parquet(builder: LogBuilder, reference: dict[str, Any], tmp_path: Path) -> None:
    assert _doc(builder.write_parquet(tmp_path / "log.parquet")) == reference


def test_sqlite_store(builder: LogBuilder, reference: dict[str, Any], tmp_path: Path) -> None:
    path = builder.write_sqlite(tmp_path / "store.sqlite")
    assert _doc(path) == reference
    assert _doc(f"sqlite:///{path}") == reference


@pytest.mark.postgres
def test_postgres_store(
    builder: LogBuilder, reference: dict[str, Any], pg_conn: Any, pg_schema: str
) -> None:
    builder.write_postgres(pg_conn, pg_schema)
    assert _doc(f"{PG_DSN}?schema={pg_schema}") == reference
    assert _doc(PG_DSN, table=f"{pg_schema}.delivery_log") == reference


def test_the_receivers_store_and_exports(builder: LogBuilder, tmp_path: Path) -> None:
    """A store written by the receiver's own code, and its JSONL/Parquet exports."""
    webhooks = pytest.importorskip("gptools.webhooks")
    from gptools.webhooks._records import LogEntry, WriteItem

    store = webhooks.SQLiteStore(tmp_path / "receiver.sqlite")
    conn = store.connect()
    items = [
        WriteItem(LogEntry(
            received_at=datetime.fromisoformat(r["received_at"]), status=r["status"],
            body=builder.body_text(r), latency_ms=float(r["latency_ms"]),
        ))
        for r in builder.ordered()
    ]  # fmt: skip
    conn.write_batch(items)
    conn.close()
    from_store = _doc(tmp_path / "receiver.sqlite")
    assert from_store["deliveries"] == builder.truth.deliveries
    assert from_store["retries"] == builder.truth.retries
    for fmt, name in (("jsonl", "export.jsonl"), ("parquet", "export.parquet")):
        webhooks.export_log(store, tmp_path / name, format=fmt)
        assert _doc(tmp_path / name) == from_store, fmt


def test_column_mapping_for_a_proxy_log(tmp_path: Path) -> None:
    b = LogBuilder(5)
    b.action([503, 200], at=START, gaps=[30.0])
    b.action([400], at=START + timedelta(seconds=3))
    lines = [
        {"time": r["received_at"], "upstream_status": r["status"],
         "request_time": float(r["latency_ms"]) / 1000, "request_body": b.body_text(r)}
        for r in b.ordered()
    ]  # fmt: skip
    path = write_json_lines(tmp_path / "proxy.jsonl", lines)
    mapping = ColumnMapping(
        received_at="time", status="upstream_status", latency_ms="request_time",
        body="request_body", latency_unit="s",
    )  # fmt: skip
    with analyze(path, mapping=mapping) as analysis:
        r = analysis.report
        assert (r.deliveries, r.retries, r.lost_actions, r.acknowledged_actions) == (3, 1, 1, 1)
        assert r.ack_latency_ms["max"] == pytest.approx(max(b.truth.latencies))


def test_payload_that_is_not_an_object_is_counted(tmp_path: Path) -> None:
    lines = [
        {"received_at": "2026-03-01T12:00:00.000000Z", "status": 400, "latency_ms": 1.0,
         "payload": [1, 2]},
        {"received_at": "2026-03-01T12:00:01.000000Z", "status": 400, "latency_ms": 1.0,
         "payload": {"actionId": "a8098c1a-f86e-11da-bd1a-00112444be1e"}},
    ]  # fmt: skip
    with analyze(write_json_lines(tmp_path / "odd.jsonl", lines)) as analysis:
        r = analysis.report
        assert r.deliveries == 2 and r.invalid_by_reason == {"not_object": 1, "missing:roundId": 1}
        assert r.lost_actions == 1 and r.identity_holds


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"received_at": "yesterday", "status": 200, "latency_ms": 1, "body": "x"}\n', "line 1"),
        (
            '{"received_at": "2026-03-01T12:00:00Z", "latency_ms": 1, "body": "x"}\n'
            '{"received_at": "2026-03-01T12:00:00Z", "status": 200, "latency_ms": 1, '
            '"body": "x"}\n',
            "line 1",
        ),
        ('\n{"received_at": "2026-03-01T12:00:00Z", "status": "OK", "latency_ms": 1}\n', "line 2"),
    ],
    ids=["bad-time", "no-status", "text-status"],
)
def test_bad_log_names_the_place(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(DeliveryLogError) as info:
        analyze(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_bad_parquet_record_is_numbered(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({
        "received_at": ["2026-03-01T12:00:00Z", "later"], "status": [200, 200],
        "latency_ms": [1.0, 1.0], "body": ["x", "x"],
    }), path)  # fmt: skip
    with pytest.raises(DeliveryLogError, match="record 2"):
        analyze(path)


def test_unknown_files_and_tables(tmp_path: Path) -> None:
    with pytest.raises(DeliveryLogError, match="cannot tell the log format"):
        analyze(tmp_path / "log.txt")
    with pytest.raises(DeliveryLogError, match="no such file"):
        analyze(tmp_path / "missing.jsonl")
    store = LogBuilder(1).write_sqlite(tmp_path / "s.sqlite")
    with pytest.raises(DeliveryLogError, match="no such table"):
        analyze(store, table="other_table")
    with pytest.raises(DeliveryLogError, match=r"must be NAME or SCHEMA\.NAME"):
        analyze(store, table="x; DROP TABLE y")


def test_now_must_be_aware(tmp_path: Path) -> None:
    path = write_json_lines(tmp_path / "one.jsonl", [json.loads(
        '{"received_at": "2026-03-01T12:00:00Z", "status": 200, "latency_ms": 1, "body": "x"}'
    )])  # fmt: skip
    with pytest.raises(ValueError, match="timezone-aware"):
        analyze(path, now=datetime(2026, 3, 1))
