"""What every engine's reader agrees on, and nothing of any engine: the normalised
relation's columns, the :class:`ColumnMapping` of a foreign log, format detection and the
files a source names (the payload's timestamp layout is ``spec.EVENT_TIMESTAMP_PATTERN``,
with the rest of the game event's declaration), and :class:`BaseDeliveryLog`, the
interface both engines' logs implement (DuckDB: :mod:`._readers`; Spark:
:mod:`._readers_spark`). The metrics (:mod:`._metrics`), the analysis and the campaign
results are written against this module only, so neither engine is needed to read them.

This module imports neither DuckDB nor PySpark, not even lazily (``tests/deliverylog/
test_engine_imports.py``): the two readers are siblings that meet here, never in each
other.

The normalised relation has one row per delivery and no other meaning attached yet:
``received_at`` (UTC timestamp), ``status``, ``latency_ms``, ``shape`` (what the body
was: ``object``, ``not_json``, ``not_object``, ``no_body``, or :data:`MALFORMED` for a
JSONL line that is not a JSON object at all), one JSON column per field of the game event
notification (SQL NULL when the field is absent or null), ``bet_negative_zero``, the
typed pass's columns (:data:`KNOWN_COLUMNS`) and ``source_file``; and
:data:`CAMPAIGN_ID` when the mapping names one.
"""

from __future__ import annotations

import abc
import glob
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Self, TypeVar, get_args

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir
import pandas as pd

from gptools import spec
from gptools._secrets import redact_url
from gptools.deliverylog import _files
from gptools.deliverylog._files import DEFAULT_MAX_LINE_BYTES
from gptools.errors import GptoolsError

LogFormat = Literal["auto", "jsonl", "parquet", "sqlite", "postgres"]
LOG_FORMATS: tuple[str, ...] = get_args(LogFormat)

#: The fields of the game event notification, in the order their checks run: those of
#: its declaration (``spec.GAME_EVENT_FIELDS``), never written again here.
PAYLOAD_FIELDS: tuple[str, ...] = tuple(f.name for f in spec.GAME_EVENT_FIELDS)

#: The field of a summary row's body (``status`` ``spec.WEBHOOK_SUMMARY_STATUS``) that
#: holds how many refusals it stands for (docs/design.md, "The delivery-log fields").
SUMMARY_FIELD = "suppressed"
#: The body fields every reader extracts: the notification's and the summary's count.
BODY_FIELDS: tuple[str, ...] = (*PAYLOAD_FIELDS, SUMMARY_FIELD)

#: The columns every reader produces (``bet_negative_zero``: the body's text has a ``bet``
#: of ``-0``, a sign no JSON parser keeps; spec.BET_NEGATIVE_ZERO_PATTERN).
RAW_COLUMNS: tuple[str, ...] = (
    "received_at", "status", "latency_ms", "shape", *BODY_FIELDS, "bet_negative_zero",
)  # fmt: skip

#: True for a row a reader's own typed reading proved to be a valid game event
#: notification (never NULL). Such a row carries its validated values in the other
#: :data:`KNOWN_COLUMNS` and may leave its JSON fields NULL; a reader without a typed
#: reading (DuckDB's) gives false and NULL values (:func:`nothing_known`), so both engines
#: yield the same columns and :func:`._metrics.validate` has one form.
KNOWN_VALID = "known_valid"
#: The typed reading's columns: :data:`KNOWN_VALID`, then ``known_`` and each value
#: :func:`._metrics.validate` gives after ``reason``.
KNOWN_COLUMNS: tuple[str, ...] = (
    KNOWN_VALID, "known_action_id", "known_round_id", "known_game_id", "known_player_id",
    "known_currency_code", "known_event_ts", "known_bet", "known_events",
)  # fmt: skip

#: The optional column of the normalised relation that holds a delivery's campaign id,
#: present when the log's :class:`ColumnMapping` names one (text, NULL when empty).
CAMPAIGN_ID = "campaign_id"

#: The shape (and invalid reason) of a JSONL line that is not a JSON object.
MALFORMED = "malformed_line"

_V = TypeVar("_V")

