"""The game event's validity is declared once (``spec.GAME_EVENT_FIELDS``); every
implementation gives the same verdict and the same reason on cases generated from it:
the model, the receiver (its full check and its fast check), the analyser's checks on
DuckDB and on Spark. Bets are read from their JSON text, exactly, on both engines."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pydantic
import pytest

from gptools import spec
from gptools.deliverylog import analyze
from gptools.models import GameEventNotification, event_refusal_reason, loads_wire
from gptools.webhooks._payload import fast_action_id, parse
from tests.deliverylog.conftest import write_json_lines

ACTION = "a8098c1a-f86e-11da-bd1a-00112444be1e"
#: A valid notification, each field as its JSON text.
VALID: dict[str, str] = {
    "actionId": json.dumps(ACTION),
    "roundId": '"R-1"',
    "gameId": '"vs20olympgate"',
    "playerId": '"p-1"',
    "timestamp": '"2026-11-21T10:15:30.123456"',
    "bet": "2.5",
    "currencyCode": '"EUR"',
    "events": '["COIN","FEATURE"]',
}
_DROP = None


def body(**texts: str | None) -> str:
    """VALID with some fields' JSON texts replaced (``None``: the field left out)."""
    fields = {**VALID, **texts}
    return "{" + ",".join(f'"{k}":{v}' for k, v in fields.items() if v is not None) + "}"


def _string_cases(field: spec.EventField) -> list[tuple[str, str | None]]:
    """(JSON text, expected reason or None) for a string field, from its declaration."""
    out: list[tuple[str, str | None]] = [
        ("7", field.reason(spec.CHECK_WRONG_TYPE)),
        ("true", field.reason(spec.CHECK_WRONG_TYPE)),
        ('["x"]', field.reason(spec.CHECK_WRONG_TYPE)),
        ('{"a":"x"}', field.reason(spec.CHECK_WRONG_TYPE)),
    ]
    if field.min_length is not None:
        out += [
            (json.dumps("x" * field.min_length), None),  # at the limit
            (json.dumps("x" * (field.min_length - 1)), field.reason(spec.CHECK_EMPTY)),
        ]
    return out


def _action_id_cases(field: spec.EventField) -> list[tuple[str, str | None]]:
    bad = field.reason(spec.CHECK_NOT_A_UUID)
    return [
        (json.dumps(ACTION.upper()), None),
        (json.dumps(ACTION[:-1]), bad),  # one digit short
        (json.dumps(ACTION + "0"), bad),  # one digit past
        (json.dumps(ACTION[:-1] + "g"), bad),  # not hexadecimal
        (json.dumps(ACTION.replace("-", "")), bad),
        (json.dumps("{" + ACTION + "}"), bad),
        (json.dumps("urn:uuid:" + ACTION), bad),
        (json.dumps(ACTION + "\n"), bad),  # the pattern's end is the text's end
    ]


def _timestamp_cases(field: spec.EventField) -> list[tuple[str, str | None]]:
    zone, bad = field.reason(spec.CHECK_HAS_ZONE), field.reason(spec.CHECK_BAD_FORMAT)
    return [
        ('"2026-11-21T10:15:30"', None),  # the fraction is optional
        ('"2026-12-31T23:59:59.123456789"', None),  # nine fractional digits
        ('"2026-12-31T23:59:59.1234567891"', bad),  # ten
        ('"2026-11-21T10:15:30Z"', zone),
        ('"2026-11-21T10:15:30.5+02:00"', zone),
        ('"2026-11-21T10:15:30-0530"', zone),
        ('"2026-13-21T10:15:30"', bad),
        ('"2026-11-21T24:00:00"', bad),
        ('"2026-11-21T10:15:60"', bad),
        ('"2026-02-30T10:15:30"', bad),  # the pattern's, but no real date
        ('"0000-01-01T00:00:00"', bad),
        ('"2026-11-21 10:15:30"', bad),
        (json.dumps("2026-11-21T10:15:30\n"), bad),
    ]


def _bet_cases(field: spec.EventField) -> list[tuple[str, str | None]]:
    out_of_range = field.reason(spec.CHECK_OUT_OF_RANGE)
    whole = field.max_integer_digits or 0
    fraction = field.max_fraction_digits or 0
    return [
        ('"2.5"', field.reason(spec.CHECK_WRONG_TYPE)),
        ("true", field.reason(spec.CHECK_WRONG_TYPE)),
        ("[2.5]", field.reason(spec.CHECK_WRONG_TYPE)),
        (str(field.minimum), None),  # at the minimum
        ("-0", out_of_range),
        ("-0.01", out_of_range),  # one cent past it
        ("9" * whole, None),  # at the integer digits' limit
        ("1" + "0" * whole, out_of_range),  # one past
        ("0." + "1" * fraction, None),  # at the decimals' limit
        ("0." + "1" * (fraction + 1), out_of_range),  # one past
        ("2." + "1" * fraction + "000000000", None),  # trailing zeros are no decimals
        ("9" * whole + "." + "9" * fraction, None),  # both limits at once
        ("19.99999999999999999", out_of_range),  # 20.0 through a double
        (f"1e-{fraction}", None),
        (f"1e-{fraction + 1}", out_of_range),
        (f"1e{whole - 1}", None),
        (f"1E+{whole}", out_of_range),
        ("2.5e1", None),
        ("100e-2", None),
        ("1e400", out_of_range),
        # No JSON to RFC 8259, but numbers to the receiver's parser (the declaration's
        # spec.JSON_NON_FINITE_LITERALS): out of range on every implementation.
        *((literal, out_of_range) for literal in spec.JSON_NON_FINITE_LITERALS),
    ]


