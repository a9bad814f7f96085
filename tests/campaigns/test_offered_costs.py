"""What a review checks a plan's bets against, fetched from the sandbox: the known games'
feature costs, and each unknown game apart (one problem of the plan, not an error)."""

from __future__ import annotations

from decimal import Decimal

from gptools.campaigns import CurrencyLine, offered_costs, review
from gptools.client import Client
from gptools.costs import CostBook, CostSource
from tests.campaigns.conftest import NOW, make_plan


def test_an_unknown_game_is_set_apart_and_the_known_ones_priced(client: Client) -> None:
    plan = make_plan(game_ids=("no-such-game", "golden-pharaoh"))
    costs, unknown = offered_costs(CostBook(client, brand=201), plan)
    assert unknown == ("no-such-game",)
    assert costs.attrs["source"] == CostSource.CONFIGURATIONS
    assert set(costs["game_id"]) == {"golden-pharaoh"}
    assert sorted(set(costs["currency"])) == ["EUR", "JPY", "KWD"]
    errors = review(plan, now=NOW, costs=costs, unknown_games=unknown).validation.errors
    assert [(p.field, p.value) for p in errors] == [("game_ids", "no-such-game")]


def test_every_game_known_leaves_nothing_apart(client: Client) -> None:
    plan = make_plan()
    costs, unknown = offered_costs(CostBook(client, brand=201), plan)
    assert unknown == ()
    assert set(costs["game_id"]) == {"golden-pharaoh"}
    assert review(plan, now=NOW, costs=costs).validation.ok


def test_which_plans_have_their_bets_checked() -> None:
    assert make_plan().checks_bets
    assert not make_plan(currencies={}).checks_bets
    free_rounds = make_plan(
        campaign_type="FREE_ROUNDS",
        currencies={"EUR": CurrencyLine(bet=Decimal("0.20"), players=5)},
    )
    assert not free_rounds.checks_bets