#: The body-shape rule, written once: a record's ``shape`` is that of the first of these
#: conditions that holds, each engine stating every condition in its own terms
#: (:func:`shape_cases`: Ibis expressions for DuckDB, SQL text for Spark).
BODY_SHAPE_RULES: tuple[tuple[str, str], ...] = (
    ("known", "object"),  # a typed reading proved the row a valid notification
    ("malformed", MALFORMED),  # a JSONL line that is not a JSON object
    ("payload_not_object", "not_object"),  # a payload (not JSON null) that is no object
    ("payload", "object"),  # a payload (an object): it wins over a body
    ("no_body", "no_body"),  # neither a payload nor a body
    ("body_not_json", "not_json"),  # a body text that does not parse as JSON
    ("body_not_object", "not_object"),  # a body that parses, to no object
)
#: The shape of a record no rule of :data:`BODY_SHAPE_RULES` catches: a body, an object.
BODY_SHAPE_OTHERWISE = "object"


def shape_cases(conditions: dict[str, _V | None]) -> list[tuple[_V, str]]:
    """:data:`BODY_SHAPE_RULES` in order, each with the engine's ``conditions[name]``; a
    condition that cannot hold for the source read (``None``: no body column, no typed
    reading) is left out. Every rule must be named, so an engine cannot forget one."""
    unknown = sorted(set(conditions) - {name for name, _ in BODY_SHAPE_RULES})
    if unknown:
        raise ValueError(f"no body-shape rule named {', '.join(unknown)}")
    out: list[tuple[_V, str]] = []
    for name, shape in BODY_SHAPE_RULES:
        condition = conditions[name]
        if condition is not None:
            out.append((condition, shape))
    return out


#: Exact decimal type a bet is read in and added up in: it holds every bet the rule
#: admits (``spec.GAME_EVENT_FIELD["bet"]``: 18 integer digits, 8 decimals) exactly.
BET_DECIMAL = dt.Decimal(38, 9)

_LATENCY_SCALE = {"ms": 1.0, "s": 1000.0, "us": 0.001}
_FILE_FORMATS = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".jsonl.gz": "jsonl",
    ".jsonl.zst": "jsonl", ".ndjson.gz": "jsonl", ".ndjson.zst": "jsonl",
    ".parquet": "parquet",
}  # fmt: skip


class DeliveryLogError(GptoolsError, ValueError):
    """The log itself cannot be read: a missing file, a record without a usable
    ``received_at`` or ``status``, a malformed line under ``strict=True``. The message
    names the source and the place. ``io_failed`` is true when the log was not at fault
    but reaching it failed (a PostgreSQL store that does not answer): the CLI's exit 1,
    as for every store command, not the bad input's 2."""

    def __init__(self, message: str, *, io_failed: bool = False) -> None:
        super().__init__(message)
        self.io_failed = io_failed


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnMapping:
    """Where the four contract fields live in a log written by another system.

    Each attribute names the source column (JSONL: top-level key) holding that field;
    ``payload`` is a JSON object column, ``body`` a raw-text column, either may be absent
    from a record. ``latency_unit`` says what unit the latency column is in (``ms``, ``s``
    or ``us``); it is converted to milliseconds.

    ``campaign_id`` (optional, no default) names a column holding the campaign each
    delivery belongs to, for a log whose writer knows it: the campaign results then
    attribute each action by it instead of by the assumed rule
    (:data:`gptools.spec.CAMPAIGN_ATTRIBUTION`). The readers add it to the normalised
    relation as the text column :data:`CAMPAIGN_ID` (a number is taken as its text,
    surrounding whitespace is dropped, an empty or absent value is NULL); the delivery
    analysis ignores it.

    >>> ColumnMapping(received_at="time", status="upstream_status", latency_ms="request_time",
    ...               body="request_body", latency_unit="s",
    ...               campaign_id="promo_id")  # doctest: +ELLIPSIS
    ColumnMapping(...)
    """

    received_at: str = "received_at"
    status: str = "status"
    latency_ms: str = "latency_ms"
    payload: str = "payload"
    body: str = "body"
    latency_unit: Literal["ms", "s", "us"] = "ms"
    campaign_id: str | None = None

    def __post_init__(self) -> None:
        if self.latency_unit not in _LATENCY_SCALE:
            raise ValueError(
                f"latency_unit must be one of {sorted(_LATENCY_SCALE)}, got {self.latency_unit!r}"
            )
        if self.campaign_id is not None and not self.campaign_id:
            raise ValueError("campaign_id must name a column (or be None)")

    def source_columns(self) -> list[str]:
        """The source columns this mapping reads, in the readers' order: the five
        contract columns, then the campaign id column when it names one."""
        out = [self.received_at, self.status, self.latency_ms, self.payload, self.body]
        return out + ([self.campaign_id] if self.campaign_id is not None else [])


