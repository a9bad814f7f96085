"""The sandbox's webhook side against real receivers on loopback, on a simulated clock
(7 days of retries without real waiting)."""

from __future__ import annotations

import base64
import itertools
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gptools import spec
from gptools.models import GameEventNotification
from gptools.sandbox import SandboxConfig, run_sandbox
from gptools.sandbox._dispatcher import (
    SIMULATED_TIME_HEADER,
    DeliveryTarget,
    DispatchReport,
    ScaledClock,
    VirtualClock,
    WalletCredentials,
    WebhookDispatcher,
    attach_dispatcher,
)
from gptools.sandbox._events import CampaignPlay, EventGenerator
from gptools.webhooks import InjectedFault, ReceiverAuth, WebhookReceiver, open_store
from tests.webhooks.conftest import ThreadServer, serve_in_thread

START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)


class Scripted:
    """A tiny ASGI receiver answering a scripted list of statuses (the last repeats) and
    recording what it got."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                while (m := await receive())["type"] != "lifespan.shutdown":
                    await send({"type": "lifespan.startup.complete"})
                await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        n = len(self.requests)
        status = self.statuses[min(n, len(self.statuses) - 1)]
        self.requests.append({"headers": dict(scope["headers"]), "body": body})
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def scripted() -> Iterator[tuple[Scripted, ThreadServer]]:
    app = Scripted([200])
    with serve_in_thread(app, path="/hook") as srv:
        yield app, srv


def _one_event() -> GameEventNotification:
    return EventGenerator(seed=1, start=START).take(1)[0]


def _dispatch(url: str, statuses: list[int], app: Scripted, **options: Any) -> WebhookDispatcher:
    app.statuses = statuses
    d = WebhookDispatcher(clock=VirtualClock(START), target=DeliveryTarget(url), **options)
    d.enqueue(_one_event())
    d.run()
    d.close()
    return d


def test_5xx_is_retried_with_exponential_backoff_until_7_days(
    scripted: tuple[Scripted, ThreadServer],
) -> None:
    app, srv = scripted
    d = _dispatch(srv.url, [503], app)
    times = [a.sent_at for a in d.attempts]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    expected = [d.delay_after(n).total_seconds() for n in range(1, len(times))]
    # Each gap is the backoff plus the real seconds the exchange took (well under one).
    assert all(0 <= g - e < 1 for g, e in zip(gaps, expected, strict=True)), (gaps, expected)
    assert expected[:4] == [30, 60, 120, 240]  # doubling from the first delay
    assert max(expected) == spec.WEBHOOK_RETRY_MAX_DELAY.total_seconds()  # capped
    first = times[0]
    assert times[-1] - first <= spec.WEBHOOK_RETRY_WINDOW
    assert times[-1] + d.delay_after(len(times)) - first > spec.WEBHOOK_RETRY_WINDOW
    assert d.outcomes == {d.attempts[0].action_id: "expired"}
    assert len(app.requests) == len(times) > 20


@pytest.mark.parametrize("status", [400, 401, 404, 409, 413, 422])
def test_4xx_is_never_retried(scripted: tuple[Scripted, ThreadServer], status: int) -> None:
    app, srv = scripted
    d = _dispatch(srv.url, [status], app)
    assert [a.status for a in d.attempts] == [status]
    assert list(d.outcomes.values()) == ["refused"]


def test_retry_succeeds_after_5xx_then_200(scripted: tuple[Scripted, ThreadServer]) -> None:
    app, srv = scripted
    d = _dispatch(srv.url, [500, 502, 200], app)
    assert [a.status for a in d.attempts] == [500, 502, 200]
    assert list(d.outcomes.values()) == ["delivered"]
    bodies = {r["body"] for r in app.requests}
    assert len(bodies) == 1  # the same notification each time, same actionId


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_every_2xx_acknowledges_and_is_not_retried(
    scripted: tuple[Scripted, ThreadServer],
    status: int,
) -> None:
    """The document names 200 and leaves only "non-2xx/4xx/5xx" codes unknown: a 2xx
    acknowledges (spec.WEBHOOK_ACKNOWLEDGED_STATUSES), it is not retried."""
    app, srv = scripted
    d = _dispatch(srv.url, [status, 200], app)
    assert [a.status for a in d.attempts] == [status]
    assert list(d.outcomes.values()) == ["delivered"]


def test_other_status_is_retried_by_assumption(scripted: tuple[Scripted, ThreadServer]) -> None:
    app, srv = scripted
    d = _dispatch(srv.url, [302, 308, 200], app)
    assert [a.status for a in d.attempts] == [302, 308, 200]
    app.requests.clear()
    d = _dispatch(srv.url, [302], app, retry_other_status=False)
    assert list(d.outcomes.values()) == ["refused"]


def test_unreachable_receiver_is_retried_like_a_5xx() -> None:
    d = WebhookDispatcher(
        clock=VirtualClock(START),
        first_delay=timedelta(hours=1),
        max_delay=timedelta(days=1),
        target=DeliveryTarget("http://127.0.0.1:9/nothing-listens"),
    )
    d.enqueue(_one_event())
    d.run()
    d.close()
    assert all(a.status is None and a.error for a in d.attempts)
    assert [
        round((b.sent_at - a.sent_at).total_seconds() / 3600)
        for a, b in itertools.pairwise(d.attempts)
    ] == [1, 2, 4, 8, 16, 24, 24, 24, 24, 24]
    assert list(d.outcomes.values()) == ["expired"]


def test_answer_after_the_senders_timeout_causes_a_duplicate(tmp_path: Path) -> None:
    calls = 0

    def slow_first() -> InjectedFault | None:
        nonlocal calls
        calls += 1
        return InjectedFault(delay=timedelta(seconds=1.0)) if calls == 1 else None

    store = f"sqlite:///{tmp_path / 's.db'}"
    receiver = WebhookReceiver(
        store, auth=ReceiverAuth.bearer("k"), faults=slow_first, ack_timeout=timedelta(seconds=5)
    )
    with serve_in_thread(receiver) as srv:
        target = DeliveryTarget.from_subscription(
            {"callbackUrl": srv.url, "authenticationType": "BEARER", "apiKey": "k"}
        )
        d = WebhookDispatcher(
            clock=VirtualClock(START), target=target, timeout=timedelta(seconds=0.3)
        )
        d.enqueue(_one_event())
        d.run()
        d.close()
        assert [a.status for a in d.attempts] == [None, 200]
        assert d.attempts[0].error == "timeout"
        # The slow answer still stores the delivery after the sender gave up on it. On the
        # virtual clock the retry may get there first; either way one of the two is a
        # duplicate of an action the receiver processed.
        conn = open_store(store).connect()
        deadline = time.monotonic() + 10
        while conn.log_count() < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        rows = list(conn.iter_log())
        conn.close()
    assert sorted((r["status"], r["duplicate"]) for r in rows) == [(200, False), (200, True)]


def test_subscription_auth_and_default_wallet_endpoint(
    scripted: tuple[Scripted, ThreadServer],
) -> None:
    app, srv = scripted
    subs = {
        201: {
            "callbackUrl": srv.url,
            "authenticationType": "BASIC",
            "username": "u",
            "password": "pw",
        },
        202: {"callbackUrl": srv.url, "authenticationType": "BEARER", "apiKey": "key-1"},
    }
    d = WebhookDispatcher(clock=VirtualClock(START), subscriptions=subs, wallet_url=srv.base_url)
    events = EventGenerator(seed=3, start=START).take(2)
    for brand, ev in zip((201, 202), events, strict=True):
        d.enqueue(ev, brand_id=brand)
    d.run()
    d.close()
    seen = {json.loads(r["body"])["actionId"]: r for r in app.requests}
    auth = [seen[str(e.action_id)]["headers"].get(b"authorization") for e in events]
    assert auth == [b"Basic dTpwdw==", b"Bearer key-1"]
    assert "key-1" not in repr(d.target_for(202))
    assert d.target_for(101).url == srv.base_url + spec.DEFAULT_WEBHOOK_PATH
    headers = seen[str(events[0].action_id)]["headers"]
    assert headers[b"content-type"] == b"application/json"
    assert headers[SIMULATED_TIME_HEADER.lower().encode()].endswith(b"Z")


def test_default_endpoint_uses_the_wallets_credentials(
    scripted: tuple[Scripted, ThreadServer],
) -> None:
    """No callback URL: deliveries go to {wallet_url}/v1/game-action-events "using the
    authentication credentials already configured for the account's wallet", whether the
    brand has no subscription or one without a callback URL (its own type is not used)."""
    app, wallet = scripted
    subs = {202: {"authenticationType": "BEARER", "apiKey": "subscription-key"}}
    d = WebhookDispatcher(
        clock=VirtualClock(START),
        subscriptions=subs,
        wallet_url=wallet.base_url,
        wallet_credentials=WalletCredentials.basic("wallet", "w-pass"),
    )
    events = EventGenerator(seed=4, start=START).take(2)
    for brand, ev in zip((101, 202), events, strict=True):
        d.enqueue(ev, brand_id=brand)
    report = d.run()
    d.close()
    assert report.counts["delivered"] == 2
    wallet_auth = b"Basic " + base64.b64encode(b"wallet:w-pass")
    assert [r["headers"].get(b"authorization") for r in app.requests] == [wallet_auth] * 2
    assert {d.target_for(b).url for b in (101, 202)} == {
        wallet.base_url + spec.DEFAULT_WEBHOOK_PATH
    }
    assert "w-pass" not in repr(d.target_for(101)) + repr(WalletCredentials.bearer("w-pass"))


def test_sandbox_config_carries_the_wallet_credentials_to_its_dispatcher(
    scripted: tuple[Scripted, ThreadServer],
) -> None:
    _app, srv = scripted
    config = SandboxConfig(
        wallet_url=srv.base_url, wallet_credentials=WalletCredentials.bearer("wallet-key")
    )
    with run_sandbox(config) as sb:
        d = attach_dispatcher(sb, clock=VirtualClock(START))
        target = d.target_for(101)
        d.close()
    assert target.url == srv.base_url + spec.DEFAULT_WEBHOOK_PATH
    assert target.authorization == "Bearer wallet-key"


def test_no_callback_and_no_wallet_is_a_clear_error() -> None:
    d = WebhookDispatcher(clock=VirtualClock(START))
    with pytest.raises(ValueError, match="wallet_url"):
        d.enqueue(_one_event(), brand_id=101)
    d.close()


def test_dispatcher_attached_to_a_running_sandbox_follows_its_subscriptions(
    scripted: tuple[Scripted, ThreadServer],
) -> None:
    app, srv = scripted
    with run_sandbox() as sb:
        sb.state.subscriptions[101] = {"callbackUrl": srv.url, "authenticationType": "NONE"}
        d = attach_dispatcher(sb, clock=VirtualClock(START))
        assert sb.dispatcher is d
        d.enqueue(_one_event(), brand_id=101)
        report = d.run()
        d.close()
    assert report.counts == {"delivered": 1, "refused": 0, "expired": 0}
    assert len(app.requests) == 1


def test_scaled_clock_makes_days_pass_in_real_milliseconds() -> None:
    clock = ScaledClock(START, scale=1_000_000)
    target = START + timedelta(days=1)  # 86.4 ms of real time
    clock.wait_until(target)
    assert clock.now() >= target
    assert clock.now() - START < timedelta(days=30)


def test_generator_is_seeded_and_realistic() -> None:
    a = EventGenerator(seed=7, start=START).take(2000)
    b = EventGenerator(seed=7, start=START).take(2000)
    assert [e.to_wire() for e in a] == [e.to_wire() for e in b]
    assert len({e.action_id for e in a}) == 2000
    assert all(x.timestamp < y.timestamp for x, y in itertools.pairwise(a))
    kinds = {tuple(e.events) for e in a}
    assert kinds == {("COIN",), ("COIN", "FEATURE"), ("FEATURE",)}
    assert {e.currency_code for e in a} >= {"JPY", "KWD", "EUR"}
    wire = json.loads(a[0].to_wire())
    assert "T" in wire["timestamp"] and "." in wire["timestamp"]
    assert not wire["timestamp"].endswith("Z") and "+" not in wire["timestamp"]
    for e in a:  # bets carry the currency's minor units
        if e.currency_code == "JPY":
            assert e.bet == e.bet.to_integral_value()


def test_generator_plays_active_campaigns_only() -> None:
    campaign = CampaignPlay.from_body(
        "CMP-000001",
        {
            "type": "AWARDED_FEATURE",
            "gameIds": ["neon-fruits"],
            "currencyCode": "KWD",
            "bet": "7.550",
            "players": ["vip-1", "vip-2"],
            "startDate": "2026-03-02T12:00:00",
            "endDate": "2026-03-03T12:00:00",
            "timeZone": "Asia/Kuwait",
        },
    )
    assert campaign is not None
    events = EventGenerator(seed=2, start=START, campaigns=[campaign], campaign_share=0.5).take(
        3000
    )
    played = [e for e in events if e.player_id.startswith("vip-")]
    assert played and all(
        e.events == ["FEATURE"] and str(e.bet) == "7.550" and e.currency_code == "KWD"
        for e in played
    )
    assert all(campaign.active(e.timestamp) for e in played)
    assert campaign.start == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # Kuwait is UTC+3


def test_a_report_as_json_and_as_one_line() -> None:
    """What ``sandbox deliver`` and ``play`` print: every outcome counted, zeros included;
    the answers sorted by their text."""
    report = DispatchReport(
        outcomes={"a1": "delivered", "a2": "delivered", "a3": "refused"},
        attempts=5,
        statuses={"503": 2, "200": 2, "no answer": 0, "400": 1},
        duplicates=1,
    )
    assert report.to_dict() == {
        "attempts": 5,
        "statuses": {"503": 2, "200": 2, "no answer": 0, "400": 1},
        "delivered": 2,
        "refused": 1,
        "expired": 0,
        "duplicates": 1,
    }
    assert report.summary() == (
        "5 attempts: delivered 2, refused 1, expired 0, duplicates 1; "
        "answers 200×2, 400×1, 503×2, no answer×0"
    )


def test_a_receivers_auth_as_the_senders_subscription() -> None:
    """``sandbox deliver``/``play`` reach a receiver with the credential it accepts."""
    url = "http://127.0.0.1:9/hook"
    bearer = DeliveryTarget.from_subscription(ReceiverAuth.bearer("k-123").subscription(url))
    assert (bearer.url, bearer.authentication_type) == (url, "BEARER")
    assert bearer.authorization == "Bearer k-123"
    basic = ReceiverAuth.basic("ops", "pw:1").subscription(url)
    assert basic["username"] == "ops" and "pw:1" not in repr(basic)
    pair = base64.b64encode(b"ops:pw:1").decode()
    assert DeliveryTarget.from_subscription(basic).authorization == f"Basic {pair}"
    assert ReceiverAuth.none().subscription(url) == {
        "callbackUrl": url,
        "authenticationType": "NONE",
    }
