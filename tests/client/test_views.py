"""A brand is an option of the client, not a class: ``client.brand(ID)`` and
``client.with_options(...)`` give a client of the same class that shares the connection
pool, the rate limiter, the counters and the ``GET /self`` answer with its parent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gptools import errors, spec
from gptools.sandbox import FaultRule, RunningSandbox, SandboxConfig, run_sandbox
from tests._support.proxy import TcpProxy
from tests.client.conftest import (
    AsyncTwin,
    MakeClient,
    busiest_window,
    run_on_clients,
    tier_times,
)
from tests.client.test_operations import GAME, free_rounds


def raw(client: Any) -> Any:
    """The client itself (the async twin's wrapped client)."""
    return client.target if isinstance(client, AsyncTwin) else client


def paths(sb: RunningSandbox) -> list[str]:
    return [f"{r.method} {r.path}" for r in sb.state.requests]


def test_a_view_is_a_client_of_the_same_class(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner")
    shop = c.brand(201)
    assert type(raw(shop)) is type(raw(c))
    assert raw(shop).brand_id == 201 and raw(c).brand_id is None
    assert repr(shop).endswith(", brand=201)") and "brand=" not in repr(c)
    shop.game(GAME.game_id)
    c.game(GAME.game_id, brand=202)
    c.with_options(brand=203).game(GAME.game_id)
    # One GET /self for all three: the answer is shared.
    assert paths(sb) == [
        f"GET {spec.SELF_PATH}",
        "GET /api/v1/brands/201/game",
        "GET /api/v1/brands/202/game",
        "GET /api/v1/brands/203/game",
    ]
    # One set of counters, whichever client reads them.
    assert c.stats == shop.stats and c.stats.requests == 4
    assert raw(shop).limiter is raw(c).limiter


def test_brand_options_given_to_the_constructor_and_to_each_call(
    make: MakeClient, sb: RunningSandbox
) -> None:
    bound = make("partner", brand=202)
    bound.game(GAME.game_id)
    bound.game(GAME.game_id, brand=202)  # the same brand again is fine
    assert paths(sb)[1:] == ["GET /api/v1/brands/202/game"] * 2
    before = len(sb.state.requests)
    # A call's brand that contradicts the client's is a mistake, refused before sending.
    with pytest.raises(ValueError, match=r"brand=201 conflicts with the client's brand 202"):
        bound.game(GAME.game_id, brand=201)
    # with_options changes it; brand=None unbinds (a PARTNER must then name one per call).
    bound.with_options(brand=201).game(GAME.game_id)
    with pytest.raises(errors.BrandRequiredError):
        bound.with_options(brand=None).game(GAME.game_id)
    assert paths(sb)[before:] == ["GET /api/v1/brands/201/game"]
    with pytest.raises(TypeError, match="integer brand id"):
        bound.brand("201")
    with pytest.raises(ValueError, match="int32"):
        bound.with_options(brand=2**31)
    with pytest.raises(ValueError, match="max_retries"):
        bound.with_options(max_retries=-1)
    with pytest.raises(errors.ConfigurationError, match="wait forever"):
        bound.with_options(timeout=None)


def test_with_options_changes_only_the_view(make: MakeClient, sb: RunningSandbox) -> None:
    c = make("partner", max_retries=2)
    once = c.with_options(max_retries=0, brand=201)
    sb.faults.add(FaultRule("GET /game", status=503, count=1))
    with pytest.raises(errors.ApiError) as refused:
        once.game(GAME.game_id)
    assert refused.value.status == 503 and c.stats.retries == 0
    sb.faults.add(FaultRule("GET /game", status=503, count=1))
    assert c.game(GAME.game_id, brand=201).retries == 1  # the parent still retries
    # A short read time-out on the view only; the parent waits for the slow answer.
    sb.faults.add(FaultRule("GET /game", latency_s=0.5, count=2))
    hasty = c.with_options(timeout=0.1, max_retries=0)
    with pytest.raises(errors.TransportError):
        hasty.game(GAME.game_id, brand=201)
    assert c.game(GAME.game_id, brand=201).game_id == GAME.game_id
    assert (raw(c).max_retries, raw(c).brand_id) == (2, None)
    assert raw(c).timeout == raw(make("partner")).timeout


TIGHT = (
    spec.RateTier(
        "user_participant", "per_user_endpoint", 15, None, spec.ENDPOINT_CLASS_PARTICIPANT
    ),
    spec.RateTier("user_other", "per_user_endpoint", 10, None, spec.ENDPOINT_CLASS_OTHER),
)


def test_a_client_and_its_views_stay_within_the_tiers_together(make: MakeClient) -> None:
    """Pushed at once through the parent and two views, the requests never trip a tier:
    the views wait on the parent's limiter (three limiters would send three times the
    figure)."""
    with run_sandbox(SandboxConfig(seed=0, rate_tiers=TIGHT)) as tight:
        c = make("partner", sandbox=tight, rate_tiers=TIGHT)
        campaign = c.create_campaign(free_rounds(), brand=201).campaign_id
        shop = c.brand(201)
        patient = c.with_options(max_retries=5, brand=201)
        clients = (c, shop, patient)
        jobs = [
            (
                clients[i % 3],
                "add_participants",
                (campaign, [f"p-{i}"]),
                {"brand": 201} if i % 3 == 0 else {},
            )
            for i in range(45)
        ]
        jobs += [
            (clients[i % 3], "game", (GAME.game_id,), {"brand": 201} if i % 3 == 0 else {})
            for i in range(15)
        ]
        results = run_on_clients(jobs, workers=8)
        assert [r for r in results if isinstance(r, BaseException)] == []
        # The sandbox's own count: not one rate-limit answer.
        statuses = [r.status for r in tight.state.requests]
        assert statuses.count(spec.RATE_LIMIT_STATUS) == 0
        for tier in TIGHT:
            assert (
                busiest_window(tier_times(tight, tier), tight.config.rate_window) <= tier.per_second
            ), tier.name
        # Every request of the three is in the one set of counters.
        assert c.stats.requests == len(tight.state.requests) == 2 + 60
        assert c.stats.rate_limited == 0 and c.stats.wait_seconds > 0
        assert len(tight.state.participants(campaign)) == 45


@pytest.fixture
def proxy(sb: RunningSandbox) -> Iterator[TcpProxy]:
    port = httpx.URL(sb.base_url).port
    assert port is not None
    with TcpProxy(("127.0.0.1", port)) as relay:
        yield relay


def test_a_client_and_its_views_use_one_connection_pool(
    make: MakeClient, sb: RunningSandbox, proxy: TcpProxy
) -> None:
    c = make("partner", base_url=f"http://127.0.0.1:{proxy.port}")
    shop = c.brand(201)
    slow = c.with_options(timeout=20.0, max_retries=1)
    c.self()
    shop.game(GAME.game_id)
    slow.game(GAME.game_id, brand=202)
    c.game(GAME.game_id, brand=203)
    shop.awarded_feature_configurations(GAME.game_id, "EUR")
    assert len(sb.state.requests) == 5
    # One keep-alive connection served the client and both views, one after the other.
    assert proxy.accepted == 1
