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
from gptools.participants._excel_cells import cell_text

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

#: More names a header row gives the player-id column: logins and user names, and the
#: words for player, user and id in common languages (compared as headers are, so any
#: case). A first row holding one is a header; when the rows below it look the same (a
#: list of user names under ``user``), it is ambiguous and the loader asks. Ranked after
#: :data:`PLAYER_ID_HEADERS` when a column is picked.
OTHER_HEADER_NAMES: tuple[str, ...] = (
    "login", "user", "users", "username", "uid", "externalUserId", "account", "member",
    "customer", "customerNumber", "nickname", "client",
    # French, German, Spanish, Italian, Portuguese, Dutch, Polish, Turkish, Swedish
    "joueur", "idJoueur", "identifiant", "utilisateur", "nom d'utilisateur",
    "spieler", "spielerId", "spielerNummer", "benutzer", "benutzername", "kunde", "kundennummer",
    "jugador", "idJugador", "usuario", "nombre de usuario", "cliente",
    "giocatore", "idGiocatore", "utente", "nome utente",
    "jogador", "idJogador", "usuário", "nome de usuário",
    "speler", "spelerId", "gebruiker", "gebruikersnaam", "klant",
    "gracz", "użytkownik", "oyuncu", "kullanıcı", "kullanıcı adı", "spelare", "användare",
    # Russian, Ukrainian, Greek, Chinese, Japanese, Korean
    "игрок", "id игрока", "пользователь", "логин", "гравець", "користувач",
    "παίκτης", "χρήστης", "玩家", "玩家id", "用户", "用户名", "用户id", "账号",
    "プレイヤー", "ユーザー", "ユーザーid", "ユーザー名", "플레이어", "사용자", "아이디",
)  # fmt: skip

#: How many rows above a header may be titles (``Player export 2026``, ``generated ...``).
MAX_TITLE_ROWS = 5

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


_IGNORED_IN_HEADERS = str.maketrans("", "", " \t\r\n\u00a0\ufeff_-.'\u2019")


def normalise_header(name: object) -> str:
    """The form header names are compared in: lower case, without spaces, ``_-.'`` or BOM."""
    return str(name).translate(_IGNORED_IN_HEADERS).lower()


#: The normalised forms of :data:`PLAYER_ID_HEADERS` and :data:`OTHER_HEADER_NAMES`, with
#: their rank.
KNOWN_HEADER_FORMS = {
    form: i
    for i, form in reversed(
        list(enumerate(normalise_header(h) for h in (*PLAYER_ID_HEADERS, *OTHER_HEADER_NAMES)))
    )
}


def _generic(form: str) -> bool:
    """Whether a header form could as well be a player id (``user``, ``player``...), unlike
    one that says "id" or "number" (``playerId``, ``kundennummer``)."""
    return not any(word in form for word in ("id", "number", "nummer"))


def is_header_name(value: str) -> bool:
    """Whether ``value`` is one of :data:`PLAYER_ID_HEADERS` (compared as headers are)."""
    return normalise_header(value) in KNOWN_HEADER_FORMS


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


class _Layout(NamedTuple):
    """How a file's rows are read: the player-id ``column`` (0-based), how many rows above
    the list are skipped (titles), whether a header row follows them, how the summary
    names the column, and whether the file is a rejects file (its cells unescaped)."""

    column: int
    skip: int
    header: bool
    name: str
    unescape: bool = False


