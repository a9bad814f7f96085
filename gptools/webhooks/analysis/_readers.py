"""Readers: every delivery-log format becomes one normalised Ibis table on a DuckDB connection.

The normalised table (:data:`RAW_COLUMNS`) has one row per delivery and no other meaning
attached yet: ``received_at`` (UTC timestamp), ``status``, ``latency_ms``, ``shape`` (what
the body was: ``object``, ``not_json``, ``not_object`` or ``no_body``) and one JSON column
per field of the game event notification (SQL NULL when the field is absent or null).
Validation and every metric are defined on that table in :mod:`._metrics`, so all formats
share them.

Sources (``format="auto"`` picks by name):

- JSONL (``*.jsonl``, ``*.ndjson``, ``*.json``, ``*.jsonl.gz``): read by DuckDB's own
  ``read_json`` with explicit columns, out of core. ``payload`` (an object) or ``body``
  (raw text).
- Parquet (``*.parquet``): ``body`` as raw text (the receiver's export).
- SQLite (``*.sqlite``, ``*.sqlite3``, ``*.db`` or ``sqlite:///PATH``) and PostgreSQL
  (``postgresql://...``, optional ``?schema=NAME``): the receiver's ``delivery_log`` table,
  streamed in Arrow batches into DuckDB (DuckDB's scanner extensions are not assumed to be
  installed, as they would need a download).
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import parse_qs, urlsplit, urlunsplit

import duckdb
import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir
import pyarrow as pa

from gptools.errors import GptoolsError, import_extra

LogFormat = Literal["auto", "jsonl", "parquet", "sqlite", "postgres"]
LOG_FORMATS: tuple[str, ...] = get_args(LogFormat)

#: The fields of the game event notification, in the order their checks run.
PAYLOAD_FIELDS: tuple[str, ...] = (
    "actionId",
    "roundId",
    "gameId",
    "playerId",
    "timestamp",
    "bet",
    "currencyCode",
    "events",
)

#: The columns every reader produces.
RAW_COLUMNS: tuple[str, ...] = ("received_at", "status", "latency_ms", "shape", *PAYLOAD_FIELDS)

#: DuckDB's memory limit by default; beyond it, DuckDB spills to a temporary directory.
DEFAULT_MEMORY_LIMIT = "1GB"

_UTC = dt.Timestamp(timezone="UTC")
_BATCH_ROWS = 50_000
_LATENCY_SCALE = {"ms": 1.0, "s": 1000.0, "us": 0.001}


class DeliveryLogError(GptoolsError, ValueError):
    """The log itself cannot be read: a missing file, a malformed line, a record without a
    usable ``received_at`` or ``status``. The message names the source and the place."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnMapping:
    """Where the four contract fields live in a log written by another system.

    Each attribute names the source column (JSONL: top-level key) holding that field;
    ``payload`` is a JSON object column, ``body`` a raw-text column, either may be absent
    from a record. ``latency_unit`` says what unit the latency column is in (``ms``, ``s``
    or ``us``); it is converted to milliseconds.

    >>> ColumnMapping(received_at="time", status="upstream_status", latency_ms="request_time",
    ...               body="request_body", latency_unit="s")  # doctest: +ELLIPSIS
    ColumnMapping(...)
    """

    received_at: str = "received_at"
    status: str = "status"
    latency_ms: str = "latency_ms"
    payload: str = "payload"
    body: str = "body"
    latency_unit: Literal["ms", "s", "us"] = "ms"

    def __post_init__(self) -> None:
        if self.latency_unit not in _LATENCY_SCALE:
            raise ValueError(
                f"latency_unit must be one of {sorted(_LATENCY_SCALE)}, got {self.latency_unit!r}"
            )


DEFAULT_MAPPING = ColumnMapping()


