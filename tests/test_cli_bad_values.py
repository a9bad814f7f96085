"""No traceback, anywhere (issue 23, item 12): every subcommand, found by walking the click
command tree (a new command is covered without touching this file), gets a table of bad
values for each of its options and arguments, chosen by the parameter's type: out of range,
wrong type, empty, a missing file, a directory, an unreadable file. Each run must end with
an exit code of the README's table and without a traceback; an exception that escapes the
command (which the console script would turn into "unexpected ...") fails the test too.

The other parameters of a run keep a valid value (:data:`VALID`), so each bad value reaches
the code that uses it. Serving commands run with their serving loop replaced by a return:
what is tested here is how they take their arguments, not how they serve.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.cli._params import BrandId, PositiveFinite, Share, StoreUrl
from gptools.sandbox import RunningSandbox

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "data" / "example_plan.yaml"
PLAYERS = ROOT / "data" / "players_messy.csv"
LOG = ROOT / "data" / "sample_delivery_log.jsonl"
NOW = "2029-12-01T12:00:00+00:00"

#: The exit codes of the README's table.
README_EXIT_CODES = {0, 1, 2, 3, 4, 130}


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every leaf command under ``group``."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name)


def command_at(path: tuple[str, ...]) -> click.Command:
    """The command a path names."""
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class Files:
    """The scratch files the values point at."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.small_log = root / "small.jsonl"
        with LOG.open(encoding="utf-8") as fh:
            self.small_log.write_text("".join(next(fh) for _ in range(200)), encoding="utf-8")
        self.empty = root / "empty.txt"
        self.empty.write_text("")
        self.binary = root / "binary.csv"
        self.binary.write_bytes(bytes(range(256)) * 64)
        self.unreadable = root / "unreadable.csv"
        self.unreadable.write_text("p-1\n")
        self.unreadable.chmod(0)
        self.directory = root / "a-folder"
        self.directory.mkdir()
        self.notebooks = root / "no-notebooks"
        self.notebooks.mkdir()
        self.closed_url = f"http://127.0.0.1:{_closed_port()}/v1/game-action-events"
        # The webhook store the valid --store names exists (a missing one is bad input
        # itself, which would hide the other parameters' bad values).
        from gptools.webhooks import migrate

        migrate(f"sqlite:///{root / 'w.sqlite3'}")


def valid(path: tuple[str, ...], name: str, files: Files) -> list[str] | None:
    """A valid value (as command-line words) for a parameter that needs one, or ``None``
    when it may be left out."""
    command = " ".join(path)
    by_command: dict[tuple[str, str], list[str]] = {
        ("campaigns plan", "file"): [str(PLAN), "--now", NOW],
        ("campaigns apply", "file"): [str(PLAN), "--now", NOW],
        ("participants load", "file"): [str(PLAYERS)],
        ("webhooks analyze", "log"): [str(files.small_log)],
        ("webhooks export", "out"): [str(files.root / "export.jsonl")],
        ("run-notebooks", "folder"): ["--notebooks", str(files.notebooks)],
        ("sandbox deliver", "count"): ["-n", "2"],
    }
    by_name: dict[str, list[str]] = {
        "games": ["--game", "neon-fruits"],
        "currencies": ["--currency", "EUR"],
        "campaign_id": ["--campaign", "CMP-000001"],
        "store_url": ["--store", f"sqlite:///{files.root / 'w.sqlite3'}"],
        "url": ["--url", files.closed_url],
        "auth_kind": ["--auth", "none"],
        "fmt": ["--format", "jsonl"] if command == "webhooks export" else [],
    }
    return by_command.get((command, name), by_name.get(name))


