"""Tables a person reads: text left, numbers right and rounded to what matters, gaps as "–".

The frames the package returns keep their raw values (full precision, ``NaN`` where nothing
is known); :func:`readable` wraps one for display only, in a notebook (HTML) or a terminal
(text). :func:`html_table` is the same rendering for the package's own ``_repr_html_``.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from numbers import Number
from typing import Any

import pandas as pd

#: What a missing value (``None``, ``NaN``, ``<NA>``, ``NaT``) is shown as.
MISSING = "–"

#: Decimals shown by the unit a column name ends with: milliseconds to 0.1, seconds to 0.001.
_UNIT_DECIMALS: Mapping[str, int] = {"_ms": 1, "_s": 3, "seconds": 3}


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, float | Decimal):
        return bool(value != value)  # NaN is the one value unequal to itself
    return False


def _is_number(value: Any) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def _column_decimals(name: str, decimals: Mapping[str, int] | None = None) -> int | None:
    """The decimals a float column is shown with: ``decimals[name]``, else by its unit
    suffix (:data:`_UNIT_DECIMALS`), else ``None`` (shown as Python prints it)."""
    if decimals and name in decimals:
        return decimals[name]
    for suffix, places in _UNIT_DECIMALS.items():
        if name.endswith(suffix):
            return places
    return None


def cell_text(value: Any, places: int | None = None) -> str:
    """One value as shown: exact ``Decimal`` digits, floats rounded to ``places``, times
    rounded to the millisecond, missing values as :data:`MISSING`."""
    if _missing(value):
        return MISSING
    if isinstance(value, Decimal):
        return f"{value:f}"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        return repr(value) if places is None else f"{value:.{places}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, pd.Timestamp | datetime):
        stamp = pd.Timestamp(value).round("ms")
        text = stamp.strftime("%Y-%m-%d %H:%M:%S")
        if stamp.microsecond or stamp.nanosecond:
            text += f".{stamp.microsecond // 1000:03d}"
        return f"{text} {stamp.tzname()}" if stamp.tzinfo is not None else text
    if isinstance(value, tuple | list | set | frozenset):
        return ", ".join(cell_text(v) for v in value)
    return str(value)


def _numeric(values: Sequence[Any]) -> bool:
    present = [v for v in values if not _missing(v)]
    return bool(present) and all(_is_number(v) for v in present)


@dataclass(frozen=True)
class ReadableTable:
    """A frame shown for reading (see :func:`readable`); ``frame`` holds the raw values."""

    frame: pd.DataFrame
    decimals: Mapping[str, int] = field(default_factory=dict)
    index: bool = False

    def columns(self) -> list[tuple[str, bool, list[str]]]:
        """Per column: its header, whether it is numeric (right-aligned), its cell texts."""
        frame = self.frame.reset_index() if self.index else self.frame
        out = []
        for name in frame.columns:
            values = list(frame[name])
            places = _column_decimals(str(name), self.decimals)
            out.append((str(name), _numeric(values), [cell_text(v, places) for v in values]))
        return out

    def _repr_html_(self) -> str:
        return html_table(self.frame, decimals=self.decimals, index=self.index)

    def __str__(self) -> str:
        columns = self.columns()
        if not columns:
            return "(no columns)"
        widths = [max([len(head), *(len(c) for c in cells)]) for head, _, cells in columns]
        rows = [[head for head, _, _ in columns]]
        rows += [list(r) for r in zip(*(cells for _, _, cells in columns), strict=True)]
        lines = [
            "  ".join(
                text.rjust(w) if numeric else text.ljust(w)
                for text, w, (_, numeric, _) in zip(row, widths, columns, strict=True)
            ).rstrip()
            for row in rows
        ]
        if len(rows) == 1:
            lines.append("(no rows)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


def readable(
    frame: pd.DataFrame, *, decimals: Mapping[str, int] | None = None, index: bool = False
) -> ReadableTable:
    """``frame`` for reading: text columns left-aligned, numbers right-aligned, floats
    rounded by unit (``*_ms`` to 0.1, ``*_s`` to 0.001; ``decimals`` names others), times to
    the millisecond, missing values as "–". The frame itself is not changed."""
    return ReadableTable(frame, dict(decimals or {}), index)


#: A run of text without a space longer than this may break anywhere in an HTML table.
_UNBROKEN_RUN_MAX_CHARS = 64
_UNBROKEN = re.compile(rf"\S{{{_UNBROKEN_RUN_MAX_CHARS + 1},}}")


def html_table(
    frame: pd.DataFrame,
    *,
    decimals: Mapping[str, int] | None = None,
    index: bool = False,
    numeric: Collection[str] = (),
) -> str:
    """An HTML table of ``frame`` with the rules of :func:`readable`, every text escaped;
    the ``numeric`` columns are right-aligned whatever they hold (numbers the caller wrote
    as text, with separators or a currency)."""
    table = ReadableTable(frame, dict(decimals or {}), index)
    columns = [
        (name, is_number or name in numeric, cells) for name, is_number, cells in table.columns()
    ]

    def align(numeric: bool) -> str:
        return "right" if numeric else "left"

    head = "".join(
        f"<th style='text-align:{align(numeric)}'>{html.escape(name)}</th>"
        for name, numeric, _ in columns
    )

    def cell(text: str, numeric: bool) -> str:
        style = f"text-align:{align(numeric)}"
        if _UNBROKEN.search(text):
            # A long id or URL has no space to wrap at and would stretch the table past
            # the page: let it break anywhere (the whole value stays in the cell).
            style += ";overflow-wrap:anywhere"
        return f"<td style='{style}'>{html.escape(text)}</td>"

    body = "".join(
        "<tr>"
        + "".join(cell(text, numeric) for text, (_, numeric, _) in zip(row, columns, strict=True))
        + "</tr>"
        for row in zip(*(cells for _, _, cells in columns), strict=True)
    )
    return f"<table class='dataframe'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


__all__ = [
    "MISSING",
    "ReadableTable",
    "cell_text",
    "html_table",
    "readable",
]
