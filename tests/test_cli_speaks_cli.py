"""The CLI speaks CLI (issue 11, item 9): options not Python arguments, currencies the
CLI takes, the lost actions of the analyser, empty inputs, plain JSON values, negative
players refused, and every exit code documented."""

from __future__ import annotations

import csv
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gptools.campaigns import budget, load_plan
from gptools.cli import _main, cli
from gptools.deliverylog import analyze
from gptools.sandbox import RunningSandbox

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_LOG = ROOT / "data" / "sample_delivery_log.jsonl"
MESSY = ROOT / "data" / "players_messy.csv"
PLAN = ROOT / "data" / "example_plan.yaml"
#: What a Python argument looks like in a message: ``name=...``, ``brand=ID``, ``client.x(``.
PYTHON_FORMS = re.compile(r"\b[a-z_]+=(\.\.\.|ID\b|\{| one of|\))|client\.[a-z_]+\(")


@pytest.fixture
def runner(cli_runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPTOOLS_JOURNAL_DIR", str(tmp_path / "journals"))
    return cli_runner


def _run(runner: CliRunner, *args: str) -> Result:
    return runner.invoke(cli, list(args))


def _no_python(text: str) -> None:
    assert PYTHON_FORMS.search(text) is None, text


def test_the_pattern_catches_python_forms() -> None:
    for text in (
        "pass format= one of jsonl",
        "Pass brand=ID or use client.brand(ID)",
        "name it with column=...",
        "e.g. exponents={'XBT': 8}",
        "(pass costs=)",
    ):
        assert PYTHON_FORMS.search(text), text


def test_format_is_named_as_the_option(runner: CliRunner) -> None:
    result = _run(runner, "webhooks", "analyze", "deliveries.xyz")
    assert result.exit_code == 2
    assert "--format" in result.stderr
    _no_python(result.stderr)


def test_brand_is_named_as_the_option(runner: CliRunner, tmp_path: Path) -> None:
    result = _run(
        runner, "participants", "load", str(MESSY), "--campaign", "CMP-000001", "--no-progress"
    )
    assert result.exit_code == 2
    assert "BRAND_REQUIRED" in result.stderr and "--brand" in result.stderr
    _no_python(result.stderr)


def test_column_and_encoding_are_named_as_options(runner: CliRunner, tmp_path: Path) -> None:
    two = tmp_path / "two.csv"
    two.write_text("handle,name\nu-1,A\n", encoding="utf-8")
    result = _run(
        runner,
        "participants",
        "load",
        str(two),
        "--campaign",
        "CMP-000001",
        "--brand",
        "201",
        "--no-progress",
    )
    assert result.exit_code == 2 and "--column" in result.stderr
    _no_python(result.stderr)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"playerId\nab\x81c\n" + b"p-1\n" * 20)
    result = _run(
        runner,
        "participants",
        "load",
        str(latin),
        "--campaign",
        "CMP-000001",
        "--brand",
        "201",
        "--no-progress",
    )
    assert result.exit_code == 2 and "--encoding" in result.stderr
    _no_python(result.stderr)


def test_offline_plan_names_the_option(runner: CliRunner) -> None:
    result = _run(
        runner, "campaigns", "plan", str(PLAN), "--offline", "--now", "2029-12-01T00:00:00+00:00"
    )
    assert result.exit_code == 0, result.output
    assert "--offline" in result.stdout
    _no_python(result.stdout)


def test_unknown_plan_currency_names_no_python_argument(runner: CliRunner, tmp_path: Path) -> None:
    text = PLAN.read_text(encoding="utf-8").replace("KWD: {bet", "XBT: {bet")
    plan = tmp_path / "xbt.yaml"
    plan.write_text(text, encoding="utf-8")
    result = _run(
        runner,
        "campaigns",
        "plan",
        str(plan),
        "--offline",
        "--json",
        "--now",
        "2029-12-01T00:00:00+00:00",
    )
    assert result.exit_code == 2
    messages = [p["message"] for p in json.loads(result.stdout)["problems"]]
    assert any("ISO 4217 codes only" in m for m in messages), messages
    _no_python(" ".join(messages))


