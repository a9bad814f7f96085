"""The client's pure parts: retry decision, backoff, Retry-After, rate limiter, timeouts."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

import gptools.client as client_pkg
from gptools import spec
from gptools._backoff import BACKOFF_JITTER
from gptools.client import _constants as C
from gptools.client import backoff_delay
from gptools.client._base import parse_retry_after, server_date, should_retry
from gptools.client._ratelimit import RateLimiter, Ticket
from gptools.client._settings import as_timeout
from gptools.errors import ConfigurationError, RateLimitedError, error_class, is_rate_limited


def test_all_is_sorted_and_importable() -> None:
    names = client_pkg.__all__
    # isort style, as ruff's RUF022 wants: CONSTANTS, then Classes, then functions.
    assert names == sorted(names, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    for name in names:
        assert getattr(client_pkg, name) is not None
    assert {"Client", "AsyncClient"} <= set(names)
    # A brand is an option of the one client class (client.brand(ID)), not a class.
    assert not {"BrandClient", "AsyncBrandClient"} & set(names)


@pytest.mark.parametrize(
    ("status", "rate_limited", "idempotent", "reached", "expected"),
    [
        (500, False, True, True, True),
        (502, False, True, True, True),
        (503, False, True, True, True),
        (504, False, True, True, True),
        (429, True, True, True, True),
        (429, True, False, True, True),  # the rate-limit response did nothing: always safe
        (None, False, True, True, True),  # dropped / timed out, idempotent
        (None, False, False, True, False),  # dropped, might have been done: not repeated
        (None, False, False, False, True),  # never reached the server
        (500, False, False, True, False),
        (504, False, False, True, False),
        (408, False, True, True, True),  # a proxy's time-out: temporary, like the loader says
        (425, False, True, True, True),
        (408, False, False, True, False),  # ... but the server may have acted: not repeated
        (400, False, True, True, False),
        (401, False, True, True, False),
        (403, False, True, True, False),
        (404, False, True, True, False),
        (409, False, True, True, False),
    ],
)
def test_should_retry(
    status: int | None, rate_limited: bool, idempotent: bool, reached: bool, expected: bool
) -> None:
    assert (
        should_retry(status, rate_limited=rate_limited, idempotent=idempotent, reached=reached)
        is expected
    )


def test_backoff_is_exponential_capped_and_jittered() -> None:
    rng = random.Random(7)
    delays = [backoff_delay(a, rng, base=0.5, cap=4.0) for a in range(8)]
    for attempt, delay in enumerate(delays):
        ceiling = min(4.0, 0.5 * 2**attempt)
        assert ceiling * (1 - BACKOFF_JITTER) <= delay <= ceiling
    assert delays[0] < delays[1] < delays[2] < delays[3]
    assert max(delays) <= 4.0
    # Seeded: the same sequence again.
    rng2 = random.Random(7)
    assert delays == [backoff_delay(a, rng2, base=0.5, cap=4.0) for a in range(8)]
    # Jitter actually varies the delays.
    assert len({round(d / min(4.0, 0.5 * 2**a), 6) for a, d in enumerate(delays)}) > 1


def test_parse_retry_after() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_retry_after(None) is None
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    date = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert parse_retry_after(date, now=now) == 90.0
    # Not a finite number of seconds: refused like an unreadable value, never a pause.
    for endless in ("inf", "1e400", "-inf", "Infinity"):
        assert parse_retry_after(endless) is None, endless


def test_server_date() -> None:
    def answer(**headers: str) -> httpx.Response:
        return httpx.Response(429, headers=headers)

    assert server_date(answer(Date="Sun, 06 Nov 1994 08:49:37 GMT")) == datetime(
        1994, 11, 6, 8, 49, 37, tzinfo=UTC
    )
    assert server_date(answer()) is None
    assert server_date(answer(Date="yesterday")) is None


@pytest.mark.parametrize(
    ("status", "code", "rate_limit_status", "expected"),
    [
        (429, None, 429, True),
        (429, "UNKNOWN_ERROR", 429, True),
        (503, spec.RATE_LIMIT_CODE, 429, True),
        (503, None, 429, False),
        (503, "SLOW_DOWN", 503, True),
        (429, None, 503, False),
        (None, None, 429, False),
    ],
)
def test_one_predicate_for_rate_limited(
    status: int | None, code: str | None, rate_limit_status: int, expected: bool
) -> None:
    assert is_rate_limited(status, code, rate_limit_status=rate_limit_status) is expected
    klass = error_class(status, code, rate_limit_status=rate_limit_status)
    assert issubclass(klass, RateLimitedError) is expected


def test_limiter_refuses_an_endless_pause() -> None:
    lim = RateLimiter((_tier("t", 3),))
    ticket = lim.try_acquire(("t",), 0.0)
    assert isinstance(ticket, Ticket)
    with pytest.raises(ValueError, match="finite"):
        lim.release(ticket, 0.0, rate_limited=True, retry_after=float("inf"))


def _tier(
    name: str, per_second: int, endpoint: str | None = None, methods: frozenset[str] | None = None
) -> spec.RateTier:
    return spec.RateTier(name, "per_user_endpoint", per_second, methods, endpoint)


def test_limiter_tiers_follow_the_rate_table() -> None:
    lim = RateLimiter()
    participant = "/api/v1/brands/201/campaign/CMP-1/participant"
    assert set(lim.tiers_for("POST", participant)) == {
        "global_all",
        "user_participant",
        "endpoint_participant",
    }
    assert set(lim.tiers_for("GET", "/api/v1/game")) == {
        "global_all",
        "global_get",
        "user_other GET /game",
    }
    assert set(lim.tiers_for("GET", "/api/v1/brands/201/game")) == {
        "global_all",
        "global_get",
        "user_other GET /game",
    }
    assert set(lim.tiers_for("POST", "/api/v1/freeround/campaign")) == {
        "global_all",
        "user_campaign",
        "endpoint_campaign",
    }
    assert RateLimiter(()).tiers_for("GET", "/api/v1/self") == ()


def test_limiter_gives_each_other_endpoint_its_own_60() -> None:
    """'Per endpoint per user | All other endpoints | 60': one figure per endpoint, not one
    pool for all of them (GET /game full does not hold back GET /self or the
    configurations)."""
    lim = RateLimiter(margin=0.0)
    game = lim.tiers_for("GET", "/api/v1/brands/201/game")
    for _ in range(60):
        t = lim.try_acquire(game, 0.0)
        assert isinstance(t, Ticket)
        lim.release(t, 0.0)
    assert lim.try_acquire(game, 0.0) == pytest.approx(1.0)
    for other in ("/api/v1/brands/201/awarded-feature-configurations", "/api/v1/self"):
        assert isinstance(lim.try_acquire(lim.tiers_for("GET", other), 0.0), Ticket), other
    assert lim.allowed()["user_other GET /game"] == 60


def test_limiter_sliding_window_counts_until_answer_plus_window() -> None:
    lim = RateLimiter((_tier("t", 3),), margin=0.0)
    tiers = lim.tiers_for("GET", "/api/v1/game")
    tickets = [lim.try_acquire(tiers, 0.0) for _ in range(3)]
    assert all(isinstance(t, Ticket) for t in tickets)
    # Full, and the three are still in flight: wait for an answer (recheck interval).
    assert lim.try_acquire(tiers, 0.1) == C.RATE_INFLIGHT_RECHECK
    for i, t in enumerate(tickets):
        assert isinstance(t, Ticket)
        lim.release(t, 0.2 + i * 0.1)  # answers at 0.2, 0.3, 0.4
    # The first place frees one window after the first answer, not after its sending.
    assert lim.try_acquire(tiers, 0.5) == pytest.approx(0.7)
    assert lim.try_acquire(tiers, 1.19) == pytest.approx(0.01)
    assert isinstance(lim.try_acquire(tiers, 1.2), Ticket)
    assert lim.try_acquire(tiers, 1.2) == pytest.approx(0.1)


def test_limiter_waits_for_every_tier() -> None:
    lim = RateLimiter((_tier("a", 5), _tier("b", 2, methods=frozenset({"GET"}))), margin=0.0)
    get, post = lim.tiers_for("GET", "/api/v1/game"), lim.tiers_for("POST", "/api/v1/x")
    for _ in range(2):
        t = lim.try_acquire(get, 0.0)
        assert isinstance(t, Ticket)
        lim.release(t, 0.0)
    assert lim.try_acquire(get, 0.5) == pytest.approx(0.5)  # tier b is full
    assert isinstance(lim.try_acquire(post, 0.5), Ticket)  # POST counts only against a


def test_limiter_aimd_decreases_on_rate_limit_and_probes_back_up() -> None:
    lim = RateLimiter((_tier("t", 100),), decrease_factor=0.5, increase_per_success=10)
    tiers = lim.tiers_for("GET", "/api/v1/game")
    t1, t2 = lim.try_acquire(tiers, 0.0), lim.try_acquire(tiers, 0.0)
    assert isinstance(t1, Ticket) and isinstance(t2, Ticket)
    lim.release(t1, 0.0, rate_limited=True, retry_after=2.0)
    assert lim.allowed()["t"] == 50
    # A second rate-limit answer within the same window does not halve again.
    lim.release(t2, 0.1, rate_limited=True)
    assert lim.allowed()["t"] == 50
    # Paused for the server's Retry-After.
    assert lim.try_acquire(tiers, 1.0) == pytest.approx(1.0)
    for i in range(10):
        t = lim.try_acquire(tiers, 3.0 + i)
        assert isinstance(t, Ticket)
        lim.release(t, 3.0 + i)
    assert lim.allowed()["t"] == 100  # back to the published figure, not beyond
    t = lim.try_acquire(tiers, 20.0)
    assert isinstance(t, Ticket)
    lim.release(t, 20.0, rate_limited=True)
    assert lim.allowed()["t"] == 50


def test_limiter_admits_at_most_the_decreased_figure() -> None:
    lim = RateLimiter((_tier("t", 4),), margin=0.0, decrease_factor=0.5)
    tiers = lim.tiers_for("GET", "/api/v1/game")
    t = lim.try_acquire(tiers, 0.0)
    assert isinstance(t, Ticket)
    lim.release(t, 0.0, rate_limited=True)
    t2 = lim.try_acquire(tiers, 0.0)
    assert isinstance(t2, Ticket)
    assert not isinstance(lim.try_acquire(tiers, 0.0), Ticket)  # 2 in the window = new figure


def test_limiter_refuses_bad_tiers() -> None:
    with pytest.raises(ValueError, match="per_second"):
        RateLimiter((_tier("zero", 0),))


def test_timeouts() -> None:
    t = as_timeout((2.0, 9.0))
    assert (t.connect, t.read) == (2.0, 9.0)
    assert as_timeout(3).read == 3.0
    assert client_pkg.DEFAULT_TIMEOUT.connect == C.DEFAULT_CONNECT_TIMEOUT
    assert client_pkg.DEFAULT_TIMEOUT.read == C.DEFAULT_READ_TIMEOUT
    with pytest.raises(ConfigurationError, match="wait forever"):
        as_timeout(None)
    with pytest.raises(ConfigurationError, match="read timeout"):
        as_timeout(httpx.Timeout(5.0, read=None))
    with pytest.raises(ConfigurationError, match="connect timeout"):
        as_timeout((0, 5))
