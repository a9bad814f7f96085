"""Every validation rule at its boundary, DST gaps and overlaps, all problems at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from gptools import spec
from gptools.campaigns import CurrencyLine, Plan, validate_plan
from gptools.campaigns._validate import instant, local_time_kind
from tests.campaigns.conftest import NOW, make_plan

MALTA = ZoneInfo("Europe/Malta")


def _problems(
    plan: Plan,
    costs: pd.DataFrame | None = None,
    field: str | None = None,
) -> list[tuple[str, str]]:
    found = validate_plan(plan, now=NOW, costs=costs).problems
    return [(p.field, p.severity) for p in found if field is None or p.field == field]


def test_the_reference_plan_is_valid(costs: pd.DataFrame) -> None:
    validation = validate_plan(make_plan(), now=NOW, costs=costs)
    assert validation.problems == ()
    assert validation.ok
    assert "no problems" in validation._repr_html_()


@pytest.mark.parametrize(
    ("field", "limit"),
    [
        ("name", spec.NAME_MAX_LENGTH),
        ("external_campaign_id", spec.EXTERNAL_CAMPAIGN_ID_MAX_LENGTH),
        ("rules_url", spec.RULES_URL_MAX_LENGTH),
    ],
)
def test_text_limits_at_the_boundary(field: str, limit: int) -> None:
    assert _problems(make_plan(**{field: "x" * limit}), field=field) == []
    problem = validate_plan(make_plan(**{field: "x" * (limit + 1)}), now=NOW).errors[0]
    assert problem.field == field
    assert problem.limit == f"{limit} characters"
    assert f"{limit + 1} characters" in str(problem.value)


def test_name_is_required() -> None:
    assert _problems(make_plan(name=""), field="name") == [("name", "error")]


@pytest.mark.parametrize(("bet_number", "ok"), [(0, False), (1, True), (1500, True), (1501, False)])
def test_bet_number_limits(bet_number: int, ok: bool) -> None:
    problems = _problems(make_plan(bet_number=bet_number), field="bet_number")
    assert (problems == []) is ok


def test_start_must_be_in_the_future() -> None:
    at_now = NOW.astimezone(MALTA).replace(tzinfo=None)
    later = at_now + timedelta(seconds=1)
    end = at_now + timedelta(days=30)
    assert _problems(make_plan(start=at_now, end=end), field="start") == [("start", "error")]
    assert _problems(make_plan(start=later, end=end), field="start") == []


def test_end_after_start_and_the_24_hour_warning(costs: pd.DataFrame) -> None:
    start = datetime(2030, 3, 1, 10, 0)
    assert _problems(make_plan(start=start, end=start), field="end") == [("end", "error")]
    assert _problems(make_plan(start=start, end=start - timedelta(hours=1)), field="end") == [
        ("end", "error")
    ]
    short = validate_plan(
        make_plan(start=start, end=start + timedelta(hours=23, minutes=59)), now=NOW, costs=costs
    )
    assert short.ok and [p.field for p in short.warnings] == ["end"]
    assert "atypical" in short.warnings[0].message
    day = validate_plan(
        make_plan(start=start, end=start + timedelta(hours=24)), now=NOW, costs=costs
    )
    assert day.warnings == ()


def test_24_hours_are_measured_in_real_time_across_dst() -> None:
    # 2030-03-31: Malta skips 02:00-03:00, so 00:00 -> next day 00:30 is 23.5 real hours.
    start, end = datetime(2030, 3, 31, 0, 0), datetime(2030, 4, 1, 0, 30)
    assert _problems(make_plan(start=start, end=end), field="end") == [("end", "warning")]


@pytest.mark.parametrize(
    ("wall", "kind"),
    [
        (datetime(2030, 3, 31, 2, 30), "nonexistent"),
        (datetime(2030, 3, 31, 1, 59), "ok"),
        (datetime(2030, 3, 31, 3, 0), "ok"),
        (datetime(2030, 10, 27, 2, 30), "ambiguous"),
        (datetime(2030, 10, 27, 1, 59), "ok"),
        (datetime(2030, 10, 27, 3, 0), "ok"),
    ],
)
def test_local_time_kinds_follow_the_zone(wall: datetime, kind: str) -> None:
    assert local_time_kind(wall, MALTA) == kind


def test_dst_gap_and_overlap_are_errors_naming_the_zone() -> None:
    plan = make_plan(start=datetime(2030, 3, 31, 2, 30), end=datetime(2030, 10, 27, 2, 30))
    errors = validate_plan(plan, now=NOW).errors
    assert [(p.field, "gap" in p.message, "twice" in p.message) for p in errors] == [
        ("start", True, False),
        ("end", False, True),
    ]
    assert all("Europe/Malta" in str(p.limit) for p in errors)


def test_other_zone_other_dates() -> None:
    ny = ZoneInfo("America/New_York")
    assert local_time_kind(datetime(2030, 3, 10, 2, 30), ny) == "nonexistent"
    assert local_time_kind(datetime(2030, 11, 3, 1, 30), ny) == "ambiguous"
    assert instant(datetime(2030, 1, 1, 12, 0), ny) == datetime(2030, 1, 1, 17, 0, tzinfo=UTC)


def test_unknown_zone_and_aware_dates() -> None:
    assert _problems(make_plan(time_zone="Mars/Olympus"), field="time_zone") == [
        ("time_zone", "error")
    ]
    aware = datetime(2030, 3, 1, 10, 0, tzinfo=MALTA)
    assert _problems(make_plan(start=aware), field="start") == [("start", "error")]


def test_bet_must_be_an_available_feature_cost(costs: pd.DataFrame) -> None:
    plan = make_plan(currencies={"EUR": CurrencyLine(bet=Decimal("0.20"), players=10)})
    errors = validate_plan(plan, now=NOW, costs=costs).errors
    assert len(errors) == 1
    assert errors[0].field == "currencies.EUR.bet"
    assert Decimal("20.00") in errors[0].limit and Decimal("40.00") in errors[0].limit
    assert "base bet × multiplier" in errors[0].message


def test_bet_is_checked_for_every_game(costs: pd.DataFrame) -> None:
    plan = make_plan(game_ids=("golden-pharaoh", "neon-fruits", "viking-raid"))
    problems = validate_plan(plan, now=NOW, costs=costs).errors
    fields = [(p.field, p.limit if isinstance(p.limit, str) else "list") for p in problems]
    # EUR 20.00 is a golden-pharaoh cost only; viking-raid has no KWD at all
    assert ("currencies.KWD.bet", "viking-raid in KWD") in fields
    eur = [p.message for p in problems if p.field == "currencies.EUR.bet"]
    assert len(eur) == 2
    assert "neon-fruits" in eur[0] and "viking-raid" in eur[1]


def test_without_costs_the_bet_check_is_a_warning() -> None:
    validation = validate_plan(make_plan(), now=NOW)
    assert validation.ok
    assert [p.field for p in validation.warnings] == ["currencies"]


def test_currency_rules() -> None:
    plan = make_plan(
        currencies={
            "JPY": CurrencyLine(bet=Decimal("1.5"), players=1),
            "XYZ": CurrencyLine(bet=Decimal("1"), players=1),
            "EUR": CurrencyLine(bet=Decimal("0"), players=0, player_ids=("a", "a", "")),
        },
        reporting_currency=None,
        exchange_rates={},
    )
    fields = {p.field: p for p in validate_plan(plan, now=NOW).errors}
    assert fields["currencies.JPY.bet"].limit == "0 decimals"
    assert "currencies.XYZ" in fields
    assert fields["currencies.EUR.bet"].limit == "> 0"
    assert fields["currencies.EUR.players"].limit == ">= 1"
    assert "currencies.EUR.player_ids" in fields  # 3 ids for 0 players
    assert fields["currencies.EUR.player_ids[1]"].message == "is listed twice"
    assert "currencies.EUR.player_ids[2]" in fields


def test_exchange_rates_rules() -> None:
    missing = make_plan(exchange_rates={"JPY": Decimal("0.0061")})
    assert _problems(missing, field="exchange_rates.KWD") == [("exchange_rates.KWD", "error")]
    negative = make_plan(exchange_rates={"JPY": Decimal("-1"), "KWD": Decimal("3")})
    assert _problems(negative, field="exchange_rates.JPY") == [("exchange_rates.JPY", "error")]
    orphan = make_plan(reporting_currency=None)
    assert _problems(orphan, field="reporting_currency") == [("reporting_currency", "error")]


def test_every_problem_is_reported_at_once() -> None:
    plan = make_plan(
        name="",
        bet_number=0,
        campaign_type="JACKPOT",
        game_ids=(),
        time_zone="Nowhere/City",
        rules_url="u" * 3000,
    )
    validation = validate_plan(plan, now=NOW)
    fields = {p.field for p in validation.errors}
    assert {"name", "bet_number", "campaign_type", "game_ids", "time_zone", "rules_url"} <= fields
    frame = validation.to_frame()
    assert list(frame.columns) == ["severity", "field", "value", "limit", "message"]
    assert len(frame) == len(validation.problems)


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        validate_plan(make_plan(), now=datetime(2030, 1, 1))
