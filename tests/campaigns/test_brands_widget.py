"""The multi-brand planner widget: a brand picker from /self and the per-brand budget."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gptools.campaigns import brands_plan_from_dict, fetch_brand_checks
from gptools.client import Client
from gptools.sandbox import RunningSandbox
from gptools.widgets import build_brands_ui
from tests.campaigns.conftest import NOW
from tests.campaigns.test_brands_plan import brands_doc

pytest.importorskip("ipywidgets")


def test_the_picker_reviews_the_brands_chosen_without_a_request(
    fresh_sandbox: RunningSandbox,
) -> None:
    acct = fresh_sandbox.accounts["aggregator"]
    plan = brands_plan_from_dict(
        brands_doc(brands="all", per_brand={2002: {"game_ids": ["viking-raid"]}})
    )
    with Client(fresh_sandbox.base_url, acct.username, acct.password) as client:
        checks = fetch_brand_checks(client, plan)
    assert list(checks.names)[:2] == [2001, 2002] and checks.names[2001] == "Amber Spins"
    ui = build_brands_ui(plan, checks, now=NOW)
    sent = len(fresh_sandbox.state.requests)
    assert ui.result is not None and ui.result.brand_ids == tuple(range(2001, 2031))
    assert [p.field for p in ui.result.validation.errors] == ["brands.2002.game_ids"]
    assert ui.controls["brands"].disabled
    ui.controls["all"].value = False
    ui.controls["brands"].value = (2001, 2003)
    assert ui.result.brand_ids == (2001, 2003) and ui.result.validation.ok
    assert ui.plan().brands == (2001, 2003) and ui.plan().per_brand == {}
    table = ui.result.budget.table
    assert list(table["brand"]) == [2001, 2003]
    assert ui.result.budget.exposure("EUR") == Decimal("40000.00")
    assert "Budget per brand" in ui.output.value and "2003" in ui.output.value
    assert len(fresh_sandbox.state.requests) == sent  # a change costs no request