def test_currency_codes_are_upper_cased(runner: CliRunner) -> None:
    result = _run(
        runner,
        "costs",
        "preview",
        "--game",
        "neon-fruits",
        "--currency",
        "eur",
        "--currency",
        "kwd",
        "--brand",
        "201",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["currencies"] == ["EUR", "KWD"]
    assert {row["currency"] for row in document["rows"]} == {"EUR", "KWD"}


@pytest.mark.parametrize(
    ("code", "suggestion"), [("XBT", "such as EUR, USD"), ("EUT", "did you mean"), ("kwdd", "KWD")]
)
def test_unknown_currency_suggests_codes_the_cli_takes(
    runner: CliRunner, code: str, suggestion: str
) -> None:
    result = _run(
        runner, "costs", "preview", "--game", "neon-fruits", "--currency", code, "--brand", "201"
    )
    assert result.exit_code == 2
    assert f"--currency {code}" in result.stderr and suggestion in result.stderr
    assert "exponents" not in result.stderr
    _no_python(result.stderr)


def test_analyze_lists_the_lost_actions(runner: CliRunner, tmp_path: Path) -> None:
    with analyze(SAMPLE_LOG) as analysis:
        expected = list(analysis.lost_actions()["action_id"])
    assert expected, "the sample log has lost actions"
    out = tmp_path / "lost.csv"
    result = _run(runner, "webhooks", "analyze", str(SAMPLE_LOG), "--json", "--lost-out", str(out))
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert [a["action_id"] for a in document["lost"]] == expected
    first = document["lost"][0]
    for key in ("round_id", "player_id", "game_id", "currency_code", "bet", "event_ts"):
        assert first[key], key
    assert first["event_ts"].endswith("Z")
    with out.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["action_id"] for r in rows] == expected
    assert rows[0] == {k: str(v) for k, v in first.items()}
    human = _run(runner, "webhooks", "analyze", str(SAMPLE_LOG))
    assert f"Lost actions to ask the provider to replay ({len(expected):,})" in human.stdout
    assert expected[0] in human.stdout


def test_empty_log_says_so(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    result = _run(runner, "webhooks", "analyze", "empty.jsonl", "--json")
    assert result.exit_code == 0
    assert "warning: empty.jsonl holds no deliveries" in result.stderr
    document = json.loads(result.stdout)
    assert document["lost"] == [] and any("no deliveries" in w for w in document["warnings"])


@pytest.mark.parametrize("content", [b"", b"playerId\n"])
def test_empty_player_file_says_so(
    runner: CliRunner, fresh_sandbox: RunningSandbox, tmp_path: Path, content: bytes
) -> None:
    (tmp_path / "players.csv").write_bytes(content)
    result = _run(
        runner,
        "participants",
        "load",
        "players.csv",
        "--campaign",
        "CMP-000001",
        "--brand",
        "201",
        "--no-progress",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    assert "warning: players.csv holds no player rows" in result.stderr
    document = json.loads(result.stdout)
    assert document["rows"] == 0 and document["rejects_file"] is None
    assert not (tmp_path / "players.rejects.csv").exists()
    assert fresh_sandbox.state.requests == []


def test_json_values_carry_no_stray_quotes(
    runner: CliRunner, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    from tests.participants.conftest import make_client, new_campaign

    with make_client(fresh_sandbox) as client:
        campaign = new_campaign(client)
    result = _run(
        runner,
        "participants",
        "load",
        str(MESSY),
        "--campaign",
        campaign,
        "--brand",
        "201",
        "--no-progress",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    details = json.loads(result.stdout)["source_details"]
    assert details["delimiter"] == ","
    assert not any(v.startswith("'") for v in details.values())


def test_planner_refuses_negative_players(runner: CliRunner, tmp_path: Path) -> None:
    text = PLAN.read_text(encoding="utf-8").replace("players: 500", "players: -5")
    negative = tmp_path / "negative.yaml"
    negative.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="cannot be negative"):
        budget(load_plan(negative))
    result = _run(
        runner,
        "campaigns",
        "plan",
        str(negative),
        "--offline",
        "--json",
        "--now",
        "2029-12-01T00:00:00+00:00",
    )
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert document["budget"] is None
    assert any(p["field"] == "currencies.EUR.players" for p in document["problems"])


def _exit_codes_in_readme() -> set[int]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    table = section.split("Exit codes", 1)[1]
    return {int(n) for n in re.findall(r"^\| `(\d+)` \|", table, re.MULTILINE)}


def test_every_exit_code_is_in_the_readme() -> None:
    # 0 (success) is click's own exit; the others are the constants of cli/_main.py.
    codes = {0} | {v for k, v in vars(_main).items() if k.startswith("EXIT_")}
    assert codes == {0, 1, 2, 3, 4, 130}
    assert _exit_codes_in_readme() == codes


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize("command", [["sandbox", "serve"], ["webhooks", "serve", "--auth", "none"]])
def test_port_in_use_exits_3_before_any_start_up_line(
    runner: CliRunner, taken_port: int, command: list[str]
) -> None:
    result = _run(runner, *command, "--port", str(taken_port))
    assert result.exit_code == _main.EXIT_ADDRESS_IN_USE
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"127.0.0.1:{taken_port}" in lines[0] and "--port" in lines[0]
