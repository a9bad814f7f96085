"""Export the delivery log from a store to JSONL or Parquet (docs/design.md's record shape).

JSONL: one object per line with ``received_at`` (ISO 8601 UTC, ``Z``, microseconds),
``status``, ``latency_ms``, then ``payload`` (the body parsed, when it is a JSON object in
strict JSON) or ``body`` (the raw text otherwise), then ``action_id``, ``duplicate``,
``auth_ok``, ``error`` and ``remote_addr``. Strict means what every JSON reader reads
alike: no ``NaN``/``Infinity``, no repeated key, no lone surrogate (``"\ud800"``), no
number of more than ``EXPORT_MAX_NUMBER_DIGITS`` digits written out, nesting within
``spec.JSON_MAX_DEPTH``; a body whose bet is ``-0`` stays text too (a reader's parser would
drop the sign). Whatever a stranger sent, each row is exported, once. A summary row
(``status`` 0) is exported like any other: its ``payload`` holds the ``suppressed`` count.
Numbers in a payload keep their exact digits; a body with a number a double would not
read back exactly (more than 15 significant digits) stays text too.

Parquet: the same columns with ``body`` always the raw text (a payload's shape varies
too much for one column type); ``received_at`` is a UTC timestamp column.

The file is written under a temporary name beside ``out`` and renamed to ``out`` only once
complete (``_private_files.private_replacement``): a failed export leaves nothing under the
name, and moves no mark.

An export with a ``target`` name is incremental: it writes the rows received since that
target's last export, up to ``settle`` ago (a row is committed up to about a second after
its ``received_at``; the margin makes sure none arrives behind the mark), then records
the new mark in the store. A store whose ``export_target`` names it never purges a row
beyond that mark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Literal

from gptools import spec
from gptools._json_depth import exceeds_json_depth
from gptools._private_files import PRIVATE_FILE_MODE, check_output, private_replacement
from gptools.errors import import_extra
from gptools.models import dumps_wire
from gptools.webhooks._constants import (
    EXPORT_MAX_NUMBER_DIGITS,
    EXPORT_SETTLE,
    PARQUET_CHUNK_ROWS,
)
from gptools.webhooks._records import format_utc
from gptools.webhooks._schema import LOG_COLUMNS
from gptools.webhooks._store import Store

ExportFormat = Literal["jsonl", "parquet"]
_NEGATIVE_ZERO_BET = re.compile(spec.BET_NEGATIVE_ZERO_PATTERN)
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Significant digits every decimal number keeps through a double (C's DBL_DIG).
_DOUBLE_DIGITS = 15
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


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
    parsed = strict_object(row["body"])
    if parsed is not None:
        out["payload"] = parsed
    else:
        out["body"] = row["body"]
    for name in ("action_id", "duplicate", "auth_ok", "error", "remote_addr"):
        out[name] = row[name]
    return out


def strict_object(body: str) -> dict[str, Any] | None:
    """``body`` parsed, when it is one JSON object in strict JSON (the module docstring),
    numbers as exact Decimals; else None (it is exported as its text)."""
    # A body nested past the limit (a stranger's refused prefix) is never parsed, and one
    # whose bet is -0 stays text: a reader's JSON parser would drop the sign.
    if exceeds_json_depth(body) or _NEGATIVE_ZERO_BET.search(body):
        return None
    try:
        parsed = json.loads(
            body,
            parse_float=Decimal,
            parse_int=_exact_int,
            parse_constant=_not_strict,
            object_pairs_hook=_unique_keys,
        )
    except ValueError:  # not JSON, NaN, a repeated key, an integer Python refuses
        return None
    if not isinstance(parsed, dict) or not _plain(parsed):
        return None
    return parsed


def _exact_int(text: str) -> int | Decimal:
    return Decimal(text) if text == "-0" else int(text)  # an int would lose the sign


def _not_strict(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a repeated key: readers disagree on which value counts")
    return found


def _plain(value: Any) -> bool:
    """Whether every string of ``value`` is whole Unicode (no lone surrogate) and every
    number short enough to write out and to read back exactly: a JSON reader may read a
    payload's number through a double (DuckDB's does), so a fraction of more than
    :data:`_DOUBLE_DIGITS` digits or an integer past int64 stays in the body's text, which
    the analyser reads digit for digit (depth is bounded: checked before parsing)."""
    if isinstance(value, str):
        return not _SURROGATE.search(value)
    if isinstance(value, Decimal):
        return (
            value.is_finite()
            and abs(value.adjusted()) <= EXPORT_MAX_NUMBER_DIGITS
            and len(value.as_tuple().digits) <= _DOUBLE_DIGITS
        )
    if isinstance(value, int) and not isinstance(value, bool):
        return _INT64_MIN <= value <= _INT64_MAX
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return True


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
        # Under its name only once whole and synced; the mark moves only after that.
        with private_replacement(path, file_mode=file_mode) as fh:
            count = _write_jsonl(rows, fh) if format == "jsonl" else _write_parquet(rows, fh)
        if target is not None and through is not None:
            conn.set_export_mark(target, through)
    finally:
        conn.close()
    return ExportResult(path, format, count, after, through)


def _write_jsonl(rows: Iterable[dict[str, Any]], sink: IO[bytes]) -> int:
    written = 0
    for line in iter_jsonl_lines(rows):
        sink.write(line + b"\n")
        written += 1
    return written


def _write_parquet(
    rows: Iterable[dict[str, Any]], sink: IO[bytes], *, chunk: int = PARQUET_CHUNK_ROWS
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
    with pq.ParquetWriter(sink, schema) as writer:
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
