"""Plan then apply against the sandbox: twice creates one campaign per currency."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gptools.campaigns import CurrencyLine, PlanInvalidError, add_participants_to, apply_plan
from gptools.campaigns._apply import add_players
from gptools.client import Client
from gptools.sandbox import RunningSandbox
from tests.campaigns.conftest import NOW, make_plan


def _posts(sb: RunningSandbox, suffix: str) -> int:
    return sum(1 for r in sb.state.requests if r.method == "POST" and r.path.endswith(suffix))


def test_apply_twice_creates_one_campaign_per_currency(
    client: Client, fresh_sandbox: RunningSandbox
) -> None:
    plan = make_plan()
    first = apply_plan(client, plan, now=NOW)
    assert len(fresh_sandbox.state.campaigns) == 3
    second = apply_plan(client, plan, now=NOW)
    assert second.campaign_ids == first.campaign_ids
    assert len(fresh_sandbox.state.campaigns) == 3
    assert _posts(fresh_sandbox, "/campaign") == 6  # sent twice, created once
    stored = {c.request_id: c for c in fresh_sandbox.state.campaigns.values()}
    assert set(stored) == {c.request_id for c in first.campaigns}
    kwd = next(c for c in first.campaigns if c.currency == "KWD")
    assert stored[kwd.request_id].brand_id == 201
    assert stored[kwd.request_id].body["bet"] == Decimal("10.000")


def test_bets_are_checked_against_the_configurations_endpoint_before_sending(
    client: Client, fresh_sandbox: RunningSandbox
) -> None:
    plan = make_plan(currencies={"EUR": CurrencyLine(bet=Decimal("0.20"), players=10)})
    with pytest.raises(PlanInvalidError, match=r"currencies.EUR.bet = 0.20"):
        apply_plan(client, plan, now=NOW)
    assert _posts(fresh_sandbox, "/campaign") == 0
    assert any(
        r.path.endswith("/awarded-feature-configurations") for r in fresh_sandbox.state.requests
    )


def test_participants_are_added_when_asked(client: Client, fresh_sandbox: RunningSandbox) -> None:
    result = apply_plan(client, make_plan(), now=NOW, add_participants=True)
    eur = result.campaign_ids["EUR"]
    assert fresh_sandbox.state.participants(eur) == {"p1": 1, "p2": 1}
    assert {c.currency: c.participants_sent for c in result.campaigns} == {
        "EUR": 2,
        "JPY": 0,
        "KWD": 0,
    }
    sent = add_participants_to(client, result, {"JPY": ["j1", "j2", "j3"]}, brand=201)
    assert sent == {"JPY": 3}
    assert fresh_sandbox.state.participants(result.campaign_ids["JPY"]) == {
        "j1": 1,
        "j2": 1,
        "j3": 1,
    }
    with pytest.raises(KeyError, match="no campaign in"):
        add_participants_to(client, result, {"GBP": ["x"]}, brand=201)
    html = result._repr_html_()
    assert eur in html and "participants_sent" in html


def test_add_players_sends_chunks(client: Client, fresh_sandbox: RunningSandbox) -> None:
    result = apply_plan(client, make_plan(), now=NOW)
    before = _posts(fresh_sandbox, "/participant")
    sent = add_players(
        client.brand(201), result.campaign_ids["KWD"], ["a", "b", "c", "d", "e"], chunk_size=2
    )
    assert sent == 5
    assert _posts(fresh_sandbox, "/participant") - before == 3
    with pytest.raises(ValueError, match="chunk_size"):
        add_players(client.brand(201), result.campaign_ids["KWD"], ["a"], chunk_size=0)
