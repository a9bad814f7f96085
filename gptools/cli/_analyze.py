"""``gptools webhooks analyze LOG``: the delivery-log analyser's summary."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from gptools.cli._main import emit, fail, webhooks
from gptools.webhooks.analysis import DeliveryLogError, analyze
from gptools.webhooks.analysis._analysis import ENGINES
from gptools.webhooks.analysis._readers import LOG_FORMATS


def _parse_now(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--now {value!r} is not an ISO 8601 time like 2026-03-09T12:00:00Z", bad_input=True)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@webhooks.command("analyze")
@click.argument("log")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(LOG_FORMATS),
    default="auto",
    show_default=True,
    help="Log format; auto picks by file name or URL.",
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
@click.option(
    "--engine",
    type=click.Choice(ENGINES),
    default="duckdb",
    show_default=True,
    help="Where the metrics run: DuckDB on this machine, or Spark (the [spark] extra).",
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
def analyze_command(
    log: str, as_json: bool, fmt: str, now: str | None, table: str, engine: str,
    spark_master: str | None, strict: bool,
) -> None:  # fmt: skip
    """Analyse a webhook delivery log: duplicates, retries, backoff, lost and pending
    actions, latency, silent periods.

    LOG is a JSONL or Parquet file, a glob ('logs/*.jsonl') or a directory of them
    (date=YYYY-MM-DD/ partitions included), a SQLite store (path or sqlite:///PATH) or a
    PostgreSQL URL (postgresql://USER@HOST/DB?schema=NAME).
    """
    moment = _parse_now(now)
    try:
        with analyze(
            log, format=fmt, table=table, now=moment, strict=strict,  # type: ignore[arg-type]
            engine=engine, spark_master=spark_master,
        ) as analysis:  # fmt: skip
            report = analysis.report
    except (DeliveryLogError, ImportError) as exc:
        fail(str(exc), bad_input=True)
    emit(report.to_dict(), as_json=as_json, human=lambda: str(report))
