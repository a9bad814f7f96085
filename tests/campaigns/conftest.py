"""Fixtures of the campaign tests: a valid plan, a pinned now, and a sandbox client."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest

from gptools.campaigns import CurrencyLine, Plan
from gptools.client import Client
from gptools.costs import combine, table_from_game
from gptools.models import Game
from gptools.sandbox import CATALOGUE, RunningSandbox
from gptools.widgets import PlannerInputs

NOW = datetime(2029, 12, 1, 12, 0, tzinfo=UTC)


def make_plan(**changes: Any) -> Plan:
    """A valid awarded-feature plan (golden-pharaoh FREE_SPINS x100), with ``changes``."""
    fields: dict[str, Any] = {
        "name": "Spring feature drop",
        "campaign_type": "AWARDED_FEATURE",
        "game_ids": ("golden-pharaoh",),
        "currencies": {
            "EUR": CurrencyLine(bet=Decimal("20.00"), players=500, player_ids=("p1", "p2")),
            "JPY": CurrencyLine(bet=Decimal("2000"), players=200),
            "KWD": CurrencyLine(bet=Decimal("10.000"), players=50),
        },
        "bet_number": 10,
        "start": datetime(2030, 3, 1, 10, 0),
        "end": datetime(2030, 3, 31, 22, 0),
        "time_zone": "Europe/Malta",
        "rules_url": "https://casino.example/rules",
        "external_campaign_id": "SPRING-2030",
        "brand": 201,
        "reporting_currency": "EUR",
        "exchange_rates": {"JPY": Decimal("0.0061"), "KWD": Decimal("2.98")},
    }
    fields.update(changes)
    return Plan(**fields)


def planner_inputs(**changes: Any) -> PlannerInputs:
    """The planner's inputs for one player on golden-pharaoh's FREE_SPINS (level 0, 5
    rounds, EUR) in March 2030, with ``changes``."""
    fields: dict[str, Any] = {
        "game_ids": ("golden-pharaoh",),
        "currencies": ("EUR",),
        "buy_feature_type": "FREE_SPINS",
        "level": 0,
        "bet_number": 5,
        "players": 1,
        "start": "2030-03-01 10:00",
        "end": "2030-03-31 22:00",
    }
    return PlannerInputs(**{**fields, **changes})


@pytest.fixture(scope="session")
def costs() -> pd.DataFrame:
    """The sandbox catalogue's cost table (as data, no HTTP)."""
    return combine(
        (table_from_game(Game.model_validate(g.to_json())) for g in CATALOGUE), source="game"
    )


@pytest.fixture
def client(fresh_sandbox: RunningSandbox) -> Iterator[Client]:
    """A partner client of the freshly reset sandbox."""
    acct = fresh_sandbox.accounts["partner"]
    with Client(fresh_sandbox.base_url, acct.username, acct.password) as c:
        yield c
