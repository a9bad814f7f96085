"""`gptools sandbox deliver` sends events that already happened: their lag is positive."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from gptools.models import GameEventNotification
from gptools.webhooks import ReceiverAuth, WebhookReceiver, open_store
from tests._support.cli import run_gptools
from tests.webhooks.conftest import serve_in_thread


def test_delivered_events_happened_before_they_arrived(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    receiver = WebhookReceiver(url, auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv:
        r = run_gptools(
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
    r = run_gptools(
        "sandbox", "deliver", "--url", url, "-n", "2", "--json", env={"PATH": "/usr/bin:/bin"}
    )
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["expired"] == 2
    assert f"no answer from {url}" in r.stderr and "connection failed" in r.stderr


def test_nothing_acknowledged_fails_with_the_answers_and_a_hint(tmp_path: Path) -> None:
    """Issue 23, item 16: a wrong key (401) or a wrong path (404) refuses every event; the
    command says so and exits 1 instead of 0."""
    receiver = WebhookReceiver(
        f"sqlite:///{tmp_path / 's.db'}", auth=ReceiverAuth.bearer("the-right-key")
    )
    with serve_in_thread(receiver) as srv:
        wrong_key = run_gptools(
            "sandbox",
            "deliver",
            "--url",
            srv.url,
            "-n",
            "3",
            "--auth",
            "bearer",
            "--json",
            env={"PATH": "/usr/bin:/bin", "GP_WEBHOOK_API_KEY": "a-wrong-key"},
        )
        wrong_path = run_gptools(
            "sandbox",
            "deliver",
            "--url",
            srv.url + "/nope",
            "-n",
            "3",
            "--auth",
            "bearer",
            env={"PATH": "/usr/bin:/bin", "GP_WEBHOOK_API_KEY": "the-right-key"},
        )
    assert wrong_key.returncode == 1, wrong_key.stderr
    assert json.loads(wrong_key.stdout)["statuses"] == {"401": 3}  # the report, one document
    assert "acknowledged none of 3 events (answers 401×3)" in wrong_key.stderr
    assert "wrong key" in wrong_key.stderr
    assert wrong_path.returncode == 1, wrong_path.stderr
    assert "answers 404×3" in wrong_path.stderr and "wrong path" in wrong_path.stderr


def test_the_report_counts_duplicates(tmp_path: Path) -> None:
    """The same seed delivers the same actions: the second run's are all duplicates."""
    receiver = WebhookReceiver(f"sqlite:///{tmp_path / 's.db'}", auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv:
        runs = [
            run_gptools(
                "sandbox",
                "deliver",
                "--url",
                srv.url,
                "-n",
                "4",
                "--json",
                env={"PATH": "/usr/bin:/bin"},
            )
            for _ in range(2)
        ]
    first, second = (json.loads(r.stdout) for r in runs)
    assert first["delivered"] == 4 and first["duplicates"] == 0
    assert second["delivered"] == 4 and second["duplicates"] == 4
