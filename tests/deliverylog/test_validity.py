"""The SQL validity check agrees with the pydantic model on a matrix of bodies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pydantic
import pytest

from gptools.deliverylog import analyze
from gptools.models import GameEventNotification, loads_wire
from tests.deliverylog.conftest import write_json_lines

GOOD: dict[str, Any] = {
    "roundId": "R-1",
    "gameId": "vs20olympgate",
    "playerId": "p-1",
    "timestamp": "2026-11-21T10:15:30.123456",
    "bet": 2.5,
    "currencyCode": "EUR",
    "events": ["COIN", "FEATURE"],
    "actionId": "a8098c1a-f86e-11da-bd1a-00112444be1e",
}


def _with(**changes: Any) -> str:
    body = {**GOOD, **changes}
    return json.dumps({k: v for k, v in body.items() if v is not _DROP})


_DROP = object()


def _bet_text(number: str) -> str:
    """GOOD with its bet written as this JSON number text, exactly."""
    return _with(bet=0.5).replace('"bet": 0.5', f'"bet": {number}')


BODIES: list[str] = [
    json.dumps(GOOD),
    _with(extra={"kept": True}),
    _with(events=[]),
    _with(events=["COIN", "SOMETHING_NEW"]),
    _with(bet=3),
    _with(bet=0),
    # The edges of a sane bet (spec.BET_MAX_INTEGER_DIGITS, BET_MAX_FRACTION_DIGITS).
    _bet_text("999999999999999999"),
    _bet_text("2.12345678"),
    _bet_text("2.1000000000"),
    _with(timestamp="2026-11-21T10:15:30"),
    _with(timestamp="2026-11-21T10:15:30.1"),
    _with(timestamp="2026-11-21T10:15:30.123456789"),
    _with(actionId="A8098C1A-F86E-11DA-BD1A-00112444BE1E"),
    # invalid ones
    # actionId "format uuid" is the canonical 8-4-4-4-12 form only (spec.ACTION_ID_FORMAT)
    _with(actionId="a8098c1af86e11dabd1a00112444be1e"),
    _with(actionId="{a8098c1a-f86e-11da-bd1a-00112444be1e}"),
    _with(actionId="urn:uuid:a8098c1a-f86e-11da-bd1a-00112444be1e"),
    "not json at all",
    '{"roundId": ',
    "[1, 2]",
    '"a string"',
    "42",
    "null",
    "{}",
    _with(actionId=_DROP),
    _with(actionId=None),
    _with(actionId=12345),
    _with(actionId="not-a-uuid"),
    _with(actionId="a8098c1a-f86e-11da-bd1a-00112444be1"),
    _with(roundId=_DROP),
    _with(roundId=""),
    _with(roundId=7),
    _with(gameId=None),
    _with(playerId=["p"]),
    _with(currencyCode=True),
    _with(currencyCode=""),
    _with(bet="2.50"),
    _with(bet=True),
    _with(bet=None),
    _with(bet=_DROP),
    _with(bet=float("inf")),
    _with(bet=-1.25),
    _bet_text("1e400"),
    _bet_text("2.123456789"),
    _bet_text("1000000000000000000"),
    '{"roundId":"R","gameId":"g","playerId":"p","timestamp":"2026-11-21T10:15:30",'
    '"bet":NaN,"currencyCode":"EUR","events":[],"actionId":"a8098c1a-f86e-11da-bd1a-00112444be1e"}',
    _with(events="COIN"),
    _with(events=["COIN", 1]),
    _with(events=["COIN", None]),
    _with(events=None),
    _with(timestamp="2026-11-21T10:15:30Z"),
    _with(timestamp="2026-11-21T10:15:30.123+02:00"),
    _with(timestamp="2026-11-21 10:15:30"),
    _with(timestamp="2026-02-30T10:15:30"),
    _with(timestamp="2026-11-21T24:00:00"),
    _with(timestamp="2026-11-21T10:15:60"),
    _with(timestamp="2026-11-21"),
    _with(timestamp=1763720130),
    _with(timestamp="0000-01-01T00:00:00"),
]


def _pydantic_valid(body: str) -> bool:
    try:
        data = loads_wire(body)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    try:
        GameEventNotification.model_validate(data)
    except pydantic.ValidationError:
        return False
    return True


@pytest.mark.parametrize("as_payload", [False, True], ids=["body-text", "payload-object"])
def test_sql_validity_matches_the_model(tmp_path: Path, as_payload: bool) -> None:
    lines = []
    for i, body in enumerate(BODIES):
        rec: dict[str, Any] = {
            "received_at": f"2026-11-21T10:{i // 60:02d}:{i % 60:02d}.000000Z",
            "status": 200,
            "latency_ms": 1.0,
        }
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if as_payload and isinstance(parsed, dict):
            # In JSONL a body that parsed as an object is written as "payload".
            lines.append(json.dumps(rec)[:-1] + ', "payload": ' + body + "}")
        else:
            lines.append(json.dumps({**rec, "body": body}))
    path = write_json_lines(tmp_path / "matrix.jsonl", lines)
    expected = [_pydantic_valid(b) for b in BODIES]
    assert sum(expected) == 13, "the matrix holds 13 valid bodies"
    with analyze(path) as analysis:
        got = analysis.log.con.execute(
            analysis.attempts.order_by("received_at").select(
                valid=analysis.attempts.reason.isnull()
            )
        )
    mismatches = [
        (body, want) for body, want, have in zip(BODIES, expected, got.valid, strict=True)
        if bool(have) != want
    ]  # fmt: skip
    assert mismatches == []


def test_reasons_and_usable_action_id(tmp_path: Path) -> None:
    bodies = {
        "not_json": "not json at all",
        "not_object": "[1, 2]",
        "missing:actionId": _with(actionId=_DROP),
        "not_a_uuid:actionId": _with(actionId="nope"),
        "wrong_type:bet": _with(bet="2.50"),
        "has_zone:timestamp": _with(timestamp="2026-11-21T10:15:30Z"),
        "bad_format:timestamp": _with(timestamp="2026-11-21 10:15:30"),
        "empty:roundId": _with(roundId=""),
        "wrong_type:events": _with(events=["COIN", 1]),
        "out_of_range:bet": _with(bet=float("nan")),
    }
    lines = [
        json.dumps({"received_at": f"2026-11-21T10:00:{i:02d}.000000Z", "status": 400,
                    "latency_ms": 1.0, "body": body})
        for i, body in enumerate(bodies.values())
    ]  # fmt: skip
    path = write_json_lines(tmp_path / "reasons.jsonl", lines)
    with analyze(path) as analysis:
        r = analysis.report
        assert r.invalid_by_reason == dict.fromkeys(bodies, 1)
        # An invalid body with a usable actionId is an attempt of that action: the same
        # actionId appears in several broken bodies, so they form one chain.
        assert r.invalid_deliveries_without_action_id == 4
        assert r.actions == 1
        assert r.identity_holds


@pytest.mark.parametrize("container", ["jsonl", "parquet"])
def test_shape_of_a_raw_body_text(tmp_path: Path, container: str) -> None:
    """A raw body is parsed once: its shape (no_body, not_json, not_object, object) is
    decided on the text itself, JSON's whitespace around it included."""
    bodies: list[tuple[str | None, str | None]] = [
        (None, "no_body"),
        ("", "not_json"),
        ("   ", "not_json"),
        ("{not json", "not_json"),
        ('{"a": 1} trailing', "not_json"),
        ("[1, 2]", "not_object"),
        (" \n\t[1]", "not_object"),
        ('"a string"', "not_object"),
        ("12", "not_object"),
        ("null", "not_object"),
        (json.dumps(GOOD), None),
        (" \r\n" + json.dumps(GOOD) + "\n", None),
        (_with(bet=None), "missing:bet"),
        ("{}", "missing:actionId"),
    ]
    rows = [
        {"received_at": f"2026-11-21T10:00:{i:02d}.000000Z", "status": 200,
         "latency_ms": 1.0, "body": body}
        for i, (body, _) in enumerate(bodies)
    ]  # fmt: skip
    if container == "jsonl":
        path = write_json_lines(tmp_path / "bodies.jsonl", [json.dumps(r) for r in rows])
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / "bodies.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
    with analyze(path) as analysis:
        got = analysis.log.con.execute(analysis.attempts.order_by("received_at").select("reason"))
    assert [None if pd.isna(r) else r for r in got.reason] == [w for _, w in bodies]
