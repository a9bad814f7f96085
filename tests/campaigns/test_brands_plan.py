"""A plan over several brands: overrides, players files, validation per brand, budget."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from gptools.campaigns import Plan, PlanFileError, load_plan
from gptools.campaigns._brands import (
    BrandsPlan,
    brands_plan_from_dict,
    expand_brands,
    load_any_plan,
    read_players_file,
)
from gptools.campaigns._brands_review import check_brands, review_brands
from gptools.client import Client
from gptools.sandbox import RunningSandbox
from tests.campaigns.conftest import NOW


def brands_doc(**changes: Any) -> dict[str, Any]:
    """An awarded-feature promotion (golden-pharaoh, EUR 20.00 × 10) on 2001-2003."""
    doc: dict[str, Any] = {
        "name": "Winter drop",
        "campaign_type": "AWARDED_FEATURE",
        "game_ids": ["golden-pharaoh"],
        "currencies": {"EUR": {"bet": "20.00", "players": 100}},
        "bet_number": 10,
        "start": "2030-03-01T10:00:00",
        "end": "2030-03-31T22:00:00",
        "time_zone": "Europe/Malta",
        "brands": [2001, 2002, 2003],
    }
    doc.update(changes)
    return doc


@pytest.fixture
def aggregator(fresh_sandbox: RunningSandbox) -> Iterator[Client]:
    """The aggregator's client (PARTNER, brands 2001-2030) on a fresh sandbox."""
    acct = fresh_sandbox.accounts["aggregator"]
    with Client(fresh_sandbox.base_url, acct.username, acct.password) as c:
        yield c


def test_a_file_with_brands_is_a_brands_plan_and_one_without_stays_a_plan(
    tmp_path: Path,
) -> None:
    multi = tmp_path / "multi.yaml"
    multi.write_text(yaml.safe_dump(brands_doc()))
    single = tmp_path / "single.yaml"
    single.write_text(yaml.safe_dump({**brands_doc(brands=None), "brand": 201}))
    loaded = load_any_plan(multi)
    assert isinstance(loaded, BrandsPlan)
    assert loaded.brands == (2001, 2002, 2003)
    assert loaded.base.brand is None and loaded.name == "Winter drop"
    doc = brands_doc()
    del doc["brands"]
    single.write_text(yaml.safe_dump({**doc, "brand": 201}))
    plain = load_any_plan(single)
    assert isinstance(plain, Plan) and plain == load_plan(single)


def test_file_errors_name_the_field_without_the_base_prefix() -> None:
    with pytest.raises(PlanFileError) as err:
        brands_plan_from_dict(brands_doc(bet_number="many", brands="some"), where="p.yaml")
    assert str(err.value).splitlines()[1:] == [
        "p.yaml: field bet_number: Input should be a valid integer, unable to parse string "
        "as an integer (got 'many')",
        "p.yaml: field brands.tuple[int, ...]: Input should be a valid tuple (got 'some')",
        "p.yaml: field brands.literal['all']: Input should be 'all' (got 'some')",
    ]
    with pytest.raises(PlanFileError, match="names its brands in 'brands'"):
        brands_plan_from_dict({**brands_doc(), "brand": 2001})


def test_per_brand_overrides_make_each_brands_plan() -> None:
    plan = brands_plan_from_dict(
        brands_doc(
            currencies={
                "EUR": {"bet": "20.00", "players": 100},
                "JPY": {"bet": "2000", "players": 30},
            },
            per_brand={
                2001: {"currencies": ["JPY"], "players": 7},
                2002: {"game_ids": ["neon-fruits"], "bet": {"EUR": "7.55"},
                       "end": "2030-04-30T22:00:00"},
                2003: {"currencies": {"EUR": {}, "KWD": {"bet": "10.000", "players": 5}},
                       "time_zone": "Asia/Kuwait", "display_options": {"show_opt_out": True}},
            },
        )
    )  # fmt: skip
    expansion = expand_brands(plan)
    assert expansion.problems == ()
    p1, p2, p3 = (expansion.plans[b] for b in (2001, 2002, 2003))
    assert (p1.brand, list(p1.currencies), p1.currencies["JPY"].players) == (2001, ["JPY"], 7)
    assert p2.game_ids == ("neon-fruits",) and p2.end.month == 4
    assert (p2.currencies["EUR"].bet, p2.currencies["JPY"].bet) == (Decimal("7.55"), 2000)
    assert list(p3.currencies) == ["EUR", "KWD"] and p3.time_zone == "Asia/Kuwait"
    assert p3.currencies["KWD"].bet == Decimal("10.000")
    assert expansion.notes[2003].show_opt_out and not expansion.notes[2001].show_opt_out


