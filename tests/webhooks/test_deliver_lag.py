"""`gptools sandbox deliver` sends events that already happened: their lag is positive."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from gptools.models import GameEventNotification
from gptools.webhooks import ReceiverAuth, WebhookReceiver, open_store
from tests.webhooks.conftest import serve_in_thread
from tests.webhooks.test_queue_export import _cli


def test_delivered_events_happened_before_they_arrived(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    receiver = WebhookReceiver(url, auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv:
        r = _cli(
            "sandbox",
            "deliver",
            "--url",
            srv.url,
            "-n",
            "7",
            "--json",
            env={"PATH": "/usr/bin:/bin"},
        )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["delivered"] == 7
    conn = open_store(url).connect()
    rows = list(conn.iter_log())
    conn.close()
    assert len(rows) == 7
    for row in rows:
        event = GameEventNotification.model_validate_json(row["body"])
        received = datetime.fromisoformat(str(row["received_at"]).replace("Z", "+00:00"))
        assert received.tzinfo is not None
        assert event.timestamp <= received.astimezone(UTC), (event.timestamp, received)


def test_a_receiver_that_never_answers_fails_the_command() -> None:
    """Every attempt refused at the TCP level: the report is still printed, the exit is 1
    with a line naming the address, not a silent 0 with every event "expired"."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1/game-action-events"
    r = _cli("sandbox", "deliver", "--url", url, "-n", "2", "--json", env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["expired"] == 2
    assert f"no answer from {url}" in r.stderr and "connection failed" in r.stderr
