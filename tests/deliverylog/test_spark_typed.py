"""The Spark engine's typed pass (issue 25): most rows are proved valid from a typed
reading, the rest take the general path; either way every delivery's verdict and values
equal DuckDB's, type confusion included (a number where a string belongs, a bet written
as a string, keys written with escapes, repeated keys, spaces after colons)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gptools.deliverylog import analyze
from tests.deliverylog.test_engines import _close, _rows
from tests.deliverylog.test_validity import GOOD as VALID

ACTION = "a8098c1a-f86e-11da-bd1a-00112444be1e"
GOOD: dict[str, Any] = {"actionId": ACTION, **VALID}


def _raw(**fields: str) -> str:
    """A payload's JSON text with some fields written as raw JSON text."""
    parts = [f'"{k}":{fields.pop(k) if k in fields else json.dumps(v)}' for k, v in GOOD.items()]
    parts += [f'"{k}":{v}' for k, v in fields.items()]
    return "{" + ",".join(parts) + "}"


#: Bodies (JSON text of the payload), each a trap for a typed reading.
BODIES: list[str] = [
    json.dumps(GOOD, separators=(",", ":")),
    json.dumps(GOOD),  # spaces after every colon and comma
    _raw(playerId='"12345"'),  # a numeric string: valid
    _raw(playerId="12345"),  # a number where a string belongs
    _raw(roundId="7", gameId='"7"'),
    _raw(playerId="true"),
    _raw(playerId='{"id":"p-1"}'),
    _raw(currencyCode='"NaN"'),
    _raw(bet='"2.5"'),  # a bet written as a string
    _raw(bet="2.50"),
    _raw(bet="0"),
    _raw(bet="-0"),
    _raw(bet="-1.5"),
    _raw(bet="0.1234"),
    _raw(bet="1e3"),
    _raw(bet="123456789012.5"),
    _raw(events='["COIN",1]'),
    _raw(events='["BONUS"]'),
    _raw(events='["COIN",null]'),
    _raw(events='["FEATURE","FEATURE"]'),
    _raw(events="[]"),
    _raw(events='"COIN"'),
    _raw(actionId=json.dumps(ACTION.upper())),
    _raw(actionId=json.dumps("{" + ACTION + "}")),
    _raw(timestamp='"2026-11-21T24:00:00"'),
    _raw(timestamp='"2026-11-21T10:15:30Z"'),
    _raw(timestamp='"0000-01-01T00:00:00"'),
    _raw(playerId='"p\\u002d1"'),  # an escape inside a value
    '{"actionId":"' + ACTION + '","r\\u006fundId":7,"gameId":"g","playerId":"p",'
    '"timestamp":"2026-11-21T10:15:30","bet":1,"currencyCode":"EUR","events":[],'
    '"x":{"roundId":"nested"}}',  # an escaped key with a nested decoy
    '{"actionId":"' + ACTION + '","roundId":"1","gameId":"g","playerId":"p",'
    '"timestamp":"2026-11-21T10:15:30","b\\u0065t":"1","currencyCode":"EUR",'
    '"events":[],"x":{"bet":2}}',
    _raw(extra='{"bet":"x","playerId":5}'),  # the keys again, nested
    '{"actionId":"' + ACTION + '","roundId":"1","gameId":"g","playerId":"p",'
    '"timestamp":"2026-11-21T10:15:30","currencyCode":"EUR","events":[],'
    '"x":{"bet":2}}',  # no bet of its own, one nested: missing
    # a final newline inside a value: Java's "$" matches before it, RE2's does not
    _raw(actionId=json.dumps(ACTION + "\n")),
    _raw(actionId=json.dumps("{" + ACTION + "}\n")),
    _raw(timestamp=json.dumps("2026-11-21T10:15:30\n")),
    _raw(currencyCode=json.dumps("EUR\n")),
    "{}",
    "[1, 2]",
    "not json",
    # Something after the object: Spark's parsers read the first value and stop there.
    json.dumps(GOOD) + " x",
    json.dumps(GOOD) + "}",
    json.dumps(GOOD) + "]",
    json.dumps(GOOD) + " ]",
    json.dumps(GOOD) * 2,
    json.dumps(GOOD) + ',{"a":1}',
    json.dumps(GOOD) + " \n",  # whitespace only: valid
    _raw(extra='[{"a":1}]'),  # an array of objects inside: valid
]


