"""Every rate tier: a burst above it gets 429 + Retry-After, a paced run below it never does.

The per-user tiers are tested at the document's figures (60 and 130 per second). The global
and per-endpoint tiers are shared by everyone, so they are tested with scaled-down figures
(``SandboxConfig(rate_tiers=...)``) that a plain sequential httpx client can exceed on a
busy machine; the code path is the same.

A burst is asserted against the server's own record: when the first 429 comes, the requests
the server admitted in the preceding window number exactly the limit. That holds however
fast the client is, as long as it outruns the limit.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

import httpx
import pytest

from gptools import spec
from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox
from tests.sandbox.conftest import assert_error, auth, campaign_body, path

Send = Callable[[httpx.Client, int], httpx.Response]


def tiers(**figures: int) -> tuple[spec.RateTier, ...]:
    """The documented tiers with the named ones changed; the rest effectively unlimited."""
    return tuple(
        dataclasses.replace(t, per_second=figures.get(t.name, 100_000)) for t in spec.RATE_TIERS
    )


@contextmanager
def serving(config: SandboxConfig) -> Iterator[tuple[RunningSandbox, httpx.Client]]:
    with run_sandbox(config) as sb, httpx.Client(base_url=sb.base_url, timeout=10) as http:
        yield sb, http


def new_campaign(http: httpx.Client, brand: int = 202) -> str:
    response = http.post(
        path("campaign", brand), json=campaign_body(requestId=None), auth=auth("partner")
    )
    assert response.status_code == 201, response.text
    campaign_id: str = response.json()["campaignId"]
    return campaign_id


def burst_until_refused(
    sb: RunningSandbox, http: httpx.Client, send: Send, limit: int, tier_name: str
) -> httpx.Response:
    """Send as fast as possible until the first 429; check it against the server's record."""
    first = len(sb.state.requests)
    for i in range(limit * 3):
        response = send(http, i)
        if response.status_code == spec.RATE_LIMIT_STATUS:
            break
        assert response.is_success, response.text
    else:
        pytest.fail(f"no 429 after {limit * 3} requests; the limit is {limit}")
    body = assert_error(response, spec.RATE_LIMIT_STATUS, spec.RATE_LIMIT_CODE)
    assert tier_name in body["message"], body["message"]
    retry_after = response.headers["Retry-After"]
    assert retry_after.isdigit() and int(retry_after) >= 1
    records = sb.state.requests[first:]
    refused_at = records[-1].at
    window = sb.config.rate_window
    admitted = [
        r for r in records[:-1] if r.status != spec.RATE_LIMIT_STATUS and refused_at - r.at < window
    ]
    # A request exactly on the window's edge may fall either side of the clock read.
    assert limit - 1 <= len(admitted) <= limit, (len(admitted), limit)
    return response


def paced(http: httpx.Client, send: Send, per_second: float, seconds: float) -> list[int]:
    """Send at ``per_second`` for ``seconds``; never faster (a late send is not caught up)."""
    interval = 1.0 / per_second
    statuses = []
    next_at = time.monotonic()
    deadline = next_at + seconds
    i = 0
    while next_at < deadline:
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing, not synchronisation
        statuses.append(send(http, i).status_code)
        next_at = max(next_at + interval, time.monotonic())
        i += 1
    return statuses


def get_game(key: str, brand: int | None) -> Send:
    return lambda http, i: http.get(
        path("game", brand), params={"gameId": "neon-fruits"}, auth=auth(key)
    )


def add_participant(campaign_id: str, key: str = "partner", brand: int = 202) -> Send:
    return lambda http, i: http.post(
        path(f"campaign/{campaign_id}/participant", brand),
        json={"playerIds": [f"p{i}"]},
        auth=auth(key),
    )


def create_campaign(key: str = "partner", brand: int = 202) -> Send:
    # The same requestId every time: after the first, each answer is an idempotent replay.
    return lambda http, i: http.post(path("campaign", brand), json=campaign_body(), auth=auth(key))


