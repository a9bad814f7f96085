"""Reading a wallet ledger on the delivery log's engine, and the rows it rejects.

Sources: CSV (a header line), JSONL and Parquet files (a file, a glob, a directory; a CSV
or JSONL file may be gzip or zstd compressed, told by its first bytes as the delivery
log's reader tells them, :func:`gptools.deliverylog._files.magic`), and a database table
through a URL in SQLAlchemy's form (``sqlite:///PATH``, ``postgresql://...``, a
``+driver`` part ignored), read with the drivers gptools already has and streamed into a
temporary Parquet file. The table is read on the engine that holds the delivery log
(DuckDB or Spark), so the reconciliation's joins run there.

:func:`normalise` turns the source's columns (named by a :class:`LedgerMapping`) into the
ledger's typed fields, each row with ``reason`` NULL (used) or the first check it fails
(rejected): ``missing:FIELD``, ``bad_value:type``, ``bad_value:free_round``,
``bad_format:amount``, ``out_of_range:amount``, ``has_no_zone:timestamp``,
``bad_format:timestamp``. Nothing is dropped: rows = used + rejected.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir
import pyarrow as pa
import pyarrow.parquet as pq

from gptools import spec
from gptools._private_files import sqlite_read_uri
from gptools._secrets import redact_url, scrub
from gptools._store_url import parse_store_url
from gptools.deliverylog._contract import BET_DECIMAL, BaseDeliveryLog, resolve_files
from gptools.deliverylog._files import ReadableFiles, magic, readable
from gptools.deliverylog._ledger_layout import DEFAULT_LEDGER_MAPPING, LEDGER_FIELDS, LedgerMapping
from gptools.errors import GptoolsError, import_extra

LedgerFormat = Literal["auto", "csv", "jsonl", "parquet", "sqlite", "postgres"]
LEDGER_FORMATS: tuple[str, ...] = get_args(LedgerFormat)

#: The exact type a ledger amount is read in (the delivery log's bet type, so that an
#: amount and a bet compare and join exactly).
AMOUNT_DECIMAL = BET_DECIMAL
_UTC = dt.Timestamp(timezone="UTC")
_SUFFIXES = {
    ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
    ".parquet": "parquet",
}  # fmt: skip
_COMPRESSED = (".gz", ".zst")
#: Rows fetched from a database per batch (bounded memory whatever the table's size).
_DB_BATCH_ROWS = 50_000
#: A non-negative amount: at most the bet rule's integer digits and decimals
#: (``spec.BET_MAX_INTEGER_DIGITS``, ``spec.BET_MAX_FRACTION_DIGITS``; trailing zeros
#: past them are only a typed column's scale).
_AMOUNT_PATTERN = (
    rf"^[0-9]{{1,{spec.BET_MAX_INTEGER_DIGITS}}}"
    rf"(\.[0-9]{{0,{spec.BET_MAX_FRACTION_DIGITS}}}0*)?$"
)
#: A timestamp text that names its zone: ``Z`` or an offset at the end.
_ZONE_PATTERN = r"(Z|z|[+-][0-9]{2}(:?[0-9]{2})?)$"


class LedgerError(GptoolsError, ValueError):
    """The ledger itself cannot be read: a missing file, an unknown format, a column the
    mapping names that the source lacks, a database that refuses. The message names the
    source."""


def detect_ledger_format(source: str | Path) -> str:
    """The format a ledger source implies: a database URL's scheme, a file's first bytes
    (Parquet; gzip and zstd then its name without the compression's suffix), else its
    name; a directory's files. A :class:`LedgerError` says how to name it."""
    text = str(source)
    scheme = text.partition("://")[0].partition("+")[0].lower()
    if scheme in ("postgresql", "postgres"):
        return "postgres"
    if scheme == "sqlite":
        return "sqlite"
    path = Path(text)
    if path.is_file() and magic(path) == "parquet":
        return "parquet"
    if path.is_dir():
        found = {f for p in sorted(path.rglob("*")) if p.is_file() for f in [_by_name(p)] if f}
        if len(found) == 1:
            return found.pop()
        raise LedgerError(
            f"{text}: {'holds several ledger formats' if found else 'holds no ledger file'}; "
            "pass the format or a glob"
        )
    fmt = _by_name(path)
    if fmt is None:
        raise LedgerError(
            f"{redact_url(text)}: cannot tell the ledger format from the name; pass format= "
            f"one of {', '.join(f for f in LEDGER_FORMATS if f != 'auto')}"
        )
    return fmt


def _by_name(path: Path) -> str | None:
    name = path.name.lower()
    for suffix in _COMPRESSED:
        name = name.removesuffix(suffix)
    return next((fmt for s, fmt in _SUFFIXES.items() if name.endswith(s)), None)


def _files(source: str | Path, fmt: str) -> list[str]:
    return resolve_files(source, fmt, format_of=_by_name, error=LedgerError)


@dataclass
class LedgerSource:
    """A ledger opened on a log's engine, not read yet: ``raw`` holds the mapping's
    columns under the field names (:data:`LEDGER_FIELDS`); ``source`` names it (a URL
    without password); ``close`` removes the temporary files made for it."""

    raw: ir.Table
    source: str
    format: str
    files: list[str] = field(default_factory=list)
    _readable: ReadableFiles | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    def close(self) -> None:
        """Remove the stand-ins and copies made for the engine."""
        if self._readable is not None:
            self._readable.cleanup()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def open_ledger(
    log: BaseDeliveryLog,
    source: str | Path,
    *,
    format: LedgerFormat = "auto",
    mapping: LedgerMapping = DEFAULT_LEDGER_MAPPING,
    table: str = "wallet_ledger",
    temp_directory: str | Path | None = None,
) -> LedgerSource:
    """``source`` opened on ``log``'s engine with ``mapping``'s columns (``table``: a
    database's table, ``schema.table`` allowed)."""
    if format not in LEDGER_FORMATS:
        raise LedgerError(f"format must be one of {', '.join(LEDGER_FORMATS)}, got {format!r}")
    fmt = detect_ledger_format(source) if format == "auto" else format
    if fmt in ("sqlite", "postgres"):
        tmp = tempfile.TemporaryDirectory(prefix="gptools-ledger-", dir=temp_directory)
        try:
            target = os.path.join(tmp.name, "ledger.parquet")
            shown = _database_to_parquet(str(source), fmt, table, mapping, target)
            # The copy names its columns by field already (the mapping was applied in
            # the SELECT): select them as the default layout names them.
            raw = _select(log.con.read_parquet([target]), DEFAULT_LEDGER_MAPPING, shown)
        except BaseException:
            tmp.cleanup()
            raise
        return LedgerSource(raw, shown, fmt, [target], None, tmp)
    files = _files(source, fmt)
    paths, stand_ins = files, None
    if fmt in ("csv", "jsonl"):
        stand_ins = ReadableFiles()
        try:
            for path in files:
                readable(
                    path, stand_ins, compression=magic(path), long_lines=0, max_line_bytes=1,
                    decompress_zstd=log.engine == "spark", temp_directory=temp_directory,
                )  # fmt: skip
        except OSError as exc:
            stand_ins.cleanup()
            raise LedgerError(f"{exc.filename or files[0]}: {exc.strerror or exc}") from None
        paths = stand_ins.paths
    try:
        raw = _select(_read_files(log, paths, fmt, mapping), mapping, str(source))
    except BaseException:
        if stand_ins is not None:
            stand_ins.cleanup()
        raise
    return LedgerSource(raw, str(source), fmt, files, stand_ins)


def _read_files(log: BaseDeliveryLog, paths: list[str], fmt: str, mapping: LedgerMapping) -> Any:
    con = log.con
    columns = list(dict.fromkeys(mapping.columns().values()))
    try:
        if log.engine == "spark":
            # The session's own readers (Ibis' Spark read_parquet takes one path only),
            # every CSV and JSON value as its text.
            session = con._session
            if fmt == "parquet":
                df = session.read.parquet(*paths)
            elif fmt == "csv":
                df = session.read.csv(paths, header=True, inferSchema=False)
            else:
                df = session.read.json(paths, primitivesAsString=True)
            view = f"gp_ledger_{log.tag}"
            df.createOrReplaceTempView(view)
            return con.table(view)
        if fmt == "parquet":
            return con.read_parquet(paths)
        if fmt == "csv":
            return con.read_csv(paths, all_varchar=True, header=True)
        return con.read_json(
            paths, columns={c: "VARCHAR" for c in columns}, format="newline_delimited"
        )
    except Exception as exc:  # the engines' own errors: one line naming the source
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LedgerError(f"{paths[0]}: cannot read as {fmt}: {first}") from None


def _select(src: ir.Table, mapping: LedgerMapping, shown: str) -> ir.Table:
    present = set(src.columns)
    absent = [f"{f} ({c!r})" for f, c in mapping.columns().items() if c not in present]
    if absent:
        raise LedgerError(
            f"{shown}: has no column for {', '.join(absent)}; name the columns with a "
            "LedgerMapping or --ledger-column FIELD=NAME"
        )
    return src.select(**{f: src[c] for f, c in mapping.columns().items()})


def _database_to_parquet(
    url: str, fmt: str, table: str, mapping: LedgerMapping, target: str
) -> str:
    """Stream ``table``'s mapped columns into the Parquet file ``target``, named by field
    (:data:`LEDGER_FIELDS`; as text, except what the database types); return the source's
    name without password."""
    try:
        address = parse_store_url(url.replace("+psycopg", "").replace("+pysqlite", ""))
    except ValueError as exc:
        raise LedgerError(str(exc)) from None
    cols = ", ".join(f'"{c}"' for c in mapping.columns().values())
    name = table if address.schema is None or "." in table else f"{address.schema}.{table}"
    quoted = ".".join(f'"{part}"' for part in name.split("."))
    sql = f"SELECT {cols} FROM {quoted}"
    names = list(LEDGER_FIELDS)
    if fmt == "sqlite":
        path = address.location
        if not Path(path).is_file():
            raise LedgerError(f"{path}: no such SQLite file")
        with contextlib.closing(sqlite3.connect(sqlite_read_uri(path), uri=True)) as db:
            try:
                cursor = db.execute(sql)
            except sqlite3.Error as exc:
                raise LedgerError(f"{path}: {exc} (table {table!r})") from None
            _write_batches(_batches(cursor), names, target)
        return path
    psycopg = import_extra("psycopg", "postgres", "Reading a ledger from PostgreSQL")
    try:
        with psycopg.connect(address.location) as db, db.cursor(name="gptools_ledger") as cur:
            cur.itersize = _DB_BATCH_ROWS
            cur.execute(sql)
            _write_batches(_batches(cur), names, target)
    except psycopg.Error as exc:
        first = scrub(str(exc).splitlines()[0], url) if str(exc) else type(exc).__name__
        raise LedgerError(f"{address.shown}: {first} (table {table!r})") from None
    return address.shown


def _batches(cursor: Any) -> Iterator[list[tuple[Any, ...]]]:
    while rows := cursor.fetchmany(_DB_BATCH_ROWS):
        yield rows


def _write_batches(batches: Iterator[list[tuple[Any, ...]]], names: list[str], target: str) -> None:
    # Every value as its text (None stays null): a database's own types (a Decimal, an
    # aware datetime, a boolean, an integer) are written the way the text checks read
    # them, so one rule judges a database row and a CSV row alike.
    schema = pa.schema([(n, pa.string()) for n in names])
    with pq.ParquetWriter(target, schema) as writer:
        for rows in batches:
            columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
            arrays = [pa.array([_text(v) for v in col], pa.string()) for col in columns]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        text: str = value.isoformat()
        return text
    return str(value)


# --------------------------------------------------------------------------------------
# The typed fields and the reason a row is rejected
# --------------------------------------------------------------------------------------


def _text_of(v: ir.Value) -> ir.Value:
    out: ir.Value = v.cast("string").strip().nullif("")
    return out


def _id_of(v: ir.Value) -> ir.Value:
    # An id is compared exactly as the wallet wrote it (the event's roundId is too): only
    # an empty one is missing. Trimming every id costs several times the rest of a read.
    text = v if v.type().is_string() else v.cast("string")
    out: ir.Value = text.nullif("")
    return out


def normalise(raw: ir.Table, mapping: LedgerMapping) -> ir.Table:
    """Per ledger row: the fields typed (``amount`` exact, ``timestamp`` UTC, ``type`` one
    of ``debit``/``credit``/``rollback``, ``free_round`` a boolean) and ``reason``, NULL
    for a row used, else the first check it fails (in the layout's order)."""
    schema = raw.schema()
    ids = {f: _id_of(raw[f]) for f in ("transaction_id", "round_id", "player_id", "game_id")}
    currency = _id_of(raw.currency)

    type_text = _text_of(raw.type).lower()
    kind = type_text.substitute(dict(mapping.types), else_=ibis.null("string"))

    if schema["free_round"].is_boolean():
        flag_missing = raw.free_round.isnull()
        flag = raw.free_round
    else:
        flag_text = _text_of(raw.free_round).lower()
        flag_missing = flag_text.isnull()
        flag = flag_text.substitute(dict(mapping.free_round_values), else_=ibis.null("boolean"))

    # A typed column is judged by its type (no text made of it: formatting every value
    # costs more than the rest of the reading); a text column by its text.
    a_type = schema["amount"]
    if a_type.is_decimal() or a_type.is_integer():
        amount_missing = raw.amount.isnull()
        amount = raw.amount.cast(AMOUNT_DECIMAL)
        amount_ok = (amount >= 0) & (amount < 10**spec.BET_MAX_INTEGER_DIGITS)
        amount_format = ibis.literal(True)
    else:
        amount_text = _text_of(raw.amount)
        amount_missing = amount_text.isnull()
        amount_format = amount_text.re_search(_AMOUNT_PATTERN)
        amount = ibis.ifelse(
            amount_format, amount_text.try_cast(AMOUNT_DECIMAL), ibis.null(AMOUNT_DECIMAL)
        )
        amount_ok = ibis.literal(True)

    t_type = schema["timestamp"]
    if t_type.is_timestamp():
        zoned = ibis.literal(t_type.timezone is not None)
        moment = raw.timestamp.cast(_UTC)
        ts_missing = raw.timestamp.isnull()
    else:
        ts_text = _text_of(raw.timestamp)
        ts_missing = ts_text.isnull()
        zoned = ts_text.re_search(_ZONE_PATTERN)
        moment = ibis.ifelse(zoned, ts_text.try_cast(_UTC), ibis.null(_UTC))

    checks: list[tuple[ir.Value, str]] = [
        *((v.isnull(), f"{spec.CHECK_MISSING}:{f}") for f, v in ids.items()),
        (currency.isnull(), f"{spec.CHECK_MISSING}:currency"),
        (amount_missing, f"{spec.CHECK_MISSING}:amount"),
        (type_text.isnull(), f"{spec.CHECK_MISSING}:type"),
        (flag_missing, f"{spec.CHECK_MISSING}:free_round"),
        (ts_missing, f"{spec.CHECK_MISSING}:timestamp"),
        (kind.isnull(), "bad_value:type"),
        (flag.isnull(), "bad_value:free_round"),
        (~amount_format | amount.isnull(), f"{spec.CHECK_BAD_FORMAT}:amount"),
        (~amount_ok, f"{spec.CHECK_OUT_OF_RANGE}:amount"),
        (~zoned, "has_no_zone:timestamp"),
        (moment.isnull(), f"{spec.CHECK_BAD_FORMAT}:timestamp"),
    ]
    reason = ibis.cases(*((c.fill_null(False), r) for c, r in checks), else_=ibis.null("string"))
    return raw.select(
        **ids,
        currency_code=currency,
        amount=amount,
        kind=kind,
        free_round=flag,
        ts=moment,
        reason=reason,
    )


#: The reasons a ledger row is rejected for, in the order the checks run.
LEDGER_REASONS: tuple[str, ...] = (
    *(f"{spec.CHECK_MISSING}:{f}" for f in LEDGER_FIELDS),
    "bad_value:type",
    "bad_value:free_round",
    f"{spec.CHECK_BAD_FORMAT}:amount",
    f"{spec.CHECK_OUT_OF_RANGE}:amount",
    "has_no_zone:timestamp",
    f"{spec.CHECK_BAD_FORMAT}:timestamp",
)
