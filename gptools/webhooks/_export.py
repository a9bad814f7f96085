"""Export the delivery log from a store to JSONL or Parquet (docs/design.md's record shape).

JSONL: one object per line with ``received_at`` (ISO 8601 UTC, ``Z``, microseconds),
``status``, ``latency_ms``, then ``payload`` (the body parsed, when it is a JSON object) or
``body`` (the raw text otherwise, and for a body nested deeper than
``spec.JSON_MAX_DEPTH`` or whose bet is ``-0``), then ``action_id``,
``duplicate``, ``auth_ok``, ``error`` and ``remote_addr``. A summary row (``status`` 0)
is exported like any other: its ``payload`` holds the ``suppressed`` count. Numbers in a
payload keep their exact digits.

Parquet: the same columns with ``body`` always the raw text (a payload's shape varies
too much for one column type); ``received_at`` is a UTC timestamp column.

An export with a ``target`` name is incremental: it writes the rows received since that
target's last export, up to ``settle`` ago (a row is committed up to about a second after
its ``received_at``; the margin makes sure none arrives behind the mark), then records
the new mark in the store. A store whose ``export_target`` names it never purges a row
beyond that mark.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from gptools import spec
from gptools._json_depth import exceeds_json_depth
from gptools._private_files import PRIVATE_FILE_MODE, check_output, create_private, open_private
from gptools.errors import import_extra
from gptools.models import dumps_wire, loads_wire
from gptools.webhooks._constants import EXPORT_SETTLE, PARQUET_CHUNK_ROWS
from gptools.webhooks._records import format_utc
from gptools.webhooks._schema import LOG_COLUMNS
from gptools.webhooks._store import Store

ExportFormat = Literal["jsonl", "parquet"]
_NEGATIVE_ZERO_BET = re.compile(spec.BET_NEGATIVE_ZERO_PATTERN)


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What an export wrote: the file, its format and the number of records (and, for an
    incremental export, the ``received_at`` range after ``after`` up to ``through``)."""

    path: Path
    format: ExportFormat
    records: int
    after: datetime | None = None
    through: datetime | None = None


def log_record(row: dict[str, Any]) -> dict[str, Any]:
    """One ``delivery_log`` row (as :meth:`StoreConnection.iter_log` yields it) as its
    JSONL object."""
    out: dict[str, Any] = {
        "received_at": format_utc(row["received_at"]),
        "status": row["status"],
        "latency_ms": row["latency_ms"],
    }
    body = row["body"]
    parsed = None
    # A body nested past the limit (a stranger's refused prefix) is never parsed, and one
    # whose bet is -0 stays text: a reader's JSON parser would drop the sign.
    if not exceeds_json_depth(body) and not _NEGATIVE_ZERO_BET.search(body):
        try:
            parsed = loads_wire(body)
        except ValueError:
            parsed = None
    if isinstance(parsed, dict):
        out["payload"] = parsed
    else:
        out["body"] = row["body"]
    for name in ("action_id", "duplicate", "auth_ok", "error", "remote_addr"):
        out[name] = row[name]
    return out


def iter_jsonl_lines(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """The JSONL lines (without newline) of ``rows``, Decimal digits kept."""
    for row in rows:
        record = log_record(row)
        # dumps_wire refuses floats (money must not be one); a latency is a measurement,
        # written from the float's shortest repr.
        record["latency_ms"] = Decimal(repr(float(record["latency_ms"])))
        yield dumps_wire(record)


def export_log(
    store: Store,
    out: str | Path,
    *,
    format: ExportFormat,
    target: str | None = None,
    now: datetime | None = None,
    settle: timedelta = EXPORT_SETTLE,
    file_mode: int = PRIVATE_FILE_MODE,
) -> ExportResult:
    """Write ``store``'s delivery log to ``out`` as ``jsonl`` or ``parquet``.

    A new file is created with ``file_mode`` (owner-only by default, under the umask): the
    log holds every delivery's body; give ``0o640`` to share it with a group.

    With ``target``, only the rows that target has not exported yet, up to ``settle``
    before ``now``; once the file is on disk, the target's mark moves up to there.
    """
    if format not in ("jsonl", "parquet"):
        raise ValueError(f"unknown export format {format!r}: use jsonl or parquet")
    path = check_output(out, force=True)  # never written through a symbolic link
    conn = store.connect()
    try:
        after = through = None
        if target is not None:
            after = conn.export_mark(target)
            through = (now or datetime.now(UTC)) - settle
            if after is not None and through < after:
                through = after  # a clock set back: never move the mark backwards
        rows = conn.iter_log(after=after, through=through)
        if format == "jsonl":
            count = 0
            with open_private(path, "wb", file_mode=file_mode) as fh:
                for line in iter_jsonl_lines(rows):
                    fh.write(line + b"\n")
                    count += 1
                if target is not None:
                    fh.flush()
                    os.fsync(fh.fileno())
        else:
            count = _write_parquet(rows, create_private(path, file_mode=file_mode))
            if target is not None:
                with path.open("rb") as fh:
                    os.fsync(fh.fileno())
        if target is not None and through is not None:
            conn.set_export_mark(target, through)
    finally:
        conn.close()
    return ExportResult(path, format, count, after, through)


def _write_parquet(
    rows: Iterable[dict[str, Any]], path: Path, *, chunk: int = PARQUET_CHUNK_ROWS
) -> int:
    pa = import_extra("pyarrow", "analysis", "Parquet export")
    pq = import_extra("pyarrow.parquet", "analysis", "Parquet export")

    schema = pa.schema(
        [
            ("received_at", pa.timestamp("us", tz="UTC")),
            ("status", pa.int32()),
            ("latency_ms", pa.float64()),
            ("body", pa.string()),
            ("action_id", pa.string()),
            ("duplicate", pa.bool_()),
            ("auth_ok", pa.bool_()),
            ("error", pa.string()),
            ("remote_addr", pa.string()),
        ]
    )
    assert tuple(schema.names) == LOG_COLUMNS
    count = 0
    with pq.ParquetWriter(path, schema) as writer:
        buffer: list[dict[str, Any]] = []
        for row in rows:
            buffer.append(row)
            if len(buffer) >= chunk:
                writer.write_table(pa.Table.from_pylist(buffer, schema=schema))
                count += len(buffer)
                buffer = []
        if buffer or count == 0:
            writer.write_table(pa.Table.from_pylist(buffer, schema=schema))
            count += len(buffer)
    return count
