"""Structured logs (issue 14 item 4): ``--log-format json`` writes one JSON object a line
with time, level, event, status, actionId and latency_ms, and never a secret or an
Authorization header, even when requests carry them."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from gptools.webhooks._logs import JsonFormatter
from tests.webhooks.conftest import ReceiverProcess, event, wire

SECRET = "k-9f8e7d6c5b4a-receiver-secret"
WRONG = "w-1a2b3c4d-wrong-secret"


def test_json_lines_without_secrets(
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
) -> None:
    rp = receiver_process(
        f"sqlite:///{tmp_path / 's.db'}",
        args=("--log-format", "json"),
        extra_env={"GP_WEBHOOK_API_KEY": SECRET},
    )
    json_ct = {"content-type": "application/json"}
    good = event()
    ok = httpx.post(
        rp.url, content=wire(good), headers={**json_ct, "authorization": f"Bearer {SECRET}"}
    )
    assert ok.status_code == 200
    assert (
        httpx.post(
            rp.url, content=wire(event()), headers={**json_ct, "authorization": f"Bearer {WRONG}"}
        ).status_code
        == 401
    )
    # A body quoting the secret and a bad actionId: refused, and neither is logged.
    bad = httpx.post(
        rp.url,
        content=wire(event("{" + SECRET + "}")),
        headers={**json_ct, "authorization": f"Bearer {SECRET}"},
    )
    assert bad.status_code == 400
    rp.terminate()

    text = rp.log.read_text()
    assert SECRET not in text and WRONG not in text
    # No header: neither its name nor a "Bearer <token>" value ("auth BEARER" names the kind).
    assert "authorization" not in text.lower()
    assert re.search(r"(?i)bearer\s+[^\s,;)]*secret", text) is None
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert records, "the receiver logged nothing"
    for record in records:
        assert {"time", "level", "event"} <= record.keys()
        assert record["time"].endswith("Z")
    events = [r["event"] for r in records]
    assert "listening" in events
    refused = [r for r in records if r["event"] == "delivery_refused"]
    assert sorted(r["status"] for r in refused) == [400, 401]
    assert all(isinstance(r["latency_ms"], float) and r["latency_ms"] >= 0 for r in refused)


def test_formatter_blanks_credentials_in_any_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GP_WEBHOOK_PASSWORD", "pw-0123456789")
    formatter = JsonFormatter()
    record = logging.LogRecord(
        "gptools.webhooks",
        logging.WARNING,
        __file__,
        1,
        "header was Authorization: Basic dXNlcjpwYXNz, pw %s",
        ("pw-0123456789",),
        None,
    )
    record.status = 401
    record.actionId = "6a1f7e4e-8c2a-4c1e-9d7b-0b7d2f6e9a10"
    record.latency_ms = 1.5
    line = json.loads(formatter.format(record))
    assert "dXNlcjpwYXNz" not in line["event"] and "pw-0123456789" not in line["event"]
    assert line["status"] == 401 and line["latency_ms"] == 1.5
    assert line["actionId"] == "6a1f7e4e-8c2a-4c1e-9d7b-0b7d2f6e9a10"
    assert line["level"] == "warning"
