"""``gptools costs preview`` against the sandbox, following the CLI contract."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.sandbox import FaultRule, RunningSandbox


def test_preview_json_is_one_document_with_exact_costs(cli_runner: CliRunner) -> None:
    preview = ["costs", "preview", "--game", "neon-fruits", "--currency", "EUR", "--currency",
               "KWD", "--brand", "201", "--json"]  # fmt: skip
    result = cli_runner.invoke(cli, preview)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    # The document's recommended source is the default: costs only, exact digits.
    assert doc["source"] == "awarded-feature-configurations"
    costs = {(r["currency"], r["feature_cost"]) for r in doc["rows"]}
    assert {("EUR", "11.33"), ("KWD", "3.775")} <= costs
    result = cli_runner.invoke(cli, [*preview, "--source", "game"])
    doc = json.loads(result.stdout)
    assert doc["source"] == "game"
    breakdown = {(r["currency"], r["base_bet"]): r["feature_cost"] for r in doc["rows"]}
    assert breakdown[("EUR", "0.15")] == "11.33"
    assert breakdown[("KWD", "0.050")] == "3.775"


def test_preview_human_output_and_configurations_source(cli_runner: CliRunner) -> None:
    result = cli_runner.invoke(
        cli, ["costs", "preview", "--game", "wild-safari", "--currency", "JPY", "--brand", "201"]
    )
    assert result.exit_code == 0, result.output
    assert "wild-safari" in result.stdout and "16000" in result.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--game", "neon-fruits", "--currency", "EUR"], 2, "name one with --brand"),
        (["--game", "neon-fruits", "--currency", "XYZ", "--brand", "201"], 2, "--currency XYZ"),
        (["--game", "no-such-game", "--currency", "EUR", "--brand", "201"], 2, "no-such-game"),
        (["--game", "neon-fruits", "--currency", "EUR", "--brand", "901"], 2, "BRAND_NOT_ALLOWED"),
    ],
)
def test_bad_input_exits_2_with_a_message(
    cli_runner: CliRunner, args: list[str], code: int, message: str
) -> None:
    result = cli_runner.invoke(cli, ["costs", "preview", *args, "--json"])
    assert result.exit_code == code, result.output
    assert message in result.output
    # One document on stdout, on failure too: the error (issue 23, item 14).
    assert json.loads(result.stdout)["error"]["exit"] == code
    assert "Traceback" not in result.output


def test_a_wrong_address_fails_fast_and_says_so(unreachable: Any) -> None:
    unreachable(["costs", "preview", "--game", "neon-fruits", "--currency", "EUR", "--json"])


def test_max_retries_and_timeout_before_the_subcommand_reach_the_client(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox
) -> None:
    args = [
        "costs",
        "preview",
        "--game",
        "neon-fruits",
        "--currency",
        "EUR",
        "--brand",
        "201",
        "--json",
    ]
    fresh_sandbox.faults.add(FaultRule("other", status=503, count=1))
    failed = cli_runner.invoke(cli, ["--max-retries", "0", *args])
    assert failed.exit_code == 1 and "HTTP 503" in failed.stderr
    fresh_sandbox.faults.add(FaultRule("other", status=503, count=1))
    again = cli_runner.invoke(cli, args)
    assert again.exit_code == 0, again.output  # the default retries get through
    fresh_sandbox.faults.add(FaultRule("other", latency_s=1.0, count=1))
    slow = cli_runner.invoke(cli, ["--max-retries", "0", "--timeout", "5,0.2", *args])
    assert slow.exit_code == 1 and "ReadTimeout" in slow.stderr
    bad = cli_runner.invoke(cli, ["--timeout", "soon", *args])
    assert bad.exit_code == 2 and "--timeout must be seconds or connect,read" in bad.stderr
