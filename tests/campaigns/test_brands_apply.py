"""Apply a multi-brand plan once, exactly once: 30 brands within every rate tier, a crash
resumed, one brand failing named and completed by a re-run."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gptools import spec
from gptools.campaigns import (
    BrandGroups,
    BrandsPlan,
    CampaignRegister,
    GroupIncompleteError,
    GroupMember,
    PlanInvalidError,
    apply_brands,
    brands_plan_from_dict,
    check_brands,
)
from gptools.client import Client
from gptools.participants import load_group_players
from gptools.sandbox import RunningSandbox
from gptools.sandbox._brand_offers import AGGREGATOR_BRAND_IDS, BRAND_OFFERS
from gptools.sandbox._faults import FaultRule
from tests.campaigns.conftest import NOW
from tests.client.conftest import busiest_window, tier_times

#: A free-round bet of golden-pharaoh (one of its base bets) in each currency.
BASE_BETS = {"EUR": "0.10", "USD": "0.10", "GBP": "0.10", "SEK": "1", "BRL": "0.50",
             "JPY": "10", "KWD": "0.050"}  # fmt: skip


def promotion(tmp_path: Path, players_per_brand: int = 0, **changes: Any) -> BrandsPlan:
    """Free rounds on golden-pharaoh in every currency each aggregator brand uses (~75
    campaigns over 30 brands), with ``players_per_brand`` players in one file."""
    chosen = changes.get("brands", AGGREGATOR_BRAND_IDS)
    per_brand: dict[int, Any] = {
        b: {"currencies": list(BRAND_OFFERS[b].currencies)} for b in chosen
    }
    for b, override in changes.pop("per_brand", {}).items():
        per_brand[b] = {**per_brand[b], **override}
    doc: dict[str, Any] = {
        "name": "Aggregator spring spins",
        "campaign_type": "FREE_ROUNDS",
        "game_ids": ["golden-pharaoh"],
        "currencies": {c: {"bet": bet, "players": 10} for c, bet in BASE_BETS.items()},
        "bet_number": 20,
        "start": "2030-03-01T10:00:00",
        "end": "2030-03-31T22:00:00",
        "time_zone": "Europe/Malta",
        "brands": "all",
        "per_brand": per_brand,
    }
    if players_per_brand:
        rows = [f"{b},b{b}-p{i},EUR" for b in chosen for i in range(players_per_brand)]
        (tmp_path / "players.csv").write_text("brand,player_id,currency\n" + "\n".join(rows))
        doc["players_file"] = str(tmp_path / "players.csv")
    doc.update(changes)
    return brands_plan_from_dict(doc)


@pytest.fixture
def aggregator(fresh_sandbox: RunningSandbox) -> Iterator[Client]:
    """The aggregator's client (PARTNER, brands 2001-2030), the published rate tiers."""
    acct = fresh_sandbox.accounts["aggregator"]
    with Client(fresh_sandbox.base_url, acct.username, acct.password) as c:
        yield c


def _creations(sb: RunningSandbox) -> Counter[str]:
    """How many times each requestId was POSTed to create a campaign."""
    return Counter(
        json.loads(r.body)["requestId"]
        for r in sb.state.requests
        if r.method == "POST" and r.path.endswith("/campaign")
    )


EXPECTED = sum(len(BRAND_OFFERS[b].currencies) for b in AGGREGATOR_BRAND_IDS)


