"""Choosing the engine: :func:`open_log` opens a source on DuckDB or Spark from one
:class:`LogOptions`, for :func:`analyze <._analysis.analyze>`, :func:`campaign_results
<._results.campaign_results>` and, through them, the command line. The one place that
knows both readers (:mod:`._readers`, :mod:`._readers_spark`), so an option cannot reach
one engine and miss the other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gptools.deliverylog._contract import (
    DEFAULT_MAPPING,
    BaseDeliveryLog,
    ColumnMapping,
    DeliveryLogError,
    LogFormat,
)
from gptools.deliverylog._files import DEFAULT_MAX_LINE_BYTES
from gptools.deliverylog._readers import DEFAULT_MEMORY_LIMIT, read_delivery_log

#: The engines a log opens on.
ENGINES = ("duckdb", "spark")


@dataclass(frozen=True, slots=True, kw_only=True)
class LogOptions:
    """How to open a log, whichever engine reads it.

    Both engines: ``format`` (``auto`` picks by first bytes, else by name), ``mapping``
    (a foreign log's columns), ``max_line_bytes`` (a longer JSONL line is a
    ``malformed_line``), ``force`` (read a JSONL file that does not look like a delivery
    log) and ``temp_directory`` (DuckDB spills there; both engines' stand-in files, such
    as a copy without over-long lines, go there). DuckDB only: ``table`` (a store's
    table), ``memory_limit`` and ``threads``. Spark only: the ``spark`` session, else one
    for ``spark_master``.
    """

    format: LogFormat = "auto"
    mapping: ColumnMapping = DEFAULT_MAPPING
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    force: bool = False
    temp_directory: str | Path | None = None
    table: str = "delivery_log"
    memory_limit: str = DEFAULT_MEMORY_LIMIT
    threads: int | None = None
    spark: Any = None
    spark_master: str | None = None


def open_log(
    source: str | Path | BaseDeliveryLog,
    engine: str = "duckdb",
    options: LogOptions | None = None,
) -> BaseDeliveryLog:
    """``source`` opened on ``engine`` (one of :data:`ENGINES`) with ``options`` (default:
    :class:`LogOptions`'s); a log already open is returned as it is. An unknown engine is
    a :class:`DeliveryLogError`."""
    if engine not in ENGINES:
        raise DeliveryLogError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if isinstance(source, BaseDeliveryLog):
        return source
    o = options if options is not None else LogOptions()
    if engine == "spark":
        # PySpark is an optional extra: imported only when asked for.
        from gptools.deliverylog._readers_spark import read_delivery_log_spark

        return read_delivery_log_spark(
            source, format=o.format, mapping=o.mapping, spark=o.spark, master=o.spark_master,
            max_line_bytes=o.max_line_bytes, force=o.force, temp_directory=o.temp_directory,
        )  # fmt: skip
    return read_delivery_log(
        source, format=o.format, mapping=o.mapping, table=o.table, memory_limit=o.memory_limit,
        threads=o.threads, temp_directory=o.temp_directory, max_line_bytes=o.max_line_bytes,
        force=o.force,
    )  # fmt: skip
