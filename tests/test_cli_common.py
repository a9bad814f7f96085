"""The CLI's shared helpers (issue 12, item 4): one ``--now`` rule in every command, the
commands grouped by capability, and commands that import only the public names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

from gptools.cli import _sandbox, _webhooks, cli

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "data" / "example_plan.yaml"
LOG = ROOT / "data" / "sample_delivery_log.jsonl"
CLI_DIR = ROOT / "gptools" / "cli"

#: Every command that takes --now, with what it needs besides.
NOW_COMMANDS = [
    ["campaigns", "plan", str(PLAN), "--offline"],
    ["campaigns", "apply", str(PLAN)],
    ["webhooks", "analyze", str(LOG)],
]


@pytest.mark.parametrize("command", NOW_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_now_without_an_offset_is_refused_the_same_way_everywhere(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--now", "2030-01-01T00:00:00"])
    assert result.exit_code == 2, result.output
    assert "needs an offset or Z for UTC" in result.stderr


@pytest.mark.parametrize("command", NOW_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_now_help_states_the_rule_everywhere(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command[:2], "--help"])
    assert result.exit_code == 0
    assert "offset or Z for UTC" in " ".join(result.stdout.split())


def test_now_in_utc_is_taken_by_the_plan_and_the_analyser() -> None:
    for command in (NOW_COMMANDS[0], NOW_COMMANDS[2]):
        result = CliRunner().invoke(cli, [*command, "--now", "2029-12-01T00:00:00Z", "--json"])
        assert result.exit_code == 0, result.output


def test_sandbox_deliver_lives_with_the_sandbox_commands() -> None:
    assert _sandbox.deliver.name == "deliver"
    assert not hasattr(_webhooks, "deliver")


def test_commands_import_public_names_only() -> None:
    for path in CLI_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
            elif isinstance(node, ast.Import):
                module = node.names[0].name
            else:
                continue
            if module.startswith("gptools.") and not module.startswith("gptools.cli"):
                assert "._" not in module, f"{path.name} imports the private {module}"