def _events_cases(field: spec.EventField) -> list[tuple[str, str | None]]:
    wrong = field.reason(spec.CHECK_WRONG_TYPE)
    return [
        ("[]", None),
        ('["SOMETHING_NEW"]', None),
        ('"COIN"', wrong),
        ('["COIN",1]', wrong),
        ('["COIN",null]', wrong),
        ('{"COIN":1}', wrong),
    ]


def declared_cases() -> list[tuple[str, str | None]]:
    """(body, expected reason or None when valid): for every declared field, absent and
    null (missing), the wrong JSON types, each limit and one past it, the patterns' edges."""
    cases: list[tuple[str, str | None]] = [(body(), None)]
    for field in spec.GAME_EVENT_FIELDS:
        missing = field.reason(spec.CHECK_MISSING)
        cases += [(body(**{field.name: _DROP}), missing), (body(**{field.name: "null"}), missing)]
        if field.name == "actionId":
            values = _string_cases(field)[:4] + _action_id_cases(field)
        elif field.name == "timestamp":
            values = _string_cases(field)[:4] + _timestamp_cases(field)
        elif field.json_type == "string":
            values = _string_cases(field)
        elif field.json_type == "number":
            values = _bet_cases(field)
        else:
            values = _events_cases(field)
        cases += [(body(**{field.name: text}), reason) for text, reason in values]
    # A non-finite literal where no number is checked is a number like any other.
    cases.append((body()[:-1] + ',"note":-Infinity}', None))
    return cases


CASES = declared_cases()


def _model_reason(text: str) -> str | None:
    try:
        GameEventNotification.model_validate(loads_wire(text))
    except pydantic.ValidationError as exc:
        return event_refusal_reason(exc)
    return None


def _receiver_reason(text: str) -> str | None:
    """The receiver's verdict: its fast check, then its full check; the declared reason
    is the end of the refusal's reason."""
    fast = fast_action_id(text.encode())
    event, status, reason, _ = parse(text.encode())
    if fast is not None:
        # The fast check only vouches for what the full check accepts, with the same id.
        assert event is not None and str(event.action_id) == fast, text
    if event is not None:
        return None
    assert status in (400, 422), (status, reason)
    return reason.rsplit(": ", 1)[1]


def _log(tmp_path: Path, bodies: list[str], status: list[int]) -> Path:
    lines = [
        {
            "received_at": f"2026-11-21T10:{i // 60:02d}:{i % 60:02d}.000000Z",
            "status": s,
            "latency_ms": 1.0,
            "body": b,
        }
        for i, (b, s) in enumerate(zip(bodies, status, strict=True))
    ]
    return write_json_lines(tmp_path / "declared.jsonl", lines)


def _analyser_reasons(path: Path, **engine: Any) -> list[str | None]:
    with analyze(path, **engine) as analysis:
        t = analysis.attempts
        frame = analysis.log.execute(t.order_by("received_at").select("reason"))
    return [None if r is None or r != r else str(r) for r in frame["reason"]]


def test_the_cases_cover_every_declared_reason() -> None:
    assert {r for _, r in CASES if r is not None} == set(spec.GAME_EVENT_REASONS)
    assert sum(r is None for _, r in CASES) == 20
    non_finite = [b for b, _ in CASES if "NaN" in b or "Infinity" in b]
    assert non_finite[:3] == [body(bet="NaN"), body(bet="Infinity"), body(bet="-Infinity")]


def test_the_model_and_the_receiver_give_the_declared_reason() -> None:
    assert [_model_reason(b) for b, _ in CASES] == [r for _, r in CASES]
    assert [_receiver_reason(b) for b, _ in CASES] == [r for _, r in CASES]
    # The usual body takes the receiver's fast path.
    assert fast_action_id(body().encode()) == ACTION


