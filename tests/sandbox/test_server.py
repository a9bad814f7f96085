"""Both ways to run the sandbox, and the inspection paths."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools.sandbox import DEMO_ACCOUNTS, RunningSandbox, SandboxConfig, run_sandbox
from tests._support.cli import start_gptools
from tests.sandbox.conftest import auth, campaign_body, path

ROOT = Path(__file__).resolve().parents[2]


def test_run_sandbox_serves_on_loopback_and_stops() -> None:
    with run_sandbox(SandboxConfig()) as sb:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", sb.base_url)
        port = int(sb.base_url.rsplit(":", 1)[1])
        # Started before the context manager yields: the first request needs no retry.
        assert httpx.get(sb.base_url + "/api/v1/self", auth=auth("internal")).status_code == 200
        assert set(sb.accounts) == {
            "individual", "partner", "third_party", "internal", "aggregator", "supplier"
        }  # fmt: skip
        assert sb.dispatcher is None
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection(("127.0.0.1", port), timeout=2),
    ):
        pass


def test_two_sandboxes_are_independent() -> None:
    with run_sandbox() as one, run_sandbox() as two:
        assert one.base_url != two.base_url
        for sb in (one, two):
            response = httpx.post(
                sb.base_url + path("campaign"), json=campaign_body(), auth=auth("individual")
            )
            assert response.json()["campaignId"] == "CMP-000001"


def test_requests_are_recorded(fresh_sandbox: RunningSandbox) -> None:
    with httpx.Client(base_url=fresh_sandbox.base_url) as http:
        http.get(path("game", 201), params={"gameId": "neon-fruits"}, auth=auth("partner"))
        http.post(path("campaign"), json=campaign_body(), auth=auth("individual"))
        http.get("/_sandbox/requests")  # inspection is not recorded
    game, campaign = fresh_sandbox.state.requests
    assert (game.method, game.path, game.query, game.username, game.brand_id, game.status) == (
        "GET",
        "/api/v1/brands/201/game",
        {"gameId": "neon-fruits"},
        "demo-partner",
        201,
        200,
    )
    assert game.at.tzinfo is not None and game.body == b""
    assert campaign.status == 201 and b'"requestId"' in campaign.body


def test_inspection_over_http(fresh_sandbox: RunningSandbox) -> None:
    with httpx.Client(base_url=fresh_sandbox.base_url) as http:
        campaign_id = http.post(
            path("campaign"), json=campaign_body(players=["a", "a"]), auth=auth("individual")
        ).json()["campaignId"]
        http.post(
            path("webhook-subscription"),
            auth=auth("individual"),
            json={"authenticationType": "BEARER", "apiKey": "topsecret"},
        )
        requests = http.get("/_sandbox/requests", params={"limit": 1}).json()
        assert [r["path"] for r in requests] == ["/api/v1/webhook-subscription"]
        # Masked exactly as /_sandbox/subscriptions masks it (one masking function).
        assert "topsecret" not in requests[0]["body"]
        assert json.loads(requests[0]["body"]) == {"authenticationType": "BEARER", "apiKey": "****"}
        campaigns = http.get("/_sandbox/campaigns").json()
        assert [(c["campaignId"], c["brandId"], c["requestId"]) for c in campaigns] == [
            (campaign_id, 101, "req-1")
        ]
        assert http.get(f"/_sandbox/campaigns/{campaign_id}/participants").json() == {"a": 2}
        assert http.get("/_sandbox/campaigns/CMP-9/participants").status_code == 404
        subscriptions = http.get("/_sandbox/subscriptions").json()
        assert subscriptions == {"101": {"authenticationType": "BEARER", "apiKey": "****"}}
        accounts = http.get("/_sandbox/accounts").json()
        assert {a["username"] for a in accounts} == {a.username for a in DEMO_ACCOUNTS.values()}
        assert http.get("/_sandbox/requests", params={"limit": "x"}).status_code == 400
        assert http.post("/_sandbox/reset").status_code == 200
    assert fresh_sandbox.state.campaigns == {} and fresh_sandbox.state.requests == []


def test_request_log_is_bounded() -> None:
    config = SandboxConfig(max_recorded_requests=10, enforce_rate_limits=False)
    with run_sandbox(config) as sb, httpx.Client(base_url=sb.base_url) as http:
        for _ in range(25):
            http.get("/api/v1/self", auth=auth("partner"))
        assert 5 <= len(sb.state.requests) <= 10


def test_cli_serve_prints_url_and_credentials_and_stops_on_ctrl_c() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = start_gptools(
        *("sandbox", "serve", "--port", "0", "--seed", "3"),
        stdout=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    try:
        assert proc.stderr is not None
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            if not line or line.startswith("try: curl"):
                break
        text = "".join(lines)
        match = re.search(r"serving at (http://127\.0\.0\.1:\d+)", text)
        assert match, text
        for account in DEMO_ACCOUNTS.values():
            assert f"{account.username}:{account.password}" in text
        response = httpx.get(match.group(1) + "/api/v1/self", auth=auth("partner"))
        assert [b["id"] for b in response.json()["allowedBrands"]] == [201, 202, 203]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.mark.parametrize(
    ("sent", "shown"),
    [
        (b'{"authenticationType": "BASIC", "username": "u", "password": "pw-1"}',
         {"authenticationType": "BASIC", "username": "u", "password": "****"}),
        (b'{"a": [{"apiKey": "k-1"}], "bet": 1.10}',
         {"a": [{"apiKey": "****"}], "bet": Decimal("1.10")}),
        (b'{"apiKey": "k-1", ', None),  # not JSON but names a secret: hidden whole
        (b"[" * 5000, None),  # too deep to parse: shown (it names no secret)
    ],
)  # fmt: skip
def test_recorded_bodies_are_masked_at_any_depth(
    fresh_sandbox: RunningSandbox, sent: bytes, shown: Any
) -> None:
    with httpx.Client(base_url=fresh_sandbox.base_url) as http:
        http.post(
            path("webhook-subscription"),
            auth=auth("individual"),
            content=sent,
            headers={"Content-Type": "application/json"},
        )
        body = http.get("/_sandbox/requests", params={"limit": 1}).json()[0]["body"]
    assert "pw-1" not in body and "k-1" not in body
    if shown is not None:
        assert json.loads(body, parse_float=Decimal) == shown
    elif b"apiKey" in sent:
        assert body == "****"
    else:
        assert body == sent.decode()
