"""Bodies built to break the parsers, sent by an authenticated sender to a real
``gptools webhooks serve`` on loopback: JSON nested far deeper than the limit is refused
with 400 and a log row on both parsing paths (the fast actionId check and the full
parse), with no traceback in the receiver's log; bets that are no sane amount of money
(``1e400``, ``-0``, ``NaN``, more digits than any currency uses) are invalid deliveries
(422, a reason naming ``bet``), never stored actions."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from gptools import spec
from tests.webhooks.conftest import JSON, ReceiverProcess, event, receiver_process, wire

__all__ = ["receiver_process"]  # the fixture, imported to be used here

AUTH = {**JSON, "authorization": "Bearer test-key"}
DEEP = 2_000  # Python's json recurses about 1,000 levels before RecursionError


def _rows(db: Path) -> list[tuple[int, str | None, str | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT status, action_id, error FROM delivery_log ORDER BY received_at"
        ).fetchall()


def _deep(action_id: str, *, escape: bool) -> bytes:
    """A notification whose ``events`` hold an array nested DEEP levels down: without a
    backslash it takes the fast actionId check (``json.loads``), with one (an escaped
    character in ``roundId``) the full parse (pydantic, then the exact decoding)."""
    body = event(action_id, roundId="R\\u0031" if escape else "R-1")
    text = wire(body).decode()
    if escape:
        text = text.replace("R\\\\u0031", "R\\u0031")  # wire() escaped the backslash
    return text.replace('["COIN"]', "[" * DEEP + "]" * DEEP).encode()


@pytest.mark.parametrize("escape", [False, True], ids=["fast-path", "full-parse"])
def test_deep_nesting_is_a_400_with_a_row_and_no_traceback(
    tmp_path: Path, receiver_process: Callable[..., ReceiverProcess], escape: bool
) -> None:
    db = tmp_path / "deep.sqlite3"
    rp = receiver_process(f"sqlite:///{db}")
    action_id = str(uuid.uuid4())
    body = _deep(action_id, escape=escape)
    assert (b"\\" in body) is escape
    r = httpx.post(rp.url, content=body, headers=AUTH, timeout=10)
    assert r.status_code == 400, r.text
    assert f"deeper than {spec.JSON_MAX_DEPTH}" in r.json()["reason"]
    assert r.json()["error"] == "invalid_payload"
    ((status, _, error),) = _rows(db)
    assert status == 400 and error.startswith("invalid:")
    # Within the limit still parses: 32 levels are a bad field, not bad JSON.
    shallow = wire(event(str(uuid.uuid4()), events=[[[["COIN"]]]]))
    r = httpx.post(rp.url, content=shallow, headers=AUTH, timeout=10)
    assert r.status_code == 422, r.text
    ok = httpx.post(rp.url, content=wire(event(action_id)), headers=AUTH, timeout=10)
    assert ok.status_code == 200
    rp.terminate()
    log = rp.log.read_text()
    assert "Traceback" not in log and "RecursionError" not in log, log


BAD_BETS = {
    "huge-exponent": "1e400",
    "negative-zero": "-0",
    "negative-zero-float": "-0.0",
    "negative": "-2.10",
    "nan": "NaN",
    "infinity": "Infinity",
    "too-many-decimals": "2.123456789",
    "too-many-integer-digits": "1" + "0" * 18,
}


def test_bets_that_are_no_sane_amount_are_invalid(
    tmp_path: Path, receiver_process: Callable[..., ReceiverProcess]
) -> None:
    db = tmp_path / "bets.sqlite3"
    rp = receiver_process(f"sqlite:///{db}")
    with httpx.Client(timeout=10) as http:
        for case, bet in BAD_BETS.items():
            body = wire(event(str(uuid.uuid4()))).decode()
            body = body.replace('"bet":2.10', f'"bet":{bet}')
            assert f'"bet":{bet}' in body, case
            r = http.post(rp.url, content=body.encode(), headers=AUTH)
            assert r.status_code == 422, (case, r.text)
            assert [f["field"] for f in r.json()["fields"]] == ["bet"], (case, r.json())
        # The edges that are sane: zero, 18 integer digits, 8 decimal places.
        for bet in ("0", "9" * 18, "2.12345678", "2.1000000000"):
            body = wire(event(str(uuid.uuid4()))).decode().replace('"bet":2.10', f'"bet":{bet}')
            r = http.post(rp.url, content=body.encode(), headers=AUTH)
            assert r.status_code == 200, (bet, r.text)
    rows = _rows(db)
    assert [s for s, _, _ in rows] == [422] * len(BAD_BETS) + [200] * 4
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM webhook_actions").fetchone()[0] == 4
