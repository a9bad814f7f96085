"""The tidy table from each source, and the stored file format."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from gptools.costs import (
    COLUMNS,
    CostRow,
    CostSource,
    StoredTableError,
    available_costs,
    cross_check,
    read_stored_table,
    table_from_configurations,
    table_from_game,
    write_stored_table,
)
from gptools.models import AwardedFeatureConfigurations, Game, loads_wire
from tests.costs.conftest import no_float

DATA = Path(__file__).resolve().parents[2] / "data" / "stored_bet_sizes.csv"

GAME = Game.model_validate(
    loads_wire(
        '{"gameId": "g1", "buyFeatures": [{"buyFeatureType": "FS", "priceMultiplier": 75.5}],'
        ' "betSizes": {"EUR": [0.10, 0.15], "JPY": [25], "KWD": [0.050]}}'
    )
)


def test_game_source_gives_every_feature_and_base_bet_exactly() -> None:
    table = table_from_game(GAME)
    assert tuple(table.columns) == COLUMNS
    assert all(str(dtype) == "object" for dtype in table.dtypes)
    assert no_float(table) == []
    costs = {(r.currency, r.base_bet): r.feature_cost for r in table.itertuples()}
    assert costs == {
        ("EUR", Decimal("0.10")): Decimal("7.55"),
        ("EUR", Decimal("0.15")): Decimal("11.33"),
        ("JPY", Decimal("25")): Decimal("1888"),
        ("KWD", Decimal("0.050")): Decimal("3.775"),
    }
    only_eur = table_from_game(GAME, currencies=["EUR"])
    assert set(only_eur["currency"]) == {"EUR"}


def test_game_without_id_needs_one() -> None:
    game = GAME.model_copy(update={"game_id": None})
    with pytest.raises(ValueError, match="game_id="):
        table_from_game(game)
    assert set(table_from_game(game, game_id="named")["game_id"]) == {"named"}


def test_configurations_source_fills_what_it_lacks_with_na() -> None:
    answer = AwardedFeatureConfigurations.model_validate(
        loads_wire(
            '{"content": [{"gameId": "g1", "bet": 7.55, "currencyCode": "EUR"},'
            ' {"gameId": "g1", "bet": 7.55, "currencyCode": "EUR"},'
            ' {"gameId": "g1", "bet": 11.33, "currencyCode": "EUR"}]}'
        )
    )
    table = table_from_configurations(answer)
    assert table.attrs["source"] == CostSource.CONFIGURATIONS
    assert len(table) == 2  # the same cost twice is one available cost
    assert table["buy_feature_type"].isna().all()
    assert table["base_bet"].isna().all() and table["price_multiplier"].isna().all()
    assert list(table["feature_cost"]) == [Decimal("7.55"), Decimal("11.33")]
    assert no_float(table) == []
    assert available_costs(table, "g1", "EUR") == [Decimal("7.55"), Decimal("11.33")]


def test_stored_file_in_data_reads_and_recomputes_costs() -> None:
    table = read_stored_table(DATA)
    assert table.attrs["source"] == CostSource.STORED
    assert len(table) > 300
    assert no_float(table) == []
    assert all(isinstance(v, Decimal) for v in table["feature_cost"])


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    table = table_from_game(GAME)
    path = tmp_path / "stored.csv"
    write_stored_table(table, path)
    assert (
        path.read_text().splitlines()[0]
        == "game_id,currency,buy_feature_type,base_bet,price_multiplier"
    )
    back = read_stored_table(path)
    assert cross_check(table, back).ok
    assert list(back["base_bet"]) == list(table["base_bet"])  # 0.050 keeps its digits
    assert str(back["base_bet"].iloc[-1]) == "0.050"


def test_writing_a_table_without_breakdown_is_refused(tmp_path: Path) -> None:
    table = pd.DataFrame(
        [["g", "EUR", pd.NA, pd.NA, pd.NA, Decimal("1.00")]], columns=list(COLUMNS), dtype=object
    )
    with pytest.raises(ValueError, match="no breakdown"):
        write_stored_table(table, tmp_path / "x.csv")


def test_every_problem_of_a_bad_file_is_named_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(
        "# comment\n"
        "game_id,currency,buy_feature_type,base_bet,price_multiplier\n"
        "g1,EUR,FS,0.10,75.5\n"
        "g1,EUR,FS,abc,75.5\n"  # line 4: base bet not a number
        ",XYZ,FS,0.10,-2\n"  # line 5: empty game, unknown currency, bad multiplier
        "g1,EUR,FS,0.10,75.5\n"  # line 6: duplicate of line 3
        "g1,EUR,FS\n"  # line 7: too few fields
    )
    with pytest.raises(StoredTableError) as info:
        read_stored_table(path)
    message = str(info.value)
    assert "6 problem(s)" in message
    for expected in (
        f"{path}:4: column base_bet: 'abc'",
        f"{path}:5: column game_id is empty",
        f"{path}:5: column currency:",
        f"{path}:5: column price_multiplier: '-2'",
        f"{path}:6: duplicate row",
        f"{path}:7: 3 fields; expected 5",
    ):
        assert expected in message


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("game,currency\n", "header is game,currency"),
    ],
)
def test_bad_header_or_empty_file(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "f.csv"
    path.write_text(text)
    with pytest.raises(StoredTableError, match=match):
        read_stored_table(path)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(StoredTableError, match=r"nope\.csv: cannot read"):
        read_stored_table(tmp_path / "nope.csv")


def test_the_sources_keep_their_texts() -> None:
    """A table's ``attrs["source"]`` names a side of a cross-check by these texts."""
    assert [source.value for source in CostSource] == [
        "awarded-feature-configurations",
        "game",
        "stored",
    ]


def test_a_row_as_json_keeps_every_digit() -> None:
    """Trailing zeros stay (a KWD amount has three decimals); a missing part is null."""
    row = CostRow("g1", "KWD", "FS", Decimal("0.050"), Decimal("75.50"), Decimal("3.775"))
    assert row.to_dict() == {
        "game_id": "g1",
        "currency": "KWD",
        "buy_feature_type": "FS",
        "base_bet": "0.050",
        "price_multiplier": "75.50",
        "feature_cost": "3.775",
    }
    bare = CostRow("g1", "EUR", None, None, None, Decimal("1E+1"))
    assert bare.to_dict() == {
        "game_id": "g1",
        "currency": "EUR",
        "buy_feature_type": None,
        "base_bet": None,
        "price_multiplier": None,
        "feature_cost": "10",
    }