@pytest.fixture(scope="module")
def declared_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cases as a delivery log of raw bodies, answered as the receiver answers them."""
    statuses = [parse(b.encode())[1] or 200 for b, _ in CASES]
    return _log(tmp_path_factory.mktemp("declared"), [b for b, _ in CASES], statuses)


def test_duckdb_gives_the_declared_reason(declared_log: Path) -> None:
    assert _analyser_reasons(declared_log) == [r for _, r in CASES]


def test_spark_gives_the_declared_reason(declared_log: Path, spark: Any) -> None:
    assert _analyser_reasons(declared_log, engine="spark", spark=spark) == [r for _, r in CASES]


#: Five bets the receiver accepts whose sum a double gets wrong (by 1.50 through DuckDB's).
EXACT_BETS = ("123456789012345678.5", "9007199254740993", "0.1", "0.2", "12345678.12345678")


def _bets_log(tmp_path: Path) -> Path:
    bodies = [
        body(bet="19.99999999999999999"),
        *(body(bet=b, actionId=f'"{i:08x}{ACTION[8:]}"') for i, b in enumerate(EXACT_BETS)),
    ]
    return _log(tmp_path, bodies, [422, 200, 200, 200, 200, 200])


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_bets_are_read_exactly(tmp_path: Path, engine: str, request: pytest.FixtureRequest) -> None:
    path = _bets_log(tmp_path)
    event, status, reason, _ = parse(body(bet="19.99999999999999999").encode())
    assert (event, status) == (None, 422)
    assert reason == "not a valid game event notification (bet): out_of_range:bet"
    for bet in EXACT_BETS:
        assert parse(body(bet=bet).encode())[1] == 0, bet
    options: dict[str, Any] = {}
    if engine == "spark":
        options = {"engine": "spark", "spark": request.getfixturevalue("spark")}
    with analyze(path, **options) as analysis:
        assert analysis.report.invalid_by_reason == {"out_of_range:bet": 1}
        totals = analysis.bets_per_game()
        assert totals["bet_total"].tolist() == [Decimal("132463988279432349.92345678")]
        assert sum(Decimal(b) for b in EXACT_BETS) == Decimal("132463988279432349.92345678")


def _payload_log(tmp_path: Path, torn: bool) -> Path:
    """The two examples as a JSONL log of payload objects (as a writer of its own logs
    them, the numbers written as sent), with a torn line that needs the general reading
    when ``torn``."""
    texts = [body(bet="19.99999999999999999")]
    texts += [body(bet=b, actionId=f'"{i:08x}{ACTION[8:]}"') for i, b in enumerate(EXACT_BETS)]
    lines = [
        f'{{"received_at":"2026-11-21T10:00:0{i}Z","status":{422 if i == 0 else 200},'
        f'"latency_ms":1.0,"payload":{text}}}'
        for i, text in enumerate(texts)
    ]
    if torn:
        lines.insert(3, lines[3][:40])
    path = tmp_path / "payloads.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("torn", [False, True], ids=["fast", "general"])
@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_payload_objects_bets_are_read_exactly(
    tmp_path: Path, engine: str, torn: bool, request: pytest.FixtureRequest
) -> None:
    """A JSONL line's payload object is read from the line's text, every number as sent,
    in the fast reading and in the general one (a torn line elsewhere): never through a
    double, which would make 19.99999999999999999 a valid 20 and the sum off by 1.50."""
    options: dict[str, Any] = {}
    if engine == "spark":
        options = {"engine": "spark", "spark": request.getfixturevalue("spark")}
    with analyze(_payload_log(tmp_path, torn), **options) as analysis:
        invalid = {"out_of_range:bet": 1} | ({"malformed_line": 1} if torn else {})
        assert analysis.report.invalid_by_reason == invalid
        totals = analysis.bets_per_game()["bet_total"].tolist()
        assert totals == [Decimal("132463988279432349.92345678")]


def test_the_receivers_store_and_exports_keep_every_digit(tmp_path: Path) -> None:
    """The two examples logged by the receiver's own store, then exported: the JSONL
    export keeps the bodies whose bets a double cannot hold as text, so each reading of
    the log gives the same exact outcome."""
    from datetime import datetime

    from gptools import webhooks
    from gptools.webhooks._records import LogEntry, WriteItem

    bodies = [json.loads(line)["body"] for line in _bets_log(tmp_path).read_text().splitlines()]
    store = webhooks.SQLiteStore(tmp_path / "receiver.sqlite")
    conn = store.connect()
    conn.write_batch(
        [
            WriteItem(
                LogEntry(
                    received_at=datetime.fromisoformat(f"2026-11-21T10:00:0{i}+00:00"),
                    status=parse(text.encode())[1] or 200,
                    body=text,
                    latency_ms=1.0,
                )
            )
            for i, text in enumerate(bodies)
        ]
    )
    conn.close()
    sources = [tmp_path / "receiver.sqlite"]
    for fmt in ("jsonl", "parquet"):
        sources.append(tmp_path / f"export.{fmt}")
        webhooks.export_log(store, sources[-1], format=fmt)
    exported = [json.loads(line) for line in sources[1].read_text().splitlines()]
    assert ["payload" in record for record in exported] == [False, False, True, True, True, False]
    for source in sources:
        with analyze(source) as analysis:
            assert analysis.report.invalid_by_reason == {"out_of_range:bet": 1}, source
            totals = analysis.bets_per_game()["bet_total"].tolist()
            assert totals == [Decimal("132463988279432349.92345678")], source
