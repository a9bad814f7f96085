"""Progress bars only where a person watches (issue 23, item 17): a bar on a terminal or
in a notebook, a plain line now and then otherwise, ``--progress/--no-progress`` to force."""

from __future__ import annotations

import io
from pathlib import Path

from click.testing import CliRunner

from gptools._progress import PlainProgress, progress
from gptools.cli import cli
from gptools.sandbox import RunningSandbox
from tests.participants.conftest import BRAND, cli_env

ROOT = Path(__file__).resolve().parents[1]
PLAYERS = ROOT / "data" / "players_messy.csv"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_file_gets_plain_lines_not_a_bar() -> None:
    out = io.StringIO()
    reporter = progress(desc="loading into CMP-1", unit="rows", total=300, stream=out)
    assert isinstance(reporter, PlainProgress)
    with reporter:
        reporter.update(100)
    assert out.getvalue() == "loading into CMP-1: 100/300 rows (33 %)\n"


def test_plain_lines_come_every_period_and_once_at_the_end() -> None:
    now = [0.0]
    out = io.StringIO()
    reporter = PlainProgress(
        desc="reading x", unit="rows", stream=out, every=10, clock=lambda: now[0]
    )
    for _ in range(25):
        now[0] += 1
        reporter.update(1000)
    reporter.close()
    reporter.close()
    assert out.getvalue().splitlines() == [
        "reading x: 10,000 rows",
        "reading x: 20,000 rows",
        "reading x: 25,000 rows",
    ]


def test_a_terminal_gets_a_bar_and_show_forces_either_way() -> None:
    terminal = Terminal()
    with progress(desc="loading", unit="rows", total=10, stream=terminal) as bar:
        bar.update(5)
    assert "\r" in terminal.getvalue() and "5/10" in terminal.getvalue()
    log = io.StringIO()
    with progress(desc="loading", unit="rows", total=10, stream=log, show=True) as bar:
        bar.update(5)
    assert "\r" in log.getvalue()
    quiet = Terminal()
    with progress(desc="loading", unit="rows", total=10, stream=quiet, show=False) as bar:
        bar.update(5)
    assert quiet.getvalue() == ""


def test_participants_load_writes_no_bar_into_a_log(
    fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    env = {**cli_env(fresh_sandbox), "GPTOOLS_JOURNAL_DIR": str(tmp_path / "journals")}
    runner = CliRunner()
    plan = str(ROOT / "data" / "example_plan.yaml")
    applied = runner.invoke(
        cli, ["campaigns", "apply", plan, "--now", "2029-12-01T12:00:00Z"], env=env
    )
    assert applied.exit_code == 0, applied.output
    args = ["participants", "load", str(PLAYERS), "--campaign", "CMP-000001", "--brand", str(BRAND)]
    args += ["--rejects", str(tmp_path / "r.csv")]
    plain = runner.invoke(cli, args, env=env)  # CliRunner's stderr is no terminal
    assert plain.exit_code == 0, plain.output
    assert "\r" not in plain.stderr
    assert "loading into CMP-000001: " in plain.stderr
    forced = runner.invoke(
        cli, [*args, "--progress", "--journal", str(tmp_path / "j2.sqlite")], env=env
    )
    assert forced.exit_code == 0, forced.output
    assert "\r" in forced.stderr
    quiet = runner.invoke(
        cli, [*args, "--no-progress", "--journal", str(tmp_path / "j3.sqlite")], env=env
    )
    assert "loading into" not in quiet.stderr