def test_override_problems_name_their_brand() -> None:
    plan = brands_plan_from_dict(
        brands_doc(
            brands=[2001, 2002, 2001],
            per_brand={
                2001: {"currencies": ["USD"]},
                2002: {"currencies": {"SEK": {"bet": "20"}}, "bet": {"GBP": "1.00"}},
                2009: {"players": 3},
            },
        )
    )
    found = [(p.field, p.value, p.message) for p in expand_brands(plan).problems]
    assert found == [
        ("brands[2]", 2001, "is listed twice"),
        ("per_brand.2009", 2009, "overrides brand 2009, which the plan does not run on"),
        ("per_brand.2001.currencies", "USD", "a list keeps the plan's currencies; give a "
         "mapping with bet and players to add one"),
        ("per_brand.2002.currencies.SEK", "SEK", "a currency the plan lacks needs players"),
        ("per_brand.2002.bet.GBP", "GBP", "names a currency the brand does not run"),
    ]  # fmt: skip


def test_brands_all_needs_the_accounts_brands() -> None:
    plan = brands_plan_from_dict(brands_doc(brands="all"))
    offline = expand_brands(plan)
    assert [(p.field, p.message) for p in offline.problems] == [
        ("brands", "'all' needs the account's brands: check the plan against the server")
    ]
    assert offline.plans == {}
    online = expand_brands(plan, allowed=frozenset({2003, 2001, 2002}))
    assert online.brand_ids == (2001, 2002, 2003) and online.problems == ()


def test_players_from_one_file_with_a_brand_column_and_from_a_file_per_brand(
    tmp_path: Path,
) -> None:
    (tmp_path / "all.csv").write_text(
        "brand,player_id,currency\n2001,a1,EUR\n2001,a2,JPY\n2002,b1,\n2002,b1,\n2003,c1,\n"
    )
    (tmp_path / "p2003.csv").write_text("player_id\nc2\nc3\n")
    doc = brands_doc(
        currencies={"EUR": {"bet": "20.00", "players": 1}},
        players_file="all.csv",
        per_brand={
            2001: {"currencies": {"EUR": {}, "JPY": {"bet": "2000", "players": 1}}},
            2003: {"players_file": "p2003.csv"},
        },
    )
    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(yaml.safe_dump(doc))
    plan = load_any_plan(plan_file)
    assert isinstance(plan, BrandsPlan)
    expansion = expand_brands(plan)
    assert expansion.problems == ()
    ids = {
        b: {c: (line.player_ids, line.players) for c, line in p.currencies.items()}
        for b, p in expansion.plans.items()
    }
    assert ids == {
        2001: {"EUR": (("a1",), 1), "JPY": (("a2",), 1)},
        2002: {"EUR": (("b1",), 1)},
        2003: {"EUR": (("c1", "c2", "c3"), 3)},  # the count grows to the ids listed
    }


def test_players_file_problems_name_the_brand_and_file(tmp_path: Path) -> None:
    (tmp_path / "all.csv").write_text("brand,player_id\n2001,a1\n2007,z1\n")
    (tmp_path / "none.csv").write_text("name\nx\n")
    doc = brands_doc(
        players_file=str(tmp_path / "all.csv"),
        per_brand={
            2001: {"currencies": {"EUR": {}, "JPY": {"bet": "2000", "players": 1}}},
            2002: {"players_file": str(tmp_path / "none.csv")},
        },
    )
    found = [(p.field, p.message) for p in expand_brands(brands_plan_from_dict(doc)).problems]
    assert found == [
        ("per_brand.2002.players_file", "has no player id column (one of player_id, playerId, "
         "player)"),
        ("players_file", "lists players of brand 2007, which the plan does not run on"),
        ("brands.2001.players_file", "brand 2001 runs ['EUR', 'JPY']: say which currency each "
         "player plays in"),
    ]  # fmt: skip


def test_a_players_file_past_its_bounds_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text("brand,player_id\n" + "".join(f"2001,p{i}\n" for i in range(11)))
    too_big = read_players_file(path, field="players_file", max_bytes=50)
    assert [p.message for p in too_big.problems] == [
        f"is {path.stat().st_size} bytes; a players file may have 50"
    ]
    too_long = read_players_file(path, field="players_file", max_rows=10)
    assert [p.message for p in too_long.problems] == ["has more than 10 rows"]
    assert len(read_players_file(path, field="players_file", max_rows=11).ids[2001][None]) == 11