DEFAULT_MAPPING = ColumnMapping()


def latency_scale(mapping: ColumnMapping) -> float:
    """The factor that turns the mapping's latency unit into milliseconds."""
    return _LATENCY_SCALE[mapping.latency_unit]


def campaign_text(value: ir.Value) -> ir.Value:
    """A campaign id as the results compare it: text without surrounding whitespace,
    NULL when empty (:class:`ColumnMapping`'s ``campaign_id``). Both engines' readers
    apply it, so their ids are equal."""
    result: ir.Value = value.cast("string").strip().nullif("")
    return result


def nothing_known(action_id_type: dt.DataType) -> dict[str, ir.Value]:
    """The :data:`KNOWN_COLUMNS` of a reader without a typed reading: no row proved,
    every value NULL in the type :func:`._metrics.validate` gives it (``action_id_type``:
    the engine's, its dialect's ``ACTION_ID_TYPE``)."""
    types = (
        action_id_type, dt.string, dt.string, dt.string, dt.string, dt.timestamp, BET_DECIMAL,
        dt.string,
    )  # fmt: skip
    known = {name: ibis.null(t) for name, t in zip(KNOWN_COLUMNS[1:], types, strict=True)}
    return {KNOWN_VALID: ibis.literal(False), **known}


def refuse_absent_fields(name: str, column: str, present: Any) -> None:
    """Refuse a payload struct column without every field of the notification: no record
    of such a file could be valid, so it is foreign, not a log of invalid deliveries."""
    absent = [f for f in PAYLOAD_FIELDS if f not in set(present)]
    if absent:
        raise DeliveryLogError(
            f"{name}: the {column!r} column has no field {', '.join(absent)} (a game event "
            f"notification has {', '.join(PAYLOAD_FIELDS)}); pass a ColumnMapping naming "
            "the request body, or export the log with gptools webhooks export"
        )


#: A condition on a normalised relation, given the relation.
Where = Callable[[ir.Table], ir.Value]


def unplaced(table: ir.Table) -> ir.Value:
    """A loaded row (:meth:`BaseDeliveryLog.load`) without a usable ``received_at`` or
    ``status``: the load refuses the log (a malformed line apart, which is counted)."""
    result: ir.Value = (table.received_at.isnull() | table.status.isnull()) & (
        table.reason.isnull() | (table.reason != MALFORMED)
    )
    return result


def unplaced_raw(t: ir.Table) -> ir.Value:
    """A raw record that cannot be placed in time or classified (a malformed line
    apart)."""
    result: ir.Value = (t.received_at.isnull() | t.status.isnull()) & (t.shape != MALFORMED)
    return result


# --------------------------------------------------------------------------------------
# Sources: the format a name implies, the files it names, what an engine reads for them
# --------------------------------------------------------------------------------------


def checked_source(source: str | Path) -> str:
    """``source`` as text, or a :class:`DeliveryLogError` for a name that can name no
    log: an empty one (which would read the current folder) or one the system refuses as
    too long."""
    text = str(source)
    if not text.strip():
        raise DeliveryLogError("an empty name names no delivery log")
    if "://" not in text:
        try:
            Path(text).exists()
        except OSError as exc:
            # Path.exists swallows only "no such file"; a name too long raises.
            shown = text if len(text) <= 80 else f"{text[:40]}...{text[-20:]}"
            raise DeliveryLogError(f"{shown}: {exc.strerror or exc}") from None
    return text


