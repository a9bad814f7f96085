"""Player lists from files, DataFrames and iterables, read as a stream of rows.

Every source turns into :class:`PlayerRow` values (the row's line number and its raw,
untrimmed player-id value) and has a fingerprint, a hash of its content, which names the
load in the journal so that running the same load again resumes it.

Files (CSV, TSV, any delimited text, Excel ``.xlsx``/``.xlsm``) are never read whole:
the encoding is detected in one streaming pass (which also computes the fingerprint), and
rows are then parsed one by one, so memory stays flat whatever the file size.
"""

from __future__ import annotations

import abc
import codecs
import csv
import hashlib
import io
import json
import math
import os
import re
import sys
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple, TypeAlias

from gptools.errors import GptoolsError, import_extra

if TYPE_CHECKING:
    import pandas as pd

#: Header names recognised as the player-id column, compared case-insensitively and
#: ignoring spaces, ``_``, ``-`` and ``.`` (so ``Player ID``, ``player_id`` and
#: ``PLAYER-ID`` all match ``playerId``). Earlier names win when several columns match.
PLAYER_ID_HEADERS: tuple[str, ...] = (
    "playerId",
    "externalPlayerId",
    "playerIds",
    "player",
    "players",
    "externalId",
    "customerId",
    "userId",
    "accountId",
    "memberId",
    "id",
)

#: Columns of the rejects file: fix ``playerId`` and feed the file back (the loader finds
#: the ``playerId`` column by its name and ignores the others).
REJECTS_COLUMNS: tuple[str, ...] = ("line", "playerId", "reason_code", "reason")

#: First characters a spreadsheet reads as a formula (or that hide one): a rejects-file
#: cell starting with one is written with a ``'`` in front, so a spreadsheet shows it as
#: text (the OWASP advice against CSV injection).
FORMULA_STARTS: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: str) -> str:
    """``value`` as a spreadsheet shows it as text: a ``'`` in front when it starts with
    one of :data:`FORMULA_STARTS` (undone by :func:`unescape_spreadsheet_cell`)."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def unescape_spreadsheet_cell(value: str) -> str:
    """The value :func:`spreadsheet_safe` was given: its ``'`` removed (only a ``'``
    followed by one of :data:`FORMULA_STARTS`, so no other value changes)."""
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA_STARTS) else value


#: Delimiters tried, in order of preference when two fit equally well.
DELIMITERS: tuple[str, ...] = (",", "\t", ";", "|")

#: File name endings read as Excel workbooks (openpyxl, read-only streaming).
EXCEL_SUFFIXES: frozenset[str] = frozenset({".xlsx", ".xlsm", ".xltx", ".xltm"})

_BLOCK = 1 << 20
_SAMPLE_CHARS = 64 * 1024
_SAMPLE_LINES = 200
#: Bytes that Windows-1252 leaves undefined: a file that is not UTF-8 and holds one decodes
#: only as Latin-1 (where they are control characters), so it is not taken for text.
_CP1252_HOLES = re.compile(rb"[\x81\x8d\x8f\x90\x9d]")
#: The first bytes of common binary formats, and what to call them in the refusal.
_BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive; an Excel workbook needs its .xlsx name"),
    (b"PK\x05\x06", "an empty ZIP archive"),
    (b"\x1f\x8b", "gzip-compressed data; decompress it first"),
    (b"\xfd7zXZ\x00", "xz-compressed data; decompress it first"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office file; save it as .xlsx or CSV"),
    (b"\x7fELF", "an executable"),
)
#: Above this share of control characters (tab, CR and LF aside) in its first characters,
#: a decoded file is not a list of ids but binary data that happened to decode.
_MAX_CONTROL_SHARE = 0.10
_TEXT_CONTROLS = frozenset("\t\r\n")
# A field no delimiter can split: single-column files keep commas and tabs inside ids.
_NO_DELIMITER = "\x00"


class PlayerListError(GptoolsError, ValueError):
    """A player list cannot be read: names the source, the line when known, and why."""


class PlayerRow(NamedTuple):
    """One input row: ``line`` (the line number in a file, where the row starts; the
    1-based position for other sources) and ``raw``, the player-id value as read, or
    ``None`` when the row has no field in the player-id column."""

    line: int
    raw: str | None


_IGNORED_IN_HEADERS = str.maketrans("", "", " \t\r\n\u00a0\ufeff_-.")


def normalise_header(name: object) -> str:
    """The form header names are compared in: lower case, without spaces, ``_-.`` or BOM."""
    return str(name).translate(_IGNORED_IN_HEADERS).lower()


#: The normalised forms of :data:`PLAYER_ID_HEADERS`, with their rank.
KNOWN_HEADER_FORMS = {normalise_header(h): i for i, h in enumerate(PLAYER_ID_HEADERS)}


def is_header_name(value: str) -> bool:
    """Whether ``value`` is one of :data:`PLAYER_ID_HEADERS` (compared as headers are)."""
    return normalise_header(value) in KNOWN_HEADER_FORMS


def _is_header(first: list[str], index: int | None, column: str | int | None) -> bool:
    """Whether the first record is a header: its player-id cell is a known header name, or
    the name the caller gave for the column."""
    if index is None or index >= len(first):
        return False
    cell = first[index]
    return is_header_name(cell) or (
        isinstance(column, str) and normalise_header(cell) == normalise_header(column)
    )


def _pick_column(names: Sequence[object], column: str | int | None, where: str) -> int | None:
    """Index of the player-id column among header ``names``; None when none matches and
    the caller did not name one (the first row is then data)."""
    normalised = [normalise_header(n) for n in names]
    if isinstance(column, int):
        if column < 0:
            raise PlayerListError(f"{where}: column index must be 0 or more, got {column}")
        return column
    if column is not None:
        wanted = normalise_header(column)
        if wanted in normalised:
            return normalised.index(wanted)
        raise PlayerListError(
            f"{where}: no column named {column!r}; the header row has {list(map(str, names))}"
        )
    ranked = sorted(
        (rank, i)
        for i, n in enumerate(normalised)
        if (rank := KNOWN_HEADER_FORMS.get(n)) is not None
    )
    return ranked[0][1] if ranked else None


def _text(value: object) -> str:
    """A cell or item as text: integral numbers without '.0', missing values as ''."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value.is_integer():
            return str(int(value))
        return repr(value)
    pandas = sys.modules.get("pandas")
    if pandas is not None and (value is pandas.NA or value is pandas.NaT):
        return ""
    return str(value)