def bad_values(param: click.Parameter, files: Files) -> list[str]:
    """The bad values for a parameter, by its type."""
    kind = param.type
    if isinstance(param, click.Option) and param.is_flag:
        return []
    if isinstance(kind, (click.IntRange, BrandId)) or kind is click.INT:
        return ["999999999999", "-999999999999", "-1", "abc", ""]
    if isinstance(kind, (click.FloatRange, PositiveFinite, Share)) or kind is click.FLOAT:
        return ["nan", "inf", "-1", "abc"]
    if isinstance(kind, click.Choice):
        return ["nope", ""]
    if isinstance(kind, StoreUrl):
        # Malformed store URLs (issue 34): each is bad input, never "a bug in gptools".
        return [
            "",
            "postgresql://postgres@127.0.0.1:99999/test",
            "postgresql:///test",
            "postgresql://postgres@127.0.0.1/test?connect_timeout=soon",
            "postgresql://postgres@127.0.0.1/test?no_such_option=1",
            f"sqlite:///{files.root / 'w.sqlite3'}?log_retention_days=inf",
            f"sqlite:///{files.root / 'w.sqlite3'}?synchronous=sometimes",
            "mysql://user@127.0.0.1/test",
            str(files.root / "missing.sqlite3"),
            str(files.directory),
        ]
    if isinstance(kind, click.Path):
        return [
            str(files.root / "missing" / "file.csv"),
            str(files.directory),
            str(files.unreadable),
            str(files.empty),
            str(files.binary),
            str(files.binary / "below-a-file"),
            "",
        ]
    return ["", "x" * 5000, "ü\u202e", str(files.directory)]


def words(param: click.Parameter, value: str) -> list[str]:
    """The command-line words that give ``param`` the value."""
    if isinstance(param, click.Argument):
        return [value]
    return [param.opts[0], value]


def cases(files: Files) -> Iterator[list[str]]:
    """Every (command, arguments) to run: for each parameter and bad value, the command
    with that value and valid values for the rest."""
    for path in commands(cli):
        command = command_at(path)
        params = [p for p in command.params if p.name not in (None, "help")]
        for param in params:
            assert param.name is not None
            for value in bad_values(param, files):
                args = list(path)
                for other in params:
                    assert other.name is not None
                    if other is param:
                        args += words(param, value)
                    else:
                        args += valid(path, other.name, files) or []
                yield args


@pytest.fixture
def runner(
    cli_runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CliRunner]:
    import uvicorn

    import gptools.sandbox

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPTOOLS_SANDBOX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    monkeypatch.setattr(gptools.sandbox, "serve_forever", lambda *a, **k: None)
    yield cli_runner
    for name in ("unreadable.csv",):
        path = tmp_path / "files" / name
        if path.exists():
            path.chmod(0o600)


def test_commands_are_found_by_walking_the_tree() -> None:
    found = {" ".join(p) for p in commands(cli)}
    assert {"costs preview", "campaigns plan", "participants load", "webhooks analyze"} <= found
    assert {"sandbox deliver", "run-notebooks"} <= found


def test_every_bad_value_ends_in_one_of_the_readme_exit_codes(
    runner: CliRunner, tmp_path: Path, fresh_sandbox: RunningSandbox
) -> None:
    (tmp_path / "files").mkdir()
    files = Files(tmp_path / "files")
    applied = runner.invoke(cli, ["campaigns", "apply", str(PLAN), "--now", NOW])
    assert applied.exit_code == 0, applied.output
    problems: list[str] = []
    ran = 0
    for args in cases(files):
        result = runner.invoke(cli, args)
        ran += 1
        escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
        if escaped or "Traceback" in result.output or result.exit_code not in README_EXIT_CODES:
            problems.append(
                f"gptools {' '.join(a if len(a) < 80 else a[:20] + '...' for a in args)}: "
                f"exit {result.exit_code}, {type(result.exception).__name__}: "
                f"{str(result.exception)[:200]}; output {result.output[-300:]!r}"
            )
    assert ran > 100
    assert not problems, f"{len(problems)} of {ran} runs broke the contract:\n" + "\n".join(
        problems
    )


def test_brand_outside_int32_is_one_line_and_exit_2(runner: CliRunner) -> None:
    for args in (
        ["costs", "preview", "--game", "neon-fruits", "--currency", "EUR"],
        ["campaigns", "plan", str(PLAN), "--now", NOW],
        ["participants", "load", str(PLAYERS), "--campaign", "CMP-000001"],
    ):
        result = runner.invoke(cli, [*args, "--brand", "999999999999"])
        assert result.exit_code == 2, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "--brand" in result.stderr and "int32" in result.stderr
        assert "Traceback" not in result.output


def test_unreadable_is_really_unreadable_when_not_root(tmp_path: Path) -> None:
    # As root the chmod'ed file is readable; the "below a file" path fails for root too.
    files = Files(tmp_path)
    if os.geteuid() != 0:
        with pytest.raises(PermissionError):
            files.unreadable.read_text()
    with pytest.raises(NotADirectoryError):
        (files.binary / "below-a-file").read_text()
    files.unreadable.chmod(0o600)
