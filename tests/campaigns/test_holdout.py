"""Holdout groups: the share is read and bounded, the split is seeded, recorded and
reproducible (a player's group depends on the seed and its own id only), apply loads the
treatment group alone and the register keeps both groups."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from gptools.campaigns import (
    MIN_GROUP,
    CampaignRegister,
    CurrencyLine,
    PlanFileError,
    apply_plan,
    plan_from_dict,
    split_players,
    validate_plan,
)
from gptools.campaigns._holdout import default_seed, group_digest, parse_share
from gptools.campaigns._register import plan_hash
from gptools.client import Client
from gptools.sandbox import RunningSandbox
from tests.campaigns.conftest import NOW, make_plan

PLAYERS = tuple(f"pl-{i:04d}" for i in range(1000))


@pytest.mark.parametrize(
    ("given", "share"),
    [("10%", Decimal("0.1")), (" 12.5 % ", Decimal("0.125")), (0.1, Decimal("0.1")),
     ("0.25", Decimal("0.25")), (Decimal("0.5"), Decimal("0.5")), (None, None)],
)  # fmt: skip
def test_the_share_is_a_percentage_or_a_fraction(given: object, share: Decimal | None) -> None:
    assert parse_share(given) == share


@pytest.mark.parametrize("given", ["ten", 10, 1, "150", True, "%"])
def test_an_ambiguous_share_is_refused_by_name(given: object) -> None:
    with pytest.raises(PlanFileError, match="holdout"):
        plan_from_dict({**make_plan().model_dump(), "holdout": given})


def test_the_split_is_seeded_and_adding_players_moves_no_one() -> None:
    split = split_players(PLAYERS, Decimal("0.1"), 7)
    assert (len(split.treatment), len(split.holdout)) == (897, 103)
    assert split_players(PLAYERS, Decimal("0.1"), 7) == split
    other = split_players(PLAYERS, Decimal("0.1"), 8)
    assert other.holdout != split.holdout
    more = split_players((*PLAYERS, *(f"new-{i}" for i in range(500))), Decimal("0.1"), 7)
    assert set(split.holdout) == set(more.holdout) & set(PLAYERS)
    # Order-independent, repeats once; the list's order is kept in each group.
    assert set(split_players(reversed(PLAYERS), Decimal("0.1"), 7).holdout) == set(split.holdout)
    assert split_players(("a", "a", "b"), Decimal("0.5"), 1).treatment.count("a") <= 1
    assert list(split.treatment) == [p for p in PLAYERS if p in set(split.treatment)]
    # A larger share holds out a superset (the threshold only rises).
    assert set(split.holdout) < set(split_players(PLAYERS, Decimal("0.2"), 7).holdout)


def test_validation_bounds_the_share_and_needs_the_players() -> None:
    ids = PLAYERS[:400]
    line = CurrencyLine(bet=Decimal("20.00"), players=400, player_ids=ids)
    for share, ok in (("0%", False), ("50%", True), ("50.1%", False), ("10%", True)):
        plan = make_plan(currencies={"EUR": line}, holdout=share)
        errors = [p for p in validate_plan(plan, now=NOW).errors if p.field == "holdout"]
        assert (not errors) is ok, share
    empty = make_plan(currencies={"EUR": CurrencyLine(bet=Decimal("20.00"), players=5)},
                      holdout="10%")  # fmt: skip
    (problem,) = [p for p in validate_plan(empty, now=NOW).errors if "player_ids" in p.field]
    assert "holdout splits the plan's player_ids" in problem.message
    small = make_plan(currencies={"EUR": line}, holdout="5%")
    (warning,) = [p for p in validate_plan(small, now=NOW).warnings if "player_ids" in p.field]
    assert f"at least {MIN_GROUP} players" in str(warning.limit)
    assert not [p for p in validate_plan(make_plan(currencies={"EUR": line}, holdout="10%"),
                                         now=NOW).warnings if "player_ids" in p.field]  # fmt: skip


def test_a_plan_without_holdout_keeps_its_hash() -> None:
    plan = make_plan()
    assert "holdout" not in plan_hash.__globals__["_plan_json"](plan)
    assert plan_hash(plan) != plan_hash(make_plan(holdout="10%"))
    assert make_plan(holdout="10%").split_seed == default_seed("Spring feature drop")
    assert make_plan(holdout="10%", holdout_seed=3).split_seed == 3


def test_apply_loads_the_treatment_and_records_both_groups(
    client: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    ids = PLAYERS[:300]
    plan = make_plan(
        currencies={"EUR": CurrencyLine(bet=Decimal("20.00"), players=300, player_ids=ids)},
        holdout="10%",
        holdout_seed=11,
    )
    path = tmp_path / "register.sqlite"
    result = apply_plan(client, plan, now=NOW, register=path, add_participants=True)
    cid = result.campaign_ids["EUR"]
    split = split_players(ids, Decimal("0.1"), 11)
    assert (len(split.treatment), len(split.holdout)) == (266, 34)
    url = f"{fresh_sandbox.base_url}/_sandbox/campaigns/{cid}/participants"
    loaded = httpx.get(url, timeout=10).json()
    assert sorted(loaded) == sorted(split.treatment)
    reg = CampaignRegister(path)
    record = reg.get(cid)
    assert record.players == tuple(sorted(split.treatment))
    groups = reg.holdout_groups(record)
    assert groups is not None and groups.verified
    assert (groups.share, groups.seed, groups.method) == (Decimal("0.1"), 11, split.method)
    assert groups.treatment == tuple(sorted(split.treatment))
    assert groups.holdout == tuple(sorted(split.holdout))
    assert groups.digests["holdout"] == group_digest(split.holdout)
    assert groups.to_dict()["holdout"] == 34
    # Applied again: the same campaign, the same split, recorded once.
    apply_plan(client, plan, now=NOW, register=path)
    again = reg.holdout_groups(reg.get(cid))
    assert again == groups
    # A campaign without holdout has none.
    plain = apply_plan(client, make_plan(name="No holdout"), now=NOW, register=path)
    assert reg.holdout_groups(reg.get(plain.campaign_ids["EUR"])) is None
