"""``gptools campaigns plan|apply FILE`` against the sandbox, following the CLI contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.sandbox import RunningSandbox

EXAMPLE = str(Path(__file__).resolve().parents[2] / "data" / "example_plan.yaml")
NOW = "2029-12-01T12:00:00+00:00"


def test_plan_json_reports_budget_and_requests(cli_runner: CliRunner) -> None:
    result = cli_runner.invoke(cli, ["campaigns", "plan", EXAMPLE, "--now", NOW, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] and doc["bets_checked"] and doc["problems"] == []
    assert doc["budget"]["total"] == "139300.00"
    assert [r["currency"] for r in doc["requests"]] == ["EUR", "JPY", "KWD"]
    assert all(len(r["requestId"]) == 36 for r in doc["requests"])
    assert doc["requests"][2]["body"]["bet"] == "10.000"


def test_plan_with_errors_exits_2_with_the_document(cli_runner: CliRunner, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        Path(EXAMPLE)
        .read_text()
        .replace('bet: "20.00"', 'bet: "0.20"')
        .replace("bet_number: 10", "bet_number: 1501")
    )
    result = cli_runner.invoke(cli, ["campaigns", "plan", str(bad), "--now", NOW, "--json"])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert not doc["ok"] and doc["requests"] == []
    assert {p["field"] for p in doc["problems"]} == {"bet_number", "currencies.EUR.bet"}


def test_apply_twice_gives_the_same_campaigns(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox
) -> None:
    args = ["campaigns", "apply", EXAMPLE, "--now", NOW, "--json"]
    first = cli_runner.invoke(cli, args)
    assert first.exit_code == 0, first.output
    second = cli_runner.invoke(cli, args)
    assert second.exit_code == 0, second.output
    ids = [[c["campaignId"] for c in json.loads(r.stdout)["campaigns"]] for r in (first, second)]
    assert ids[0] == ids[1] and len(set(ids[0])) == 3
    assert len(fresh_sandbox.state.campaigns) == 3
    # Issue 35 item 4: the plan's players are loaded (3 EUR, 2 JPY, none for KWD) and a
    # re-run says which campaigns already existed and sends nothing again.
    firsts, seconds = (json.loads(r.stdout)["campaigns"] for r in (first, second))
    assert [c["status"] for c in firsts] == ["created"] * 3
    assert [c["status"] for c in seconds] == ["existed"] * 3
    assert [c["participants"] and c["participants"]["loaded"] for c in firsts] == [3, 2, None]
    assert [c["participants"] and c["participants"]["loaded_this_run"] for c in seconds] == [
        0, 0, None,
    ]  # fmt: skip
    assert sorted(fresh_sandbox.state.participants(ids[0][0])) == [
        "p-eur-0001", "p-eur-0002", "p-eur-0003",
    ]  # fmt: skip
    human = cli_runner.invoke(cli, ["campaigns", "apply", EXAMPLE, "--now", NOW])
    assert f"EUR: campaign {ids[0][0]} already existed" in human.stdout
    assert "players loaded 3 (0 this run)" in human.stdout


def test_apply_without_participants_loads_none(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox
) -> None:
    args = ["campaigns", "apply", EXAMPLE, "--now", NOW, "--json", "--no-participants"]
    result = cli_runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert [c["participants"] for c in json.loads(result.stdout)["campaigns"]] == [None] * 3
    assert not [r for r in fresh_sandbox.state.requests if "/participant" in r.path]
    listed = json.loads(cli_runner.invoke(cli, ["campaigns", "list", "--json"]).stdout)
    assert [c["participants"]["loaded"] for c in listed["campaigns"]] == [0, 0, 0]


def test_apply_adds_participants_through_the_batch_endpoint(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox
) -> None:
    result = cli_runner.invoke(
        cli,
        [
            "campaigns",
            "apply",
            EXAMPLE,
            "--now",
            NOW,
            "--json",
            "--endpoint",
            "batch",
        ],
    )
    assert result.exit_code == 0, result.output
    loads = [c["participants"] for c in json.loads(result.stdout)["campaigns"]]
    posts = [r.path for r in fresh_sandbox.state.requests if "/participant" in r.path]
    assert len(posts) == sum(1 for p in loads if p and p["loaded"]) == 2
    assert all(p.endswith("/participant/batch") for p in posts)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", "/nonexistent.yaml"], "cannot read"),
        (["plan", EXAMPLE, "--now", "yesterday"], "not an ISO 8601"),
        (["plan", EXAMPLE, "--now", "2030-01-01T00:00:00"], "needs an offset"),
        (["apply", EXAMPLE, "--now", "2031-01-01T00:00:00+00:00"], "start in the future"),
        (["apply", EXAMPLE, "--now", NOW, "--brand", "901"], "BRAND_NOT_ALLOWED"),
    ],
)
def test_bad_input_exits_2(cli_runner: CliRunner, args: list[str], message: str) -> None:
    result = cli_runner.invoke(cli, ["campaigns", *args, "--json"])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["plan", "apply"])
def test_a_wrong_address_fails_fast_and_says_so(unreachable: Any, command: str) -> None:
    unreachable(["campaigns", command, EXAMPLE, "--now", NOW, "--json"])


def test_an_unknown_game_is_one_problem_among_the_others(
    cli_runner: CliRunner, tmp_path: Path
) -> None:
    """Issue 23, item 15: GAME_NOT_FOUND for one game no longer hides every other problem."""
    past = tmp_path / "past.yaml"
    past.write_text(
        Path(EXAMPLE)
        .read_text()
        .replace("game_ids: [golden-pharaoh]", "game_ids: [golden-pharaoh, no-such-game]")
        .replace("bet_number: 10", "bet_number: 1501")
    )
    result = cli_runner.invoke(cli, ["campaigns", "plan", str(past), "--now", NOW, "--json"])
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    fields = {(p["field"], str(p["value"])) for p in doc["problems"] if p["severity"] == "error"}
    assert fields == {("game_ids", "no-such-game"), ("bet_number", "1501")}
    assert doc["bets_checked"] and doc["requests"] == []
    human = cli_runner.invoke(cli, ["campaigns", "plan", str(past), "--now", NOW])
    assert "no-such-game" in human.stdout and "GAME_NOT_FOUND" in human.stdout
    assert "bet_number" in human.stdout
