"""Plan files in JSON and YAML; bad files are named with file, line and field."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from gptools.campaigns import PlanFileError, load_plan, plan_from_dict, validate_plan
from tests.campaigns.conftest import NOW

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "example_plan.yaml"


def test_the_example_plan_loads_exactly() -> None:
    plan = load_plan(EXAMPLE)
    assert plan.currencies["KWD"].bet == Decimal("10.000")
    assert str(plan.currencies["KWD"].bet) == "10.000"
    assert plan.exchange_rates["JPY"] == Decimal("0.0061")
    assert plan.currencies["EUR"].player_ids == ("p-eur-0001", "p-eur-0002", "p-eur-0003")
    assert validate_plan(plan, now=NOW).ok


def test_json_plan_keeps_decimal_digits(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(
        '{"name": "n", "campaign_type": "AWARDED_FEATURE", "game_ids": ["g"],'
        ' "currencies": {"EUR": {"bet": 0.10, "players": 1}}, "bet_number": 1,'
        ' "start": "2030-01-01T10:00:00", "end": "2030-01-05T10:00:00",'
        ' "time_zone": "UTC"}'
    )
    plan = load_plan(path)
    assert str(plan.currencies["EUR"].bet) == "0.10"


def test_yaml_float_is_read_from_its_digits(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace('bet: "20.00"', "bet: 20.1")
    path = tmp_path / "plan.yml"
    path.write_text(text)
    assert load_plan(path).currencies["EUR"].bet == Decimal("20.1")


def test_type_problems_are_all_named(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(
        "name: n\ncampaign_type: AWARDED_FEATURE\ngame_ids: [g]\n"
        "currencies: {EUR: {bet: lots, players: 1}}\nbet_number: many\n"
        "start: 2030-01-01T10:00:00\nend: not-a-date\ntime_zone: UTC\ncolour: red\n"
    )
    with pytest.raises(PlanFileError) as info:
        load_plan(path)
    message = str(info.value)
    for field in ("currencies.EUR.bet", "bet_number", "end", "colour"):
        assert f"{path}: field {field}:" in message


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("bad.json", '{"name": ', r"bad.json:1: not valid JSON"),
        ("bad.yaml", "name: [unclosed\n", r"bad.yaml:2: not valid YAML"),
        ("list.yaml", "- 1\n- 2\n", "expected a mapping of plan fields, got a list"),
    ],
)
def test_unreadable_files(tmp_path: Path, name: str, text: str, match: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(PlanFileError, match=match):
        load_plan(path)


def test_missing_file() -> None:
    with pytest.raises(PlanFileError, match="cannot read"):
        load_plan("/nonexistent/plan.yaml")


def test_plan_from_dict_without_a_file() -> None:
    with pytest.raises(PlanFileError, match="plan: field name"):
        plan_from_dict({"name": 5})
