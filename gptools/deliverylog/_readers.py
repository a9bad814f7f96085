"""DuckDB's readers: every delivery-log format becomes the normalised Ibis table of
:mod:`._contract` (:data:`._contract.RAW_COLUMNS`: one row per delivery, no meaning
attached yet) on a DuckDB connection. Validation and every metric are defined on that
table in :mod:`._metrics`, so all formats and both engines share them. Spark's readers
(:mod:`._readers_spark`) are this module's sibling: neither imports the other, what both
need is in :mod:`._contract`.

Sources (``format="auto"`` picks by a file's first bytes, else by name):

- JSONL (``*.jsonl``, ``*.ndjson``, ``*.json``, gzip or zstd compressed: ``*.jsonl.gz``,
  ``*.jsonl.zst``, or any name whose first bytes say so) and Parquet (``*.parquet``, or
  any name starting with Parquet's magic bytes): one file (a path that exists is taken
  literally), a glob (``logs/*.jsonl``, ``logs/**/*.parquet``) or a directory, searched
  recursively (``date=YYYY-MM-DD/`` partitions included). JSONL carries ``payload`` (an
  object) or ``body`` (raw text), Parquet ``body`` as raw text (the receiver's export).
  DuckDB reads them out of core with its own readers. A JSONL file whose first
  :data:`._files.SNIFF_LINES` lines are mostly not JSON objects is refused unless
  ``force``; a line over ``max_line_bytes`` is ``malformed_line`` (:mod:`._files`).
- SQLite (``*.sqlite``, ``*.sqlite3``, ``*.db`` or ``sqlite:///PATH``) and PostgreSQL
  (``postgresql://...``, optional ``?schema=NAME``): the receiver's ``delivery_log`` table,
  streamed in Arrow batches into DuckDB (DuckDB's scanner extensions are not assumed to be
  installed, as they would need a download). DuckDB only.

A JSONL line that is not a JSON object (torn by a crash, truncated, binary) is a delivery
with shape ``malformed_line``; :meth:`DeliveryLog.malformed_lines` names its file and true
1-based line number. Blank lines are not deliveries.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir
import pyarrow as pa

from gptools import spec
from gptools._private_files import sqlite_read_uri
from gptools._secrets import scrub
from gptools._store_url import StoreAddress, parse_store_url
from gptools.deliverylog import _dialect_duckdb, _files
from gptools.deliverylog._contract import (
    BODY_FIELDS,
    BODY_SHAPE_OTHERWISE,
    CAMPAIGN_ID,
    DEFAULT_MAPPING,
    LOG_FORMATS,
    BaseDeliveryLog,
    ColumnMapping,
    DeliveryLogError,
    LogFormat,
    Where,
    campaign_text,
    checked_source,
    detect_format,
    latency_scale,
    nothing_known,
    readable_jsonl,
    readable_literal,
    refuse_absent_fields,
    resolve_files,
    shape_cases,
    unplaced,
)
from gptools.deliverylog._files import DEFAULT_MAX_LINE_BYTES
from gptools.errors import import_extra

#: DuckDB's memory limit by default; beyond it, DuckDB spills to its temporary directory.
#: Set deliberately: DuckDB's own default (80 % of RAM) would let one analysis take the
#: machine, and a log bigger than the limit spills instead of failing.
DEFAULT_MEMORY_LIMIT = "1GB"

_UTC = dt.Timestamp(timezone="UTC")
_BATCH_ROWS = 50_000


@dataclass(slots=True)
class DeliveryLog(BaseDeliveryLog):
    """A delivery log opened on DuckDB, not read yet (:class:`._contract.BaseDeliveryLog`;
    its Spark sibling is :class:`._readers_spark.SparkDeliveryLog`).

    ``source`` names where it came from (a path, a glob, or a URL without password);
    ``files`` the files it resolved to; ``readable`` what the engine reads for them (and
    the way back to their names). :meth:`load` materialises a table built from the
    normalised relation (:data:`._contract.RAW_COLUMNS`). Close the log (or use it as a
    context manager) to drop the connection and its spill directory.
    """

    con: Any
    source: str
    format: str
    #: Normalised relations to try in order: the fast JSONL reading, then the general one.
    candidates: list[ir.Table]
    files: list[str] = field(default_factory=list)
    mapping: ColumnMapping = field(default_factory=lambda: DEFAULT_MAPPING)
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)
    #: Makes this log's table names its own (several logs may share a Spark session).
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    readable: _files.ReadableFiles = field(default_factory=_files.ReadableFiles)
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES

    engine = "duckdb"
    dialect = _dialect_duckdb

    def execute(self, expr: ir.Expr) -> Any:
        """Run an expression on the engine: a pandas DataFrame (or a scalar)."""
        return self.con.execute(expr)

    def materialise(self, name: str, expr: ir.Table) -> ir.Table:
        """``expr`` computed once into this log's temporary table ``name``."""
        return create_temp_table(self.con, f"{name}_{self.tag}", expr)

    def load(self, name: str, build: Callable[[ir.Table], ir.Table]) -> ir.Table:
        """Scan the source once into a temporary table ``name`` holding ``build(raw)``.

        A JSONL line that is not a JSON object, a payload that is not an object, or a time
        the fast reading cannot parse defeat the fast reading; the general one (line by
        line) is used then. Any other read error becomes a :class:`DeliveryLogError` naming
        the source. Records without a usable ``received_at`` or ``status`` (malformed lines
        apart) are refused: they cannot be placed in time or classified, and dropping them
        silently would break the count identity.
        """
        # No result depends on the order rows are stored in (every listing is ordered
        # explicitly); keeping the file's order costs memory and time on millions of rows.
        self.con.raw_sql("SET preserve_insertion_order = false")
        while True:
            try:
                table = self.materialise(name, build(self.candidates[0]))
            except duckdb.OutOfMemoryException as exc:
                # Not the log's shape: the line-by-line reading would need as much again.
                error = _duckdb_error(self.source, exc)
                raise DeliveryLogError(
                    f"{error}; give the reading more memory (memory_limit=)"
                ) from None
            except duckdb.Error as exc:
                if len(self.candidates) > 1:
                    self.candidates.pop(0)
                    continue
                raise _duckdb_error(self.source, exc) from None
            break
        self._refuse_unplaced(table)
        return table

    def _refuse_unplaced(self, table: ir.Table) -> None:
        self._refuse_unplaced_count(int(self.execute(table.filter(unplaced(table)).count())))

    def places(self, where: Where, *, limit: int | None = None) -> list[str]:
        """Where the raw rows matching ``where(raw)`` are: ``FILE line N`` for JSONL,
        ``record N`` (of the log, in its order) otherwise."""
        if self.format == "jsonl":
            return [f"{f} line {n}" for f, n in self._numbered(where, limit)]
        # Record numbers follow the source only while DuckDB keeps insertion order.
        self.con.raw_sql("SET preserve_insertion_order = true")
        try:
            numbered = self.raw.mutate(_n=ibis.row_number() + 1)
            hits = numbered.filter(where(numbered)).order_by("_n").select("_n").limit(limit)
            rows = self.execute(hits)
        finally:
            self.con.raw_sql("SET preserve_insertion_order = false")
        return [f"record {int(n)}" for n in rows["_n"]]

    def _numbered(self, where: Where, limit: int | None) -> list[tuple[str, int]]:
        """(file, true line number) of the JSONL rows matching ``where``, in file order."""
        hit = self.raw.filter(where(self.raw))
        hits = self.execute(hit.group_by("source_file").aggregate(n=hit.count()))
        found: dict[str, list[int]] = {}
        self.con.raw_sql("SET preserve_insertion_order = true")
        try:
            for path in sorted(hits["source_file"]):
                # One file's rows in its own order: row numbers among its non-blank lines.
                one = _jsonl_lines(self.con, [path], self.mapping, self.max_line_bytes)
                one = one.mutate(_n=ibis.row_number() + 1)
                rows = self.execute(one.filter(where(one)).select("_n"))
                found[path] = sorted(int(n) for n in rows["_n"])
        finally:
            self.con.raw_sql("SET preserve_insertion_order = false")
        out = [
            (self.readable.name(path), line)
            for path, ks in found.items()
            for line in _true_lines(path, ks)
        ]
        return out[:limit] if limit is not None else out

    def close(self) -> None:
        """Drop the DuckDB connection and remove its spill directory."""
        self.con.disconnect()
        self.readable.cleanup()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _true_lines(path: str, rows: list[int]) -> list[int]:
    """The 1-based line numbers of the ``rows``-th non-blank lines of a text file (sorted
    ``rows``): the readers skip blank lines, a person counts them."""
    out: list[int] = []
    if not rows:
        return out
    want = iter(rows)
    target = next(want)
    seen = 0
    for number, blank in enumerate(_files.blank_lines(path), start=1):
        if blank:
            continue
        seen += 1
        while seen == target:
            out.append(number)
            target = next(want, -1)
        if target < 0:
            break
    return out