@dataclass(slots=True)
class DeliveryLog:
    """A delivery log opened on a DuckDB connection, not read yet.

    ``source`` names where it came from (a path, or a URL without password). :meth:`load`
    materialises a table built from the normalised relation (:data:`RAW_COLUMNS`). Close
    the log (or use it as a context manager) to drop the connection and its spill directory.
    """

    con: Any
    source: str
    format: str
    #: Normalised relations to try in order: the fast JSONL reading, then the general one.
    candidates: list[ir.Table]
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    @property
    def raw(self) -> ir.Table:
        """The normalised relation (lazy: reading it scans the source)."""
        return self.candidates[0]

    def load(self, name: str, build: Callable[[ir.Table], ir.Table]) -> ir.Table:
        """Scan the source once into a temporary table ``name`` holding ``build(raw)``.

        A JSONL payload that is not an object, or a time the reader cannot parse, defeats
        the fast reading; the general one is used then. Any other read error becomes a
        :class:`DeliveryLogError` naming the source and the line. Records without a usable
        ``received_at`` or ``status`` are refused: they cannot be placed in time or
        classified, and dropping them silently would break the count identity.
        """
        # No result depends on the order rows are stored in (every listing is ordered
        # explicitly); keeping the file's order costs memory and time on millions of rows.
        self.con.raw_sql("SET preserve_insertion_order = false")
        while True:
            raw = self.candidates[0]
            try:
                table = create_temp_table(self.con, name, build(raw))
            except duckdb.Error as exc:
                # The fast reading refuses what the general one handles (a payload that
                # is not an object, a time it cannot parse); a log the general reading
                # refuses too is reported from there.
                if len(self.candidates) > 1:
                    self.candidates.pop(0)
                    continue
                raise _duckdb_error(self.source, exc) from None
            break
        bad = table.received_at.isnull() | table.status.isnull()
        n_bad = int(self.con.execute(table.filter(bad).count()))
        if n_bad:
            # Record numbers follow the file only while DuckDB keeps insertion order.
            self.con.raw_sql("SET preserve_insertion_order = true")
            numbered = raw.mutate(_n=ibis.row_number() + 1)
            first = numbered.filter(numbered.received_at.isnull() | numbered.status.isnull())
            raise DeliveryLogError(
                f"{self.source}: {n_bad} record(s) without a usable received_at (ISO 8601 "
                f"time) or integer status; the first is record "
                f"{int(self.con.execute(first._n.min()))}"
            )
        return table

    def close(self) -> None:
        """Drop the DuckDB connection and remove its spill directory."""
        self.con.disconnect()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> DeliveryLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect_duckdb(
    *, memory_limit: str = DEFAULT_MEMORY_LIMIT, threads: int | None = None
) -> tuple[Any, tempfile.TemporaryDirectory[str]]:
    """A DuckDB connection for the analyser: UTC session, bounded memory, a spill directory.

    The memory limit makes DuckDB spill to the temporary directory instead of growing, so a
    log larger than memory still works. ``threads=None`` lets DuckDB use every core.
    """
    tmp = tempfile.TemporaryDirectory(prefix="gptools-analysis-")
    config: dict[str, Any] = {"memory_limit": memory_limit, "temp_directory": tmp.name}
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


