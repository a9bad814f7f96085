"""``--json`` always prints exactly one JSON document, on failure too (issue 23, item 14):
``{"error": {"code": ..., "message": ..., "exit": N}}``; and the console script's last
resort turns an unexpected exception into one line and exit 1 (item 12)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gptools.cli import cli, main
from gptools.cli._main import ENV_TRACEBACK
from tests.test_cli_bad_values import command_at, commands

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "data" / "example_plan.yaml"


def _json_commands() -> list[tuple[str, ...]]:
    return [
        path for path in commands(cli) if any(p.name == "as_json" for p in command_at(path).params)
    ]


@pytest.mark.parametrize("path", _json_commands(), ids=" ".join)
def test_a_usage_error_with_json_is_one_error_document(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*path, "--no-such-option", "--json"])
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["error"]["exit"] == 2
    assert document["error"]["code"] == "usage_error"
    assert "--no-such-option" in document["error"]["message"]
    assert "--no-such-option" in result.stderr  # the human line still goes to stderr


def test_a_failure_with_json_names_the_exit_code(tmp_path: Path) -> None:
    # A store that does not exist is bad input (the README's exit 2).
    store = f"sqlite:///{tmp_path / 'no-such-folder' / 'w.sqlite3'}"
    result = CliRunner().invoke(cli, ["webhooks", "dead-letters", "--store", store, "--json"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert (error["code"], error["exit"]) == ("bad_input", 2)
    assert error["message"].startswith(f"no store at {store} ")


def test_an_io_failure_is_exit_1(tmp_path: Path) -> None:
    # The README's exit 1: I/O failed (here a folder cannot be made under a regular file,
    # whoever runs the test, root too), the file and the system's reason in one line.
    store = f"sqlite:///{tmp_path / 'w.sqlite3'}"
    assert CliRunner().invoke(cli, ["webhooks", "migrate", "--store", store]).exit_code == 0
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    out = blocker / "out.jsonl"
    args = ["webhooks", "export", "--store", store, "--format", "jsonl", str(out), "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert (error["code"], error["exit"]) == ("failure", 1)
    assert error["message"].startswith("export failed: ") and "Not a directory" in error["message"]


def test_an_os_error_no_command_expected_is_an_io_failure(tmp_path: Path) -> None:
    # Whatever command meets an OSError it does not handle itself: exit 1, code io_error,
    # the file and the system's reason (the root group's rule, the same for every command).
    from gptools.cli._main import _Root

    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")

    @click.group(cls=_Root)
    def root() -> None:
        """A root group under the CLI's contract."""

    @root.command()
    @click.option("--json", "as_json", is_flag=True)
    def make(as_json: bool) -> None:
        """Make a folder where none can be."""
        (blocker / "folder").mkdir()

    result = CliRunner().invoke(root, ["make", "--json"])
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert (error["code"], error["exit"]) == ("io_error", 1)
    assert error["message"] == f"{blocker / 'folder'}: Not a directory"


def test_a_bad_brand_with_json_is_one_document() -> None:
    result = CliRunner().invoke(
        cli, ["campaigns", "plan", str(PLAN), "--offline", "--brand", "2147483648", "--json"]
    )
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert "int32" in error["message"] and error["exit"] == 2


def test_a_plan_with_errors_prints_its_document_only(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(PLAN.read_text(encoding="utf-8").replace("bet_number: 10", "bet_number: 1501"))
    result = CliRunner().invoke(
        cli, ["campaigns", "plan", str(bad), "--offline", "--now", "2029-12-01T00:00:00Z", "--json"]
    )
    assert result.exit_code == 2
    document = json.loads(result.stdout)  # one document: the plan's, no error after it
    assert document["ok"] is False and "error" not in document


@pytest.fixture
def broken_command() -> Iterator[list[str]]:
    @click.command("broken-for-test")
    @click.option("--json", "as_json", is_flag=True)
    def broken(as_json: bool) -> None:
        raise RuntimeError("a bug")

    cli.add_command(broken)
    yield ["broken-for-test"]
    del cli.commands["broken-for-test"]


def test_tests_see_an_unexpected_exception_as_it_is(broken_command: list[str]) -> None:
    result = CliRunner().invoke(cli, broken_command)
    assert isinstance(result.exception, RuntimeError)


def test_the_console_script_turns_it_into_one_line_and_exit_1(
    broken_command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_TRACEBACK, raising=False)
    with pytest.raises(SystemExit) as stopped:
        main([*broken_command, "--json"])
    assert stopped.value.code == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["error"] == {
        "code": "internal_error",
        "message": "unexpected RuntimeError: a bug",
        "exit": 1,
    }
    assert err.count("\n") == 1 and "unexpected RuntimeError: a bug" in err
    assert "Traceback" not in err and ENV_TRACEBACK in err


def test_the_traceback_is_shown_on_request(
    broken_command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_TRACEBACK, "1")
    with pytest.raises(RuntimeError, match="a bug"):
        main(broken_command)