def connect_duckdb(
    *,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int | None = None,
    temp_directory: str | Path | None = None,
) -> tuple[Any, tempfile.TemporaryDirectory[str] | None]:
    """A DuckDB connection for the analyser: UTC session, bounded memory, a spill directory.

    ``memory_limit`` makes DuckDB spill to ``temp_directory`` instead of growing, so a log
    larger than memory still works; without ``temp_directory`` a fresh temporary directory
    is used (removed on close; point it at a disk with room for the log's working set,
    about the size of the log). ``threads=None`` lets DuckDB use every core.
    """
    tmp = None
    if temp_directory is None:
        tmp = tempfile.TemporaryDirectory(prefix="gptools-analysis-")
        temp_directory = tmp.name
    config: dict[str, Any] = {"memory_limit": memory_limit, "temp_directory": str(temp_directory)}
    if threads is not None:
        config["threads"] = threads
    con = ibis.duckdb.connect(**config)
    con.raw_sql("SET TimeZone = 'UTC'")
    con.raw_sql("SET enable_progress_bar = false")
    return con, tmp


def create_temp_table(con: Any, name: str, expr: ir.Table) -> ir.Table:
    """Materialise ``expr`` as the temporary table ``name``, with the column types Ibis
    gives the expression (DuckDB alone would widen sums to HUGEINT). A table left by an
    earlier, failed attempt is replaced."""
    con.raw_sql(f'DROP TABLE IF EXISTS "{name}"')
    table: ir.Table = con.create_table(name, expr, temp=True)
    return table