def detect_format(source: str | Path) -> str:
    """The format implied by a path or URL; a :class:`DeliveryLogError` says how to name it."""
    text = str(source)
    if text.startswith(("postgresql://", "postgres://")):
        return "postgres"
    if text.startswith("sqlite:///"):
        return "sqlite"
    name = Path(text).name.lower()
    for suffix, fmt in (
        (".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "jsonl"), (".jsonl.gz", "jsonl"),
        (".parquet", "parquet"), (".sqlite", "sqlite"), (".sqlite3", "sqlite"), (".db", "sqlite"),
    ):  # fmt: skip
        if name.endswith(suffix):
            return fmt
    raise DeliveryLogError(
        f"{text}: cannot tell the log format from the name; pass format= one of "
        f"{', '.join(f for f in LOG_FORMATS if f != 'auto')}"
    )


def read_delivery_log(
    source: str | Path,
    *,
    format: LogFormat = "auto",
    mapping: ColumnMapping = DEFAULT_MAPPING,
    table: str = "delivery_log",
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int | None = None,
) -> DeliveryLog:
    """Open a delivery log in any supported format as a :class:`DeliveryLog`.

    ``table`` names the store table (SQLite/PostgreSQL; ``SCHEMA.NAME`` allowed; a
    PostgreSQL URL may carry ``?schema=NAME`` like the receiver's store URL).
    ``memory_limit`` and ``threads`` bound DuckDB. A file is only read by
    :meth:`DeliveryLog.load`; a store is copied into DuckDB here, in Arrow batches.
    """
    fmt = detect_format(source) if format == "auto" else format
    if fmt not in LOG_FORMATS:
        raise DeliveryLogError(f"unknown format {fmt!r}; use one of {', '.join(LOG_FORMATS)}")
    con, tmp = connect_duckdb(memory_limit=memory_limit, threads=threads)
    try:
        if fmt == "jsonl":
            candidates, name = _read_jsonl(con, Path(source), mapping), str(source)
        elif fmt == "parquet":
            candidates, name = [_read_parquet(con, Path(source), mapping)], str(source)
        elif fmt == "sqlite":
            raw, name = _read_sqlite(con, str(source), mapping, table)
            candidates = [raw]
        else:
            raw, name = _read_postgres(con, str(source), mapping, table)
            candidates = [raw]
    except BaseException:
        con.disconnect()
        tmp.cleanup()
        raise
    return DeliveryLog(con=con, source=name, format=fmt, candidates=candidates, _tmp=tmp)


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
) -> ir.Table:
    """Map one source relation onto :data:`RAW_COLUMNS`.

    ``payload`` is a struct of JSON fields (the fast JSONL reading) or any JSON value;
    ``body`` is raw text. A payload wins over a body when a record has both.
    """
    body_doc = body.try_cast("json") if body is not None else None
    cases: list[tuple[ir.Value, str]] = []
    if payload is not None and payload.type().is_struct():
        cases.append((payload.notnull(), "object"))
    elif payload is not None:
        payload = payload.cast("json")
        cases += [(payload.notnull() & payload.map.isnull(), "not_object"),
                  (payload.notnull(), "object")]  # fmt: skip
    if body is not None and body_doc is not None:
        cases += [
            (body.isnull(), "no_body"),
            (body_doc.isnull(), "not_json"),
            (body_doc.map.isnull(), "not_object"),
            (ibis.literal(True), "object"),
        ]
    fields: dict[str, ir.Value] = {}
    for f in PAYLOAD_FIELDS:
        from_body = body_doc[f] if body_doc is not None else None
        if payload is None:
            fields[f] = from_body if from_body is not None else ibis.null("json")
        else:
            value = payload[f].cast("json")
            fields[f] = value if from_body is None else value.coalesce(from_body)
    return t.select(
        received_at=received_at,
        status=t[mapping.status].cast("int64"),
        latency_ms=t[mapping.latency_ms].cast("float64") * _LATENCY_SCALE[mapping.latency_unit],
        shape=ibis.cases(*cases, else_="no_body") if cases else ibis.literal("no_body"),
        **fields,
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


def _read_jsonl(con: Any, path: Path, mapping: ColumnMapping) -> list[ir.Table]:
    if not path.is_file():
        raise DeliveryLogError(f"{path}: no such file")
    # Fast: the payload as a struct of JSON fields, so DuckDB parses each line once, and
    # received_at parsed by the reader itself. General: the payload as any JSON value, for
    # logs where some payload is not an object, and received_at as text, so that a record
    # with an unusable time is found and named instead of failing the whole read.
    struct = ", ".join(f'"{f}" JSON' for f in PAYLOAD_FIELDS)
    out = []
    for time_type, payload_type in (("TIMESTAMPTZ", f"STRUCT({struct})"), ("VARCHAR", "JSON")):
        columns = {
            mapping.received_at: time_type,
            mapping.status: "BIGINT",
            mapping.latency_ms: "DOUBLE",
            mapping.payload: payload_type,
            mapping.body: "VARCHAR",
        }
        try:
            src = con.read_json(str(path), columns=columns, format="newline_delimited")
        except duckdb.Error as exc:
            raise _duckdb_error(str(path), exc) from None
        out.append(
            _normalise(
                src,
                mapping,
                received_at=_timestamp(src[mapping.received_at]),
                payload=src[mapping.payload],
                body=src[mapping.body],
            )
        )
    return out


def _read_parquet(con: Any, path: Path, mapping: ColumnMapping) -> ir.Table:
    if not path.is_file():
        raise DeliveryLogError(f"{path}: no such file")
    try:
        src = con.read_parquet(str(path))
    except duckdb.Error as exc:
        raise _duckdb_error(str(path), exc) from None
    return _from_table(src, mapping, str(path))


def _from_table(src: ir.Table, mapping: ColumnMapping, name: str) -> ir.Table:
    missing = [
        c for c in (mapping.received_at, mapping.status, mapping.latency_ms) if c not in src.columns
    ]
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
    if payload is not None and payload.type().is_string():
        # A text payload column is a body by another name.
        body = payload if body is None else body.coalesce(payload)
        payload = None
    return _normalise(
        src, mapping, received_at=_timestamp(src[mapping.received_at]), payload=payload, body=body
    )


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
    for col in (mapping.received_at, mapping.status, mapping.latency_ms, mapping.body):
        if not _IDENT.match(col):
            raise DeliveryLogError(f"column name {col!r} must be letters, digits, underscores")
    quoted = ".".join(f'"{p}"' for p in parts)
    return (
        f'SELECT {received_at_sql} AS received_at, "{mapping.status}" AS status,'
        f' "{mapping.latency_ms}" AS latency_ms, "{mapping.body}" AS body FROM {quoted}'
    )


def _batches(cursor: Any) -> Iterator[pa.RecordBatch]:
    # Column-wise conversion of each fetched block; the rows are never looked at one by one.
    while rows := cursor.fetchmany(_BATCH_ROWS):
        cols = zip(*rows, strict=True)
        yield pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(cols, _STORE_SCHEMA, strict=True)],
            schema=_STORE_SCHEMA,
        )