def _has_digit(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def _has_space(text: str) -> bool:
    return any(ch.isspace() for ch in text)


#: Share of the rows below that must have a trait for a first row without it to stand out.
_SHAPE_SHARE = 0.9


def _unlike(cell: str, below: Sequence[str]) -> bool:
    """Whether ``cell`` differs in kind from the non-empty cells ``below`` it: it has no
    digit where they nearly all have one, or a space where nearly none has one. An empty
    cell, or nothing below to compare with, is not unlike."""
    cell = cell.strip()
    body = [b.strip() for b in below if b.strip()][:_SAMPLE_LINES]
    if not cell or not body:
        return False
    with_digit = sum(map(_has_digit, body)) / len(body)
    with_space = sum(map(_has_space, body)) / len(body)
    return (not _has_digit(cell) and with_digit >= _SHAPE_SHARE) or (
        _has_space(cell) and with_space <= 1 - _SHAPE_SHARE
    )


def _cell(record: Sequence[str], index: int) -> str:
    return record[index] if index < len(record) else ""


def _row_text(record: Sequence[str]) -> str:
    return " ".join(c.strip() for c in record if c.strip())


def _names_column(record: Sequence[str], column: str | int | None) -> bool:
    """Whether ``record`` is a header row: it names the wanted column, or (no name wanted)
    holds a known header name where the column is looked for."""
    if isinstance(column, str):
        return normalise_header(column) in {normalise_header(c) for c in record}
    cells = [_cell(record, column)] if isinstance(column, int) else record
    return any(is_header_name(c) for c in cells)


def _below_ids(above: Sequence[Sequence[str]], index: int, body: Sequence[str]) -> bool:
    """Whether a row that names the column stands below rows ``above`` that are all ids
    like the ``body`` below it: then it is no header (a header sits above the data) but a
    row of the list, which validation rejects as ``header_row``. Nothing below it, or
    rows above unlike the body (titles), leave it a header."""
    if not above or not any(b.strip() for b in body):
        return False
    return all((cell := _cell(row, index).strip()) and not _unlike(cell, body) for row in above)


def _ambiguous(where: str, rows: Sequence[str]) -> PlayerListError:
    shown = ", ".join(repr(r[:40]) for r in rows[:3])
    return PlayerListError(
        f"{where}: cannot tell whether the first row(s) ({shown}) are a header, titles or "
        "player ids; say which with header=True or header=False, and skip_rows=N for N "
        "title rows above the list; nothing was sent"
    )


def _layout(
    records: Sequence[Sequence[str]],
    column: str | int | None,
    header: bool | None,
    skip_rows: int | None,
    where: str,
    unit: str = "line",
    name_it: str = "name it with column=...",
) -> _Layout:
    """Where the list starts in the sampled ``records`` and which column holds the ids.

    A header is a row that names the column (:data:`PLAYER_ID_HEADERS`,
    :data:`OTHER_HEADER_NAMES`, or ``column`` when it is a name), found in the first row
    or below at most :data:`MAX_TITLE_ROWS` title rows (rows unlike the list, such as
    ``Player export 2026``), which are skipped. Without a header name, a first row unlike
    the rows below it (``login`` above ``u-1``, ``u-2``) makes the layout ambiguous, and so
    does a header name that could as well be an id (``user`` above ``alice``, ``bob``):
    :class:`PlayerListError` asks for ``header=`` and ``skip_rows=``, which decide.
    A row naming the column below rows that are ids like those under it is no header but
    a row of a list without one (``players`` on the third row of an id list). Given
    ``header=`` always wins over what the rows look like. ``name_it`` ends the message
    of a file without a player-id column (how to name the column, or another sheet).
    """
    width = max((len(r) for r in records), default=0) or 1
    if isinstance(column, int) and column < 0:
        raise PlayerListError(f"{where}: column index must be 0 or more, got {column}")
    if isinstance(column, int) and column >= width:
        raise PlayerListError(
            f"{where}: there is no column {column}: the rows have {width} column(s), "
            f"numbered 0 to {width - 1}; nothing was sent"
        )
    if skip_rows is not None and skip_rows < 0:
        raise PlayerListError(f"{where}: skip_rows must be 0 or more, got {skip_rows}")
    skip = skip_rows or 0
    rows = records[skip:]
    if header is False:
        if isinstance(column, str):
            raise PlayerListError(
                f"{where}: without a header row, give the column's position (0 for the "
                f"first), not a name ({column!r})"
            )
        if column is None and width > 1:
            raise PlayerListError(
                f"{where}: without a header row, give the player-id column's position "
                "(0 for the first) with column=..."
            )
        return _Layout(column or 0, skip, False, f"field {(column or 0) + 1}")
    if header is True:
        found: int | None = 0
    else:
        # With skip_rows given the header (if any) is the next row; else titles may come first.
        reach = 1 if skip_rows is not None else MAX_TITLE_ROWS + 1
        found = next(
            (i for i in range(min(len(rows), reach)) if _names_column(rows[i], column)), None
        )
    if found is not None:
        names = list(rows[found]) if rows else []
        index = _pick_column(names, column, where)
        if index is None and width == 1:
            index = 0  # one column: the header (given with header=True) names it
        if index is None:
            raise PlayerListError(
                f"{where}: no player-id column in the header row {names}; known names are "
                f"{list(PLAYER_ID_HEADERS)} (any case); {name_it}"
            )
        body = [_cell(r, index) for r in rows[found + 1 :]]
        name = _cell(names, index)
        # A header sits above the data: below ids, the row is one of the list (validation
        # rejects it as header_row) and the file is read without a header.
        if header is not None or not _below_ids(rows[:found], index, body):
            if header is None:
                titles = [_row_text(r) for r in rows[:found]]
                if any(not _unlike(t, body) for t in titles):
                    raise _ambiguous(where, [*titles, name])
                if column is None and _generic(normalise_header(name)) and not _unlike(name, body):
                    raise _ambiguous(where, [name])
            rejects = [normalise_header(c) for c in names] == [
                normalise_header(c) for c in REJECTS_COLUMNS
            ]
            return _Layout(index, skip + found, True, name, rejects)
    if isinstance(column, str):
        _pick_column(list(rows[0]) if rows else [], column, where)  # raises: no such column
    if column is None and width > 1:
        first = list(rows[0]) if rows else []
        raise PlayerListError(
            f"{where}, {unit} {skip + 1}: no player-id column in the header row {first}; "
            f"known names are {list(PLAYER_ID_HEADERS)} (any case); {name_it}"
        )
    index = column if isinstance(column, int) else 0
    cells = [_cell(r, index) for r in rows]
    # Title rows: the first k rows each unlike the rows after them (k at most MAX_TITLE_ROWS).
    leading = max(
        (
            k
            for k in range(1, min(MAX_TITLE_ROWS, len(cells) - 1) + 1)
            if all(_unlike(cell, cells[k:]) for cell in cells[:k])
        ),
        default=0,
    )
    if leading:
        raise _ambiguous(where, cells[:leading])
    return _Layout(index, skip, False, f"field {index + 1}")


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
    #: Rows above the header (or the list) that are not read: titles.
    skip: int = 0
    #: The number of fields of the widest sampled row (a swallowed row has as many).
    width: int = 1
    #: A rejects file: the ``'`` that kept a cell text in a spreadsheet is removed.
    unescape: bool = False

    def rows(self) -> Iterator[PlayerRow]:
        with self.path.open("rb") as raw:
            text = io.TextIOWrapper(raw, encoding=self.encoding, newline="")
            yield from _csv_rows(text, self)


def _csv_rows(text: IO[str], src: _TextFileSource) -> Iterator[PlayerRow]:
    # The raw lines of the record being read: the reader reads no line ahead, so after
    # each record they are that record's, and a record over several lines can be told
    # closed (its quote ended on its last line) from cut off by the end of the file.
    raw: list[str] = []

    def lines() -> Iterator[str]:
        for text_line in text:
            raw.append(text_line)
            yield text_line

    reader = csv.reader(lines(), delimiter=src.delimiter, strict=False)
    single = src.delimiter == _NO_DELIMITER
    start = 1
    unread = src.skip + (1 if src.header else 0)
    try:
        for number, record in enumerate(reader):
            line, start = start, reader.line_num + 1
            if reader.line_num > line:
                _check_swallowed(src, record, "".join(raw), line, reader.line_num)
            raw.clear()
            if number < unread:
                continue
            if single:
                # A NUL splits a record here; put it back so validation sees it.
                value = _NO_DELIMITER.join(record)
            elif not record:
                value = ""
            elif src.column < len(record):
                value = record[src.column]
            else:
                yield PlayerRow(line, None)
                continue
            yield PlayerRow(line, unescape_spreadsheet_cell(value) if src.unescape else value)
    except csv.Error as exc:
        raise PlayerListError(f"{src.path}, line {start}: cannot parse the row: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise PlayerListError(
            f"{src.path}, near line {start}: not valid {src.encoding} ({exc.reason}); "
            "name the encoding with encoding=..."
        ) from exc


def _check_swallowed(
    src: _TextFileSource, record: list[str], raw: str, line: int, last: int
) -> None:
    """Refuse a row that runs over several lines when a quote swallowed lines: its quote
    is still open at the end of the file, or a field holds whole rows of the file (lines
    with as many delimiters as a row). A quoted field closed on a later line is a row like
    any other (RFC 4180 allows line breaks inside quotes): a name on two lines loads, and
    an id holding a line break is that row's ``control_character`` rejection."""
    swallowed = _open_quote(raw, src.delimiter) or any(
        len(inner.split(src.delimiter)) >= max(src.width, 2)
        for field in record
        for inner in field.splitlines()[1:]
    )
    if swallowed:
        raise PlayerListError(
            f"{src.path}, line {line}: a quote opened on this line is not closed where the "
            f"line ends, so lines {line + 1} to {last} were read into one field; close the "
            "quote (or remove it) and load again; nothing was sent"
        )


def _open_quote(raw: str, delimiter: str) -> bool:
    """Whether the record ``raw`` ends inside a quoted field, read as the ``csv`` module
    reads it with ``strict=False``: a quote opens a field only at the field's start, ``""``
    inside one is a quote, and a quote followed by anything else closes it."""
    ends = (delimiter, "\n", "\r")
    quoted = closing = False
    at_start = True
    for ch in raw:
        if quoted:
            if ch == '"':
                quoted, closing = False, True
            continue
        if closing and ch == '"':
            quoted, closing = True, False  # "" inside quotes: a quote, still quoted
            continue
        closing = False
        if ch == '"' and at_start:
            quoted = True
        at_start = ch in ends
    return quoted


@dataclass
class _ExcelSource(Source):
    path: Path = Path()
    sheet: str | int | None = None
    column: int = 0
    header: bool = False
    skip: int = 0
    unescape: bool = False

    def rows(self) -> Iterator[PlayerRow]:
        book, sheet = _open_sheet(self.path, self.sheet)
        formulas = _Formulas(self.path, self.sheet, self.column)
        unread = self.skip + (1 if self.header else 0)
        try:
            for line, cells in enumerate(sheet.iter_rows(), start=1):
                if line <= unread:
                    continue
                if self.column < len(cells):
                    value = _excel_text(cells[self.column], sheet.title, line, formulas)
                    yield PlayerRow(
                        line, unescape_spreadsheet_cell(value) if self.unescape else value
                    )
                elif not cells:
                    yield PlayerRow(line, "")
                else:
                    yield PlayerRow(line, None)
        finally:
            formulas.close()
            book.close()


def _excel_text(cell: Any, title: str, line: int, formulas: _Formulas | None) -> str:
    """What a person sees in ``cell`` (:func:`cell_text`), or why it holds no id, naming
    the cell and its sheet; an empty cell is looked up in ``formulas`` (none: the sample,
    where a formula without a value reads as empty)."""
    coordinate = getattr(cell, "coordinate", None)  # None: a cell missing from the file

    def formula() -> str | None:
        if formulas is None or coordinate is None:
            return None
        return formulas.at(line)

    return cell_text(
        cell.value,
        cell.data_type,
        cell.number_format,
        formula,
        f"cell {coordinate} of sheet {title!r}",
    )


class _Formulas:
    """The formulas of the player-id column, for the cells that read as empty.

    A workbook read with its calculated values (what a person sees) gives a formula that
    was never calculated (a file written by a program that does not calculate) as an
    empty cell; a second reading, formulas kept, tells the two apart. It is opened at the
    first empty cell and advanced only as far as the cells asked about, so a sheet
    without empty ids is read once.
    """

    def __init__(self, path: Path, sheet: str | int | None, column: int) -> None:
        self._path, self._sheet, self._column = path, sheet, column
        self._book: Any = None
        self._rows: Iterator[Any] = iter(())
        self._line = 0
        self._row: Any = ()

    def at(self, line: int) -> str | None:
        """The formula of the column's cell on ``line`` (1-based, asked in order), or
        ``None`` when the cell holds none."""
        if self._book is None:
            self._book, sheet = _open_sheet(self._path, self._sheet, data_only=False)
            column = self._column + 1
            self._rows = iter(sheet.iter_rows(min_col=column, max_col=column))
        while self._line < line:
            self._row = next(self._rows, ())
            self._line += 1
        cell = self._row[0] if self._row else None
        if cell is None or cell.data_type != "f":
            return None
        # An array or data-table formula is an object holding its text.
        return str(getattr(cell.value, "text", cell.value))

    def close(self) -> None:
        """Close the second reading, if it was opened."""
        if self._book is not None:
            self._book.close()
            self._book = None


def _open_sheet(path: Path, sheet: str | int | None, *, data_only: bool = True) -> tuple[Any, Any]:
    openpyxl = import_extra("openpyxl", "excel", "Reading Excel player lists")

    try:
        book = openpyxl.load_workbook(path, read_only=True, data_only=data_only)
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
    header: bool | None = None,
    skip_rows: int | None = None,
) -> Source:
    """Inspect ``source`` and return a :class:`Source` ready to be read.

    ``source`` is a file path (CSV/TSV/delimited text or Excel), a pandas DataFrame or
    Series, or any iterable of ids. ``column`` names the player-id column (header name or
    0-based position); by default it is found among :data:`PLAYER_ID_HEADERS`, and a file
    with a single column needs no header. ``encoding`` and ``delimiter`` override the
    detection, ``sheet`` picks an Excel sheet (name or 0-based index; default the first).
    For files, ``header`` says whether there is a header row (default: detected, see
    :func:`_layout`; an ambiguous file is refused until it is given) and ``skip_rows``
    how many rows above the list (or its header) to skip, such as titles.
    Raises :class:`PlayerListError` when the source cannot be read.
    """
    if isinstance(source, str | os.PathLike):
        return _open_file(Path(source), column, encoding, delimiter, sheet, header, skip_rows)
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
    header: bool | None = None,
    skip_rows: int | None = None,
) -> Source:
    if not path.exists():
        raise PlayerListError(f"{path}: no such file")
    if path.is_dir():
        raise PlayerListError(f"{path}: is a directory, not a player list")
    if path.suffix.lower() == ".xls":
        raise PlayerListError(f"{path}: old .xls workbooks are not supported; save as .xlsx or CSV")
    scan = _scan(path)
    chosen: list[object] = [column, encoding, delimiter, sheet]
    if header is not None or skip_rows is not None:
        # Only when given: loads begun before these options keep their fingerprint.
        chosen += [header, skip_rows]
    options = json.dumps(chosen)
    fingerprint = hashlib.sha256(f"{scan.fingerprint}\n{options}".encode()).hexdigest()
    if path.suffix.lower() in EXCEL_SUFFIXES:
        return _open_excel(path, column, sheet, fingerprint, header, skip_rows)
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
    records = _records(sample, delim)
    widest = max((len(r) for r in records), default=1)
    if delim != _NO_DELIMITER and widest == 1:
        delim = _NO_DELIMITER
        records = _records(sample, delim)
    layout = _layout(records, column, header, skip_rows, str(path))
    details = {
        "kind": "text",
        "encoding": enc,
        "delimiter": "none (one column)" if delim == _NO_DELIMITER else delim,
        "column": layout.name if layout.header else f"field {layout.column + 1}",
        "header": "yes" if layout.header else "no",
    }
    if layout.skip:
        details["skipped_rows"] = str(layout.skip)
    return _TextFileSource(
        str(path),
        fingerprint,
        details,
        path,
        enc,
        delim,
        layout.column if delim != _NO_DELIMITER else 0,
        layout.header,
        skip=layout.skip,
        width=widest,
        unescape=layout.unescape,
    )


def _open_excel(
    path: Path,
    column: str | int | None,
    sheet: str | int | None,
    fp: str,
    header: bool | None,
    skip_rows: int | None,
) -> Source:
    book, ws = _open_sheet(path, sheet)
    try:
        title = ws.title
        sample = [
            [_excel_text(cell, title, line, None) for cell in cells]
            for line, cells in enumerate(ws.iter_rows(max_row=_SAMPLE_LINES), start=1)
        ]
        sheets = book.sheetnames
    finally:
        book.close()
    where = f"{path} (sheet {title!r})"
    name_it = "name it with column=..."
    if sheet is None and len(sheets) > 1:
        name_it += f", or choose the sheet with sheet=... (the workbook has {sheets})"
    layout = _layout(sample, column, header, skip_rows, where, "row", name_it)
    details = {
        "kind": "excel",
        "sheet": title,
        "column": layout.name if layout.header else f"column {layout.column + 1}",
        "header": "yes" if layout.header else "no",
    }
    if layout.skip:
        details["skipped_rows"] = str(layout.skip)
    return _ExcelSource(
        where,
        fp,
        details,
        path,
        sheet,
        layout.column,
        layout.header,
        skip=layout.skip,
        unescape=layout.unescape,
    )


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
