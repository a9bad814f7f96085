"""Retries against injected faults: 5xx, 504, dropped connections, time-outs, the
rate-limit response with Retry-After, and "commit then fail" on campaign creation."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from email.utils import format_datetime, parsedate_to_datetime

import pytest

from gptools import errors, spec
from gptools.client import Client
from gptools.models import loads_wire
from gptools.sandbox import FaultRule, RunningSandbox, SandboxConfig, run_sandbox
from tests.client.conftest import MakeClient, run_concurrently
from tests.client.test_operations import GAME, free_rounds

GAME_PATH = "/api/v1/brands/201/game"


def retry_logs(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == "gptools.client"
        and r.levelno == logging.INFO
        and r.getMessage().startswith("retry ")
    ]


@pytest.mark.parametrize(
    "rule",
    [
        FaultRule("other", status=500, count=2),
        FaultRule("other", status=503, count=2),
        FaultRule("other", status=504, count=2),
        FaultRule("other", drop=True, count=2),
    ],
    ids=["500", "503", "504-timeout", "dropped"],
)
def test_retried_until_success(
    make: MakeClient, sb: RunningSandbox, rule: FaultRule, caplog: pytest.LogCaptureFixture
) -> None:
    c = make("partner")
    c.self()
    sb.faults.add(rule)
    with caplog.at_level(logging.INFO, logger="gptools.client"):
        game = c.game(GAME.game_id, brand=201)
    assert game.retries == 2
    assert [r.path for r in sb.state.requests[1:]] == [GAME_PATH] * 3
    assert c.stats.retries == 2 and c.stats.requests == 4
    logs = retry_logs(caplog)
    assert len(logs) == 2
    assert GAME_PATH in logs[0].getMessage() and "retry 1 of" in logs[0].getMessage()


def test_retries_exhausted_raise_with_count(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner", max_retries=2)
    c.self()
    sb.faults.add(FaultRule("other", status=504))
    with pytest.raises(errors.GatewayTimeoutError) as caught:
        c.game(GAME.game_id, brand=201)
    assert caught.value.retries == 2
    assert "2 retries" in str(caught.value)
    assert len(sb.state.requests) == 1 + 3


def test_dropped_connections_exhausted_give_transport_error(
    make: MakeClient, sb: RunningSandbox
) -> None:
    c = make("partner", max_retries=1)
    c.self()
    sb.faults.add(FaultRule("other", drop=True))
    with pytest.raises(errors.TransportError) as caught:
        c.game(GAME.game_id, brand=201)
    assert caught.value.retries == 1
    assert caught.value.url == f"{sb.base_url}{GAME_PATH}?gameId={GAME.game_id}"
    assert c.stats.transport_errors == 2
    assert [r.status for r in sb.state.requests[1:]] == [0, 0]  # 0: dropped, no answer


def test_read_timeout_is_retried_and_overridable_per_call(
    make: MakeClient, sb: RunningSandbox
) -> None:
    c = make("partner")
    c.self()
    sb.faults.add(FaultRule("other", latency_s=1.5, count=1))
    game = c.game(GAME.game_id, brand=201, timeout=(2.0, 0.2))
    assert game.retries == 1
    assert c.stats.transport_errors == 1
    # The abandoned request is recorded when the server finishes it; wait for that so it
    # does not land in the next test's record.
    deadline = time.monotonic() + 10
    while len(sb.state.requests) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(sb.state.requests) == 3
    with pytest.raises(errors.ConfigurationError, match="wait forever"):
        c.game(GAME.game_id, brand=201, timeout=None)


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def test_connection_refused_is_retried(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner", base_url=f"http://127.0.0.1:{_closed_port()}", max_retries=2)
    with pytest.raises(errors.TransportError) as caught:
        c.self()
    assert caught.value.retries == 2
    assert str(caught.value).startswith(f"cannot connect to {c.base_url}: connection refused")
    assert caught.value.sent is False
    assert c.stats.transport_errors == 3


class _FirstHolderWaits:
    """The ``GET /self`` lock of a sync client, whose first holder starts its fetch only
    once ``callers`` threads have come to the lock, so that they all wait for that fetch."""

    def __init__(self, callers: int) -> None:
        self._lock = threading.Lock()
        self._count = threading.Lock()
        self._arrived = 0
        self._all_arrived = threading.Event()
        self._callers = callers
        self._first = True

    def __enter__(self) -> None:
        with self._count:
            self._arrived += 1
            if self._arrived == self._callers:
                self._all_arrived.set()
        self._lock.acquire()
        if self._first:
            self._first = False
            assert self._all_arrived.wait(timeout=30), "the callers never came to the lock"

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_callers_waiting_for_a_failed_self_share_its_error(make: MakeClient) -> None:
    """Eight calls started together against a dead address cost one retry budget, not eight
    in a row: the ones that waited for the GET /self fetch get its error."""
    c = make("partner", base_url=f"http://127.0.0.1:{_closed_port()}", max_retries=2)
    if isinstance(c, Client):
        # Refused connections fail within milliseconds: without the gate a thread the pool
        # starts late would arrive after the fetch and rightly try again.
        c._self_lock = _FirstHolderWaits(callers=8)  # type: ignore[assignment]
    results = run_concurrently(c, [("game", (GAME.game_id,), {"brand": 201})] * 8)
    assert all(isinstance(r, errors.TransportError) and r.sent is False for r in results)
    assert c.stats.requests == 3 and c.stats.transport_errors == 3
    # A later call tries again (the failure is shared, never cached).
    with pytest.raises(errors.TransportError):
        c.self()
    assert c.stats.requests == 6


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        (FaultRule("other", status=400, code="BAD"), errors.BadRequestError),
        (FaultRule("other", status=401, code=spec.CODE_NOT_AUTHORIZED), errors.NotAuthorizedError),
        (
            FaultRule("other", status=403, code=spec.CODE_BRAND_NOT_ALLOWED),
            errors.BrandNotAllowedError,
        ),
        (
            FaultRule("other", status=403, code=spec.CODE_INVALID_REQUEST),
            errors.InvalidRequestError,
        ),
        (FaultRule("other", status=404, code=spec.NOT_FOUND_CODE), errors.NotFoundError),
    ],
    ids=["400", "401", "403-brand", "403-invalid", "404"],
)
def test_no_retry_on_4xx(
    make: MakeClient,
    sb: RunningSandbox,
    rule: FaultRule,
    error: type[errors.ApiError],
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = make("partner")
    c.self()
    sb.faults.add(rule)
    with caplog.at_level(logging.INFO, logger="gptools.client"), pytest.raises(error) as caught:
        c.game(GAME.game_id, brand=201)
    assert caught.value.retries == 0
    assert len(sb.state.requests) == 2, [(r.path, r.status, r.at) for r in sb.state.requests]
    assert c.stats.retries == 0 and retry_logs(caplog) == []


def test_commit_then_fail_creates_exactly_one_campaign(
    make: MakeClient, sb: RunningSandbox
) -> None:
    c = make("partner")
    sb.faults.add(FaultRule(spec.ENDPOINT_CLASS_CAMPAIGN_CREATE, commit_then_fail=True, count=2))
    created = c.create_campaign(free_rounds(), brand=202)
    assert created.retries == 2
    assert list(sb.state.campaigns) == [created.campaign_id]
    attempts = [r for r in sb.state.requests if r.method == "POST"]
    assert [r.status for r in attempts] == [504, 504, 200]
    keys = {loads_wire(r.body)["requestId"] for r in attempts}
    assert len(keys) == 1  # the same requestId on every attempt
    (key,) = keys
    assert len(key) == 36 and uuid.UUID(key).version == 4


def test_participant_retry_after_commit_is_harmless(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner").brand(203)
    campaign = c.create_campaign(free_rounds()).campaign_id
    sb.faults.add(FaultRule(spec.ENDPOINT_CLASS_PARTICIPANT, commit_then_fail=True, count=1))
    added = c.add_participants(campaign, ["p-1", "p-2"])
    assert added.retries == 1
    # The sandbox counts repeats: both attempts reached it, and the set of players is right.
    assert sb.state.participants(campaign) == {"p-1": 2, "p-2": 2}


def test_participant_retries_against_a_server_that_refuses_re_adds(make: MakeClient) -> None:
    """The other reading of spec.PARTICIPANT_ADDITION_IDEMPOTENT, simulated by the sandbox's
    switch: a re-add is 409 PARTICIPANT_EXISTS. The default client repeats an addition whose
    answer was lost and meets that refusal (the players were added once); a client told
    ``participant_retries=False`` reports the lost answer instead and never repeats."""
    config = SandboxConfig(readd_participants_refused=True)
    with run_sandbox(config) as strict:
        c = make("partner", sandbox=strict).brand(203)
        campaign = c.create_campaign(free_rounds()).campaign_id
        strict.faults.add(
            FaultRule(spec.ENDPOINT_CLASS_PARTICIPANT, commit_then_fail=True, count=1)
        )
        with pytest.raises(errors.ConflictError) as refused:
            c.add_participants(campaign, ["p-1", "p-2"])
        assert refused.value.code == spec.PARTICIPANT_EXISTS_CODE
        assert refused.value.retries == 1 and "p-1" in refused.value.message
        assert strict.state.participants(campaign) == {"p-1": 1, "p-2": 1}

        careful = make("partner", sandbox=strict, participant_retries=False).brand(203)
        strict.faults.add(
            FaultRule(spec.ENDPOINT_CLASS_PARTICIPANT, commit_then_fail=True, count=1)
        )
        with pytest.raises(errors.ServerError) as lost:
            careful.add_participants(campaign, ["p-3"])
        assert lost.value.status == 504 and lost.value.retries == 0
        assert strict.state.participants(campaign) == {"p-1": 1, "p-2": 1, "p-3": 1}
        # Without a fault, new players are added and a re-add is refused as a whole.
        assert careful.add_participants(campaign, ["p-4"]).retries == 0
        with pytest.raises(errors.ConflictError):
            careful.add_participants(campaign, ["p-4", "p-5"])
        assert "p-5" not in strict.state.participants(campaign)


@pytest.mark.parametrize(
    ("status", "code", "error", "retried"),
    [
        (403, spec.CODE_BRAND_NOT_ALLOWED, errors.ForbiddenError, False),
        (500, spec.CODE_UNKNOWN_ERROR, errors.UnknownServerError, True),
        (504, spec.CODE_TIMEOUT, errors.GatewayTimeoutError, True),
    ],
)
def test_self_errors_of_the_document(
    make: MakeClient,
    sb: RunningSandbox,
    status: int,
    code: str,
    error: type[errors.ApiError],
    retried: bool,
) -> None:
    """GET /self lists 401, 403, 500 and 504 with the error body: the sandbox answers them
    as seeded faults; a 403 is raised at once, 500/504 are retried and raised when they
    persist, and a passing one is retried to success."""
    c = make("partner", max_retries=2)
    sb.faults.add(FaultRule("GET /self", status=status, code=code))
    with pytest.raises(error) as caught:
        c.self()
    assert caught.value.status == status and caught.value.code == code
    assert caught.value.path == spec.SELF_PATH
    assert caught.value.retries == (2 if retried else 0)
    assert [r.status for r in sb.state.requests] == [status] * (3 if retried else 1)
    sb.faults.clear()
    sb.faults.add(FaultRule("GET /self", status=status, code=code, count=1))
    if retried:
        assert c.self().retries == 1
    else:
        with pytest.raises(error):
            c.self()
        assert c.self().principal_type == spec.PRINCIPAL_PARTNER


def test_subscription_creation_not_repeated_after_ambiguous_failure(
    make: MakeClient,
    sb: RunningSandbox,
) -> None:
    from gptools.models import WebhookSubscription

    c = make("partner").brand(201)
    sb.faults.add(FaultRule("POST /webhook-subscription", commit_then_fail=True, count=1))
    with pytest.raises(errors.GatewayTimeoutError) as caught:
        c.create_webhook_subscription(WebhookSubscription(authentication_type="NONE"))
    assert caught.value.retries == 0
    assert 201 in sb.state.subscriptions  # it was done; a repeat would have been refused


# --------------------------------------------------------------------------------------
# The rate-limit response: Retry-After honoured, or raised above the ceiling
# --------------------------------------------------------------------------------------

TIGHT = (spec.RateTier("user_other", "per_user_endpoint", 2, None, spec.ENDPOINT_CLASS_OTHER),)


@pytest.fixture(scope="module")
def tight_sandbox() -> Iterator[RunningSandbox]:
    """A sandbox whose 'other endpoints' tier is 2 per second (the document allows tightening)."""
    with run_sandbox(SandboxConfig(seed=0, rate_tiers=TIGHT)) as sb:
        yield sb


def test_retry_after_is_honoured(make: MakeClient, tight_sandbox: RunningSandbox) -> None:
    tight_sandbox.reset()
    # The client trusts the published 60/s, so the tightened server answers 429.
    c = make("partner", sandbox=tight_sandbox)
    c.self()
    c.game(GAME.game_id, brand=201)
    game = c.game(GAME.game_id, brand=201)
    assert game.retries == 1
    stats = c.stats
    assert stats.rate_limited == 1 and stats.retries == 1
    records = tight_sandbox.state.requests
    assert [r.status for r in records] == [200, 200, 429, 200]
    # The sandbox said Retry-After: 1; the retry came no sooner.
    assert (records[3].at - records[2].at).total_seconds() >= 0.95
    assert stats.backoff_seconds >= 1.0
    # The limiter slowed down the tiers the refused request counted against.
    assert c.limiter.allowed()["user_other GET /game"] < 60


def test_retry_after_above_ceiling_raises(make: MakeClient, tight_sandbox: RunningSandbox) -> None:
    tight_sandbox.reset()
    c = make("partner", sandbox=tight_sandbox, retry_after_ceiling=0.5)
    c.self()
    c.game(GAME.game_id, brand=201)
    with pytest.raises(errors.RateLimitedError) as caught:
        c.game(GAME.game_id, brand=201)
    e = caught.value
    assert (e.status, e.code, e.retry_after, e.retries) == (
        spec.RATE_LIMIT_STATUS,
        spec.RATE_LIMIT_CODE,
        1.0,
        0,
    )
    assert len(tight_sandbox.state.requests) == 3


def test_client_with_the_servers_figures_never_sees_429(
    make: MakeClient,
    tight_sandbox: RunningSandbox,
) -> None:
    tight_sandbox.reset()
    c = make("partner", sandbox=tight_sandbox, rate_tiers=TIGHT)
    for _ in range(5):
        c.game(GAME.game_id, brand=201)
    assert c.stats.rate_limited == 0
    assert {r.status for r in tight_sandbox.state.requests} == {200}
    assert c.stats.wait_seconds > 1.0  # 6 requests at 2/s: it had to wait


def test_sync_client_rejects_async_transport(sb: RunningSandbox) -> None:
    import httpx

    acct = sb.accounts["partner"]
    with pytest.raises(TypeError, match="AsyncClient"):
        Client(
            sb.base_url,
            acct.username,
            acct.password,
            env_file=None,
            transport=httpx.AsyncHTTPTransport(),
        )


# --------------------------------------------------------------------------------------
# Retry-After never freezes the client (issue 17 item 7)
# --------------------------------------------------------------------------------------


def _limiter_wait(c: object, path: str = GAME_PATH) -> float:
    """Seconds the client's limiter would make the next request on ``path`` wait now."""
    limiter = c.limiter  # type: ignore[attr-defined]
    admitted = limiter.try_acquire(limiter.tiers_for("GET", path), time.monotonic())
    assert isinstance(admitted, float), "admitted at once: no pause at all"
    return admitted