def read_delivery_log(
    source: str | Path,
    *,
    format: LogFormat = "auto",
    mapping: ColumnMapping = DEFAULT_MAPPING,
    table: str = "delivery_log",
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int | None = None,
    temp_directory: str | Path | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    force: bool = False,
) -> DeliveryLog:
    """Open a delivery log in any supported format as a :class:`DeliveryLog` on DuckDB.

    ``table`` names the store table (SQLite/PostgreSQL; ``SCHEMA.NAME`` allowed; a
    PostgreSQL URL may carry ``?schema=NAME`` like the receiver's store URL).
    ``memory_limit``, ``threads`` and ``temp_directory`` (where DuckDB spills) bound
    DuckDB. A JSONL line over ``max_line_bytes`` is a ``malformed_line``; ``force`` reads
    a JSONL file that does not look like a delivery log (:func:`readable_jsonl`). A file
    is only read by :meth:`DeliveryLog.load`; a store is copied into DuckDB here, in Arrow
    batches.
    """
    checked_source(source)
    fmt = detect_format(source) if format == "auto" else format
    if fmt not in LOG_FORMATS:
        raise DeliveryLogError(f"unknown format {fmt!r}; use one of {', '.join(LOG_FORMATS)}")
    files = resolve_files(source, fmt) if fmt in ("jsonl", "parquet") else []
    readable = _files.ReadableFiles()
    if fmt == "jsonl":
        readable = readable_jsonl(
            files, max_line_bytes=max_line_bytes, force=force, temp_directory=temp_directory
        )
    elif fmt == "parquet":
        readable = readable_literal(files, temp_directory)
    try:
        con, tmp = connect_duckdb(
            memory_limit=memory_limit, threads=threads, temp_directory=temp_directory
        )
    except BaseException:
        readable.cleanup()
        raise
    try:
        name = str(source)
        if fmt == "jsonl":
            candidates = _read_jsonl(con, readable.paths, mapping, name, max_line_bytes)
        elif fmt == "parquet":
            candidates = [_read_parquet(con, readable.paths, mapping, name)]
        elif fmt == "sqlite":
            raw, name = _read_sqlite(con, str(source), mapping, table)
            candidates = [raw]
        else:
            raw, name = _read_postgres(con, str(source), mapping, table)
            candidates = [raw]
    except BaseException:
        con.disconnect()
        readable.cleanup()
        if tmp is not None:
            tmp.cleanup()
        raise
    return DeliveryLog(
        con=con, source=name, format=fmt, candidates=candidates, files=files,
        mapping=mapping, _tmp=tmp, readable=readable, max_line_bytes=max_line_bytes,
    )  # fmt: skip