# --------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------


@dataclass
class Source(abc.ABC):
    """A player list ready to be read: what it is, how it is read, and its fingerprint.

    ``description`` names it in messages; ``details`` says what was detected (encoding,
    delimiter, column, header) for the summary.
    """

    description: str
    fingerprint: str
    details: dict[str, str] = field(default_factory=dict)

    @abc.abstractmethod
    def rows(self) -> Iterator[PlayerRow]:
        """Yield every row of the list, in order (a fresh pass on each call)."""

    def close(self) -> None:
        """Release what the source holds (a temporary copy); reading again is then an error."""
        return None


@dataclass
class _TextFileSource(Source):
    path: Path = Path()
    encoding: str = "utf-8"
    delimiter: str = ","
    column: int = 0
    header: bool = False

    def rows(self) -> Iterator[PlayerRow]:
        with self.path.open("rb") as raw:
            text = io.TextIOWrapper(raw, encoding=self.encoding, newline="")
            yield from _csv_rows(text, self)


def _csv_rows(text: IO[str], src: _TextFileSource) -> Iterator[PlayerRow]:
    reader = csv.reader(text, delimiter=src.delimiter, strict=False)
    single = src.delimiter == _NO_DELIMITER
    start = 1
    try:
        for record in reader:
            line, start = start, reader.line_num + 1
            if src.header and line == 1:
                continue
            if single:
                # A NUL splits a record here; put it back so validation sees it.
                yield PlayerRow(line, _NO_DELIMITER.join(record))
            elif not record:
                yield PlayerRow(line, "")
            elif src.column < len(record):
                yield PlayerRow(line, record[src.column])
            else:
                yield PlayerRow(line, None)
    except csv.Error as exc:
        raise PlayerListError(f"{src.path}, line {start}: cannot parse the row: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise PlayerListError(
            f"{src.path}, near line {start}: not valid {src.encoding} ({exc.reason}); "
            "name the encoding with encoding=..."
        ) from exc


@dataclass
class _ExcelSource(Source):
    path: Path = Path()
    sheet: str | int | None = None
    column: int = 0
    header: bool = False

    def rows(self) -> Iterator[PlayerRow]:
        book, sheet = _open_sheet(self.path, self.sheet)
        try:
            for line, values in enumerate(sheet.iter_rows(values_only=True), start=1):
                if self.header and line == 1:
                    continue
                if self.column < len(values):
                    yield PlayerRow(line, _text(values[self.column]))
                elif not values:
                    yield PlayerRow(line, "")
                else:
                    yield PlayerRow(line, None)
        finally:
            book.close()