def _records(form: str) -> list[dict[str, Any]]:
    out = []
    for i, body in enumerate(BODIES):
        record: dict[str, Any] = {
            "received_at": f"2026-11-21T10:{i // 60:02d}:{i % 60:02d}.000000Z",
            "status": 200 if i % 3 else 503,
            "latency_ms": 1.5,
        }
        if form == "payload" and body.startswith("{"):
            try:
                record["payload"] = json.loads(body)
            except ValueError:
                record["body"] = body
        else:
            record["body"] = body
        out.append(record)
    return out


def _write(tmp_path: Path, form: str) -> Path:
    records = _records("payload" if form == "payload" else "body")
    if form == "parquet":
        path = tmp_path / "log.parquet"
        pq.write_table(pa.Table.from_pylist(records), path)
        return path
    path = tmp_path / f"{form}.jsonl"
    if form == "payload":
        # The payload's own text, byte for byte (json.loads would lose the traps).
        lines = []
        for record, body in zip(records, BODIES, strict=True):
            head = {k: v for k, v in record.items() if k != "payload"}
            text = json.dumps(head)
            if "payload" in record:
                text = text[:-1] + ', "payload": ' + body + "}"
            lines.append(text)
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def _verdicts(analysis: Any) -> list[dict[str, Any]]:
    t = analysis.attempts
    frame = analysis.log.execute(
        t.select(
            "received_at", "status", "reason", "round_id", "game_id", "player_id",
            "currency_code", "bet", "event_ts", "events",
            action_id=t.action_id.cast("string"),
        )
    )  # fmt: skip
    return _rows(frame)


@pytest.mark.parametrize("form", ["payload", "body", "parquet"])
def test_every_verdict_equals_duckdb(tmp_path: Path, spark: Any, form: str) -> None:
    path = _write(tmp_path, form)
    with analyze(path) as duck, analyze(path, engine="spark", spark=spark) as sp:
        assert _verdicts(sp) == _verdicts(duck)
        _close(sp.report.to_dict() | {"source": ""}, duck.report.to_dict() | {"source": ""}, "")
        # The typed pass proved the plain valid rows (the first, the spaced one, the
        # numeric string id, the zero-padded bet, the empty events): they never took the
        # general path.
        raw = sp.log.raw
        known = sp.log.execute(raw.filter(raw.known_valid).count())
        assert known >= 5, known
        invalid = duck.report.invalid_deliveries
        assert known <= len(BODIES) - invalid


def test_a_log_of_valid_rows_takes_only_the_typed_pass(tmp_path: Path, spark: Any) -> None:
    """Every row of a healthy log is proved valid by the typed pass: none of them is
    parsed into a VARIANT (the slow reading the issue measured)."""

    def record(i: int) -> dict[str, Any]:
        payload = GOOD | {"actionId": f"{i:08x}-f86e-11da-bd1a-00112444be1e"}
        head = {"received_at": f"2026-11-21T10:00:{i:02d}.000000Z", "status": 200}
        if i % 3 == 0:  # the body as text, the payload key kept as null (as writers do)
            return head | {"latency_ms": 3, "payload": None, "body": json.dumps(payload)}
        return head | {"latency_ms": 3, "payload": payload}

    lines = [
        json.dumps(record(i), separators=(",", ":") if i % 2 else (", ", ": ")) for i in range(40)
    ]
    path = tmp_path / "healthy.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with analyze(path, engine="spark", spark=spark) as sp:
        raw = sp.log.raw
        assert sp.log.execute(raw.filter(~raw.known_valid).count()) == 0
        assert sp.report.actions == 40 and sp.report.invalid_deliveries == 0


def test_a_line_with_anything_after_its_object_is_malformed_on_both_engines(
    tmp_path: Path, spark: Any
) -> None:
    """A line whose object is followed by more than spaces (two records run together, a
    stray brace, junk) is ``malformed_line`` on both engines, though Spark's parsers read
    its first object and stop. Such lines send DuckDB to its line-by-line reading, where a
    ``"payload": null`` beside a body still means the body is read."""
    head = {"received_at": "2026-11-21T10:00:00.000000Z", "status": 200, "latency_ms": 3}
    record = json.dumps(head | {"payload": GOOD})
    torn = [" junk", "}", "]", " ]", "\t]", record[5:], " " + record, ',{"x":1}', ' {"x":1}']
    body = json.dumps(head | {"payload": None, "body": json.dumps(GOOD)})
    # Healthy lines first: a file that starts with torn ones is refused as no log at all.
    lines = [record, body, record + "  "] * 6 + [record + tail for tail in torn]
    path = tmp_path / "run-together.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with analyze(path) as duck, analyze(path, engine="spark", spark=spark) as sp:
        for analysis in (duck, sp):
            assert analysis.report.invalid_by_reason == {"malformed_line": len(torn)}
        assert _verdicts(sp) == _verdicts(duck)