# --------------------------------------------------------------------------------------
# Normalisation shared by the formats
# --------------------------------------------------------------------------------------


def _normalise(
    t: ir.Table,
    mapping: ColumnMapping,
    *,
    received_at: ir.Value,
    payload: ir.Value | None,
    body: ir.Value | None,
    malformed: ir.Value | None = None,
    source_file: ir.Value | None = None,
    campaign_id: ir.Value | None = None,
) -> ir.Table:
    """Map one source relation onto the normalised relation of :mod:`._contract`
    (:data:`RAW_COLUMNS <._contract.RAW_COLUMNS>`, the typed reading's columns with
    nothing known, ``source_file``, and :data:`CAMPAIGN_ID` when ``campaign_id`` is given).

    ``payload`` is a struct of JSON fields (the fast JSONL reading) or any JSON value;
    ``body`` is raw text. A payload wins over a body when a record has both. ``malformed``
    marks a line that is not a JSON object (its every field is NULL).
    """
    body_doc = _body_fields(body) if body is not None else None
    payload_doc: ir.Value | None = None
    payload_text: ir.Value | None = None
    if payload is not None and not payload.type().is_struct():
        # A JSON value's fields are read from its text as a body's are, every number as
        # sent (extracting them from the JSON value would read numbers through a double).
        payload_text = payload.cast("string")
        payload_doc = _body_fields(payload_text)
    cases = shape_cases(
        {
            "known": None,  # DuckDB has no typed reading
            "malformed": malformed,
            "payload_not_object": (
                payload.notnull() & ~payload_text.lstrip().startswith("{")
                if payload is not None and payload_text is not None
                else None
            ),
            "payload": payload.notnull() if payload is not None else None,
            # Without a body column, a record that reaches this rule has no body.
            "no_body": body.isnull() if body is not None else ibis.literal(True),
            "body_not_json": ~_json_valid(body) if body is not None else None,
            # A valid JSON text whose first character past JSON's whitespace is a brace.
            "body_not_object": ~body.lstrip().startswith("{") if body is not None else None,
        }
    )
    fields: dict[str, ir.Value] = {}
    for f in BODY_FIELDS:
        from_body = body_doc[f] if body_doc is not None else None
        if payload is None:
            fields[f] = from_body if from_body is not None else ibis.null("json")
        else:
            value = payload[f].cast("json") if payload_doc is None else payload_doc[f]
            fields[f] = value if from_body is None else value.coalesce(from_body)
    negative_zero = ibis.literal(False)
    if body is not None:
        # Only bodies holding "-0" pay for the regular expression.
        negative_zero = ibis.ifelse(
            body.contains("-0"), body.re_search(spec.BET_NEGATIVE_ZERO_PATTERN), False
        ).fill_null(False)
    return t.select(
        received_at=received_at,
        status=t[mapping.status].cast("int64"),
        latency_ms=t[mapping.latency_ms].cast("float64") * latency_scale(mapping),
        shape=ibis.cases(*cases, else_=BODY_SHAPE_OTHERWISE),
        **fields,
        bet_negative_zero=negative_zero,
        # DuckDB has no typed reading: nothing proved, every row checked by the metrics.
        **nothing_known(_dialect_duckdb.ACTION_ID_TYPE),
        source_file=source_file if source_file is not None else ibis.null("string"),
        **({CAMPAIGN_ID: campaign_text(campaign_id)} if campaign_id is not None else {}),
    )


