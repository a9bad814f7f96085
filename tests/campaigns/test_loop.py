"""The campaign loop on one source of truth, from the command line alone (issue 35): the
register is the record of who was loaded (pruning journals changes no number), every entry
names its server (a reset sandbox's CMP-000001 is another campaign), `sandbox play` makes
the campaigns run and its truth equals the results, and a failed load leaves nothing
pending."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gptools.campaigns import CampaignRegister
from gptools.cli import cli
from gptools.sandbox import RunningSandbox
from gptools.webhooks import ReceiverAuth, WebhookReceiver
from tests.deliverylog.campaign_logs import MALTA, CampaignLog
from tests.webhooks.conftest import ThreadServer, serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "data" / "example_plan.yaml")
MESSY = str(ROOT / "data" / "players_messy.csv")
SAMPLE_LOG = str(ROOT / "data" / "sample_delivery_log.jsonl")
NOW = "2029-12-01T12:00:00+00:00"
#: After the example plan's window (March 2030, Europe/Malta): every play is done.
AFTER = "2030-04-01T00:00:00Z"


def _run(runner: CliRunner, *args: str) -> Result:
    return runner.invoke(cli, list(args))


def _json(runner: CliRunner, *args: str) -> Any:
    result = _run(runner, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[ThreadServer, str]]:
    """A webhook receiver (no auth) on a SQLite store; its server and the store's URL."""
    store = f"sqlite:///{tmp_path / 'webhooks.sqlite3'}"
    with serve_in_thread(WebhookReceiver(store, auth=ReceiverAuth.none())) as server:
        yield server, store


def _applied_and_loaded(runner: CliRunner) -> dict[str, str]:
    """Apply the example plan (its player_ids loaded) and load the messy list into EUR;
    currency -> campaign id."""
    applied = _json(runner, "campaigns", "apply", EXAMPLE, "--now", NOW)
    ids = {c["currency"]: c["campaignId"] for c in applied["campaigns"]}
    loaded = _run(runner, "participants", "load", MESSY, "--campaign", ids["EUR"],
                  "--brand", "201", "--no-progress")  # fmt: skip
    assert loaded.exit_code == 0, loaded.output
    return ids


def _log(path: Path, eur: str) -> str:
    """A JSONL log of four EUR plays in the example plan's window: one by a player of the
    plan (loaded by apply), three by players of the messy list (loaded by a load)."""
    log = CampaignLog(5)
    start = datetime(2030, 3, 1, 10, 0, tzinfo=MALTA)
    feat = {"game": "golden-pharaoh", "currency": "EUR", "bet": "20.00"}
    for day, player in enumerate(("p-eur-0001", "p-100001", "p-100003", "p-100003"), start=2):
        log.event(eur, player=player, at=start.replace(day=day), **feat)
    return str(log.write(path))


def _by_id(doc: dict[str, Any], key: str = "campaigns") -> dict[str, Any]:
    return {c.get("campaignId") or c["campaign_id"]: c for c in doc[key]}


def test_the_loop_runs_from_the_command_line_with_exact_results(
    cli_runner: CliRunner, receiver: tuple[ThreadServer, str], tmp_path: Path
) -> None:
    """Plan -> apply with players -> load -> play -> deliver -> results -> list/show: the
    results are not zero and equal the truth `sandbox play` wrote."""
    server, store = receiver
    ids = _applied_and_loaded(cli_runner)
    truth_file = tmp_path / "truth.json"
    played = _json(cli_runner, "sandbox", "play", "--url", server.url, "--now", AFTER,
                   "--seed", "3", "--truth", str(truth_file))  # fmt: skip
    truth = {c["campaignId"]: c for c in json.loads(truth_file.read_text())["campaigns"]}
    assert played["delivered"] == played["events"] > 0
    results = _json(cli_runner, "campaigns", "results", store)
    assert results["attributed"] == results["actions"] == played["events"]
    for cid, entry in _by_id(results).items():
        t = truth[cid]
        assert (entry["assigned"], entry["reached"], entry["completed"], entry["rounds_used"]) == (
            t["participants"], t["reached"], t["completed"], t["roundsUsed"]
        )  # fmt: skip
    eur = _by_id(results)[ids["EUR"]]
    assert eur["assigned"] == 23 and eur["reached"] > 0  # 3 from the plan, 20 from the file
    listed = _by_id(_json(cli_runner, "campaigns", "list"))
    assert listed[ids["EUR"]]["participants"] == {"loaded": 23, "rejected": 7, "pending": 0}
    # Item 12: the notebooks' table is the same count, by the same library function.
    server = _json(cli_runner, "campaigns", "list")["server"]
    frame = CampaignRegister().frame(server=server).set_index("campaign_id")
    assert {cid: frame.loc[cid, ["loaded", "rejected", "pending"]].tolist() for cid in listed} == {
        cid: list(c["participants"].values()) for cid, c in listed.items()
    }
    shown = _run(cli_runner, "campaigns", "show", ids["EUR"])
    assert "budget: 100000.00 EUR" in shown.stdout