def _open_sheet(path: Path, sheet: str | int | None) -> tuple[Any, Any]:
    openpyxl = import_extra("openpyxl", "excel", "Reading Excel player lists")

    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds for a damaged workbook
        raise PlayerListError(f"{path}: cannot open as an Excel workbook: {exc}") from exc
    names = book.sheetnames
    try:
        if sheet is None:
            return book, book.worksheets[0]
        if isinstance(sheet, int):
            return book, book.worksheets[sheet]
        return book, book[sheet]
    except (IndexError, KeyError):
        book.close()
        raise PlayerListError(f"{path}: no sheet {sheet!r}; the workbook has {names}") from None


@dataclass
class _ValuesSource(Source):
    """Values already in memory (a Series, a DataFrame column, a list...)."""

    values: Iterable[object] = ()

    def rows(self) -> Iterator[PlayerRow]:
        for line, value in enumerate(self.values, start=1):
            yield PlayerRow(line, _text(value))


@dataclass
class _SpoolSource(Source):
    """A one-shot iterator copied to a temporary file (one JSON string a line), so it
    can be fingerprinted and read again without holding it in memory."""

    spool: Path = Path()

    def rows(self) -> Iterator[PlayerRow]:
        with self.spool.open(encoding="utf-8") as fh:
            for line, text in enumerate(fh, start=1):
                yield PlayerRow(line, json.loads(text))

    def close(self) -> None:
        """Delete the temporary copy."""
        self.spool.unlink(missing_ok=True)


SourceLike: TypeAlias = "str | os.PathLike[str] | pd.DataFrame | pd.Series[Any] | Iterable[object]"


def open_source(
    source: SourceLike,
    *,
    column: str | int | None = None,
    encoding: str | None = None,
    delimiter: str | None = None,
    sheet: str | int | None = None,
) -> Source:
    """Inspect ``source`` and return a :class:`Source` ready to be read.

    ``source`` is a file path (CSV/TSV/delimited text or Excel), a pandas DataFrame or
    Series, or any iterable of ids. ``column`` names the player-id column (header name or
    0-based position); by default it is found among :data:`PLAYER_ID_HEADERS`, and a file
    with a single column needs no header. ``encoding`` and ``delimiter`` override the
    detection, ``sheet`` picks an Excel sheet (name or 0-based index; default the first).
    Raises :class:`PlayerListError` when the source cannot be read.
    """
    if isinstance(source, str | os.PathLike):
        return _open_file(Path(source), column, encoding, delimiter, sheet)
    # pandas is looked up, not imported: a loader process that reads files never pays for
    # it, and a DataFrame can only exist where pandas is already imported.
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(source, pandas.DataFrame):
        return _open_frame(source, column)
    if pandas is not None and isinstance(source, pandas.Series):
        values = source.tolist()
        return _ValuesSource("a pandas Series", _hash_values(values), {"kind": "Series"}, values)
    if isinstance(source, str | bytes):
        raise PlayerListError("a player list must be a path, a DataFrame/Series or an iterable")
    if isinstance(source, set | frozenset):
        # Set order changes between processes; sort so a resumed load sees the same list.
        ordered = sorted(source, key=str)
        return _ValuesSource("a set of ids", _hash_values(ordered), {"kind": "set"}, ordered)
    if isinstance(source, Sequence):
        return _ValuesSource(
            f"a {type(source).__name__} of ids", _hash_values(source), {"kind": "sequence"}, source
        )
    if isinstance(source, Iterable):
        return _spool(source)
    raise PlayerListError(f"cannot read players from a {type(source).__name__}")


