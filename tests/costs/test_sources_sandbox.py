"""The three sources agree on the sandbox; previews are concurrent, cached and exact."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

from gptools.client import Client
from gptools.costs import (
    CostBook,
    CostSource,
    Difference,
    cost_book,
    cost_chart,
    cross_check,
    preview,
    read_stored_table,
    write_stored_table,
)
from gptools.costs._preview import chart_frame
from gptools.sandbox import CATALOGUE, CURRENCIES, RunningSandbox
from tests.costs.conftest import BRAND, no_float

DATA = Path(__file__).resolve().parents[2] / "data" / "stored_bet_sizes.csv"
GAMES = [g.game_id for g in CATALOGUE]


def _gets(sb: RunningSandbox, endpoint: str) -> int:
    return sum(1 for r in sb.state.requests if r.method == "GET" and r.path.endswith(endpoint))


def test_three_sources_agree_on_the_sandbox(
    client: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    book = CostBook(client, brand=BRAND)
    from_game = book.table(GAMES, CURRENCIES, source="game")
    from_configs = book.table(GAMES, CURRENCIES)  # the recommended source is the default
    stored_path = tmp_path / "stored.csv"
    write_stored_table(from_game, stored_path)
    from_stored = read_stored_table(stored_path)

    assert len(from_game) > 300
    for a, b in ((from_configs, from_game), (from_game, from_stored), (from_configs, from_stored)):
        check = cross_check(a, b)
        assert check.ok, check.differences
    assert _gets(fresh_sandbox, "/game") == len(GAMES)
    assert _gets(fresh_sandbox, "/awarded-feature-configurations") == len(GAMES) * len(CURRENCIES)
    for table in (from_game, from_configs, from_stored):
        assert no_float(table) == []


def test_the_stored_data_file_has_exactly_one_stale_entry(client: Client) -> None:
    live = CostBook(client, brand=BRAND).table(GAMES, CURRENCIES, source="game")
    check = cross_check(read_stored_table(DATA), live)
    diff = check.differences
    assert list(diff["kind"]) == [Difference.MULTIPLIER_CHANGED]
    stale = diff.iloc[0]
    assert (stale["game_id"], stale["currency"], stale["buy_feature_type"]) == (
        "neon-fruits",
        "EUR",
        "FREE_SPINS",
    )
    assert (stale["left"], stale["right"]) == (Decimal("70"), Decimal("75.5"))


def test_preview_is_cached_per_session(client: Client, fresh_sandbox: RunningSandbox) -> None:
    first = preview(
        client, ["golden-pharaoh", "neon-fruits"], ["EUR", "JPY"], source="game", brand=BRAND
    )
    assert _gets(fresh_sandbox, "/game") == 2
    again = preview(
        client, ["golden-pharaoh", "neon-fruits"], ["EUR", "JPY", "KWD"], source="game", brand=BRAND
    )
    assert _gets(fresh_sandbox, "/game") == 2  # the answers were reused
    assert len(again) > len(first)
    assert cost_book(client, brand=BRAND).requests == 2
    cost_book(client, brand=BRAND).clear()
    preview(client, ["golden-pharaoh"], ["EUR"], source="game", brand=BRAND)
    assert _gets(fresh_sandbox, "/game") == 3


def test_the_recommended_source_is_the_default(
    client: Client, fresh_sandbox: RunningSandbox
) -> None:
    """The document recommends the configurations endpoint for the bet: preview and
    CostBook.table use it unless told otherwise; the game endpoint is one argument away."""
    table = preview(client, ["neon-fruits"], ["EUR"], brand=BRAND)
    assert table.attrs["source"] == CostSource.CONFIGURATIONS
    assert _gets(fresh_sandbox, "/awarded-feature-configurations") == 1
    assert _gets(fresh_sandbox, "/game") == 0
    assert (
        CostBook(client, brand=BRAND).table(["neon-fruits"], ["EUR"]).attrs["source"]
        == CostSource.CONFIGURATIONS
    )
    assert (
        preview(client, ["neon-fruits"], ["EUR"], source="game", brand=BRAND).attrs["source"]
        == CostSource.GAME
    )


def test_preview_runs_requests_concurrently_within_the_limits(
    client: Client, fresh_sandbox: RunningSandbox
) -> None:
    book = CostBook(client, brand=BRAND, max_workers=8)
    table = book.table(GAMES, CURRENCIES, source="configurations")
    assert book.requests == len(GAMES) * len(CURRENCIES)
    statuses = {r.status for r in fresh_sandbox.state.requests}
    assert statuses == {200}  # the client kept every rate tier: nothing was refused
    assert client.stats.rate_limited == 0
    assert not table.empty
    with pytest.raises(ValueError, match="max_workers"):
        CostBook(client, max_workers=0)


def test_configurations_source_needs_currencies(client: Client) -> None:
    with pytest.raises(ValueError, match="needs the currencies"):
        CostBook(client, brand=BRAND).table(GAMES, None, source="configurations")


def test_chart_returns_a_figure_and_only_chart_columns_are_float(
    catalogue_table: pd.DataFrame,
) -> None:
    fig = cost_chart(catalogue_table)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == sorted(CURRENCIES)
    legend = ax.get_legend()
    assert legend is not None
    assert len(legend.get_texts()) == len(set(catalogue_table["game_id"]))
    rates = {c: Decimal("1") for c in CURRENCIES} | {"JPY": Decimal("0.0061")}
    converted = cost_chart(catalogue_table, rates=rates, reporting_currency="EUR")
    assert converted.axes[0].get_yscale() == "linear"
    assert converted.axes[0].get_title() != ax.get_title()
    assert "EUR" in converted.axes[0].get_title()
    frame = chart_frame(catalogue_table, rates=rates)
    assert no_float(frame, allowed=("chart_value",)) == []
    assert frame["chart_value"].dtype == float
    with pytest.raises(ValueError, match="no exchange rate for"):
        chart_frame(catalogue_table, rates={"EUR": Decimal(1)})
