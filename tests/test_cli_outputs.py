"""Issue 35 item 8: no clobbered files. Every file a command writes where the user says
(``webhooks analyze --lost-out``, ``campaigns results --unreached-out``, ``webhooks export
OUT``, ``participants load --rejects``) refuses an existing file without ``--force``
(before any work, exit 2, the file untouched), is created owner-only, and is never
written through a symbolic link, ``--force`` or not (the link's target keeps its content
and its mode).
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner, Result

from gptools.cli import cli
from gptools.sandbox import RunningSandbox
from gptools.webhooks import open_store
from tests.deliverylog.campaign_logs import CampaignLog
from tests.participants.conftest import (
    BRAND,
    cli_env,
    make_client,
    new_campaign,
    participant_requests,
)
from tests.test_cli_bad_values import command_at, commands

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_LOG = ROOT / "data" / "sample_delivery_log.jsonl"
EXAMPLE_PLAN = ROOT / "data" / "example_plan.yaml"
#: The names of the parameters through which a command writes a file the user names.
OUTPUT_PARAMS = {"lost_out", "unreached_out", "out", "rejects"}

#: Runs the command that writes ``path`` with ``more`` options; its result.
Writer = Callable[[Path, tuple[str, ...]], Result]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _precious(path: Path, mode: int = 0o644) -> Path:
    path.write_text("precious\n", encoding="utf-8")
    path.chmod(mode)
    return path


@pytest.fixture
def lost_out(cli_runner: CliRunner) -> Writer:
    def run(path: Path, more: tuple[str, ...]) -> Result:
        args = ["webhooks", "analyze", str(SAMPLE_LOG), "--json", "--lost-out", str(path)]
        return cli_runner.invoke(cli, [*args, *more])

    return run


@pytest.fixture
def unreached_out(cli_runner: CliRunner, tmp_path: Path) -> Writer:
    applied = cli_runner.invoke(
        cli, ["campaigns", "apply", str(EXAMPLE_PLAN), "--now", "2029-12-01T12:00:00Z", "--json"]
    )
    assert applied.exit_code == 0, applied.output
    eur = next(c for c in json.loads(applied.stdout)["campaigns"] if c["currency"] == "EUR")
    log = CampaignLog(3)
    log.event(
        eur["campaignId"], player="p-eur-0001", game="golden-pharaoh", currency="EUR",
        bet="20.00", at=datetime(2030, 3, 1, 11, 0, tzinfo=ZoneInfo("Europe/Malta")),
    )  # fmt: skip
    source = log.write(tmp_path / "campaign-log.jsonl")

    def run(path: Path, more: tuple[str, ...]) -> Result:
        args = ["campaigns", "results", str(source), "--json", "--unreached-out", str(path)]
        return cli_runner.invoke(cli, [*args, *more])

    return run


@pytest.fixture
def export_out(tmp_path: Path) -> Writer:
    store = f"sqlite:///{tmp_path / 'w.sqlite3'}"
    open_store(store).connect().close()

    def run(path: Path, more: tuple[str, ...]) -> Result:
        args = ["webhooks", "export", "--store", store, "--format", "jsonl", str(path)]
        return CliRunner().invoke(cli, [*args, *more])

    return run


WRITERS = ["lost_out", "unreached_out", "export_out"]
OPTION = {"lost_out": "--lost-out", "unreached_out": "--unreached-out", "export_out": "OUT"}


@pytest.mark.parametrize("writer", WRITERS)
def test_a_new_output_is_created_owner_only(
    writer: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    run: Writer = request.getfixturevalue(writer)
    out = tmp_path / "new.jsonl"
    result = run(out, ())
    assert result.exit_code == 0, result.output
    assert out.is_file() and _mode(out) == 0o600


@pytest.mark.parametrize("writer", WRITERS)
def test_an_existing_output_is_refused_without_force(
    writer: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    run: Writer = request.getfixturevalue(writer)
    out = _precious(tmp_path / "kept.jsonl")
    result = run(out, ())
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        f"Error: {OPTION[writer]} {out} exists; --force overwrites it"
    )
    assert out.read_text(encoding="utf-8") == "precious\n"
    forced = run(out, ("--force",))
    assert forced.exit_code == 0, forced.output
    assert out.read_text(encoding="utf-8") != "precious\n"


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("force", [(), ("--force",)], ids=["plain", "force"])
def test_an_output_is_never_written_through_a_symbolic_link(
    writer: str, force: tuple[str, ...], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    run: Writer = request.getfixturevalue(writer)
    target = _precious(tmp_path / "elsewhere.txt", 0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    result = run(link, force)
    assert result.exit_code == 2, result.output
    assert "is a symbolic link; outputs are never written through one" in result.stderr
    assert target.read_text(encoding="utf-8") == "precious\n" and _mode(target) == 0o640
    # A dangling link too: nothing is created where it points.
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere.txt")
    assert run(dangling, force).exit_code == 2
    assert not (tmp_path / "nowhere.txt").exists()


# -- participants load --rejects ----------------------------------------------------------


@pytest.fixture
def env(
    fresh_sandbox: RunningSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The environment of a ``gptools participants`` command against the fresh sandbox."""
    monkeypatch.chdir(tmp_path)
    return {**cli_env(fresh_sandbox), "GPTOOLS_JOURNAL_DIR": str(tmp_path / "journals")}


