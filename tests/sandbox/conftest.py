"""Helpers of the sandbox tests. They talk to the sandbox with plain httpx, never our client."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gptools.sandbox import DEMO_ACCOUNTS, RunningSandbox

ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def auth(key: str) -> tuple[str, str]:
    """HTTP Basic credentials of a demo account."""
    account = DEMO_ACCOUNTS[key]
    return account.username, account.password


def path(endpoint: str, brand: int | str | None = None, *, legacy: bool = False) -> str:
    """An API path in the implicit (``brand=None``) or explicit form."""
    if legacy and endpoint.startswith("campaign"):
        endpoint = "freeround/" + endpoint
    prefix = "/api/v1" if brand is None else f"/api/v1/brands/{brand}"
    return f"{prefix}/{endpoint}"


def campaign_body(**changes: Any) -> dict[str, Any]:
    """A valid AWARDED_FEATURE campaign body (neon-fruits, EUR, 0.10 × 75.5 = 7.55)."""
    body: dict[str, Any] = {
        "type": "AWARDED_FEATURE",
        "name": "Spring awarded features",
        "externalCampaignId": "ext-1",
        "requestId": "req-1",
        "rulesUrl": "https://example.invalid/rules",
        "betNumber": 10,
        "gameIds": ["neon-fruits"],
        "bet": 7.55,
        "currencyCode": "EUR",
        "startDate": "2026-03-01T00:00:00",
        "endDate": "2026-03-08T00:00:00",
        "timeZone": "Europe/Malta",
    }
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is the documented error body with this status and code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert set(body) == {"code", "message", "timestamp", "path"}, body
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    assert ISO_Z.match(body["timestamp"]), body["timestamp"]
    assert body["path"] == response.request.url.path
    return body


@pytest.fixture
def http(fresh_sandbox: RunningSandbox) -> Iterator[httpx.Client]:
    """A plain httpx client on a freshly reset session sandbox."""
    with httpx.Client(base_url=fresh_sandbox.base_url, timeout=10) as client:
        yield client
