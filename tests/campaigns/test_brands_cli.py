"""``gptools campaigns plan|apply`` of a 30-brand plan, and ``list/show/results --group``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.sandbox import RunningSandbox
from gptools.sandbox._faults import FaultRule

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "data" / "example_brands_plan.yaml")
GROUP = "Winter feature drop 2030"
NOW = "2029-12-01T12:00:00Z"


@pytest.fixture
def aggregator_cli(cli_runner: CliRunner, fresh_sandbox: RunningSandbox,
                   monkeypatch: pytest.MonkeyPatch) -> CliRunner:  # fmt: skip
    """The CLI on the fresh sandbox as the aggregator (PARTNER, 30 brands)."""
    acct = fresh_sandbox.accounts["aggregator"]
    monkeypatch.setenv("GP_USERNAME", acct.username)
    monkeypatch.setenv("GP_PASSWORD", acct.password)
    return cli_runner


def test_plan_of_30_brands_validates_and_budgets(aggregator_cli: CliRunner) -> None:
    result = aggregator_cli.invoke(cli, ["campaigns", "plan", EXAMPLE, "--now", NOW, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] and doc["problems"] == [] and doc["brands"] == list(range(2001, 2031))
    assert doc["budget"]["total"] == "634880.00"
    assert doc["budget"]["per_currency"] == [
        {"currency": "EUR", "brands": 30, "players": 3150, "max_exposure": "630000.00",
         "reporting_value": "630000.00"},
        {"currency": "JPY", "brands": 1, "players": 40, "max_exposure": "800000",
         "reporting_value": "4880.00"},
    ]  # fmt: skip
    assert len(doc["requests"]) == 31
    assert doc["notes"]["2012"]["show_player_expiry_time"] is True
    refused = aggregator_cli.invoke(cli, ["campaigns", "plan", EXAMPLE, "--brand", "2001"])
    assert refused.exit_code == 2
    assert "this plan names its brands itself" in refused.output


def _log(path: Path, rows: list[tuple[str, str]]) -> None:
    """A delivery log: one awarded feature played (FEATURE, EUR 20.00) per (player, day)."""
    lines = []
    for i, (player, day) in enumerate(rows):
        payload = {"roundId": f"R-{i}", "gameId": "golden-pharaoh", "playerId": player,
                   "timestamp": f"2030-03-{day}T12:00:00.000000", "bet": 20.00,
                   "currencyCode": "EUR", "events": ["FEATURE"],
                   "actionId": str(uuid.UUID(int=i + 1))}  # fmt: skip
        received = f"2030-03-{day}T12:00:01.000000Z"
        lines.append(
            json.dumps({"received_at": received, "status": 200, "latency_ms": 1.0,
                        "payload": payload})
        )  # fmt: skip
    path.write_text("\n".join(lines) + "\n")


def test_apply_twice_then_report_the_group_as_one(
    aggregator_cli: CliRunner, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    args = ["campaigns", "apply", EXAMPLE, "--now", NOW, "--json", "--no-progress"]
    first = aggregator_cli.invoke(cli, args)
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert doc["complete"] and len(doc["members"]) == 31
    assert {m["status"] for m in doc["members"]} == {"created"}
    assert doc["members"][0]["participants"]["loaded"] == 3  # brand 2001 EUR
    posts = len([r for r in fresh_sandbox.state.requests if r.method == "POST"])
    second = aggregator_cli.invoke(cli, args)
    assert second.exit_code == 0, second.output
    again = json.loads(second.stdout)["members"]
    # The same campaigns, each found again by its requestId: none created by this run.
    assert [(m["campaignId"], m["status"]) for m in again] == [
        (m["campaignId"], "existed") for m in doc["members"]
    ]
    assert {m["participants"]["loaded_this_run"] for m in again} == {0}
    assert len([r for r in fresh_sandbox.state.requests if r.method == "POST"]) == posts
    assert len(fresh_sandbox.state.campaigns) == 31

    listed = aggregator_cli.invoke(cli, ["campaigns", "list", "--group", GROUP, "--json"])
    assert listed.exit_code == 0, listed.output
    report = json.loads(listed.stdout)
    assert report["complete"] and report["failed_brands"] == report["pending_brands"] == []
    assert report["per_currency"] == [
        {"currency": "EUR", "campaigns": 30, "not_created": 0, "players_loaded": 90,
         "budget": "630000.00"},
        {"currency": "JPY", "campaigns": 1, "not_created": 0, "players_loaded": 1,
         "budget": "800000"},
    ]  # fmt: skip
    assert report["per_brand"][0] == {
        "brand": 2001, "created": 2, "failed": 0, "pending": 0, "players_loaded": 4,
        "players_rejected": 0, "players_pending": 0, "budget": "EUR 20000.00, JPY 800000",
    }  # fmt: skip
    every = json.loads(aggregator_cli.invoke(cli, ["campaigns", "list", "--json"]).stdout)
    assert every["groups"] == [GROUP] and len(every["campaigns"]) == 31
    shown = aggregator_cli.invoke(cli, ["campaigns", "show", "--group", GROUP])
    assert shown.exit_code == 0, shown.output
    assert "brand 2030 EUR: created CMP-000031  players loaded 3" in shown.output
    neither = aggregator_cli.invoke(cli, ["campaigns", "show"])
    assert neither.exit_code == 2

    log = tmp_path / "log.jsonl"
    _log(log, [("b2001-p001", "02"), ("b2001-p002", "03"), ("b2002-p001", "04"),
               ("b2002-p001", "05")])  # fmt: skip
    results = aggregator_cli.invoke(
        cli, ["campaigns", "results", str(log), "--group", GROUP, "--json"]
    )
    assert results.exit_code == 0, results.output
    funnel = json.loads(results.stdout)["group"]["funnel_by_brand"]
    assert len(funnel) == 30
    assert funnel["2001"] == {"assigned": 4, "reached": 2, "completed": 0, "rounds_used": 2,
                              "rounds_granted": 40}  # fmt: skip
    assert funnel["2002"] == {"assigned": 3, "reached": 1, "completed": 0, "rounds_used": 2,
                              "rounds_granted": 30}  # fmt: skip
    assert funnel["2003"]["reached"] == 0
    unknown = aggregator_cli.invoke(cli, ["campaigns", "list", "--group", "Nope"])
    assert unknown.exit_code == 2
    assert "no group 'Nope'" in unknown.output


def test_a_failing_brand_is_named_and_a_rerun_completes(
    aggregator_cli: CliRunner, fresh_sandbox: RunningSandbox
) -> None:
    fresh_sandbox.faults.add(
        FaultRule("POST /api/v1/brands/2005/campaign", status=400, code="VALIDATION_ERROR")
    )
    args = ["campaigns", "apply", EXAMPLE, "--now", NOW, "--json", "--no-progress"]
    first = aggregator_cli.invoke(cli, args)
    assert first.exit_code == 1
    doc = json.loads(first.stdout)
    assert doc["failed_brands"] == [2005] and not doc["complete"]
    assert sum(m["status"] == "created" for m in doc["members"]) == 30
    assert "brand 2005 EUR: " in first.stderr
    assert "30 exist" in first.stderr
    listed = json.loads(
        aggregator_cli.invoke(cli, ["campaigns", "list", "--group", GROUP, "--json"]).stdout
    )
    assert listed["failed_brands"] == [2005]
    assert listed["per_currency"][0]["not_created"] == 1
    fresh_sandbox.faults.clear()
    again = aggregator_cli.invoke(cli, args)
    assert again.exit_code == 0, again.output
    rerun = json.loads(again.stdout)
    assert rerun["complete"]
    assert [(m["brand"], m["status"]) for m in rerun["members"] if m["status"] != "existed"] == [
        (2005, "created")
    ]
    assert len(fresh_sandbox.state.campaigns) == 31
    human = aggregator_cli.invoke(cli, [*args[:-2], "--no-progress"])
    assert human.exit_code == 0, human.output
    assert "brand 2005 EUR: already existed CMP-" in human.output