@pytest.fixture
def campaign(fresh_sandbox: RunningSandbox) -> Iterator[str]:
    """A new campaign of the fresh sandbox."""
    with make_client(fresh_sandbox) as client:
        yield new_campaign(client)


def _load(env: dict[str, str], players: Path, rejects: Path, campaign: str, *more: str) -> Result:
    args = [
        "participants", "load", str(players), "--campaign", campaign, "--brand", str(BRAND),
        "--rejects", str(rejects), "--no-progress", "--json", *more,
    ]  # fmt: skip
    return CliRunner().invoke(cli, args, env=env)


def test_rejects_never_clobber_another_file(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    players = tmp_path / "players.csv"
    players.write_text("playerId\np-1\n\np-2\n", encoding="utf-8")
    # The player list itself named as the rejects file: refused, nothing sent.
    result = _load(env, players, players, campaign)
    assert result.exit_code == 2, result.output
    assert "players.csv exists and is not a rejects file" in result.stderr
    assert "--force replaces it" in result.stderr and "overwrite_rejects" not in result.stderr
    assert players.read_text(encoding="utf-8") == "playerId\np-1\n\np-2\n"
    assert participant_requests(fresh_sandbox) == []
    # A rejects file (the load's own, on a re-run) is replaced without --force.
    rejects = tmp_path / "r.csv"
    for _ in range(2):
        done = _load(env, players, rejects, campaign)
        assert done.exit_code == 0, done.output
        assert rejects.read_text(encoding="utf-8").splitlines()[1].startswith("3,,empty,")
    # Another file only with --force.
    other = _precious(tmp_path / "other.csv")
    assert _load(env, players, other, campaign).exit_code == 2
    assert other.read_text(encoding="utf-8") == "precious\n"
    assert _load(env, players, other, campaign, "--force").exit_code == 0
    assert other.read_text(encoding="utf-8").startswith("line,playerId,reason_code,reason")


def test_rejects_are_never_written_through_a_symbolic_link(
    env: dict[str, str], campaign: str, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    players = tmp_path / "players.csv"
    players.write_text("playerId\np-1\n\n", encoding="utf-8")
    target = _precious(tmp_path / "elsewhere.csv", 0o644)
    link = tmp_path / "rejects.csv"
    link.symlink_to(target)
    result = _load(env, players, link, campaign, "--force")
    assert result.exit_code == 2, result.output
    assert "is a symbolic link" in result.stderr and "nothing was sent" in result.stderr
    assert target.read_text(encoding="utf-8") == "precious\n" and _mode(target) == 0o644
    assert participant_requests(fresh_sandbox) == []


# -- every output option follows the rule -------------------------------------------------


def test_every_command_writing_a_named_file_has_force() -> None:
    writers = {
        path: {p.name for p in command_at(path).params}
        for path in commands(cli)
        if OUTPUT_PARAMS & {p.name for p in command_at(path).params if p.name}
    }
    assert set(writers) == {
        ("campaigns", "results"),
        ("participants", "load"),
        ("webhooks", "analyze"),
        ("webhooks", "export"),
    }
    assert all("force" in names for names in writers.values())
