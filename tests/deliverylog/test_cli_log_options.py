"""``campaigns results`` reads a log with the options ``webhooks analyze`` reads it with:
the same option set, and ``--force`` and ``--max-line-bytes`` reach the reader."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from click.testing import CliRunner

from gptools.cli import cli
from tests.deliverylog.campaign_logs import CampaignLog
from tests.test_cli_bad_values import command_at

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_PLAN = ROOT / "data" / "example_plan.yaml"
#: The parameters through which a command says how to read the log.
READING = {"fmt", "table", "engine", "spark_master", "force", "max_line_bytes", "columns",
           "latency_unit"}  # fmt: skip
JUNK_LINES = 3
LIMIT = 4096


def test_both_commands_read_a_log_with_the_same_options() -> None:
    for path in (("webhooks", "analyze"), ("campaigns", "results")):
        names = {p.name for p in command_at(path).params}
        assert names >= READING, path


def test_force_and_max_line_bytes_reach_the_reader(cli_runner: CliRunner, tmp_path: Path) -> None:
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
    plain = log.write(tmp_path / "plain.jsonl")
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"a,b,c\n" * JUNK_LINES + plain.read_bytes())
    log.records[0]["pad"] = "x" * LIMIT
    long = log.write(tmp_path / "long.jsonl")

    def results(*args: str, command: tuple[str, str] = ("campaigns", "results")) -> tuple[int, str]:
        run = cli_runner.invoke(cli, [*command, *args, "--json"])
        return run.exit_code, run.stdout

    code, out = results(str(junk))
    message = json.loads(out)["error"]["message"]
    assert code == 2
    assert message.startswith(
        f"{junk}: does not look like a JSONL delivery log ({JUNK_LINES} of its first "
        f"{JUNK_LINES + 1} lines are not JSON objects); "
    )
    # The very refusal the analyser's command gives.
    assert results(str(junk), command=("webhooks", "analyze")) == (code, out)
    code, out = results(str(junk), "--force")
    assert code == 0 and json.loads(out)["attributed"] == 1
    code, out = results(str(long))
    assert code == 0 and json.loads(out)["attributed"] == 1
    # Over the limit, the one play is a malformed line: no action, nothing attributed.
    code, out = results(str(long), "--max-line-bytes", str(LIMIT))
    assert code == 0 and json.loads(out)["attributed"] == 0