#: A member of the body's structure no body holds, read as a DECIMAL: asking for one
#: makes DuckDB's json_transform read every number as its own text (yyjson's raw numbers)
#: rather than through a double, so each JSON field keeps the digits it was sent with (a
#: bet of 19.99999999999999999 stays that, not 20.0).
_EXACT_NUMBERS = "gptools: numbers as sent"
_BODY_STRUCT = dt.Struct({**{f: dt.json for f in BODY_FIELDS}, _EXACT_NUMBERS: dt.Decimal(1, 0)})
#: json_transform's structure argument: every body field as JSON, numbers exact.
_BODY_STRUCTURE = (
    "{" + ",".join(f'"{f}":"JSON"' for f in BODY_FIELDS) + f',"{_EXACT_NUMBERS}":"DECIMAL(1,0)"}}'
)


def _json_valid(text: ir.Value) -> ir.Value:
    """Whether a text parses as JSON (DuckDB's parser: the one the JSONL reading uses)."""

    def json_valid(text: Any) -> bool:
        """The engine's own function; Ibis supplies the call."""
        raise NotImplementedError

    udf = ibis.udf.scalar.builtin(json_valid, signature=((dt.string,), dt.boolean))
    result: ir.Value = udf(text)
    return result


def _body_fields(body: ir.Value) -> ir.Value:
    """A raw body text's payload fields as a struct of JSON values (NULL unless the text
    is JSON), parsed once per row: the same transform the fast JSONL reading applies to a
    payload object. A body that is valid JSON but not an object gives NULL fields.
    Casting to JSON and extracting each field would parse the text once per field."""

    def json_transform(text: Any, structure: Any) -> Any:
        """The engine's own function; Ibis supplies the call."""
        raise NotImplementedError

    udf = ibis.udf.scalar.builtin(json_transform, signature=((dt.string, dt.string), _BODY_STRUCT))
    return ibis.cases(
        (_json_valid(body), udf(body, ibis.literal(_BODY_STRUCTURE))), else_=ibis.null(_BODY_STRUCT)
    )


def _timestamp(col: ir.Value) -> ir.Value:
    """A UTC timestamp from a text or timestamp column; naive values are taken as UTC."""
    if col.type().is_timestamp():
        return col.cast(_UTC)
    return col.cast("string").try_cast(_UTC)


def _duckdb_error(name: str, exc: Exception) -> DeliveryLogError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return DeliveryLogError(f"{name}: {first}")


# --------------------------------------------------------------------------------------
# JSONL and Parquet
# --------------------------------------------------------------------------------------


def _object_size(max_line_bytes: int) -> int:
    """DuckDB's ``maximum_object_size`` for a limit: never below its own default, never
    below the limit (no line left in the files read is over it)."""
    return max(max_line_bytes, DEFAULT_MAX_LINE_BYTES)


def _read_jsonl(
    con: Any, files: list[str], mapping: ColumnMapping, name: str, max_line_bytes: int
) -> list[ir.Table]:
    """Two readings of JSONL files, both from each line's own text, parsed once, with
    every number kept as sent (:func:`_line_structure`): a bet is never read through a
    double. Fast: the payload as a struct of JSON fields, received_at cast to a time; it
    fails on a line that is not a JSON object, one without a received_at, a payload that
    is not an object (or an empty one), or a time it cannot parse. General
    (:func:`_jsonl_lines`): such a line is counted (malformed) or named (an unusable time)
    instead of failing the read."""
    payload = _struct_extract("r", mapping.payload)
    # A payload that is no object (a text, a number, an array) becomes a struct of NULL
    # fields, as an empty object does: the general reading tells them apart.
    no_field = " AND ".join(f"{_struct_extract(payload, f)} IS NULL" for f in BODY_FIELDS)
    received_at = _struct_extract("r", mapping.received_at)
    sql = f"""
        SELECT filename AS source_file,
               CASE WHEN {received_at} IS NULL OR ({payload} IS NOT NULL AND {no_field})
                    THEN error('gptools: a line for the general reading in ' || filename)
                    ELSE {received_at} END AS received_at,
               {_line_columns(mapping)}, {payload} AS payload
        FROM (SELECT filename, json_transform(json, {_line_structure(mapping, fast=True)}) AS r
              FROM {_json_objects(files, max_line_bytes, ignore_errors=False)})
    """
    try:
        src = _view(con, "jsonl_fast", sql)
    except duckdb.Error as exc:
        raise _duckdb_error(name, exc) from None
    fast = _normalise(
        src, ColumnMapping(latency_unit=mapping.latency_unit),
        received_at=src.received_at, payload=src.payload, body=src.body,
        source_file=src.source_file,
        campaign_id=src.campaign_id if mapping.campaign_id is not None else None,
    )  # fmt: skip
    return [fast, _jsonl_lines(con, files, mapping, max_line_bytes)]


