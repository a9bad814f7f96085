"""Client-side rate limiting against a sandbox that enforces the same figures: requests
pushed as fast as possible (threads for the sync client, tasks for the async one) never
get a rate-limit response, and the server-side windows are never over a tier's limit."""

from __future__ import annotations

import pytest

from gptools import spec
from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox
from tests.client.conftest import MakeClient, busiest_window, run_concurrently, tier_times
from tests.client.test_operations import GAME, free_rounds


@pytest.mark.slow
def test_1000_participant_requests_at_the_documented_limit(
    make: MakeClient, sb: RunningSandbox
) -> None:
    c = make("partner")
    campaign = c.create_campaign(free_rounds(), brand=201).campaign_id
    jobs = [
        ("add_participants", (campaign, [f"player-{i:04d}"]), {"brand": 201}) for i in range(1000)
    ]
    results = run_concurrently(c, jobs, workers=8)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert failures == []
    assert c.stats.rate_limited == 0
    participant_requests = [r for r in sb.state.requests if r.path.endswith("/participant")]
    assert len(participant_requests) == 1000
    assert {r.status for r in participant_requests} == {200}
    assert len(sb.state.participants(campaign)) == 1000
    limit = next(t for t in spec.RATE_TIERS if t.name == "user_participant")
    # Measured in the limit's own window, on the clock the server's limiter counts by.
    assert busiest_window(tier_times(sb, limit), sb.config.rate_window) <= limit.per_second
    # How close to the limit the client gets is a speed goal, measured by
    # tests/benchmarks/bench_client.py (participant_rate_ratio), not timed here: a busy
    # machine would make a time bound fail for reasons that are not the client's.


MIXED = (
    spec.RateTier("global_all", "global", 40, None, None),
    spec.RateTier("global_get", "global", 30, frozenset({"GET"}), None),
    spec.RateTier(
        "user_participant", "per_user_endpoint", 20, None, spec.ENDPOINT_CLASS_PARTICIPANT
    ),
    spec.RateTier(
        "user_campaign", "per_user_endpoint", 4, None, spec.ENDPOINT_CLASS_CAMPAIGN_CREATE
    ),
    spec.RateTier("user_other", "per_user_endpoint", 10, None, spec.ENDPOINT_CLASS_OTHER),
)


def test_every_tier_at_once_with_mixed_traffic(make: MakeClient) -> None:
    """Tightened figures (the document allows it), given to both sides: GETs, campaign
    creations and participant additions at once never trip any tier."""
    with run_sandbox(SandboxConfig(seed=0, rate_tiers=MIXED)) as tight:
        c = make("partner", sandbox=tight, rate_tiers=MIXED)
        campaign = c.create_campaign(free_rounds(), brand=201).campaign_id
        jobs = (
            [("add_participants", (campaign, [f"p-{i}"]), {"brand": 201}) for i in range(40)]
            + [("game", (GAME.game_id,), {"brand": 202}) for _ in range(20)]
            + [("create_campaign", (free_rounds(),), {"brand": 203}) for _ in range(8)]
        )
        results = run_concurrently(c, jobs, workers=8)
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert c.stats.rate_limited == 0
        assert {r.status for r in tight.state.requests} <= {200, 201}
        for tier in MIXED:
            assert (
                busiest_window(tier_times(tight, tier), tight.config.rate_window) <= tier.per_second
            ), tier.name
        assert c.stats.wait_seconds > 0
