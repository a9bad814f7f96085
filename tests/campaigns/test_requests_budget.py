"""Deterministic request ids, one request per currency, the budget, the display."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

import pandas as pd
import pytest

from gptools.campaigns import (
    CurrencyLine,
    PlanInvalidError,
    budget,
    campaign_requests,
    request_id,
    review,
)
from gptools.campaigns._plan import player_view
from gptools.campaigns._requests import campaign_request
from gptools.models import DisplayOptions, loads_wire
from tests.campaigns.conftest import NOW, make_plan


def test_one_request_per_currency_with_the_total_cost_as_bet(costs: pd.DataFrame) -> None:
    requests = campaign_requests(make_plan(), now=NOW, costs=costs)
    assert list(requests) == ["EUR", "JPY", "KWD"]
    body = loads_wire(requests["KWD"].to_wire())
    assert body["type"] == "AWARDED_FEATURE"
    assert body["bet"] == Decimal("10.000") and body["currencyCode"] == "KWD"
    assert b'"bet":10.000' in requests["KWD"].to_wire()
    assert body["startDate"] == "2030-03-01T10:00:00" and body["timeZone"] == "Europe/Malta"
    assert body["gameIds"] == ["golden-pharaoh"] and body["betNumber"] == 10
    assert "players" not in body  # participants are added separately


def test_request_ids_are_deterministic_uuid5s() -> None:
    first = campaign_request(make_plan(), "EUR").request_id
    assert first is not None and len(first) == 36 and first[14] == "5"
    assert campaign_request(make_plan(), "EUR").request_id == first
    others = {
        campaign_request(make_plan(), "JPY").request_id,
        campaign_request(make_plan(brand=202), "EUR").request_id,
        campaign_request(make_plan(end=datetime(2030, 3, 30, 22, 0)), "EUR").request_id,
        campaign_request(make_plan(name="Other"), "EUR").request_id,
    }
    assert first not in others and len(others) == 4


def test_equal_amounts_give_equal_ids() -> None:
    short = make_plan(currencies={"EUR": CurrencyLine(bet=Decimal("20"), players=1)})
    long = make_plan(currencies={"EUR": CurrencyLine(bet=Decimal("20.00"), players=1)})
    assert campaign_request(short, "EUR").request_id == campaign_request(long, "EUR").request_id
    # the players count and ids are the budget's business, not the campaign body's
    more = make_plan(
        currencies={"EUR": CurrencyLine(bet=Decimal("20.00"), players=9, player_ids=("a",))}
    )
    assert campaign_request(more, "EUR").request_id == campaign_request(long, "EUR").request_id


def test_request_id_ignores_an_existing_request_id() -> None:
    req = campaign_request(make_plan(), "EUR")
    assert request_id(req, brand=201) == req.request_id


def test_an_invalid_plan_raises_with_every_error() -> None:
    with pytest.raises(PlanInvalidError) as info:
        campaign_requests(make_plan(name="", bet_number=2000), now=NOW)
    assert len(info.value.validation.errors) == 2
    assert "name" in str(info.value) and "bet_number" in str(info.value)


def test_budget_per_currency_and_in_the_reporting_currency() -> None:
    result = budget(make_plan())
    rows = {r["currency"]: r for r in result.table.to_dict(orient="records")}
    assert rows["EUR"]["max_exposure"] == Decimal("100000.00")  # 500 x 10 x 20.00
    assert rows["JPY"]["max_exposure"] == Decimal("4000000")
    assert rows["KWD"]["max_exposure"] == Decimal("5000.000")
    assert str(rows["KWD"]["max_exposure"]) == "5000.000"
    assert rows["JPY"]["reporting_value"] == Decimal("24400.00")
    assert rows["KWD"]["reporting_value"] == Decimal("14900.00")
    assert result.total == Decimal("139300.00")
    assert result.exposure("JPY") == Decimal("4000000")
    assert not any(isinstance(v, float) for col in result.table for v in result.table[col])
    assert "EUR 139300.00" in result._repr_html_()


def test_budget_rounds_each_conversion_and_adds_what_is_shown() -> None:
    plan = make_plan(
        currencies={"JPY": CurrencyLine(bet=Decimal("1"), players=1)},
        bet_number=1,
        exchange_rates={"JPY": Decimal("0.005")},
    )
    result = budget(plan)
    assert result.table["reporting_value"].iloc[0] == Decimal("0.01")  # 0.005 rounds half up
    assert result.total == Decimal("0.01")


def test_budget_without_a_rate_names_the_currency() -> None:
    with pytest.raises(ValueError, match="EUR per KWD"):
        budget(make_plan(), rates={"JPY": Decimal("0.0061")})
    plain = budget(make_plan(reporting_currency=None, exchange_rates={}))
    assert plain.total is None and plain.table["reporting_value"].isna().all()


def test_player_view_follows_the_display_options() -> None:
    view = player_view(make_plan(), "EUR")
    shown = dict(zip(view["item"], view["shown"], strict=True))
    assert shown == {
        "Value of Promotion": True,
        "Final Winning Value": True,
        "Campaign/Feature Player Expiry Time": False,
        "Play Later Button": True,
        "Bet Value (Awarded Feature only)": False,
        "Opt-Out Button and Function": False,
    }
    assert "10 features, worth EUR 200.00" in view["what"].iloc[0]
    switched = make_plan(
        display_options=DisplayOptions(show_bet_value=True, show_player_expiry_time=True)
    )
    html = switched._repr_html_()
    assert "EUR 20.00 per feature" in html and "ends 2030-03-31 22:00" in html
    free = player_view(make_plan(campaign_type="FREE_ROUNDS"), "EUR")
    assert "Bet Value (Awarded Feature only)" not in set(free["item"])
    assert "free rounds" in free["what"].iloc[0]


def test_free_rounds_type_is_the_spec_assumption() -> None:
    req = campaign_request(make_plan(campaign_type="FREE_ROUNDS"), "EUR")
    assert req.type == "FREE_ROUNDS"
    assert (
        campaign_request(make_plan(campaign_type="FREE_ROUNDS", free_rounds_type="FR"), "EUR").type
        == "FR"
    )


def test_review_shows_validation_budget_and_requests(costs: pd.DataFrame) -> None:
    good = review(make_plan(), now=NOW, costs=costs)
    assert good.validation.ok and len(good.requests) == 3
    html = good._repr_html_()
    for text in ("Campaign plan", "Validation", "Budget", "Requests", "139300.00"):
        assert text in html
    bad = review(make_plan(bet_number=0, exchange_rates={}), now=NOW, costs=costs)
    assert not bad.validation.ok and bad.requests.empty and bad.budget is None


def test_review_to_dict_is_json_ready(costs: pd.DataFrame) -> None:
    planned = review(make_plan(), now=NOW, costs=costs)
    data = planned.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["ok"] and data["problems"] == []
    assert [r["requestId"] for r in data["requests"]] == list(planned.requests["request_id"])
    assert data["budget"]["total"] == "139300.00"
    assert data["player_view"]["EUR"][0]["item"] == "Value of Promotion"
    bad = review(make_plan(bet_number=0, exchange_rates={}), now=NOW, costs=costs).to_dict()
    assert not bad["ok"] and bad["requests"] == [] and bad["budget"] is None
    assert {"severity", "field", "value", "limit", "message"} <= set(bad["problems"][0])