def _sql_text(text: str) -> str:
    """A SQL string literal holding ``text``."""
    return "'" + text.replace("'", "''") + "'"


def _struct_extract(struct: str, member: str) -> str:
    """SQL for a struct's member, whatever characters its name holds."""
    return f"struct_extract({struct}, {_sql_text(member)})"


def _line_structure(mapping: ColumnMapping, *, fast: bool) -> str:
    """json_transform's structure for a JSONL line, as a SQL literal: the mapping's
    top-level columns as text (a JSON string's content, any other value's JSON text), the
    member :data:`_EXACT_NUMBERS` that makes every number kept as sent, and the payload as
    one JSON value. For the ``fast`` reading, the payload as a struct of the body's fields
    as JSON and received_at parsed as a time while the line is (NULL when it cannot be:
    the fast reading then fails over to the general one, which names it)."""
    payload: str | dict[str, str] = dict.fromkeys(BODY_FIELDS, "JSON") if fast else "JSON"
    members: dict[str, str | dict[str, str]] = {
        mapping.received_at: "TIMESTAMPTZ" if fast else "VARCHAR",
        mapping.status: "VARCHAR",
        mapping.latency_ms: "VARCHAR",
        mapping.payload: payload,
        mapping.body: "VARCHAR",
    }
    if mapping.campaign_id is not None:
        # A JSON number is read as its text, so 42 and "42" name the same campaign.
        members[mapping.campaign_id] = "VARCHAR"
    members[_EXACT_NUMBERS] = "DECIMAL(1,0)"
    return _sql_text(json.dumps(members))


def _line_columns(mapping: ColumnMapping) -> str:
    """SQL selecting the transformed line ``r``'s status, latency, body and campaign id
    (when the mapping names one) under the contract's names, as both readings read them."""
    columns = [
        f"TRY_CAST({_struct_extract('r', mapping.status)} AS BIGINT) AS status",
        f"TRY_CAST({_struct_extract('r', mapping.latency_ms)} AS DOUBLE) AS latency_ms",
        f"{_struct_extract('r', mapping.body)} AS body",
    ]
    if mapping.campaign_id is not None:
        columns.append(f"{_struct_extract('r', mapping.campaign_id)} AS {CAMPAIGN_ID}")
    return ", ".join(columns)


def _json_objects(files: list[str], max_line_bytes: int, *, ignore_errors: bool) -> str:
    """SQL reading JSONL files' lines as JSON texts (``read_json_objects``), blank lines
    skipped; a line that is no JSON fails the read, or is NULL with ``ignore_errors``."""
    file_list = ", ".join(_sql_text(f) for f in files)
    return (
        f"read_json_objects([{file_list}], format = 'newline_delimited', "
        f"ignore_errors = {str(ignore_errors).lower()}, filename = true, "
        f"maximum_object_size = {_object_size(max_line_bytes)})"
    )


def _view(con: Any, prefix: str, sql: str) -> ir.Table:
    """``sql`` as a temporary view of its own name, as an Ibis table."""
    # A view, not con.sql(): Ibis 12 reads a query's schema through a call DuckDB 2 removed.
    view = ibis.util.gen_name(prefix)
    con.raw_sql(f'CREATE TEMP VIEW "{view}" AS {sql}')
    table: ir.Table = con.table(view)
    return table