def test_offline_review_budget_per_brand_per_currency_and_in_one_currency() -> None:
    plan = brands_plan_from_dict(
        brands_doc(
            reporting_currency="EUR",
            exchange_rates={"JPY": "0.0061"},
            per_brand={2001: {"currencies": {"EUR": {}, "JPY": {"bet": "2000", "players": 20}}},
                       2002: {"players": 50}},
        )
    )  # fmt: skip
    reviewed = review_brands(plan, now=NOW)
    assert reviewed.validation.errors == ()
    table = reviewed.budget.table[["brand", "currency", "max_exposure"]]
    assert [tuple(r) for r in table.itertuples(index=False)] == [
        (2001, "EUR", Decimal("20000.00")),
        (2001, "JPY", Decimal("400000")),
        (2002, "EUR", Decimal("10000.00")),
        (2003, "EUR", Decimal("20000.00")),
    ]  # fmt: skip
    per = reviewed.budget.per_currency
    assert [tuple(r) for r in per.itertuples(index=False)] == [
        ("EUR", 3, 250, Decimal("50000.00"), Decimal("50000.00")),
        ("JPY", 1, 20, Decimal("400000"), Decimal("2440.00")),
    ]
    assert reviewed.budget.total == Decimal("52440.00")
    assert reviewed.budget.exposure("EUR") == Decimal("50000.00")
    assert reviewed.budget.exposure("EUR", brand=2002) == Decimal("10000.00")
    # One request per brand and currency, each brand's requestId its own.
    ids = reviewed.requests
    assert list(zip(ids["brand"], ids["currency"], strict=True)) == [
        (2001, "EUR"), (2001, "JPY"), (2002, "EUR"), (2003, "EUR"),
    ]  # fmt: skip
    assert ids["request_id"].nunique() == 4
    again = review_brands(plan, now=NOW).requests
    assert list(again["request_id"]) == list(ids["request_id"])


def test_a_missing_rate_leaves_no_total_rather_than_a_short_one() -> None:
    plan = brands_plan_from_dict(
        brands_doc(
            reporting_currency="EUR",
            per_brand={2001: {"currencies": {"EUR": {}, "JPY": {"bet": "2000", "players": 20}}}},
        )
    )
    reviewed = review_brands(plan, now=NOW)
    assert [(p.field, p.message) for p in reviewed.validation.errors] == [
        ("brands.2001.exchange_rates.JPY", "missing: the budget cannot be converted")
    ]
    assert reviewed.budget.total is None
    assert reviewed.budget.exposure("EUR") == Decimal("60000.00")


def test_validation_against_the_sandbox_names_every_problem_with_its_brand(
    aggregator: Client,
) -> None:
    plan = brands_plan_from_dict(
        brands_doc(
            brands=[2001, 2002, 2003, 201, 2050],
            per_brand={
                2002: {"game_ids": ["viking-raid"]},
                2003: {"currencies": {"USD": {"bet": "20.00", "players": 5}}},
                2004: {"currencies": {"EUR": {"bet": "0.20"}}},
            },
        )
    )
    reviewed = check_brands(aggregator, plan, now=NOW)
    found = [
        (b, p.field, p.message)
        for b, p in zip(
            reviewed.problems_frame()["brand"], reviewed.validation.problems, strict=True
        )
    ]
    assert found == [
        (201, "brands[3]", "brand 201 is not covered by the account (BRAND_NOT_ALLOWED); it "
         "may act on 2001, 2002, 2003, 2004, 2005, 2006, 2007, 2008, 2009, 2010 and 20 more"),
        (2050, "brands[4]", "brand 2050 is not covered by the account (BRAND_NOT_ALLOWED); it "
         "may act on 2001, 2002, 2003, 2004, 2005, 2006, 2007, 2008, 2009, 2010 and 20 more"),
        (2004, "per_brand.2004", "overrides brand 2004, which the plan does not run on"),
        (2002, "brands.2002.game_ids", "brand 2002 does not offer viking-raid (GAME_NOT_FOUND "
         "there)"),
        (2003, "brands.2003.currencies.USD", "brand 2003 does not use USD (golden-pharaoh has "
         "no bet sizes in it there)"),
    ]  # fmt: skip
    assert reviewed.campaign_requests == {}
    assert reviewed.to_dict()["problems"][0]["brand"] == 201


def test_brands_all_against_the_sandbox_is_the_aggregators_30_brands(
    aggregator: Client,
) -> None:
    reviewed = check_brands(aggregator, brands_plan_from_dict(brands_doc(brands="all")), now=NOW)
    assert reviewed.validation.problems == ()
    assert reviewed.brand_ids == tuple(range(2001, 2031))
    assert len(reviewed.campaign_requests) == 30
    assert reviewed.budget.per_currency.iloc[0].tolist() == [
        "EUR",
        30,
        3000,
        Decimal("600000.00"),
        pd_na(),
    ]


def pd_na() -> Any:
    """pandas' missing value (no reporting currency)."""
    import pandas as pd

    return pd.NA