def test_play_moves_on_a_clock_and_a_replay_changes_nothing(
    cli_runner: CliRunner, receiver: tuple[ThreadServer, str], tmp_path: Path
) -> None:
    server, store = receiver
    ids = _applied_and_loaded(cli_runner)
    eur = ["--campaign", ids["EUR"], "--url", server.url, "--seed", "3"]
    # The first ten days of the window (it opens 2030-03-01 09:00 UTC), then the rest.
    early = _json(cli_runner, "sandbox", "play", *eur, "--now", "2030-03-01T00:00:00Z",
                  "--days", "10", "--truth", str(tmp_path / "early.json"))  # fmt: skip
    first = _json(cli_runner, "campaigns", "results", store, "--campaign", ids["EUR"])
    late = _json(cli_runner, "sandbox", "play", *eur, "--now", "2030-03-11T00:00:00Z",
                 "--days", "30", "--truth", str(tmp_path / "all.json"))  # fmt: skip
    both = _json(cli_runner, "campaigns", "results", store, "--campaign", ids["EUR"])
    (truth_early,) = json.loads((tmp_path / "early.json").read_text())["campaigns"]
    (truth_all,) = json.loads((tmp_path / "all.json").read_text())["campaigns"]
    assert 0 < early["events"] < early["events"] + late["events"]
    assert (
        first["actions"] == early["events"] and both["actions"] == early["events"] + late["events"]
    )
    assert _by_id(first)[ids["EUR"]]["rounds_used"] == truth_early["roundsUsed"]
    assert _by_id(both)[ids["EUR"]]["rounds_used"] == truth_all["roundsUsed"]
    assert truth_early["roundsUsed"] < truth_all["roundsUsed"]
    # Everything before the end again: the same actionIds, stored once, no number moves.
    again = _json(cli_runner, "sandbox", "play", *eur, "--now", AFTER, "--truth",
                  str(tmp_path / "all.json"), "--force")  # fmt: skip
    assert again["events"] == early["events"] + late["events"]
    assert _json(cli_runner, "campaigns", "results", store, "--campaign", ids["EUR"]) == both
    refused = _run(cli_runner, "sandbox", "play", *eur, "--truth", str(tmp_path / "all.json"))
    assert refused.exit_code == 2 and "--force" in refused.stderr


def test_a_log_that_misses_every_window_says_so_in_one_line(cli_runner: CliRunner) -> None:
    _json(cli_runner, "campaigns", "apply", EXAMPLE, "--now", NOW)
    result = _run(cli_runner, "campaigns", "results", SAMPLE_LOG)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines() == [
        "the log's events (2026-03-02 00:00 – 2026-03-09 00:03 UTC) and the campaigns' "
        "windows (2030-03-01 09:00 – 2030-03-31 20:00 UTC) do not overlap in time: no event "
        "can be a campaign's (another log, or the campaigns of another server?)"
    ]
    doc = _json(cli_runner, "campaigns", "results", SAMPLE_LOG)
    assert doc["apart_in_time"] == result.stdout.strip() and doc["attributed"] == 0