def detect_format(source: str | Path) -> str:
    """The format implied by a path, glob, directory or URL (one :func:`checked_source`
    passed); a :class:`DeliveryLogError` says how to name it."""
    text = str(source)
    if text.startswith(("postgresql://", "postgres://")):
        return "postgres"
    if text.startswith("sqlite:///"):
        return "sqlite"
    if Path(text).is_file():
        # The first bytes win over the name: an export renamed, a log compressed.
        kind = _files.magic(text)
        if kind is not None:
            return "parquet" if kind == "parquet" else "jsonl"
    name = Path(text).name.lower()
    stores = ((".sqlite", "sqlite"), (".sqlite3", "sqlite"), (".db", "sqlite"))
    for suffix, fmt in (*_FILE_FORMATS.items(), *stores):
        if name.endswith(suffix):
            return fmt
    if Path(text).is_dir():
        found = {fmt for f in _log_files(Path(text)) for fmt in [_file_format(f)] if fmt}
        if len(found) == 1:
            return found.pop()
        if found:
            raise DeliveryLogError(
                f"{text}: holds both JSONL and Parquet logs; pass format= or a glob"
            )
        raise DeliveryLogError(f"{text}: no JSONL or Parquet log in this directory")
    raise DeliveryLogError(
        f"{redact_url(text)}: cannot tell the log format from the name; pass format= one of "
        f"{', '.join(f for f in LOG_FORMATS if f != 'auto')}"
    )


def _file_format(path: Path) -> str | None:
    name = path.name.lower()
    return next((fmt for suffix, fmt in _FILE_FORMATS.items() if name.endswith(suffix)), None)


def _log_files(directory: Path) -> list[Path]:
    # Hidden and underscore files are a writer's bookkeeping (_SUCCESS, .crc), not logs.
    return sorted(
        p for p in directory.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_"))
                                   for part in p.relative_to(directory).parts)
    )  # fmt: skip


def resolve_files(
    source: str | Path,
    fmt: str,
    *,
    format_of: Callable[[Path], str | None] = _file_format,
    error: Callable[[str], Exception] = DeliveryLogError,
) -> list[str]:
    """The files a file source names: the file itself (a path that exists is literal,
    glob characters and all), the matches of a glob (``**`` recurses), or every file of
    the format (``format_of`` a name: a log's by default) under a directory (partitions
    such as ``date=2026-03-01/`` included), sorted. A name that matches nothing is an
    ``error`` (a log's by default; the wallet's ledger raises its own)."""
    text = str(source)
    path = Path(text)
    if path.is_dir():
        files = [p for p in _log_files(path) if format_of(p) == fmt]
    elif path.is_file():
        files = [path]
    elif glob.has_magic(text):
        files = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
    else:
        raise error(f"{text}: no such file")
    if not files:
        raise error(f"{text}: no {fmt} file matches")
    return [str(p) for p in files]


def readable_jsonl(
    files: list[str],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    force: bool = False,
    decompress_zstd: bool = False,
    temp_directory: str | Path | None = None,
) -> _files.ReadableFiles:
    """What an engine reads for local JSONL files (:func:`._files.readable`), after the
    checks both engines share: a Parquet file is not JSONL; a file whose first
    :data:`._files.SNIFF_LINES` non-blank lines are mostly not JSON objects (a CSV, a
    binary file) is refused unless ``force``; lines over ``max_line_bytes`` are found."""
    if max_line_bytes < 1:
        raise DeliveryLogError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
    out = _files.ReadableFiles()
    try:
        for path in files:
            kind = _files.magic(path)
            if kind == "parquet":
                raise DeliveryLogError(
                    f"{path}: is a Parquet file, not JSONL; read it with format='parquet' / "
                    "--format parquet, or leave the format to auto"
                )
            if not force:
                lines = _files.first_lines(path)
                objects = sum(map(_files.is_json_object, lines))
                if 2 * objects < len(lines):
                    raise DeliveryLogError(
                        f"{path}: does not look like a JSONL delivery log ({len(lines) - objects} "
                        f"of its first {len(lines)} lines are not JSON objects); force=True / "
                        "--force analyses it anyway"
                    )
            _files.readable(
                path, out, compression=kind, max_line_bytes=max_line_bytes,
                long_lines=_files.count_long_lines(path, max_line_bytes),
                decompress_zstd=decompress_zstd, temp_directory=temp_directory,
            )  # fmt: skip
    except OSError as exc:
        out.cleanup()
        raise DeliveryLogError(f"{exc.filename or files[0]}: {exc.strerror or exc}") from None
    except BaseException:
        out.cleanup()
        raise
    return out