def round_robin(*senders: Send) -> Send:
    return lambda http, i: senders[i % len(senders)](http, i)


# --- Per user, per endpoint class: the document's figures ----------------------------


def test_user_other_tier_at_60() -> None:
    with serving(SandboxConfig()) as (sb, http):
        burst_until_refused(sb, http, get_game("partner", 201), 60, "user_other")
        # Another user is not limited by the partner's window.
        assert (
            http.get(
                path("game"), params={"gameId": "neon-fruits"}, auth=auth("individual")
            ).status_code
            == 200
        )
        # Another endpoint class of the same user is not either.
        assert create_campaign()(http, 0).status_code == 201
        # Nor another endpoint of the "all other endpoints" row: each has its own 60/s.
        assert (
            http.get(
                path("awarded-feature-configurations", 201),
                params={"gameId": "neon-fruits", "currencyCode": "EUR"},
                auth=auth("partner"),
            ).status_code
            == 200
        )
        assert http.get(path("self"), auth=auth("partner")).status_code == 200
        sb.reset()
        assert spec.RATE_LIMIT_STATUS not in paced(http, get_game("partner", 201), 30, 1.2)


def test_user_participant_tier_at_130() -> None:
    with serving(SandboxConfig()) as (sb, http):
        campaign_id = new_campaign(http)
        burst_until_refused(sb, http, add_participant(campaign_id), 130, "user_participant")
        assert add_participant(campaign_id, "third_party")(http, 0).status_code == 200
        sb.reset()
        campaign_id = new_campaign(http)
        assert spec.RATE_LIMIT_STATUS not in paced(http, add_participant(campaign_id), 65, 1.2)


def test_user_campaign_tier_at_60() -> None:
    with serving(SandboxConfig()) as (sb, http):
        burst_until_refused(sb, http, create_campaign(), 60, "user_campaign")
        assert create_campaign("third_party")(http, 0).is_success
        sb.reset()
        assert spec.RATE_LIMIT_STATUS not in paced(http, create_campaign(), 30, 1.2)


def test_legacy_paths_count_in_the_same_classes() -> None:
    with serving(SandboxConfig(rate_tiers=tiers(user_campaign=10))) as (sb, http):

        def either(h: httpx.Client, i: int) -> httpx.Response:
            # Free rounds: the legacy path serves them (spec.LEGACY_CAMPAIGN_TYPES).
            body = campaign_body(type=spec.FREE_ROUNDS_CAMPAIGN_TYPE, bet=0.20)
            return h.post(
                path("campaign", 202, legacy=bool(i % 2)), json=body, auth=auth("partner")
            )

        burst_until_refused(sb, http, either, 10, "user_campaign")


# --- Shared tiers: scaled-down figures -----------------------------------------------


def test_endpoint_participant_tier_is_shared_by_users() -> None:
    with serving(SandboxConfig(rate_tiers=tiers(endpoint_participant=24, user_participant=20))) as (
        sb,
        http,
    ):
        campaign_id = new_campaign(http)
        three = round_robin(
            add_participant(campaign_id, "partner"),
            add_participant(campaign_id, "third_party"),
            add_participant(campaign_id, "internal"),
        )
        # 24 in total while each user stays at 8, under its own 20.
        burst_until_refused(sb, http, three, 24, "endpoint_participant")
        sb.reset()
        campaign_id = new_campaign(http)
        assert spec.RATE_LIMIT_STATUS not in paced(
            http,
            round_robin(
                add_participant(campaign_id, "partner"), add_participant(campaign_id, "third_party")
            ),
            12,
            1.2,
        )


def test_endpoint_campaign_tier_is_shared_by_users() -> None:
    with serving(SandboxConfig(rate_tiers=tiers(endpoint_campaign=16, user_campaign=12))) as (
        sb,
        http,
    ):
        two = round_robin(create_campaign("partner"), create_campaign("third_party"))
        burst_until_refused(sb, http, two, 16, "endpoint_campaign")
        sb.reset()
        assert spec.RATE_LIMIT_STATUS not in paced(http, two, 8, 1.2)