def test_the_analysis_session_splits_huge_methods_unless_the_caller_chose(
    spark: Any, tmp_path: Path
) -> None:
    """The log's own session carries the caller's SQL settings over, turns adaptive
    execution off, and splits whole-stage code at HotSpot's 8,000 bytes (the checks make
    methods the JVM would otherwise leave to its interpreter) unless the caller chose a
    limit; the caller's session is left as it was."""
    from gptools.deliverylog._readers_spark import read_delivery_log_spark
    from tests.deliverylog.conftest import random_log, write_records

    path = write_records(tmp_path / "log.jsonl", random_log(7, n_actions=20).ordered())
    limit, partitions = "spark.sql.codegen.hugeMethodLimit", "spark.sql.shuffle.partitions"
    before = spark.conf.get(partitions)
    with read_delivery_log_spark(path, spark=spark) as log:
        assert log.session.conf.get(limit) == "8000"
        assert log.session.conf.get("spark.sql.adaptive.enabled") == "false"
        assert log.session.conf.get(partitions) == before
    assert spark.conf.get(limit) == "65535"
    spark.conf.set(limit, "20000")
    spark.conf.set(partitions, "3")
    try:
        with read_delivery_log_spark(path, spark=spark) as log:
            assert log.session.conf.get(limit) == "20000"
            assert log.session.conf.get(partitions) == "3"
    finally:
        spark.conf.unset(limit)
        spark.conf.set(partitions, before)


def test_a_second_summary_in_the_process_compiles_nothing_again(spark: Any, tmp_path: Path) -> None:
    """The session gptools starts keeps every class a summary compiles. One summary
    compiles more classes than Spark's default cache holds (100), so each later analysis
    in the same process compiled all of them again and ran them in the JVM's interpreter
    until its compiler caught up."""
    from gptools.deliverylog import analyze
    from tests.deliverylog.conftest import random_log, write_records

    path = write_records(tmp_path / "log.jsonl", random_log(11, n_actions=50).ordered())
    metrics = getattr(spark._jvm.org.apache.spark.metrics.source, "CodegenMetrics$")
    compilations = metrics.__getattr__("MODULE$").METRIC_COMPILATION_TIME()
    with analyze(path, engine="spark", spark=spark) as a:
        first = a.report
    before = compilations.getCount()
    with analyze(path, engine="spark", spark=spark) as a:
        assert a.report == first
    assert compilations.getCount() == before


def test_the_summary_sorts_and_shuffles_the_deliveries_once(spark: Any, tmp_path: Path) -> None:
    """The deliveries are partitioned and sorted by action and key when the load caches
    them, and the cached tables keep both: the action summary neither shuffles nor sorts
    them, and the retried chains' join shuffles and sorts neither side (only the window
    orders the retried chains). Broadcast joins are off, as for a log too big for them."""
    from gptools.deliverylog import _metrics as m
    from tests.deliverylog.conftest import random_log, write_records

    path = write_records(tmp_path / "log.jsonl", random_log(7, n_actions=200).ordered())
    setting = "spark.sql.autoBroadcastJoinThreshold"
    before = spark.conf.get(setting)
    spark.conf.set(setting, "-1")
    try:
        with analyze(path, engine="spark", spark=spark) as analysis:
            log = analysis.log

            def plan(expr: Any) -> str:
                df = log.session.sql(log.con.compile(expr))
                return str(df._jdf.queryExecution().executedPlan().toString())

            summary = plan(m.action_summary(analysis.x, analysis.deliveries))
            chains = plan(m.retry_chains(analysis.deliveries, analysis.action_summary))
            assert "Exchange" not in summary and "Sort [" not in summary, summary
            assert "SortMergeJoin" in chains and "Exchange" not in chains, chains
            assert chains.count("Sort [") == 1, chains
    finally:
        spark.conf.set(setting, before)
