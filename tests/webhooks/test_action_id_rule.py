"""One actionId rule (issue 14 item 5): the model, the receiver and the analyser agree on
every spelling of an ``actionId``: only the canonical 8-4-4-4-12 hexadecimal form, either
case, stored lower-case (``spec.ACTION_ID_PATTERN`` / ``spec.canonical_action_id``)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from gptools import spec
from gptools.models import GameEventNotification
from gptools.webhooks import ReceiverAuth, WebhookReceiver, open_store
from tests.webhooks.conftest import event, serve_in_thread, wire

CANONICAL = "6a1f7e4e-8c2a-4c1e-9d7b-0b7d2f6e9a10"

#: (spelling, accepted): the same list goes to all three.
SPELLINGS: list[tuple[str, bool]] = [
    (CANONICAL, True),
    (CANONICAL.upper(), True),
    ("6A1f7E4e-8C2a-4c1E-9d7B-0b7D2f6E9a10", True),
    ("{" + CANONICAL + "}", False),
    ("urn:uuid:" + CANONICAL, False),
    (CANONICAL.replace("-", ""), False),
    (CANONICAL + "\n", False),
    (" " + CANONICAL, False),
    (CANONICAL[:-1], False),
    (CANONICAL[:-1] + "g", False),
    ("6a1f7e4e8c2a-4c1e-9d7b-0b7d-2f6e9a10", False),
]
IDS = [repr(s) for s, _ in SPELLINGS]
KEY = "rule-key"


def _model_accepts(action_id: str) -> str | None:
    try:
        return str(GameEventNotification.model_validate_json(wire(event(action_id))).action_id)
    except ValidationError:
        return None


@pytest.mark.parametrize(("spelling", "accepted"), SPELLINGS, ids=IDS)
def test_spec_and_model_follow_the_rule(spelling: str, accepted: bool) -> None:
    if accepted:
        assert spec.canonical_action_id(spelling) == CANONICAL
        assert _model_accepts(spelling) == CANONICAL
    else:
        with pytest.raises(ValueError, match="canonical"):
            spec.canonical_action_id(spelling)
        assert _model_accepts(spelling) is None


def test_model_receiver_and_analyser_agree(tmp_path: Path) -> None:
    from gptools.deliverylog import analyze

    db = tmp_path / "store.sqlite3"
    receiver = WebhookReceiver(f"sqlite:///{db}", auth=ReceiverAuth.bearer(KEY))
    answers: list[httpx.Response] = []
    with serve_in_thread(receiver) as srv, httpx.Client() as http:
        for spelling, _ in SPELLINGS:
            answers.append(
                http.post(
                    srv.url,
                    content=wire(event(spelling)),
                    headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
                )
            )
    conn = open_store(f"sqlite:///{db}").connect()
    try:
        stored = conn.action_ids()
    finally:
        conn.close()

    model = [_model_accepts(s) is not None for s, _ in SPELLINGS]
    receiver_ok = [r.status_code == 200 for r in answers]
    for (spelling, accepted), r in zip(SPELLINGS, answers, strict=True):
        if accepted:
            assert r.status_code == 200, r.text
            assert r.json()["actionId"] == CANONICAL  # answered and stored lower-case
        else:
            assert r.status_code == 400, (spelling, r.text)
            assert r.headers["content-type"] == "application/json"
            assert "actionId" in r.json()["reason"] and r.json()["error"] == "invalid_payload"
    assert stored == {CANONICAL}
    # The first accepted spelling is stored, the other two are its duplicates.
    assert [r.json().get("status") for r in answers if r.status_code == 200] == [
        "accepted",
        "duplicate",
        "duplicate",
    ]

    # The analyser reads the same bodies as a delivery log (answered 200 each, so only
    # its own validity check decides).
    lines = [
        json.dumps(
            {
                "received_at": f"2026-11-21T10:00:{i:02d}.000000Z",
                "status": 200,
                "latency_ms": 1.0,
                "body": wire(event(s)).decode(),
            }
        )
        for i, (s, _) in enumerate(SPELLINGS)
    ]
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines) + "\n")
    with analyze(log) as analysis:
        got = analysis.log.con.execute(
            analysis.attempts.order_by("received_at").select(
                valid=analysis.attempts.reason.isnull()
            )
        )
    analyser = [bool(v) for v in got.valid]
    expected = [accepted for _, accepted in SPELLINGS]
    assert model == receiver_ok == analyser == expected