def _load_store(con: Any, cursor: Any, name: str) -> ir.Table:
    reader = pa.RecordBatchReader.from_batches(_STORE_SCHEMA, _batches(cursor))
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


def _read_sqlite(
    con: Any, source: str, mapping: ColumnMapping, table: str
) -> tuple[ir.Table, str]:
    path = source[len("sqlite:///") :] if source.startswith("sqlite:///") else source
    if not Path(path).is_file():
        raise DeliveryLogError(f"{path}: no such SQLite file")
    sql = _store_select(mapping, table, f'"{mapping.received_at}"')
    uri = f"file:{Path(path).resolve()}?mode=ro"
    # DuckDB pulls the batches from its own thread, one at a time.
    with contextlib.closing(sqlite3.connect(uri, uri=True, check_same_thread=False)) as db:
        try:
            cursor = db.execute(sql)
        except sqlite3.Error as exc:
            raise DeliveryLogError(f"{path}: {exc} (table {table!r})") from None
        src = _load_store(con, cursor, path)
    return _from_table(src, _store_mapping(mapping), path), path


def _read_postgres(
    con: Any, url: str, mapping: ColumnMapping, table: str
) -> tuple[ir.Table, str]:
    psycopg = import_extra("psycopg", "postgres", "Reading a PostgreSQL store")

    parts = urlsplit(url)
    query = parse_qs(parts.query)
    schema = query.pop("schema", [None])[0]
    rest = "&".join(f"{k}={v}" for k, vs in query.items() for v in vs)
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
    netloc = (f"{parts.username}@" if parts.username else "") + (parts.hostname or "")
    shown = urlunsplit((parts.scheme, netloc + (f":{parts.port}" if parts.port else ""),
                        parts.path, "", ""))  # fmt: skip
    if schema and "." not in table:
        table = f"{schema}.{table}"
    # Text in the contract's own format, so every store goes through one timestamp parser.
    ts = (
        f"to_char(\"{mapping.received_at}\" AT TIME ZONE 'UTC',"
        " 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
    )
    sql = _store_select(mapping, table, ts)
    try:
        with psycopg.connect(dsn) as db, db.cursor(name="gptools_analysis") as cursor:
            cursor.itersize = _BATCH_ROWS
            cursor.execute(sql)
            src = _load_store(con, cursor, shown)
    except psycopg.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DeliveryLogError(f"{shown}: {first} (table {table!r})") from None
    return _from_table(src, _store_mapping(mapping), shown), shown


def _store_mapping(mapping: ColumnMapping) -> ColumnMapping:
    """The store's columns after :func:`_store_select` renamed them to the contract's names."""
    return ColumnMapping(latency_unit=mapping.latency_unit)