def test_30_brands_apply_and_load_within_every_tier_each_request_once(
    aggregator: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    register = tmp_path / "r.sqlite"
    reviewed = check_brands(aggregator, promotion(tmp_path, players_per_brand=40), now=NOW)
    assert reviewed.validation.problems == ()
    group = apply_brands(aggregator, reviewed, register=register)
    loads = load_group_players(aggregator, reviewed.plans, group, register=register, progress=False)
    assert EXPECTED == 78 and len(group.created) == EXPECTED and group.complete
    assert group.brands == AGGREGATOR_BRAND_IDS
    assert loads.complete and len(loads.summaries) == 30
    assert all(s.counts()["loaded"] == 40 for s in loads.summaries.values())
    # The sandbox's records are the truth: no 429, no tier exceeded, nothing sent twice.
    requests = fresh_sandbox.state.requests
    assert {r.status for r in requests} == {200, 201}
    for tier in spec.RATE_TIERS:
        busiest = busiest_window(tier_times(fresh_sandbox, tier), fresh_sandbox.config.rate_window)
        assert busiest <= tier.per_second, tier.name
    creations = _creations(fresh_sandbox)
    assert len(creations) == EXPECTED and set(creations.values()) == {1}
    sent = Counter((r.method, r.path, tuple(sorted(r.query.items())), r.body) for r in requests)
    assert [k for k, n in sent.items() if n > 1] == []
    assert len(fresh_sandbox.state.campaigns) == EXPECTED
    assert {c.brand_id for c in fresh_sandbox.state.campaigns.values()} == set(AGGREGATOR_BRAND_IDS)
    # Applied and loaded again: nothing new is created, nothing is sent again.
    before = len(requests)
    again = apply_brands(aggregator, reviewed, register=register)
    reload = load_group_players(
        aggregator, reviewed.plans, again, register=register, progress=False
    )
    assert again == group and reload.complete
    assert fresh_sandbox.state.requests[before:] == []
    # The register holds the promotion as one group, and each campaign as apply_plan would.
    recorded = BrandGroups(register).group("Aggregator spring spins")
    assert recorded.members == group.members
    campaigns = CampaignRegister(register).campaigns()
    assert len(campaigns) == EXPECTED and {c.plan_name for c in campaigns} == {
        "Aggregator spring spins"
    }
    counts = CampaignRegister(register).participant_counts()
    assert sum(c.loaded for c in counts.values()) == 30 * 40


def test_a_crash_midway_resumes_without_sending_a_creation_twice(
    aggregator: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    register = tmp_path / "r.sqlite"
    plan = promotion(tmp_path, brands=[2001, 2002, 2003])  # 2 + 3 + 4 currencies
    seen: list[GroupMember] = []

    def crash_after_four(member: GroupMember) -> None:
        seen.append(member)
        if len(seen) == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        apply_brands(aggregator, plan, now=NOW, register=register, on_member=crash_after_four)
    midway = BrandGroups(register).group(plan.name)
    assert [m.status for m in midway.members] == ["created"] * 4 + ["pending"] * 5
    assert midway.brands_in("pending") == (2002, 2003)
    group = apply_brands(aggregator, plan, now=NOW, register=register)
    assert group.complete and len(group.created) == 9
    assert set(_creations(fresh_sandbox).values()) == {1}
    assert len(fresh_sandbox.state.campaigns) == 9


def test_an_answer_lost_after_the_server_created_finds_the_campaign_again(
    aggregator: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    fresh_sandbox.faults.add(
        FaultRule("POST /api/v1/brands/2002/campaign", commit_then_fail=True, count=1)
    )
    plan = promotion(tmp_path, brands=[2001, 2002])
    group = apply_brands(aggregator, plan, now=NOW, register=tmp_path / "r.sqlite")
    assert group.complete and len(group.created) == 5
    assert len(fresh_sandbox.state.campaigns) == 5  # the retry found it, made none


def test_one_brand_failing_is_named_the_others_created_and_a_rerun_completes(
    aggregator: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    register = tmp_path / "r.sqlite"
    fresh_sandbox.faults.add(
        FaultRule("POST /api/v1/brands/2002/campaign", status=400, code="VALIDATION_ERROR")
    )
    plan = promotion(tmp_path, brands=[2001, 2002, 2003])
    with pytest.raises(GroupIncompleteError) as err:
        apply_brands(aggregator, plan, now=NOW, register=register)
    result = err.value.result
    assert [(m.brand, m.currency, m.status) for m in result.members] == [
        (2001, "EUR", "created"), (2001, "JPY", "created"),
        (2002, "EUR", "failed"), (2002, "GBP", "failed"), (2002, "USD", "failed"),
        (2003, "BRL", "created"), (2003, "EUR", "created"), (2003, "JPY", "created"),
        (2003, "KWD", "created"),
    ]  # fmt: skip
    message = str(err.value)
    assert message.startswith(
        "group 'Aggregator spring spins': 3 campaign(s) not created (brand 2002 EUR: "
    )
    assert message.endswith(
        "6 exist (brands 2001, 2003). Apply the same plan again to create the rest: what "
        "exists is not sent again."
    )
    assert BrandGroups(register).group(plan.name) == result  # recorded as it stood
    fresh_sandbox.faults.clear()
    before = len(fresh_sandbox.state.requests)
    group = apply_brands(aggregator, plan, now=NOW, register=register)
    assert group.complete and len(group.created) == 9
    posted = [r.path for r in fresh_sandbox.state.requests[before:] if r.method == "POST"]
    assert posted == ["/api/v1/brands/2002/campaign"] * 3


def test_a_plan_with_an_error_sends_nothing_and_names_the_brand(
    aggregator: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    plan = promotion(tmp_path, brands=[2001, 2002], per_brand={2002: {"game_ids": ["viking-raid"]}})
    with pytest.raises(PlanInvalidError, match=r"brands\.2002\.game_ids = viking-raid"):
        apply_brands(aggregator, plan, now=NOW, register=tmp_path / "r.sqlite")
    assert _creations(fresh_sandbox) == Counter()
    assert BrandGroups(tmp_path / "r.sqlite").names() == []


def test_a_changed_member_supersedes_the_created_one(
    aggregator: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    register = tmp_path / "r.sqlite"
    plan = promotion(tmp_path, brands=[2007])
    first = apply_brands(aggregator, plan, now=NOW, register=register)
    changed = promotion(tmp_path, brands=[2007], bet_number=25)
    second = apply_brands(aggregator, changed, now=NOW, register=register)
    assert [(m.status, m.campaign_id) for m in second.members] == [
        ("created", "CMP-000002"),
        ("superseded", first.members[0].campaign_id),
    ]


def test_one_brands_load_failing_is_named_and_the_others_load(
    aggregator: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    register = tmp_path / "r.sqlite"
    plan = promotion(tmp_path, players_per_brand=5, brands=[2001, 2002, 2003])
    reviewed = check_brands(aggregator, plan, now=NOW)
    group = apply_brands(aggregator, reviewed, register=register)
    fresh_sandbox.faults.add(
        FaultRule("POST /api/v1/brands/2002/campaign/*/participant", status=409, code="CONFLICT")
    )
    loads = load_group_players(aggregator, reviewed.plans, group, register=register,
                               progress=False)  # fmt: skip
    assert list(loads.failures) == [2002] and not loads.complete
    assert loads.incomplete()[0].startswith("brand 2002: ")
    assert sorted(loads.summaries) == [(2001, "EUR"), (2003, "EUR")]
    assert all(s.complete for s in loads.summaries.values())
    fresh_sandbox.faults.clear()
    again = load_group_players(aggregator, reviewed.plans, group, register=register,
                               progress=False)  # fmt: skip
    assert again.complete and again.summaries[(2002, "EUR")].counts()["loaded"] == 5
