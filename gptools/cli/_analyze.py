"""``gptools webhooks analyze LOG``: the delivery-log analyser's summary."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from gptools.cli._main import emit, fail, say, webhooks


def _parse_now(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--now {value!r} is not an ISO 8601 time like 2026-03-09T12:00:00Z", bad_input=True)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


#: What a replay request to the provider needs of each lost action.
LOST_COLUMNS = ("action_id", "round_id", "player_id", "game_id", "currency_code", "bet",
                "event_ts", "first_at", "last_at", "attempts", "last_status")
_LOST_SHOWN = 20


def _plain(value: Any) -> Any:
    if value is None or value != value:  # None, NaN, NaT
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


def _lost_records(analysis: Any) -> list[dict[str, Any]]:
    frame = analysis.lost_actions()
    return [{k: _plain(row[k]) for k in LOST_COLUMNS} for row in frame.to_dict("records")]


def _write_lost(path: Path, lost: list[dict[str, Any]]) -> None:
    try:
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=LOST_COLUMNS)
            writer.writeheader()
            writer.writerows(lost)
    except OSError as exc:
        fail(f"--lost-out {path}: cannot write: {exc.strerror or exc}")


@webhooks.command("analyze")
@click.argument("log")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    # A plain string, checked by the analyser: a Choice would import DuckDB for --help,
    # which the base install (without the [analysis] extra) does not have.
    help="Log format: jsonl, parquet, sqlite or postgres; auto picks by file name or URL.",
)
@click.option(
    "--now",
    default=None,
    help="Judge pending actions at this time (ISO 8601, UTC if no zone); "
    "default: the log's last received_at.",
)
@click.option(
    "--table", default="delivery_log", show_default=True, help="Store table (SQLite/PostgreSQL)."
)
@click.option("--lost-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the lost actions (what a replay request needs) to this CSV file.")
def analyze_command(log: str, as_json: bool, fmt: str, now: str | None, table: str,
                    lost_out: Path | None) -> None:
    """Analyse a webhook delivery log: duplicates, retries, backoff, lost and pending
    actions, latency, silent periods. Lists the lost actions to ask the provider to replay.

    LOG is a JSONL or Parquet file, a SQLite store (path or sqlite:///PATH) or a
    PostgreSQL URL (postgresql://USER@HOST/DB?schema=NAME).
    """
    moment = _parse_now(now)
    from gptools.webhooks.analysis import DeliveryLogError, analyze

    try:
        with analyze(log, format=fmt, table=table, now=moment) as analysis:  # type: ignore[arg-type]
            report = analysis.report
            lost = _lost_records(analysis)
    except DeliveryLogError as exc:
        fail(str(exc), bad_input=True)
    if lost_out is not None:
        _write_lost(lost_out, lost)
    document = report.to_dict()
    document["lost"] = lost
    if report.deliveries == 0:
        warning = f"{log} holds no deliveries: nothing to analyse"
        document["warnings"] = [*document.get("warnings", []), warning]
        say(f"warning: {warning}")

    def human() -> str:
        lines = [str(report)]
        if lost:
            lines.append(f"Lost actions to ask the provider to replay ({len(lost):,}):")
            lines += [f"  {a['action_id']}  round {a['round_id']}  player {a['player_id']}  "
                      f"{a['game_id']}  {a['currency_code']} {a['bet']}  at {a['event_ts']}"
                      for a in lost[:_LOST_SHOWN]]
            if len(lost) > _LOST_SHOWN:
                lines.append(f"  ... {len(lost) - _LOST_SHOWN:,} more"
                             + ("" if lost_out else "; --lost-out FILE writes them all"))
        if lost_out is not None:
            lines.append(f"Wrote {len(lost):,} lost action(s) to {lost_out}")
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)
