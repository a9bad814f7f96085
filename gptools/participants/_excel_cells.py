"""What a person sees in an Excel cell: its text under its number format, or why the cell
holds no player id (a date, a boolean, a fraction...).

A loader must send the id a person reads in the sheet, never a value converted on the
way: ``000042`` (the number 42 shown with the format ``000000``) is ``000042``, not
``42``, and a cell that holds a date, a boolean, a fraction, a number with more digits
than Excel keeps, an error or a formula without a calculated value is refused with its
type named (:class:`UnreadableCell`), so it becomes that row's ``cell_type`` rejection.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

#: Significant digits a spreadsheet keeps in a number (IEEE double, shown to 15 digits):
#: a longer number in a cell has already lost its last digits.
SIGNIFICANT_DIGITS = 15

#: Characters a number format may hold as they are, outside quotes (Excel's own list of
#: literals shown without a backslash, minus the ones that mean something else here).
_PLAIN_LITERALS = frozenset("$-+/():!^&'~{}<>= ")


class UnreadableCell(str):
    """The text of an Excel cell that holds no player id as text (a date, a boolean...),
    for the rejects file; :attr:`reason` says which cell and what it holds."""

    reason: str

    def __new__(cls, text: str, reason: str) -> UnreadableCell:
        cell = super().__new__(cls, text)
        cell.reason = reason
        return cell


def cell_text(
    value: object,
    data_type: str,
    number_format: str | None,
    formula: Callable[[], str | None],
    where: str,
) -> str:
    """The text a person sees in a cell read with its cached values (openpyxl's
    ``data_only``): ``value`` and ``data_type`` as openpyxl reads them, the cell's
    ``number_format``, and ``formula``, asked only for an empty cell, which gives the
    cell's formula (``None`` for a cell that is really empty). An :class:`UnreadableCell`
    when the cell holds no id as text, its reason starting with ``where`` (the cell and
    its sheet)."""
    text = _text_or_kind(value, data_type, number_format, formula)
    if isinstance(text, tuple):
        shown, kind = text
        fix = (
            "open the workbook in a spreadsheet program and save it there (which calculates "
            "it), then load again"
            if value is None
            else "enter the id as text (format the column as Text first) and load the row again"
        )
        return UnreadableCell(shown, f"{where} holds {kind}, not a player id as text: {fix}")
    return text


def _text_or_kind(
    value: object,
    data_type: str,
    number_format: str | None,
    formula: Callable[[], str | None],
) -> str | tuple[str, str]:
    if value is None:
        text = formula()
        return "" if text is None else (text, f"a formula without a calculated value ({text})")
    if isinstance(value, str):
        return (value, f"an error value ({value})") if data_type == "e" else value
    if isinstance(value, bool):
        return str(value).upper(), f"a boolean ({str(value).upper()})"
    if isinstance(value, dt.datetime | dt.date | dt.time | dt.timedelta):
        kind = (
            "a date"
            if isinstance(value, dt.datetime | dt.date)
            else "a time of day"
            if isinstance(value, dt.time)
            else "a duration"
        )
        return str(value), f"{kind} ({value})"
    if isinstance(value, int | float):
        return _number_text(value, number_format or "General")
    return str(value), f"a {type(value).__name__} value"


def _number_text(value: float, number_format: str) -> str | tuple[str, str]:
    shown = repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, float) and not value.is_integer():
        # NaN and infinity are no integers either; a sheet cannot store them anyway.
        return shown, f"a fraction ({shown})"
    number = int(value)
    digits = len(str(abs(number)))
    if digits > SIGNIFICANT_DIGITS:
        return shown, (
            f"a number of {digits} digits ({shown}; a spreadsheet keeps "
            f"{SIGNIFICANT_DIGITS} significant digits, so its last ones are not in the file)"
        )
    text = format_integer(number, number_format)
    if text is None:
        return shown, f"a number ({shown}) shown with the number format {number_format!r}"
    return text


def format_integer(number: int, number_format: str) -> str | None:
    """``number`` as a cell with ``number_format`` shows it, for the formats an id column
    has: ``General``, ``@`` (text), and digit placeholders (``0`` shows a digit or a
    leading zero, ``#`` a digit or nothing) with literal text (``"P-"000000``,
    ``\\I\\D000``), in up to three sections (positive; negative; zero). ``None`` for
    any other format (decimals, thousands separators, percentages, dates, colours...),
    whose text this reader does not reproduce."""
    if number_format.strip().lower() in ("general", "@"):
        return str(number)
    sections = _sections(number_format)
    if sections is None:
        return None
    if number < 0 and len(sections) > 1:
        section, sign = sections[1], ""
    elif number == 0 and len(sections) > 2:
        section, sign = sections[2], ""
    else:
        section, sign = sections[0], "-" if number < 0 else ""
    slots = [token for token in section if token in ("0", "#")]
    if not slots:
        return None  # a format that hides the number behind text
    digits = str(abs(number))
    spare = len(digits) - len(slots)
    # Placeholders take digits from the right; the first takes every digit left over.
    filled: list[str] = []
    for position, slot in enumerate(slots):
        if spare >= 0:
            filled.append(digits[: spare + 1] if position == 0 else digits[spare + position])
        else:
            index = position + spare  # negative: no digit reaches this placeholder
            filled.append(digits[index] if index >= 0 else "0" if slot == "0" else "")
    if number == 0 and "0" not in slots:
        filled = ["" for _ in slots]
    out: list[str] = []
    for token in section:
        out.append(filled.pop(0) if token in ("0", "#") else token[1:])
    return sign + "".join(out)


def _sections(number_format: str) -> list[list[str]] | None:
    """The format's sections as tokens: ``"0"``, ``"#"``, or ``"'"`` followed by literal
    text; ``None`` for a format holding anything else."""
    sections: list[list[str]] = [[]]
    chars = iter(number_format)
    for ch in chars:
        if ch == ";":
            sections.append([])
        elif ch in ("0", "#"):
            sections[-1].append(ch)
        elif ch == "\\":
            sections[-1].append("'" + next(chars, ""))
        elif ch == '"':
            literal = ""
            for inner in chars:
                if inner == '"':
                    break
                literal += inner
            sections[-1].append("'" + literal)
        elif ch in _PLAIN_LITERALS:
            sections[-1].append("'" + ch)
        else:
            return None
    return sections