def readable_literal(files: list[str], temp_directory: str | Path | None) -> _files.ReadableFiles:
    """The files behind links with plain names where a name holds glob characters: both
    engines expand a pattern in a name they are given, and a path that exists is
    literal."""
    out = _files.ReadableFiles()
    for path in files:
        _files.readable(
            path, out, compression=None, long_lines=0, max_line_bytes=1, decompress_zstd=False,
            temp_directory=temp_directory,
        )  # fmt: skip
    return out


# --------------------------------------------------------------------------------------
# The log both engines implement
# --------------------------------------------------------------------------------------


class BaseDeliveryLog(abc.ABC):
    """A delivery log opened on an engine, not read yet: what the metrics, the analysis
    and the campaign results use of it, whichever engine holds it (DuckDB:
    :class:`._readers.DeliveryLog`; Spark: :class:`._readers_spark.SparkDeliveryLog`).

    ``source`` names where it came from (a path, a glob, or a URL without password);
    ``files`` the files it resolved to; ``readable`` what the engine reads for them (and
    the way back to their names); ``con`` the engine's Ibis backend; ``tag`` makes this
    log's table names its own. :meth:`load` materialises a table built from the
    normalised relation. Close the log (or use it as a context manager) to release what
    the engine holds for it.
    """

    __slots__ = ()

    con: Any
    source: str
    format: str
    #: Normalised relations to try in order (the first is :attr:`raw`).
    candidates: list[ir.Table]
    files: list[str]
    mapping: ColumnMapping
    tag: str
    readable: _files.ReadableFiles
    #: The engine's name and its dialect module (:mod:`._dialect_duckdb` or
    #: :mod:`._dialect_spark`: the same names, each engine's functions).
    engine: str
    dialect: ModuleType

    @property
    def raw(self) -> ir.Table:
        """The normalised relation (lazy: reading it scans the source)."""
        return self.candidates[0]

    @abc.abstractmethod
    def execute(self, expr: ir.Expr) -> Any:
        """Run an expression on the engine: a pandas DataFrame (or a scalar)."""

    @abc.abstractmethod
    def materialise(self, name: str, expr: ir.Table) -> ir.Table:
        """``expr`` computed once into this log's table ``name``."""

    @abc.abstractmethod
    def load(self, name: str, build: Callable[[ir.Table], ir.Table]) -> ir.Table:
        """Scan the source once into the table ``name`` holding ``build(raw)``; records
        without a usable ``received_at`` or ``status`` (:func:`unplaced`, malformed lines
        apart) are refused with a :class:`DeliveryLogError` naming the first."""

    @abc.abstractmethod
    def places(self, where: Where, *, limit: int | None = None) -> list[str]:
        """Where the raw rows matching ``where(raw)`` are, in words (``FILE line N`` for
        JSONL)."""

    @abc.abstractmethod
    def _numbered(self, where: Where, limit: int | None) -> list[tuple[str, int]]:
        """(file, true line number) of the JSONL rows matching ``where``, in file
        order."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the engine holds for this log."""

    def malformed_lines(self, limit: int | None = None) -> pd.DataFrame:
        """The lines that are not JSON objects: ``file`` and ``line`` (true, 1-based, blank
        lines counted), in file order. Scans the files again (only those that have such
        lines are numbered)."""
        places = self._numbered(lambda t: t.shape == MALFORMED, limit)
        return pd.DataFrame(places, columns=["file", "line"])

    def _refuse_unplaced_count(self, n_bad: int) -> None:
        if n_bad:
            first = self.places(unplaced_raw, limit=1)
            raise DeliveryLogError(
                f"{self.source}: {n_bad} record(s) without a usable received_at (ISO 8601 "
                f"time) or integer status; the first is {first[0]}"
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
