"""The body-shape rule is written once (``_contract.BODY_SHAPE_RULES``); DuckDB's Ibis
expression and Spark's SQL text are both built from it (``shape_cases``), and give each
record the shape of the first rule that holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gptools.deliverylog import analyze
from gptools.deliverylog._contract import BODY_SHAPE_OTHERWISE, BODY_SHAPE_RULES, shape_cases
from tests.deliverylog.conftest import write_json_lines
from tests.deliverylog.test_declared_validity import body

_RULES = [name for name, _ in BODY_SHAPE_RULES]


def test_every_rule_must_be_stated_and_none_invented() -> None:
    everything: dict[str, str | None] = dict.fromkeys(_RULES, "c")
    assert shape_cases(everything) == [("c", shape) for _, shape in BODY_SHAPE_RULES]
    with pytest.raises(KeyError, match="body_not_json"):
        shape_cases({k: v for k, v in everything.items() if k != "body_not_json"})
    with pytest.raises(ValueError, match="no body-shape rule named payload_is_text"):
        shape_cases({**everything, "payload_is_text": "c"})
    # A condition that cannot hold for a source is left out, the order kept.
    assert shape_cases({**everything, "known": None, "payload": None}) == [
        ("c", shape) for name, shape in BODY_SHAPE_RULES if name not in ("known", "payload")
    ]


def test_the_spark_rule_is_the_declaration_in_sql() -> None:
    from gptools.deliverylog._readers_spark import _SHAPE

    shapes = [part.split("'")[1] for part in _SHAPE.split(" THEN ")[1:]]
    assert shapes == [shape for _, shape in BODY_SHAPE_RULES]
    assert _SHAPE.endswith(f"ELSE '{BODY_SHAPE_OTHERWISE}' END")


def _line(i: int, **fields: Any) -> str:
    record = {"received_at": f"2026-11-21T10:00:{i:02d}Z", "status": 400, "latency_ms": 1.0}
    return json.dumps({**record, **fields})


#: One record per rule (and one no rule catches), each with the reason it is given: a
#: shape that is no object is its own reason, a valid object has none. The payload wins
#: over a body; a torn line is malformed.
RECORDS: list[tuple[str, str | None]] = [
    ('{"received_at": "2026-11-21T10:00:00Z", "status": 4', "malformed_line"),
    (_line(1, payload="a text", body=body()), "not_object"),
    (_line(2, payload=json.loads(body()), body="not json"), None),
    (_line(3), "no_body"),
    (_line(4, body="{not json"), "not_json"),
    (_line(5, body="[1, 2]"), "not_object"),
    (_line(6, body=body()), None),
]


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_each_rule_gives_its_shape(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    path = write_json_lines(tmp_path / "shapes.jsonl", [line for line, _ in RECORDS])
    options: dict[str, Any] = {}
    if engine == "spark":
        options = {"engine": "spark", "spark": request.getfixturevalue("spark")}
    with analyze(path, **options) as analysis:
        frame = analysis.log.execute(analysis.attempts.select("received_at", "reason"))
    reasons = {
        (None if t is None or t != t else str(t)): (None if r is None or r != r else str(r))
        for t, r in zip(frame["received_at"], frame["reason"], strict=True)
    }
    # The torn line has no time.
    assert reasons.pop(None) == "malformed_line"
    assert [reasons[t] for t in sorted(reasons)] == [reason for _, reason in RECORDS[1:]]