def test_retry_after_above_ceiling_pauses_only_up_to_the_ceiling(
    make: MakeClient, sb: RunningSandbox
) -> None:
    c = make("partner", retry_after_ceiling=0.5)
    c.self()
    sb.faults.add(FaultRule("other", status=429, count=1, headers=(("Retry-After", "120"),)))
    with pytest.raises(errors.RateLimitedError) as caught:
        c.game(GAME.game_id, brand=201)
    assert (caught.value.retry_after, caught.value.retries) == (120.0, 0)
    # Raised at once, and the tiers pause for the ceiling, not for the server's 120 s.
    assert 0 < _limiter_wait(c) <= 0.5
    c.game(GAME.game_id, brand=201)
    refused, next_one = sb.state.requests[-2:]
    assert refused.status == 429 and next_one.status == 200
    assert 0.4 <= (next_one.at - refused.at).total_seconds() < 5


@pytest.mark.parametrize("value", ["inf", "1e400", "Infinity", "-inf"])
def test_non_finite_retry_after_is_refused(
    make: MakeClient, sb: RunningSandbox, value: str
) -> None:
    c = make("partner")
    c.self()
    sb.faults.add(FaultRule("other", status=429, count=1, headers=(("Retry-After", value),)))
    # Not a usable hint: retried after the client's own backoff, as if none had been given.
    game = c.game(GAME.game_id, brand=201)
    assert game.retries == 1 and c.stats.rate_limited == 1
    c.game(GAME.game_id, brand=201)
    assert c.stats.wait_seconds < 1.0
    assert [r.status for r in sb.state.requests[1:]] == [429, 200, 200]