def _jsonl_lines(
    con: Any, files: list[str], mapping: ColumnMapping, max_line_bytes: int
) -> ir.Table:
    """JSONL read line by line (DuckDB's ``read_json_objects``, errors kept as NULL): a
    line that does not parse, or parses to something other than an object, is
    ``malformed_line``; the contract fields of the others are read in one pass over each
    line's text (:func:`_line_structure`, the payload as its exact JSON text, whose
    fields :func:`_normalise` reads as a body's)."""
    sql = f"""
        SELECT filename AS source_file,
               json IS NULL OR NOT ltrim(json, ' \t\n\r') LIKE '{{%' AS malformed,
               {_struct_extract("r", mapping.received_at)} AS received_at,
               {_line_columns(mapping)},
               -- JSON null is no payload (its body is read), as in the fast reading.
               {_struct_extract("r", mapping.payload)} AS payload
        FROM (SELECT json, filename,
                     CASE WHEN ltrim(json, ' \t\n\r') LIKE '{{%'
                          THEN json_transform(json, {_line_structure(mapping, fast=False)}) END AS r
              FROM {_json_objects(files, max_line_bytes, ignore_errors=True)})
    """
    src = _view(con, "jsonl_lines", sql)
    return _normalise(
        src, ColumnMapping(latency_unit=mapping.latency_unit),
        received_at=_timestamp(src.received_at), payload=src.payload, body=src.body,
        malformed=src.malformed, source_file=src.source_file,
        campaign_id=src.campaign_id if mapping.campaign_id is not None else None,
    )  # fmt: skip


def _read_parquet(con: Any, files: list[str], mapping: ColumnMapping, name: str) -> ir.Table:
    try:
        src = con.read_parquet(files, filename=True)
    except duckdb.Error as exc:
        raise _duckdb_error(name, exc) from None
    return _from_table(src, mapping, name, source_file=src.filename)


def _from_table(
    src: ir.Table, mapping: ColumnMapping, name: str, source_file: ir.Value | None = None
) -> ir.Table:
    wanted = (mapping.received_at, mapping.status, mapping.latency_ms, mapping.campaign_id)
    missing = [c for c in wanted if c is not None and c not in src.columns]
    if missing:
        raise DeliveryLogError(
            f"{name}: column(s) {', '.join(missing)} not found (columns: "
            f"{', '.join(src.columns)}); pass a ColumnMapping naming them"
        )
    payload = src[mapping.payload] if mapping.payload in src.columns else None
    body = src[mapping.body].cast("string") if mapping.body in src.columns else None
    if payload is None and body is None:
        raise DeliveryLogError(
            f"{name}: neither a {mapping.payload!r} nor a {mapping.body!r} column; pass a "
            "ColumnMapping naming the request body"
        )
    if payload is not None and payload.type().is_struct():
        refuse_absent_fields(name, mapping.payload, payload.type().names)
    if payload is not None and payload.type().is_string():
        # A text payload column is a body by another name.
        body = payload if body is None else body.coalesce(payload)
        payload = None
    return _normalise(
        src, mapping, received_at=_timestamp(src[mapping.received_at]), payload=payload,
        body=body, source_file=source_file,
        campaign_id=src[mapping.campaign_id] if mapping.campaign_id is not None else None,
    )  # fmt: skip


# --------------------------------------------------------------------------------------
# SQLite and PostgreSQL stores
# --------------------------------------------------------------------------------------

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STORE_SCHEMA = pa.schema(
    [
        ("received_at", pa.string()),
        ("status", pa.int64()),
        ("latency_ms", pa.float64()),
        ("body", pa.string()),
    ]
)


def _store_select(mapping: ColumnMapping, table: str, received_at_sql: str) -> str:
    parts = table.split(".")
    if len(parts) > 2 or not all(_IDENT.match(p) for p in parts):
        raise DeliveryLogError(f"table name {table!r} must be NAME or SCHEMA.NAME")
    for col in mapping.source_columns():
        if col != mapping.payload and not _IDENT.match(col):
            raise DeliveryLogError(f"column name {col!r} must be letters, digits, underscores")
    quoted = ".".join(f'"{p}"' for p in parts)
    # Text whatever the column's type (an integer id names the same campaign as its text).
    campaign = (
        f', CAST("{mapping.campaign_id}" AS TEXT) AS {CAMPAIGN_ID}'
        if mapping.campaign_id is not None
        else ""
    )
    return (
        f'SELECT {received_at_sql} AS received_at, "{mapping.status}" AS status,'
        f' "{mapping.latency_ms}" AS latency_ms, "{mapping.body}" AS body{campaign} FROM {quoted}'
    )


