"""``gptools webhooks analyze LOG``: the delivery-log analyser's summary."""

from __future__ import annotations

from pathlib import Path

import click

from gptools.cli._common import parse_now
from gptools.cli._main import cli_text, emit, fail, say, webhooks
from gptools.cli._outputs import check_output_option, write_csv_output
from gptools.cli._params import column_mapping_options, mapping_fields, max_line_bytes_option
from gptools.errors import MissingExtraError

#: What a replay request to the provider needs of each lost action.
_LOST_SHOWN = 20


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
    help="Judge pending actions at this time (ISO 8601 with an offset or Z for UTC); "
    "default: the log's last received_at.",
)
@click.option(
    "--table", default="delivery_log", show_default=True, help="Store table (SQLite/PostgreSQL)."
)
@click.option(
    "--engine",
    # Checked by the analyser (its ENGINES), for the same reason as --format.
    default="duckdb",
    show_default=True,
    help="Where the metrics run: duckdb on this machine, or spark (the [spark] extra).",
)
@click.option(
    "--spark-master",
    envvar="GP_SPARK_MASTER",
    default=None,
    help="Spark master URL for --engine spark [env GP_SPARK_MASTER; default local[*]].",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Fail on a line that is not a JSON object (torn, truncated, binary), naming it; "
    "by default it counts as an invalid delivery (malformed_line).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Analyse a JSONL file even when its first 1,000 lines are mostly not JSON objects "
    "(refused by default: it does not look like a delivery log), and overwrite an existing "
    "--lost-out file (never through a symbolic link).",
)
@max_line_bytes_option
@click.option(
    "--lost-out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the lost actions (what a replay request needs) to this CSV file (a new "
    "one: an existing file only with --force).",
)
@click.option(
    "--known",
    "known",
    multiple=True,
    metavar="KIND=VALUE[,VALUE...]",
    help="Values of the payload's open fields that are no news (repeat per kind: "
    "event_type, currency, game); the report's 'new in this log' lists the others. "
    "Default per kind: the document's (event types COIN and FEATURE; no currency, no game).",
)
@column_mapping_options
def analyze_command(
    log: str, as_json: bool, fmt: str, now: str | None, table: str, engine: str,
    spark_master: str | None, strict: bool, force: bool, max_line_bytes: int | None,
    lost_out: Path | None, known: tuple[str, ...], columns: tuple[tuple[str, str], ...],
    latency_unit: str,
) -> None:  # fmt: skip
    """Analyse a webhook delivery log: duplicates, retries, backoff, lost and pending
    actions, latency, silent periods. Lists the lost actions to ask the provider to replay.

    LOG is a JSONL (plain, gzip or zstd) or Parquet file, a glob ('logs/*.jsonl') or a
    directory of them (date=YYYY-MM-DD/ partitions included), a SQLite store (path or
    sqlite:///PATH) or a PostgreSQL URL (postgresql://USER@HOST/DB?schema=NAME).
    A log written by another system is read through --column FIELD=NAME.
    """
    moment = parse_now(now)
    known_values = _known_values(known)
    fields = mapping_fields(columns, latency_unit)
    check_output_option("--lost-out", lost_out, force=force)
    from gptools.deliverylog import (
        DEFAULT_MAX_LINE_BYTES,
        LOST_COLUMNS,
        ColumnMapping,
        DeliveryLogError,
        analyze,
    )

    if max_line_bytes is None:
        max_line_bytes = DEFAULT_MAX_LINE_BYTES

    try:
        with analyze(
            log, format=fmt, table=table, now=moment, strict=strict,  # type: ignore[arg-type]
            engine=engine, spark_master=spark_master, force=force,
            max_line_bytes=max_line_bytes, mapping=ColumnMapping(**fields),  # type: ignore[arg-type]
        ) as analysis:  # fmt: skip
            report = analysis.report
            lost = analysis.lost_records()
            new = analysis.new_in_log(known_values)
    except MissingExtraError as exc:  # an ImportError too, but not the user's input
        fail(str(exc))
    except (DeliveryLogError, ImportError) as exc:
        fail(str(exc), bad_input=not getattr(exc, "io_failed", False))
    if lost_out is not None:
        rows = ([record[k] for k in LOST_COLUMNS] for record in lost)
        write_csv_output("--lost-out", lost_out, LOST_COLUMNS, rows, force=force)
    document = report.to_dict()
    document["warnings"] = [cli_text(w) for w in document.get("warnings", [])]
    document["lost"] = lost
    document["new_in_log"] = [
        {
            "kind": str(r["kind"]),
            "value": str(r["value"]),
            "first_received_at": r["first_received_at"].isoformat(),
            "deliveries": int(r["deliveries"]),
        }
        for r in new.to_dict("records")
    ]
    if report.deliveries == 0:
        warning = f"{log} holds no deliveries: nothing to analyse"
        document["warnings"] = [*document.get("warnings", []), warning]
        say(f"warning: {warning}")

    def human() -> str:
        lines = [cli_text(str(report))]
        if lost:
            lines.append(f"Lost actions to ask the provider to replay ({len(lost):,}):")
            lines += [
                f"  {a['action_id']}  round {a['round_id']}  player {a['player_id']}  "
                f"{a['game_id']}  {a['currency_code']} {a['bet']}  at {a['event_ts']}"
                for a in lost[:_LOST_SHOWN]
            ]
            if len(lost) > _LOST_SHOWN:
                lines.append(
                    f"  ... {len(lost) - _LOST_SHOWN:,} more"
                    + ("" if lost_out else "; --lost-out FILE writes them all")
                )
        if lost_out is not None:
            lines.append(f"Wrote {len(lost):,} lost action(s) to {lost_out}")
        lines.append("New in this log (values not in the known set):")
        for kind in ("event_type", "currency", "game"):
            values = [cli_text(str(v)) for v in new.loc[new["kind"] == kind, "value"]]
            lines.append(f"  {kind}: {', '.join(values) if values else 'none'}")
        return "\n".join(lines)

    emit(document, as_json=as_json, human=human)


def _known_values(given: tuple[str, ...]) -> dict[str, list[str]] | None:
    """The ``--known`` options as the analyser's ``known`` (None: the defaults)."""
    if not given:
        return None
    out: dict[str, list[str]] = {}
    for item in given:
        kind, sep, values = item.partition("=")
        if not sep or kind not in ("event_type", "currency", "game"):
            fail(
                f"Invalid value for '--known': {item!r}: KIND=VALUE[,VALUE...] with KIND "
                "event_type, currency or game",
                bad_input=True,
            )
        out.setdefault(kind, []).extend(v for v in values.split(",") if v)
    return out