@pytest.mark.parametrize(
    "server_now",
    ["Sun, 06 Nov 1994 08:49:37 GMT", "Fri, 01 Jan 2100 00:00:00 GMT"],
    ids=["server-clock-behind", "server-clock-ahead"],
)
def test_retry_after_date_is_measured_against_the_servers_date(
    make: MakeClient, sb: RunningSandbox, server_now: str
) -> None:
    retry_at = format_datetime(
        parsedate_to_datetime(server_now) + timedelta(seconds=1), usegmt=True
    )
    c = make("partner")
    c.self()
    sb.faults.add(
        FaultRule(
            "other", status=429, count=1, headers=(("Date", server_now), ("Retry-After", retry_at))
        )
    )
    game = c.game(GAME.game_id, brand=201)
    assert game.retries == 1
    refused, retried = sb.state.requests[-2:]
    assert (refused.status, retried.status) == (429, 200)
    # One second by the server's clock, whatever the local clock says.
    assert 0.95 <= (retried.at - refused.at).total_seconds() < 5


# --------------------------------------------------------------------------------------
# One idea of "rate limited" (issue 17 item 8, issue 11 item 5)
# --------------------------------------------------------------------------------------


def test_rate_limit_code_on_another_status_slows_the_limiter_down(
    make: MakeClient, sb: RunningSandbox
) -> None:
    c = make("partner")
    c.self()
    sb.faults.add(FaultRule("other", status=503, code=spec.RATE_LIMIT_CODE, count=1))
    game = c.game(GAME.game_id, brand=201)
    assert game.retries == 1 and c.stats.rate_limited == 1
    # The retry and the limiter agree: the tiers slowed down instead of speeding up.
    assert c.limiter.allowed()["user_other GET /game"] <= 31.0  # halved, then one success back


