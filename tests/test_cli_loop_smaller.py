"""The smaller things seen on the way round the campaign loop (issue 35, "Smaller"): no
column of <NA> in `costs preview`, the budget with its currency in `campaigns show`, help
naming the real defaults, every option with its help, CLI words in the client's settings
errors."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from tests._support.cli import run_gptools
from tests.test_cli_bad_values import command_at, commands

PLAN = str(Path(__file__).resolve().parents[1] / "data" / "example_plan.yaml")


def test_costs_preview_shows_no_column_of_missing_values(cli_runner: CliRunner) -> None:
    args = ["costs", "preview", "--game", "neon-fruits", "--currency", "EUR", "--brand", "201"]
    plain = cli_runner.invoke(cli, args)
    assert plain.exit_code == 0, plain.output
    assert "<NA>" not in plain.stdout and "NaN" not in plain.stdout
    assert plain.stdout.split()[:3] == ["game_id", "currency", "feature_cost"]
    breakdown = cli_runner.invoke(cli, [*args, "--source", "game"])
    assert breakdown.exit_code == 0 and "<NA>" not in breakdown.stdout
    assert "price_multiplier" in breakdown.stdout.splitlines()[0]


def test_campaigns_show_names_the_budget_currency(cli_runner: CliRunner) -> None:
    applied = cli_runner.invoke(cli, ["campaigns", "apply", PLAN, "--now", "2029-12-01T00:00Z"])
    assert applied.exit_code == 0, applied.output
    for campaign, budget in (("CMP-000001", "100000.00 EUR"), ("CMP-000003", "5000.000 KWD")):
        shown = cli_runner.invoke(cli, ["campaigns", "show", campaign])
        assert f"  budget: {budget}\n" in shown.stdout


def test_journal_folder_help_names_the_real_default() -> None:
    for command in (("participants", "status"), ("participants", "journals"),
                    ("participants", "load")):  # fmt: skip
        text = " ".join(CliRunner().invoke(cli, [*command, "--help"]).output.split())
        assert "$GPTOOLS_JOURNAL_DIR, else $XDG_CACHE_HOME/gptools/journals, else " \
               "~/.cache/gptools/journals" in text, command  # fmt: skip


def test_every_option_of_every_command_has_help() -> None:
    missing = [
        f"gptools {' '.join(path)} {param.opts[0]}"
        for path in commands(cli)
        for param in command_at(path).params
        if isinstance(param, click.Option) and param.name != "help" and not param.help
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"GP_BASE_URL": "http://user:pw@127.0.0.1:9", "GP_USERNAME": "u", "GP_PASSWORD": "p"},
         "base URL must not carry credentials; set GP_USERNAME and GP_PASSWORD instead"),
        ({"GP_BASE_URL": "http://127.0.0.1:9", "GP_USERNAME": "", "GP_PASSWORD": "p"},
         "missing client settings: set GP_USERNAME (in the environment or .env)"),
    ],
    ids=["credentials-in-url", "missing-username"],
)  # fmt: skip
def test_client_settings_errors_name_variables_not_arguments(
    settings: dict[str, str], message: str, tmp_path: Path
) -> None:
    env = {**os.environ, **settings}
    done = run_gptools("costs", "preview", "--game", "g", "--currency", "EUR", env=env,
                       cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"Error: {message}"


ROOT = Path(__file__).resolve().parents[1]


def _section(path: Path, heading: str) -> str:
    return path.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_says_how_to_reach_gptools_after_make_run() -> None:
    setup = _section(ROOT / "README.md", "## Set-up: two commands")
    assert "`.venv/bin/gptools`" in setup and "`source .venv/bin/activate`" in setup


def test_the_configuration_tables_name_where_gptools_keeps_its_files() -> None:
    from gptools._register_file import ENV_REGISTER
    from gptools.participants._constants import ENV_JOURNAL_DIR
    from gptools.sandbox._persist import STATE_DIR_ENV

    for page in (ROOT / "README.md", ROOT / "docs" / "guides" / "client.md"):
        table = _section(page, "## Configuration")
        for variable in (ENV_REGISTER, ENV_JOURNAL_DIR, STATE_DIR_ENV):
            assert f"\n| `{variable}` |" in table, (page.name, variable)