def test_pruning_journals_changes_no_number(cli_runner: CliRunner, tmp_path: Path) -> None:
    ids = _applied_and_loaded(cli_runner)
    log = _log(tmp_path / "log.jsonl", ids["EUR"])
    before = (_json(cli_runner, "campaigns", "results", log),
              _json(cli_runner, "campaigns", "list", "--now", AFTER))  # fmt: skip
    journals = Path(_json(cli_runner, "participants", "status")["journals"][0]["path"]).parent
    files = list(journals.glob("participants-*.sqlite"))
    assert files  # the messy list's load, and apply's (EUR and JPY)
    pruned = _json(cli_runner, "participants", "journals", "--prune")
    assert len(pruned["pruned"]) == len(files) and not list(journals.glob("*.sqlite"))
    after = (_json(cli_runner, "campaigns", "results", log),
             _json(cli_runner, "campaigns", "list", "--now", AFTER))  # fmt: skip
    assert after == before
    eur = _by_id(before[0])[ids["EUR"]]
    assert (before[0]["attributed"], eur["assigned"], eur["reached"]) == (4, 23, 3)


def test_the_same_campaign_id_on_two_servers_is_two_campaigns(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    first_server = fresh_sandbox.identity
    _json(cli_runner, "campaigns", "apply", EXAMPLE, "--now", NOW)
    fresh_sandbox.reset()  # a new state: the same ids, other campaigns
    ids = {
        c["currency"]: c["campaignId"]
        for c in _json(cli_runner, "campaigns", "apply", EXAMPLE, "--now", NOW)["campaigns"]
    }
    assert ids["EUR"] == "CMP-000001" and fresh_sandbox.identity != first_server
    log = _log(tmp_path / "log.jsonl", ids["EUR"])

    results = _json(cli_runner, "campaigns", "results", log)
    assert results["server"] == fresh_sandbox.identity and results["attributed"] == 1
    assert _by_id(results)["CMP-000001"]["assigned"] == 3
    listed = _json(cli_runner, "campaigns", "list")
    assert listed["server"] == fresh_sandbox.identity
    assert {c["server"] for c in listed["campaigns"]} == {fresh_sandbox.identity}
    assert len(listed["campaigns"]) == 3
    human = _run(cli_runner, "campaigns", "list", "--all-servers").stdout
    assert human.count("CMP-000001") == 2 and first_server in human
    old = _json(cli_runner, "campaigns", "results", log, "--server", first_server)
    assert old["server"] == first_server and len(old["campaigns"]) == 3
    mixed = _run(cli_runner, "campaigns", "results", log, "--all-servers")
    assert mixed.exit_code == 2 and "given twice" not in mixed.stderr
    assert "CMP-000001 on " in mixed.stderr and "--server" in mixed.stderr


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        (["--campaign", "CMP-00001", "--brand", "201"], "CMP-00001"),
        (["--campaign", "CMP-000001"], "--brand"),
    ],
    ids=["mistyped-campaign", "missing-brand"],
)
def test_a_load_that_reached_nothing_leaves_nothing_pending(
    cli_runner: CliRunner, fresh_sandbox: RunningSandbox, mistake: list[str], message: str
) -> None:
    ids = {
        c["currency"]: c["campaignId"]
        for c in _json(cli_runner, "campaigns", "apply", EXAMPLE, "--now", NOW)["campaigns"]
    }
    before = _json(cli_runner, "campaigns", "list")
    journals_before = _json(cli_runner, "participants", "status")["journals"]
    failed = _run(cli_runner, "participants", "load", MESSY, *mistake, "--no-progress")
    assert failed.exit_code == 2 and message in failed.stderr
    assert _json(cli_runner, "participants", "status")["journals"] == journals_before
    assert _json(cli_runner, "campaigns", "list") == before
    assert _by_id(before)[ids["EUR"]]["participants"] == {"loaded": 3, "rejected": 0, "pending": 0}
    # Done right, the same file loads: nothing of the failed run is in the way.
    right = _json(cli_runner, "participants", "load", MESSY, "--campaign", ids["EUR"],
                  "--brand", "201", "--no-progress")  # fmt: skip
    assert right["loaded"] == 20 and not right["resumed"]


def test_play_refuses_a_real_provider(
    cli_runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GP_BASE_URL", "https://provider.example.invalid")
    result = _run(cli_runner, "sandbox", "play", "--url", "http://127.0.0.1:9/x", "--now", AFTER)
    assert result.exit_code == 2, result.output
    assert "https://provider.example.invalid, which is not a sandbox" in result.stderr