def test_overridden_rate_limit_status_works_end_to_end(
    make: MakeClient, sb: RunningSandbox
) -> None:
    from gptools.models import WebhookSubscription

    c = make("partner", rate_limit_status=503, max_retries=1)
    c.self()
    sb.faults.add(FaultRule("other", status=503, code="SLOW_DOWN"))
    with pytest.raises(errors.RateLimitedError) as caught:
        c.game(GAME.game_id, brand=201)
    assert (caught.value.status, caught.value.code, caught.value.retries) == (503, "SLOW_DOWN", 1)
    assert c.stats.rate_limited == 2
    assert c.limiter.allowed()["user_other GET /game"] < 60
    sb.faults.clear()
    # The rate-limit answer did nothing, so even a creation is repeated after it.
    sb.faults.add(FaultRule("POST /webhook-subscription", status=503, code="SLOW_DOWN", count=1))
    created = c.brand(201).create_webhook_subscription(
        WebhookSubscription(authentication_type="NONE")
    )
    assert created.retries == 1
    assert 201 in sb.state.subscriptions


# --------------------------------------------------------------------------------------
# Every transport tells "never sent" from "sent, answer lost" alike (issue 13 item 1)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule",
    [
        FaultRule("POST /webhook-subscription", drop=True, count=1),
        FaultRule("POST /webhook-subscription", latency_s=1.0, count=1),
    ],
    ids=["dropped", "read-timeout"],
)
def test_a_request_that_reached_the_server_is_sent_on_every_transport(
    make: MakeClient, sb: RunningSandbox, rule: FaultRule
) -> None:
    """A dropped connection or a read time-out happened after the request left: a creation
    is not repeated, and the error says it was sent. (httpx-aiohttp alone maps both to
    ConnectTimeout, which would read as "never sent" and repeat the creation.)"""
    from gptools.models import WebhookSubscription

    c = make("partner", timeout=(2.0, 0.3))
    c.self()
    sb.faults.add(rule)
    with pytest.raises(errors.TransportError) as caught:
        c.create_webhook_subscription(WebhookSubscription(authentication_type="NONE"), brand=201)
    assert caught.value.sent is True and caught.value.retries == 0
    assert not str(caught.value).startswith("cannot connect")
    deadline = time.monotonic() + 10
    while (
        len([r for r in sb.state.requests if r.method == "POST"]) < 1
        and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    assert len([r for r in sb.state.requests if r.method == "POST"]) == 1


# --------------------------------------------------------------------------------------
# The call's deadline covers the wait a Retry-After asks for (issue 36 item 5)
# --------------------------------------------------------------------------------------


def test_a_retry_after_past_the_deadline_raises_at_once(
    make: MakeClient, sb: RunningSandbox
) -> None:
    # 4 s is under the ceiling (30 s), but a retry after it could not end within the
    # call's 2 s deadline: the 503 is raised at once rather than slept through.
    c = make("partner", timeout=2)
    c.self()
    sb.faults.add(FaultRule("other", status=503, count=1, headers=(("Retry-After", "4"),)))
    start = time.monotonic()
    with pytest.raises(errors.ServerError) as caught:
        c.game(GAME.game_id, brand=201)
    took = time.monotonic() - start
    assert (caught.value.status, caught.value.retry_after, caught.value.retries) == (503, 4.0, 0)
    assert [r.status for r in sb.state.requests[1:]] == [503]
    assert took < 2.0, f"{took:.1f} s for a 2 s deadline"


def test_a_retry_after_within_the_deadline_is_waited_for(
    make: MakeClient, sb: RunningSandbox
) -> None:
    c = make("partner", timeout=3)
    c.self()
    sb.faults.add(FaultRule("other", status=503, count=1, headers=(("Retry-After", "1"),)))
    game = c.game(GAME.game_id, brand=201)
    assert game.retries == 1
    refused, served = sb.state.requests[1:]
    assert (refused.status, served.status) == (503, 200)
    assert (served.at - refused.at).total_seconds() >= 0.95
