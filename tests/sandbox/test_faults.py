"""Fault injection: statuses at a rate (seeded), latency that blocks nobody else, dropped
connections, commit-then-fail, counted rules; and the 500 for an unexpected exception."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime

import httpx
import pytest

from gptools import spec
from gptools.sandbox import FaultRule, RunningSandbox, SandboxConfig, run_sandbox
from gptools.sandbox._state import SandboxState
from tests.sandbox.conftest import assert_error, auth, campaign_body, path


@pytest.fixture(scope="module")
def unlimited() -> Iterator[RunningSandbox]:
    with run_sandbox(SandboxConfig(seed=7, enforce_rate_limits=False)) as sb:
        yield sb


@pytest.fixture
def sb(unlimited: RunningSandbox) -> RunningSandbox:
    unlimited.reset()
    return unlimited


@pytest.fixture
def client(sb: RunningSandbox) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sb.base_url, timeout=10) as http:
        yield http


def _game(http: httpx.Client) -> httpx.Response:
    return http.get(path("game"), params={"gameId": "neon-fruits"}, auth=auth("individual"))


def test_status_at_a_rate_is_seeded(sb: RunningSandbox, client: httpx.Client) -> None:
    def run() -> list[int]:
        sb.faults.add(FaultRule(endpoint="GET /game", status=503, rate=0.3))
        return [_game(client).status_code for _ in range(200)]

    first = run()
    sb.reset()  # clears the rules and re-seeds the RNG
    second = run()
    assert first == second
    assert set(first) == {200, 503}
    assert 30 <= first.count(503) <= 90  # 0.3 of 200, with a wide margin
    refused = next(r for r in sb.state.requests if r.status == 503)
    assert refused.path == "/api/v1/game"


def test_status_body_is_the_documented_error(sb: RunningSandbox, client: httpx.Client) -> None:
    sb.faults.add(FaultRule(endpoint="GET /game", status=500, count=1))
    sb.faults.add(FaultRule(endpoint="GET /game", status=504, count=1))
    sb.faults.add(FaultRule(endpoint="GET /game", status=502, count=1, code="BAD_GATEWAY"))
    assert_error(_game(client), 500, spec.CODE_UNKNOWN_ERROR)
    assert_error(_game(client), 504, spec.CODE_TIMEOUT)
    assert_error(_game(client), 502, "BAD_GATEWAY")
    assert _game(client).status_code == 200
    sb.faults.add(FaultRule(endpoint="GET /game", status=429, count=1))
    limited = _game(client)
    assert_error(limited, 429, spec.RATE_LIMIT_CODE)
    assert limited.headers["Retry-After"] == "1"


def test_count_limits_a_rule_to_the_next_n(sb: RunningSandbox, client: httpx.Client) -> None:
    sb.faults.add(FaultRule(endpoint="*", status=500, count=3))
    assert [_game(client).status_code for _ in range(5)] == [500, 500, 500, 200, 200]
    assert sb.faults.rules == []


def test_rules_match_endpoint_classes_and_globs(sb: RunningSandbox, client: httpx.Client) -> None:
    created = client.post(path("campaign", 201), json=campaign_body(), auth=auth("partner"))
    campaign_id = created.json()["campaignId"]
    sb.faults.add(FaultRule(endpoint=spec.ENDPOINT_CLASS_PARTICIPANT, status=503))
    sb.faults.add(FaultRule(endpoint="GET /api/v1/brands/202/*", status=502))
    for legacy in (False, True):
        response = client.post(
            path(f"campaign/{campaign_id}/participant", 201, legacy=legacy),
            json={"playerIds": ["p"]},
            auth=auth("partner"),
        )
        assert response.status_code == 503
    assert client.get(path("game", 201), auth=auth("partner")).status_code == 200
    assert client.get(path("game", 202), auth=auth("partner")).status_code == 502
    assert sb.state.participants(campaign_id) == {}


def test_latency_does_not_block_other_requests(sb: RunningSandbox, client: httpx.Client) -> None:
    sb.faults.add(FaultRule(endpoint="GET /game", latency_s=2.0, count=1))
    slow: dict[str, float] = {}

    def call_slow() -> None:
        started = time.monotonic()
        with httpx.Client(base_url=sb.base_url, timeout=10) as other:
            assert _game(other).status_code == 200
        slow["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=call_slow)
    thread.start()
    deadline = time.monotonic() + 5
    while sb.faults.rules and time.monotonic() < deadline:
        time.sleep(0.005)  # readiness poll: the rule is spent once the slow request is in
    assert not sb.faults.rules, "the slow request never reached the server"
    for _ in range(5):
        assert client.get("/api/v1/self", auth=auth("partner")).status_code == 200
    assert thread.is_alive(), "fast requests waited for the slow one"
    thread.join(10)
    assert slow["elapsed"] >= 2.0


def test_dropped_connection_has_no_answer(sb: RunningSandbox, client: httpx.Client) -> None:
    sb.faults.add(FaultRule(endpoint="GET /self", drop=True, count=1))
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        client.get("/api/v1/self", auth=auth("partner"))
    assert sb.state.requests[-1].status == 0
    assert client.get("/api/v1/self", auth=auth("partner")).status_code == 200


def test_commit_then_fail_stores_then_answers_504(sb: RunningSandbox, client: httpx.Client) -> None:
    sb.faults.add(
        FaultRule(endpoint=spec.ENDPOINT_CLASS_CAMPAIGN_CREATE, commit_then_fail=True, count=1)
    )
    failed = client.post(path("campaign"), json=campaign_body(), auth=auth("individual"))
    assert_error(failed, 504, spec.CODE_TIMEOUT)
    assert list(sb.state.campaigns) == ["CMP-000001"]
    # This is why requestId matters: the retry finds the campaign, nothing new is made.
    retried = client.post(path("campaign"), json=campaign_body(), auth=auth("individual"))
    assert retried.status_code == 200 and retried.json()["campaignId"] == "CMP-000001"
    assert len(sb.state.campaigns) == 1


def test_commit_then_fail_on_participants_counts_the_addition(
    sb: RunningSandbox, client: httpx.Client
) -> None:
    campaign_id = client.post(
        path("campaign"), json=campaign_body(), auth=auth("individual")
    ).json()["campaignId"]
    sb.faults.add(
        FaultRule(endpoint="POST /campaign/*/participant", commit_then_fail=True, count=1)
    )
    url = path(f"campaign/{campaign_id}/participant")
    assert client.post(url, json={"playerIds": ["p1"]}, auth=auth("individual")).status_code == 504
    assert client.post(url, json={"playerIds": ["p1"]}, auth=auth("individual")).status_code == 200
    assert sb.state.participants(campaign_id) == {"p1": 2}  # the double send is visible


def test_unexpected_exception_is_500_unknown_error(
    sb: RunningSandbox,
    client: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    campaign_id = client.post(
        path("campaign"), json=campaign_body(), auth=auth("individual")
    ).json()["campaignId"]

    def broken(self: SandboxState, campaign_id: str, player_ids: list[str]) -> int:
        raise RuntimeError("a bug in the sandbox")

    monkeypatch.setattr(SandboxState, "add_participants", broken)
    response = client.post(
        path(f"campaign/{campaign_id}/participant"),
        json={"playerIds": ["p1"]},
        auth=auth("individual"),
    )
    body = assert_error(response, 500, spec.CODE_UNKNOWN_ERROR)
    assert "a bug" not in body["message"]  # internals stay in the log
    assert "a bug in the sandbox" in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"endpoint": "GET /game", "rate": 1.5, "status": 500}, "rate"),
        ({"endpoint": "GET /game", "count": 0, "status": 500}, "count"),
        ({"endpoint": "GET /game", "latency_s": -1.0}, "latency_s"),
        ({"endpoint": "GET /game", "status": 200}, "error status"),
        ({"endpoint": "GET /game"}, "does nothing"),
        ({"endpoint": "GET /game", "status": 500, "drop": True}, "one of"),
        ({"endpoint": "game", "status": 500}, "METHOD /path-glob"),
        ({"endpoint": "GET /game", "latency_s": 1.0, "headers": (("Date", "x"),)}, "give status"),
        ({"endpoint": "GET /game", "status": 429, "headers": (("Retry After", "1"),)}, "header"),
        ({"endpoint": "GET /game", "status": 429, "headers": (("X", "1\r\nY: 2"),)}, "header"),
    ],
)
def test_bad_rules_are_refused_clearly(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        FaultRule(**kwargs)  # type: ignore[arg-type]


def test_faults_over_http(sb: RunningSandbox, client: httpx.Client) -> None:
    added = client.post(
        "/_sandbox/faults", json={"endpoint": "GET /game", "status": 503, "rate": 1, "count": 2}
    )
    assert added.status_code == 200, added.text
    assert added.json() == [
        {
            "endpoint": "GET /game",
            "status": 503,
            "rate": 1.0,
            "count": 2,
            "latency_s": 0.0,
            "drop": False,
            "commit_then_fail": False,
            "code": None,
            "headers": [],
        }
    ]
    assert _game(client).status_code == 503
    assert client.delete("/_sandbox/faults").json() == []
    assert _game(client).status_code == 200
    for bad in (
        {"status": 500},
        {"endpoint": "GET /x", "drop": "yes"},
        {"endpoint": "GET /x", "status": 500, "colour": "red"},
        [1],
    ):
        assert_error(client.post("/_sandbox/faults", json=bad), 400, spec.VALIDATION_ERROR_CODE)


def test_every_answer_carries_one_date(sb: RunningSandbox, client: httpx.Client) -> None:
    for response in (_game(client), client.get("/_sandbox/accounts")):
        assert len(response.headers.get_list("date")) == 1
        assert parsedate_to_datetime(response.headers["date"]).year >= 2024


def test_headers_of_an_injected_answer(sb: RunningSandbox, client: httpx.Client) -> None:
    server_now = "Sun, 06 Nov 1994 08:49:37 GMT"
    sb.faults.add(
        FaultRule(
            "GET /game", status=429, count=1, headers=(("Retry-After", "inf"), ("Date", server_now))
        )
    )
    sb.faults.add(FaultRule("GET /game", status=429, count=1))
    over_http = client.post(
        "/_sandbox/faults",
        json={
            "endpoint": "GET /game",
            "status": 503,
            "count": 1,
            "headers": {"Retry-After": "120"},
        },
    )
    assert over_http.status_code == 200, over_http.text
    given = _game(client)
    assert given.status_code == 429
    assert given.headers.get_list("retry-after") == ["inf"]
    assert given.headers.get_list("date") == [server_now]
    default = _game(client)  # the rate-limit status gets the usual Retry-After: 1
    assert default.status_code == 429 and default.headers["retry-after"] == "1"
    other = _game(client)
    assert other.status_code == 503 and other.headers["retry-after"] == "120"


def test_seed_changes_the_sequence() -> None:
    def statuses(seed: int) -> list[int]:
        config = SandboxConfig(seed=seed, enforce_rate_limits=False)
        with run_sandbox(config) as sb, httpx.Client(base_url=sb.base_url) as http:
            sb.faults.add(FaultRule(endpoint="*", status=500, rate=0.5))
            return [_game(http).status_code for _ in range(40)]

    assert statuses(1) == statuses(1)
    assert statuses(1) != statuses(2)
