"""Fixtures of the cost tests: a partner client on the shared sandbox, and the catalogue."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from gptools.client import Client
from gptools.costs import combine, table_from_game
from gptools.models import Game
from gptools.sandbox import CATALOGUE, RunningSandbox

BRAND = 201


@pytest.fixture
def client(fresh_sandbox: RunningSandbox) -> Iterator[Client]:
    """A partner client of the freshly reset sandbox."""
    acct = fresh_sandbox.accounts["partner"]
    with Client(fresh_sandbox.base_url, acct.username, acct.password) as c:
        yield c


@pytest.fixture(scope="session")
def catalogue_table() -> pd.DataFrame:
    """The cost table computed from the sandbox catalogue as data (no HTTP)."""
    return combine(
        (table_from_game(Game.model_validate(g.to_json())) for g in CATALOGUE), source="game"
    )


def no_float(table: pd.DataFrame, allowed: tuple[str, ...] = ()) -> list[str]:
    """The cells (column, row) of ``table`` holding a float outside ``allowed`` columns."""
    return [
        f"{col}[{i}]={value!r}"
        for col in table.columns
        if col not in allowed
        for i, value in enumerate(table[col])
        if isinstance(value, float)
    ]
