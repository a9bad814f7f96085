"""The analyser's "new in this log" (issue 38, item 3): the values of the payload's open
fields (event types, currencies, game ids) that a log's valid deliveries hold and a known
set does not (default: the document's), each with its first delivery and how many
deliveries carried it; from the Python API and ``gptools webhooks analyze``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.deliverylog import analyze

T = "2026-03-02T10:00:0{}.000000Z"


def _line(second: int, action: int, **payload: Any) -> str:
    body = {
        "roundId": f"R-{action}",
        "gameId": "golden-pharaoh",
        "playerId": "player-1",
        "timestamp": "2026-03-02T10:00:00.000000",
        "bet": 1.0,
        "currencyCode": "EUR",
        "events": ["COIN"],
        "actionId": f"00000000-0000-4000-8000-{action:012d}",
    }
    body.update(payload)
    return json.dumps(
        {"received_at": T.format(second), "status": 200, "latency_ms": 1.0, "payload": body}
    )


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "log.jsonl"
    lines = [
        _line(1, 1),
        _line(2, 2, events=["COIN", "MEGA_SPIN"], currencyCode="XBT"),
        _line(3, 3, events=["MEGA_SPIN", "BONUS"], gameId="new-game"),
        _line(4, 2, events=["COIN", "MEGA_SPIN"], currencyCode="XBT"),  # a retry
        # Invalid (no actionId): its values are no news of the payload.
        _line(5, 4, events=["ODD"], currencyCode="ODD", actionId=None),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _at(second: int) -> datetime:
    return datetime(2026, 3, 2, 10, 0, second, tzinfo=UTC)


def test_new_values_against_the_documents_known_set(log: Path) -> None:
    with analyze(log) as analysis:
        frame = analysis.new_in_log()
    assert frame.to_dict("records") == [
        {"kind": "event_type", "value": "MEGA_SPIN", "first_received_at": _at(2), "deliveries": 3},
        {"kind": "event_type", "value": "BONUS", "first_received_at": _at(3), "deliveries": 1},
        {"kind": "currency", "value": "EUR", "first_received_at": _at(1), "deliveries": 2},
        {"kind": "currency", "value": "XBT", "first_received_at": _at(2), "deliveries": 2},
        {"kind": "game", "value": "golden-pharaoh", "first_received_at": _at(1), "deliveries": 3},
        {"kind": "game", "value": "new-game", "first_received_at": _at(3), "deliveries": 1},
    ]


def test_a_known_set_the_user_passes(log: Path) -> None:
    known = {"event_type": ["COIN", "MEGA_SPIN"], "currency": ["EUR"], "game": ["golden-pharaoh"]}
    with analyze(log) as analysis:
        frame = analysis.new_in_log(known, limit=1)
        assert [(r["kind"], r["value"]) for r in frame.to_dict("records")] == [
            ("event_type", "BONUS"),
            ("currency", "XBT"),
            ("game", "new-game"),
        ]
        with pytest.raises(ValueError, match="no such kind of value: games"):
            analysis.new_in_log({"games": []})


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_the_cli_report_has_the_section(log: Path) -> None:
    result = _run(
        "webhooks", "analyze", str(log), "--known", "currency=EUR,XBT", "--known", "game="
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-4:] == [
        "New in this log (values not in the known set):",
        "  event_type: MEGA_SPIN, BONUS",
        "  currency: none",
        "  game: golden-pharaoh, new-game",
    ]
    document = json.loads(
        _run("webhooks", "analyze", str(log), "--json", "--known", "event_type=COIN").stdout
    )
    assert [(n["kind"], n["value"]) for n in document["new_in_log"]] == [
        ("event_type", "MEGA_SPIN"),
        ("event_type", "BONUS"),
        ("currency", "EUR"),
        ("currency", "XBT"),
        ("game", "golden-pharaoh"),
        ("game", "new-game"),
    ]
    refused = _run("webhooks", "analyze", str(log), "--known", "games=x")
    assert refused.exit_code == 2
    assert "Invalid value for '--known'" in refused.stderr
