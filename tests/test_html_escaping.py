"""Every HTML the package renders escapes user-supplied text: hostile inputs stay text."""

from __future__ import annotations

from decimal import Decimal
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from gptools.campaigns import AppliedCampaign, ApplyResult, CurrencyLine, review, validate_plan
from gptools.costs import combine, cross_check, table_from_game
from gptools.deliverylog import analyze
from gptools.models import Game
from gptools.participants import LoadSummary
from gptools.sandbox import CATALOGUE
from gptools.widgets import build_ui, planner_result
from tests.campaigns.conftest import NOW, make_plan, planner_inputs

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
HOSTILE = (SCRIPT, IMG)


@pytest.fixture(scope="module")
def costs() -> pd.DataFrame:
    """The sandbox catalogue's cost table (as data, no HTTP)."""
    return combine(
        (table_from_game(Game.model_validate(g.to_json())) for g in CATALOGUE), source="game"
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.handlers: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]


def assert_inert(html: str, *texts: str) -> None:
    """No element and no event handler came from the input, and the input is still shown."""
    parser = _Tags()
    parser.feed(html)
    parser.close()
    assert "script" not in parser.tags and "img" not in parser.tags, parser.tags
    assert parser.handlers == []
    for text in texts:
        assert escape(text) in html or escape(text, quote=False) in html, text


@pytest.mark.parametrize("bad", HOSTILE)
def test_planner_input_error_is_escaped(costs: pd.DataFrame, bad: str) -> None:
    inputs = planner_inputs(start=bad, end=bad)
    result = planner_result(costs, inputs, now=NOW)
    assert result.plan is None
    errors = result.validation.errors
    unreadable = [(p.field, p.value) for p in errors if p.field in ("start", "end")]
    assert unreadable == [("start", bad), ("end", bad)]
    assert_inert(result._repr_html_(), bad)


@pytest.mark.parametrize("bad", HOSTILE)
def test_planner_widget_output_is_escaped(costs: pd.DataFrame, bad: str) -> None:
    ui = build_ui(costs, now=NOW)
    ui.controls["name"].value = bad
    ui.controls["time_zone"].value = bad
    assert_inert(ui.output.value)
    ui.controls["start"].value = bad
    assert_inert(ui.output.value, bad)


@pytest.mark.parametrize("bad", HOSTILE)
def test_plan_review_validation_and_apply_are_escaped(costs: pd.DataFrame, bad: str) -> None:
    plan = make_plan(
        name=bad,
        rules_url=bad,
        external_campaign_id=bad,
        game_ids=(bad,),
        currencies={"EUR": CurrencyLine(bet=Decimal("20.00"), players=5, player_ids=(bad,))},
    )
    assert_inert(plan._repr_html_(), bad)
    assert_inert(validate_plan(plan, now=NOW, costs=costs)._repr_html_(), bad)
    assert_inert(review(plan, now=NOW, costs=costs)._repr_html_(), bad)
    applied = ApplyResult(bad, (AppliedCampaign("EUR", bad, bad, 1),))
    assert_inert(applied._repr_html_(), bad)


@pytest.mark.parametrize("bad", HOSTILE)
def test_cross_check_is_escaped(costs: pd.DataFrame, bad: str) -> None:
    other = costs.copy()
    other.loc[other.index[0], "game_id"] = bad
    assert_inert(cross_check(costs, other)._repr_html_(), bad)


@pytest.mark.parametrize("bad", HOSTILE)
def test_load_summary_is_escaped(bad: str) -> None:
    summary = LoadSummary(
        campaign_id=bad,
        brand=None,
        source=bad,
        journal=Path("j.sqlite"),
        rows=1,
        loaded=0,
        rejected=1,
        duplicate=0,
        not_attempted=0,
        rejected_by_reason={bad: 1},
        source_details={bad: bad},
        last_error=bad,
    )
    assert_inert(summary._repr_html_(), bad)


def test_delivery_report_is_escaped(tmp_path: Path) -> None:
    # A file name cannot hold "/", so the script tag is left unclosed here.
    path = tmp_path / '<script>alert(1)"><img src=x onerror=alert(1)>.jsonl'
    path.write_text("", encoding="utf-8")
    with analyze(path) as analysis:
        assert_inert(analysis.report._repr_html_(), path.name)
        assert_inert(analysis._repr_html_(), path.name)