def test_global_all_tier_counts_every_method_and_user() -> None:
    with serving(SandboxConfig(rate_tiers=tiers(global_all=30))) as (sb, http):
        campaign_id = new_campaign(http)
        mixed = round_robin(
            get_game("individual", None),
            add_participant(campaign_id),
            create_campaign("third_party"),
            get_game("internal", 203),
        )
        burst_until_refused(sb, http, mixed, 30, "global_all")
        sb.reset()
        campaign_id = new_campaign(http)
        assert spec.RATE_LIMIT_STATUS not in paced(
            http, round_robin(get_game("individual", None), add_participant(campaign_id)), 15, 1.2
        )


def test_global_get_tier_counts_only_gets() -> None:
    with serving(SandboxConfig(rate_tiers=tiers(global_get=20))) as (sb, http):
        campaign_id = new_campaign(http)
        gets = round_robin(get_game("individual", None), get_game("partner", 201))
        burst_until_refused(sb, http, gets, 20, "global_get")
        # A POST is not a GET: it still passes while GETs are refused.
        assert add_participant(campaign_id)(http, 0).status_code == 200
        assert gets(http, 0).status_code == spec.RATE_LIMIT_STATUS
        sb.reset()
        assert spec.RATE_LIMIT_STATUS not in paced(http, gets, 10, 1.2)


# --- The rate-limit answer --------------------------------------------------------------


def test_refused_requests_do_not_count_and_retry_after_is_enough() -> None:
    with serving(SandboxConfig(rate_tiers=tiers(user_other=5))) as (sb, http):
        send = get_game("individual", None)
        refused = burst_until_refused(sb, http, send, 5, "user_other")
        for i in range(30):
            assert send(http, i).status_code == spec.RATE_LIMIT_STATUS
        # Had the 30 refusals counted, the window would still be full after Retry-After.
        time.sleep(int(refused.headers["Retry-After"]))  # time must pass: it is the contract
        assert send(http, 0).status_code == 200


def test_retry_after_reflects_the_window() -> None:
    config = SandboxConfig(rate_tiers=tiers(user_other=3), rate_window=timedelta(seconds=4))
    with serving(config) as (sb, http):
        started = time.monotonic()
        refused = burst_until_refused(sb, http, get_game("individual", None), 3, "user_other")
        elapsed = time.monotonic() - started
        retry_after = int(refused.headers["Retry-After"])
        # A slot frees when the first admitted request is 4 s old.
        assert 4 - elapsed - 1 <= retry_after <= 4


def test_unauthenticated_requests_are_limited_too() -> None:
    with serving(SandboxConfig(rate_tiers=tiers(user_other=5))) as (_sb, http):

        def anonymous(h: httpx.Client, i: int) -> httpx.Response:
            return h.get(path("game"), auth=("nobody", "nothing"))

        for i in range(5):
            assert anonymous(http, i).status_code == 401
        assert anonymous(http, 5).status_code == spec.RATE_LIMIT_STATUS
        # A real user has its own window.
        assert get_game("individual", None)(http, 0).status_code == 200


def test_inspection_paths_are_not_limited() -> None:
    with serving(SandboxConfig(rate_tiers=tiers(global_all=2, global_get=2))) as (_sb, http):
        for _ in range(2):
            assert get_game("individual", None)(http, 0).status_code == 200
        assert get_game("individual", None)(http, 0).status_code == spec.RATE_LIMIT_STATUS
        for _ in range(20):
            assert http.get("/_sandbox/requests").status_code == 200


def test_limits_can_be_switched_off() -> None:
    with serving(SandboxConfig(enforce_rate_limits=False, rate_tiers=tiers(user_other=2))) as (
        _sb,
        http,
    ):
        statuses = {get_game("individual", None)(http, i).status_code for i in range(50)}
        assert statuses == {200}
