"""No traceback, anywhere (issue 23, item 12): every subcommand, found by walking the click
command tree (a new command is covered without touching this file), gets a table of bad
values for each of its options and arguments, chosen by the parameter's type: out of range,
wrong type, empty, a missing file, a directory, an unreadable file. Each run must end with
the exit code the README's table gives it (bad input, 2, unless :data:`NOT_BAD_INPUT` says
why not) and without a traceback; an exception that escapes the command (which the
console script would turn into "unexpected ...") fails the test too.

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


def cases(files: Files) -> Iterator[tuple[str, str, str, list[str]]]:
    """Every run: the command, the parameter, the kind of bad value (:func:`kind`), and
    the arguments (that value for the parameter, valid values for the rest)."""
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
                yield " ".join(path), param.name, kind(value, files), args


def kind(value: str, files: Files) -> str:
    """A bad value's name in :data:`NOT_BAD_INPUT`: the file it names, or the value."""
    named = {
        str(files.root / "missing" / "file.csv"): "missing-file",
        str(files.directory): "folder",
        str(files.unreadable): "unreadable-file",
        str(files.empty): "empty-file",
        str(files.binary): "binary-file",
        str(files.binary / "below-a-file"): "below-a-file",
        str(files.root / "missing.sqlite3"): "missing-store",
        "": "empty",
        "x" * 5000: "5000-characters",
    }
    return named.get(value, value)


#: The bad values that are not bad input (exit 2), and the exit code the README gives
#: them: (command, parameter, kind of value) -> exit code. Any other bad value exits 2.
NOT_BAD_INPUT: dict[tuple[str, str, str], int] = {
    # Any text names a server; none of these has campaigns in the register.
    **{("campaigns list", "server", k): 0 for k in ("5000-characters", "ü\u202e", "folder")},
    # Any text is a campaign id: no journals of it.
    **{
        (f"participants {c}", "campaign_id", k): 0
        for c in ("journals", "status")
        for k in ("5000-characters", "ü\u202e", "folder")
    },
    # Journals older than 31,709 years: none.
    ("participants journals", "older_than", "999999999999"): 0,
    # A folder that does not exist, or is below a file, holds no journals.
    **{
        (f"participants {c}", "journal_dir", k): 0
        for c in ("journals", "status")
        for k in ("missing-file", "below-a-file")
    },
    # An empty folder holds no journals.
    ("participants journals", "journal_dir", "folder"): 0,
    ("participants status", "journal_dir", "folder"): 0,
    ("participants status", "journal_dir", "empty-file"): 0,
    # An empty player list: a warning, exit 0 (the README's table).
    ("participants load", "file", "empty-file"): 0,
    # Any whole number is a seed. deliver's valid --url has no server: I/O failure.
    **{("sandbox deliver", "seed", k): 1 for k in ("999999999999", "-999999999999", "-1")},
    **{
        ("sandbox play", p, k): 0
        for p in ("seed", "wallet_seed")
        for k in ("999999999999", "-999999999999", "-1")
    },
    **{("sandbox serve", "seed", k): 0 for k in ("999999999999", "-999999999999", "-1")},
    # The truth file is written, its folders made; below a file it cannot be (I/O).
    ("sandbox play", "truth", "missing-file"): 0,
    ("sandbox play", "truth", "empty-file"): 0,
    ("sandbox play", "truth", "below-a-file"): 1,
    ("sandbox play", "ledger", "below-a-file"): 1,
    ("webhooks analyze", "lost_out", "below-a-file"): 1,
    # An empty host binds every address; a name that resolves to none cannot listen.
    ("sandbox serve", "host", "empty"): 0,
    ("webhooks serve", "host", "empty"): 0,
    **{
        (f"{c} serve", "host", k): 3
        for c in ("sandbox", "webhooks")
        for k in ("5000-characters", "folder")
    },
    # --table names a database log's table and --spark-master a Spark engine's master:
    # neither is read for a JSONL log on DuckDB.
    **{
        ("webhooks analyze", p, k): 0
        for p in ("table", "spark_master")
        for k in ("empty", "5000-characters", "ü\u202e", "folder")
    },
    # Any text is a filter value that no action has (the empty one is refused).
    **{
        (c, p, k): 0
        for c in ("webhooks find", "webhooks replay")
        for p in ("action_id", "round_id", "player_id", "game_id", "currency", "event_type")
        for k in ("ü\u202e", "folder")
    },
    ("webhooks export", "target", "empty"): 0,
    # The register is read for the actions found: here none.
    ("webhooks find", "register", "below-a-file"): 0,
    # Any text names a replay; an empty one is none given (a fresh id).
    **{
        ("webhooks replay", "replay_id", k): 0
        for k in ("empty", "5000-characters", "ü\u202e", "folder")
    },
    ("webhooks replay", "handler", "empty"): 0,
    # migrate and serve create a missing store (the README's table); a folder is no
    # SQLite file (I/O).
    ("webhooks migrate", "store_url", "missing-store"): 0,
    ("webhooks serve", "store", "missing-store"): 0,
    ("webhooks migrate", "store_url", "folder"): 1,
    ("webhooks serve", "store", "folder"): 1,
    # A path is any absolute path; the spool folder is made; empty settings are unset.
    ("webhooks serve", "path", "folder"): 0,
    ("webhooks serve", "spool_dir", "folder"): 0,
    ("webhooks serve", "spool_dir", "empty"): 0,
    ("webhooks serve", "first_seen_refuse", "empty"): 0,
    ("webhooks serve", "forward", "empty"): 0,
    # Upper bounds the operator may raise (the connections are fitted to the descriptors).
    **{
        ("webhooks serve", p, "999999999999"): 0
        for p in (
            "max_body_bytes",
            "refused_rows_per_second",
            "max_batch",
            "queue_max_attempts",
            "queue_max_hung",
            "queue_batch",
            "spool_max_rows",
            "spool_max_bytes",
            "first_seen_max_values",
            "forward_max_attempts",
            "max_header_bytes",
            "max_header_fields",
            "max_connections",
        )
    },
}