def _hash_values(values: Iterable[object]) -> str:
    digest = hashlib.sha256(b"values\n")
    for value in values:
        digest.update(json.dumps(_text(value)).encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()


def _spool(items: Iterable[object]) -> Source:
    digest = hashlib.sha256(b"values\n")
    fd, name = tempfile.mkstemp(prefix="gptools-players-", suffix=".jsonl")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for item in items:
                encoded = json.dumps(_text(item))
                digest.update(encoded.encode("utf-8"))
                digest.update(b"\n")
                fh.write(encoded)
                fh.write("\n")
    except BaseException:
        os.unlink(name)
        raise
    return _SpoolSource("an iterable of ids", digest.hexdigest(), {"kind": "iterable"}, Path(name))


def _open_frame(frame: pd.DataFrame, column: str | int | None) -> Source:
    names = list(frame.columns)
    if len(names) == 0:
        raise PlayerListError("the DataFrame has no columns")
    index = _pick_column(names, column, "the DataFrame")
    if index is None:
        if len(names) != 1:
            raise PlayerListError(
                f"the DataFrame has no player-id column among {list(map(str, names))}; "
                f"known names are {list(PLAYER_ID_HEADERS)}; name it with column=..."
            )
        index = 0
    if index >= len(names):
        raise PlayerListError(f"the DataFrame has {len(names)} columns; no column {index}")
    values = frame.iloc[:, index].tolist()
    name = str(names[index])
    return _ValuesSource(
        f"DataFrame column {name!r}",
        _hash_values(values),
        {"kind": "DataFrame", "column": name},
        values,
    )


# --------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------


def _open_file(
    path: Path,
    column: str | int | None,
    encoding: str | None,
    delimiter: str | None,
    sheet: str | int | None,
) -> Source:
    if not path.exists():
        raise PlayerListError(f"{path}: no such file")
    if path.is_dir():
        raise PlayerListError(f"{path}: is a directory, not a player list")
    if path.suffix.lower() == ".xls":
        raise PlayerListError(f"{path}: old .xls workbooks are not supported; save as .xlsx or CSV")
    scan = _scan(path)
    options = json.dumps([column, encoding, delimiter, sheet])
    fingerprint = hashlib.sha256(f"{scan.fingerprint}\n{options}".encode()).hexdigest()
    if path.suffix.lower() in EXCEL_SUFFIXES:
        return _open_excel(path, column, sheet, fingerprint)
    enc = encoding or scan.encoding or "latin-1"
    try:
        wide = codecs.lookup(enc).name.startswith(("utf-16", "utf-32"))
    except LookupError:
        raise PlayerListError(f"{path}: unknown encoding {enc!r}") from None
    if scan.signature is not None:
        raise _not_text(path, scan.signature)
    if scan.nul and not wide:
        raise _not_text(path, "it holds NUL bytes")
    if encoding is None and scan.encoding is None:
        raise _not_text(
            path,
            "it is neither UTF-8, UTF-16 nor Windows-1252 (bytes such as "
            "0x81 or 0x9D are undefined there); if it really is Latin-1 "
            "text, name the encoding with encoding=...",
        )
    sample = _sample_lines(path, enc)
    _check_text(path, sample)
    delim = delimiter if delimiter is not None else _sniff_delimiter(sample, path)
    if len(delim) != 1:
        raise PlayerListError(f"{path}: the delimiter must be one character, got {delim!r}")
    first = _first_record(sample, delim)
    index = _pick_column(first, column, str(path))
    header = _is_header(first, index, column)
    if index is None:
        if delim != _NO_DELIMITER and max((len(r) for r in _records(sample, delim)), default=1) > 1:
            raise PlayerListError(
                f"{path}, line 1: no player-id column in the header row {first}; known names are "
                f"{list(PLAYER_ID_HEADERS)} (any case); name it with column=..."
            )
        index = 0
    if delim != _NO_DELIMITER and max((len(r) for r in _records(sample, delim)), default=1) == 1:
        delim = _NO_DELIMITER
    details = {
        "kind": "text",
        "encoding": enc,
        "delimiter": "none (one column)" if delim == _NO_DELIMITER else delim,
        "column": str(first[index]) if header else f"field {index + 1}",
        "header": "yes" if header else "no",
    }
    return _TextFileSource(
        str(path),
        fingerprint,
        details,
        path,
        enc,
        delim,
        index if delim != _NO_DELIMITER else 0,
        header,
    )


def _open_excel(path: Path, column: str | int | None, sheet: str | int | None, fp: str) -> Source:
    book, ws = _open_sheet(path, sheet)
    try:
        first_values = next(ws.iter_rows(values_only=True, max_row=1), ())
        widest = max((len(r) for r in ws.iter_rows(values_only=True, max_row=50)), default=0)
        title = ws.title
    finally:
        book.close()
    first = [_text(v) or "" for v in first_values]
    index = _pick_column(first, column, f"{path} (sheet {title!r})")
    header = _is_header(first, index, column)
    if index is None:
        if widest > 1:
            raise PlayerListError(
                f"{path} (sheet {title!r}), row 1: no player-id column in the header row {first}; "
                f"known names are {list(PLAYER_ID_HEADERS)}; name it with column=..."
            )
        index = 0
    details = {
        "kind": "excel",
        "sheet": title,
        "column": str(first[index]) if header else f"column {index + 1}",
        "header": "yes" if header else "no",
    }
    return _ExcelSource(f"{path} (sheet {title!r})", fp, details, path, sheet, index, header)


class _Scan(NamedTuple):
    """What one pass over a file's bytes found."""

    encoding: str | None  # None: not UTF-8, UTF-16 nor Windows-1252 (Latin-1 would decode it)
    fingerprint: str
    nul: bool  # a NUL byte outside a BOM-less UTF-16 guess
    signature: str | None  # the binary format the first bytes announce


def _scan(path: Path) -> _Scan:
    """One streaming pass: the encoding, the SHA-256 of the bytes, and signs of binary data.

    A byte-order mark decides (UTF-8 or UTF-16); NUL bytes in every other position mean
    UTF-16 without one; otherwise UTF-8 when every byte decodes as UTF-8, else
    Windows-1252 unless a byte it leaves undefined occurs (then ``None``: only Latin-1,
    which decodes anything, would read it).
    """
    digest = hashlib.sha256()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    utf8_ok = cp1252_ok = True
    nul = False
    encoding: str | None = None
    signature: str | None = None
    with path.open("rb") as fh:
        first = True
        while block := fh.read(_BLOCK):
            digest.update(block)
            if first:
                first = False
                encoding = _bom_encoding(block[:4096])
                signature = next(
                    (name for magic, name in _BINARY_SIGNATURES if block.startswith(magic)), None
                )
            if encoding is None:
                nul = nul or b"\x00" in block
                if utf8_ok:
                    try:
                        utf8.decode(block)
                    except UnicodeDecodeError:
                        utf8_ok = False
                if cp1252_ok and _CP1252_HOLES.search(block):
                    cp1252_ok = False
        if encoding is None and utf8_ok:
            try:
                utf8.decode(b"", final=True)
            except UnicodeDecodeError:
                utf8_ok = False
    if encoding is None:
        encoding = "utf-8" if utf8_ok else "cp1252" if cp1252_ok else None
    return _Scan(encoding, digest.hexdigest(), nul, signature)


def _not_text(path: Path, why: str) -> PlayerListError:
    return PlayerListError(f"{path}: not a text file of player ids ({why}); nothing was sent")


def _check_text(path: Path, sample: list[str]) -> None:
    """Refuse decoded text that is binary data: a NUL character, or too many controls."""
    text = "".join(sample)
    if "\x00" in text:
        raise _not_text(path, "it holds NUL characters")
    controls = sum(
        1 for ch in text if unicodedata.category(ch) == "Cc" and ch not in _TEXT_CONTROLS
    )
    if text and controls > _MAX_CONTROL_SHARE * len(text):
        raise _not_text(
            path, f"{controls} of its first {len(text)} characters are control characters"
        )


def _bom_encoding(head: bytes) -> str | None:
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if len(head) >= 2 and head.count(0) * 3 >= len(head):
        even = head[0::2].count(0)
        odd = head[1::2].count(0)
        return "utf-16-le" if odd > even else "utf-16-be"
    return None


def _sample_lines(path: Path, encoding: str) -> list[str]:
    """The first complete lines of a text file (line endings kept), decoded."""
    with path.open("rb") as raw:
        text = io.TextIOWrapper(raw, encoding=encoding, newline="")
        try:
            chunk = text.read(_SAMPLE_CHARS)
            complete = len(chunk) < _SAMPLE_CHARS
        except UnicodeDecodeError as exc:
            raise PlayerListError(
                f"{path}: not valid {encoding} ({exc.reason}); name the encoding with encoding=..."
            ) from exc
    lines = chunk.splitlines(keepends=True)
    if not complete and len(lines) > 1:
        lines = lines[:-1]
    return lines[:_SAMPLE_LINES]


def _records(lines: list[str], delimiter: str) -> list[list[str]]:
    try:
        return list(csv.reader(lines, delimiter=delimiter, strict=False))
    except csv.Error:
        return []


def _first_record(lines: list[str], delimiter: str) -> list[str]:
    records = _records(lines, delimiter)
    return records[0] if records else []


def _sniff_delimiter(lines: list[str], path: Path) -> str:
    """The delimiter that splits the sample into the most rows of one width above 1.

    A file where no candidate gives more than one field is a single column: it is then
    read without a delimiter, so ids may hold commas or tabs.
    """
    preferred = list(DELIMITERS)
    if path.suffix.lower() == ".tsv":
        preferred.remove("\t")
        preferred.insert(0, "\t")
    best, best_score = _NO_DELIMITER, 0
    for candidate in preferred:
        widths = [len(r) for r in _records(lines, candidate) if r]
        if not widths:
            continue
        width, count = Counter(widths).most_common(1)[0]
        if width > 1 and count > best_score:
            best, best_score = candidate, count
    return best