def _store_schema(mapping: ColumnMapping) -> pa.Schema:
    """The Arrow schema of :func:`_store_select`'s rows."""
    if mapping.campaign_id is None:
        return _STORE_SCHEMA
    return _STORE_SCHEMA.append(pa.field(CAMPAIGN_ID, pa.string()))


def _batches(cursor: Any, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    # Column-wise conversion of each fetched block; the rows are never looked at one by one.
    while rows := cursor.fetchmany(_BATCH_ROWS):
        cols = zip(*rows, strict=True)
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)],
            schema=schema,
        )


def _load_store(con: Any, cursor: Any, name: str, schema: pa.Schema) -> ir.Table:
    reader = pa.RecordBatchReader.from_batches(schema, _batches(cursor, schema))
    name = ibis.util.gen_name("store")
    try:
        # Streamed batch by batch into DuckDB (which spills), never collected in Python.
        con.con.register(f"{name}_stream", reader)
        con.raw_sql(f'CREATE TEMP TABLE "{name}" AS SELECT * FROM "{name}_stream"')
        con.con.unregister(f"{name}_stream")
        return con.table(name)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DeliveryLogError(
            f"{name}: a row does not fit the delivery_log contract: {exc}"
        ) from None


def _read_sqlite(con: Any, source: str, mapping: ColumnMapping, table: str) -> tuple[ir.Table, str]:
    path = _store_address(source).location if source.startswith("sqlite:///") else source
    if not Path(path).is_file():
        raise DeliveryLogError(f"{path}: no such SQLite file")
    sql = _store_select(mapping, table, f'"{mapping.received_at}"')
    uri = sqlite_read_uri(path)
    # DuckDB pulls the batches from its own thread, one at a time.
    with contextlib.closing(sqlite3.connect(uri, uri=True, check_same_thread=False)) as db:
        try:
            cursor = db.execute(sql)
        except sqlite3.Error as exc:
            raise DeliveryLogError(f"{path}: {exc} (table {table!r})") from None
        src = _load_store(con, cursor, path, _store_schema(mapping))
    return _from_table(src, _store_mapping(mapping), path), path


def _read_postgres(con: Any, url: str, mapping: ColumnMapping, table: str) -> tuple[ir.Table, str]:
    psycopg = import_extra("psycopg", "postgres", "Reading a PostgreSQL store")

    address = _store_address(url)
    dsn, schema, shown = address.location, address.schema, address.shown
    if schema and "." not in table:
        table = f"{schema}.{table}"
    # Text in the contract's own format, so every store goes through one timestamp parser.
    ts = f'to_char("{mapping.received_at}" AT TIME ZONE \'UTC\', \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\')'
    sql = _store_select(mapping, table, ts)
    try:
        connected = False
        with psycopg.connect(dsn) as db, db.cursor(name="gptools_analysis") as cursor:
            connected = True
            cursor.itersize = _BATCH_ROWS
            cursor.execute(sql)
            src = _load_store(con, cursor, shown, _store_schema(mapping))
    except psycopg.Error as exc:
        first = scrub(str(exc).splitlines()[0], url) if str(exc) else type(exc).__name__
        # A server that does not answer is no fault of the log (the store commands' exit 1).
        unreachable = isinstance(exc, psycopg.OperationalError) and not connected
        raise DeliveryLogError(
            f"{shown}: {first} (table {table!r})", io_failed=unreachable
        ) from None
    return _from_table(src, _store_mapping(mapping), shown), shown


def _store_address(url: str) -> StoreAddress:
    """The store a URL names (the receiver's reading of it: its own options are left out),
    or :class:`DeliveryLogError` for a malformed one."""
    try:
        return parse_store_url(url)
    except ValueError as exc:
        raise DeliveryLogError(str(exc)) from None


def _store_mapping(mapping: ColumnMapping) -> ColumnMapping:
    """The store's columns after :func:`_store_select` renamed them to the contract's names."""
    campaign = CAMPAIGN_ID if mapping.campaign_id is not None else None
    return ColumnMapping(latency_unit=mapping.latency_unit, campaign_id=campaign)