def expected_exit(command: str, param: str, value_kind: str) -> int:
    """The exit code the README's table gives this bad value."""
    return NOT_BAD_INPUT.get((command, param, value_kind), 2)


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


def test_every_bad_value_ends_in_the_readme_exit_code_for_it(
    runner: CliRunner, tmp_path: Path, fresh_sandbox: RunningSandbox
) -> None:
    (tmp_path / "files").mkdir()
    files = Files(tmp_path / "files")
    applied = runner.invoke(cli, ["campaigns", "apply", str(PLAN), "--now", NOW])
    assert applied.exit_code == 0, applied.output
    problems: list[str] = []
    ran = 0
    used: set[tuple[str, str, str]] = set()
    for command, param, value_kind, args in cases(files):
        # A missing store stays missing: migrate would create it for the next command.
        (files.root / "missing.sqlite3").unlink(missing_ok=True)
        result = runner.invoke(cli, args)
        ran += 1
        expected = expected_exit(command, param, value_kind)
        used.add((command, param, value_kind))
        escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
        if escaped or "Traceback" in result.output or result.exit_code != expected:
            problems.append(
                f"gptools {' '.join(a if len(a) < 80 else a[:20] + '...' for a in args)}: "
                f"exit {result.exit_code} (expected {expected}), "
                f"{type(result.exception).__name__}: "
                f"{str(result.exception)[:200]}; output {result.output[-300:]!r}"
            )
    assert ran > 100
    assert not problems, f"{len(problems)} of {ran} runs broke the contract:\n" + "\n".join(
        problems
    )
    # Every exception of the table is a case that ran: none is stale.
    assert set(NOT_BAD_INPUT) - used == set()


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
