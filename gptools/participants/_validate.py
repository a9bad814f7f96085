"""Checks a player id before it is sent: what the API would refuse is rejected here, with
a reason a person can act on.

Ids are trimmed of surrounding white space first (spaces, tabs, line breaks, no-break and
other Unicode spaces, a stray byte-order mark); the trimmed id is what is sent. The
rules, each with its reason code:

=====================  ===============================================================
``missing_field``      the row has no field in the player-id column
``empty``              nothing left after trimming
``header_row``         the value is a header name (a header row repeated inside the data,
                       or below the ids of a list without one); never with ``header=False``
``cell_type``          an Excel cell that holds no id as text: a date, a boolean, a
                       fraction, a number past 15 significant digits, an error, a
                       formula without a calculated value (never sent converted)
``control_character``  a control character (U+0000-U+001F, U+007F-U+009F) inside the id
``invalid_text``       an unpaired surrogate: text that cannot be sent as UTF-8
``too_long``           longer than the maximum id length (``spec.PLAYER_ID_MAX_LENGTH``,
                       assumed; override with ``max_id_length=``)
``refused_by_server``  sent, and the server refused this id on its own (set by the loader)
=====================  ===============================================================
"""

from __future__ import annotations

import re
import unicodedata
from enum import StrEnum
from typing import Final, NamedTuple

from gptools import spec
from gptools.participants._excel_cells import UnreadableCell
from gptools.participants._sources import KNOWN_HEADER_FORMS, normalise_header


class ReasonCode(StrEnum):
    """Why a row is not sent, in the order the summary lists them (a member equals its
    text, which the rejects file and the journal hold)."""

    MISSING_FIELD = "missing_field"
    EMPTY = "empty"
    HEADER_ROW = "header_row"
    CELL_TYPE = "cell_type"
    CONTROL_CHARACTER = "control_character"
    INVALID_TEXT = "invalid_text"
    TOO_LONG = "too_long"
    REFUSED_BY_SERVER = "refused_by_server"


MISSING_FIELD: Final = ReasonCode.MISSING_FIELD
EMPTY: Final = ReasonCode.EMPTY
HEADER_ROW: Final = ReasonCode.HEADER_ROW
CELL_TYPE: Final = ReasonCode.CELL_TYPE
CONTROL_CHARACTER: Final = ReasonCode.CONTROL_CHARACTER
INVALID_TEXT: Final = ReasonCode.INVALID_TEXT
TOO_LONG: Final = ReasonCode.TOO_LONG
REFUSED_BY_SERVER: Final = ReasonCode.REFUSED_BY_SERVER

#: Every rejection reason code, in the order the summary lists them.
REASON_CODES: Final = tuple(ReasonCode)

# White space that is trimmed. Other control characters (U+000B, U+000C, U+001C-U+001F...)
# count as white space for str.strip() but are not trimmed here: they are rejected.
_TRIM: Final = (
    " \t\r\n\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u200b\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_CONTROL: Final = re.compile(spec.PLAYER_ID_CONTROL_PATTERN)
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")


class Rejection(NamedTuple):
    """Why a row is not sent: a reason ``code`` (see :data:`REASON_CODES`) and a message."""

    code: str
    message: str


def trim(raw: str) -> str:
    """``raw`` without the surrounding white space that is never part of an id."""
    return raw.strip(_TRIM)


def check_player_id(
    raw: str | None,
    *,
    max_length: int = spec.PLAYER_ID_MAX_LENGTH,
    header: str | None = None,
    header_names: bool = True,
) -> str | Rejection:
    """The trimmed id to send, or the :class:`Rejection` that keeps it from being sent.

    ``header`` is the source's own header cell, so that a copy of the header row inside
    the data is recognised even when its name is not one of the known header names.
    ``header_names=False`` (the caller said the list has no header row) takes a value
    such as ``user`` or ``players`` for the id it is: an explicit choice wins.
    """
    if raw is None:
        return Rejection(MISSING_FIELD, "the row has no field in the player-id column")
    if isinstance(raw, UnreadableCell):
        return Rejection(CELL_TYPE, raw.reason)
    value = trim(raw)
    if not value:
        return Rejection(EMPTY, "empty player id" + (" (only white space)" if raw else ""))
    form = normalise_header(value)
    if (header_names and form in KNOWN_HEADER_FORMS) or (
        header is not None and form == normalise_header(header)
    ):
        return Rejection(
            HEADER_ROW,
            f"{value!r} is a column header, not a player id "
            "(a header row repeated inside the data)",
        )
    if match := _CONTROL.search(value):
        char = match.group()
        name = unicodedata.name(char, None) or _C0_NAMES.get(char, "control character")
        return Rejection(
            CONTROL_CHARACTER,
            f"control character U+{ord(char):04X} ({name}) at position {match.start() + 1}",
        )
    if _SURROGATE.search(value):
        return Rejection(INVALID_TEXT, "the id holds an unpaired surrogate and is not valid text")
    if len(value) > max_length:
        return Rejection(
            TOO_LONG,
            f"player id is {len(value)} characters; the limit is {max_length} "
            "(an assumed limit; raise it with --max-id-length, or max_id_length in Python)",
        )
    return value


_C0_NAMES: Final = {
    "\x00": "NUL",
    "\x07": "BELL",
    "\x08": "BACKSPACE",
    "\t": "TAB",
    "\n": "LINE FEED",
    "\x0b": "VERTICAL TAB",
    "\x0c": "FORM FEED",
    "\r": "CARRIAGE RETURN",
    "\x1b": "ESCAPE",
    "\x7f": "DELETE",
}
