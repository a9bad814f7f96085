"""The engine-specific pieces of the metrics, for DuckDB (twin: :mod:`._dialect_spark`).

:mod:`._metrics` defines every metric once, in Ibis; the few operations Ibis has no portable
fast form for are here, each a small function with the same name and meaning in both twins.
The JSON fields of the normalised table are DuckDB ``JSON`` values, whose text DuckDB's own
writer made canonical and minified.
"""

from __future__ import annotations

from typing import Any

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

NAME = "duckdb"
#: The type of ``action_id``: 16 bytes to sort and group on.
ACTION_ID_TYPE = dt.uuid
_UTC = dt.Timestamp(timezone="UTC")


def epoch_us(moment: ir.Value) -> ir.Value:
    """Microseconds since the epoch. Differences of these are exact and cheap; DuckDB's
    ``date_diff`` on zoned timestamps goes through a calendar library and costs about 100
    times more per row."""

    def epoch_us(moment: Any) -> int:
        """The engine's own function; Ibis supplies the call."""
        raise NotImplementedError

    udf = ibis.udf.scalar.builtin(epoch_us, signature=((moment.type(),), dt.int64))
    result: ir.Value = udf(moment)
    return result


def from_epoch_us(us: ir.Value) -> ir.Value:
    """The UTC timestamp of a count of epoch microseconds."""

    def make_timestamp(us: Any) -> Any:
        """The engine's own function; Ibis supplies the call."""
        raise NotImplementedError

    udf = ibis.udf.scalar.builtin(make_timestamp, signature=((dt.int64,), dt.timestamp))
    result: ir.Value = udf(us).cast(_UTC)
    return result


def arg_extreme(fn: str, value: ir.Value, key: ir.Value, where: ir.Value | None = None) -> ir.Value:
    """``value`` at the smallest (``fn="min"``) or largest (``"max"``) ``key`` of a group.

    Ibis writes its own ``argmin`` as an ordered aggregate (``FIRST(x ORDER BY k)``), which
    sorts inside every group; ``arg_min``/``arg_max`` keep one running value per group
    instead, several times faster on millions of actions."""

    def extreme(value: Any, key: Any) -> Any:
        """The engine's own aggregate; Ibis supplies the call."""

    udf = ibis.udf.agg.builtin(
        extreme, name=f"arg_{fn}", signature=((value.type(), key.type()), value.type())
    )
    return udf(value, key, where=where)


def json_text(value: ir.Value) -> ir.Value:
    """The canonical, minified JSON text of a JSON value: a string starts with a quote and
    holds a backslash only where it needs an escape; a number starts with a digit, ``-``,
    ``NaN`` or ``Infinity`` (read from a body's text, it is the number as sent, every
    digit kept); ``null`` is SQL NULL."""
    return value.cast("string")


def json_string(value: ir.Value) -> ir.Value:
    """The string a JSON string value holds, escapes resolved (only asked for texts that
    hold a backslash)."""
    result: ir.Value = value.str
    return result


def json_uuid(value: ir.Value, unquoted: ir.Value) -> ir.Value:
    """A JSON string as an action id (NULL unless it is a UUID: any case, hyphens anywhere,
    optional braces on both sides). ``unquoted`` is the string without its JSON quotes.
    DuckDB's JSON-to-UUID cast reads the string (escapes included) and refuses other JSON
    types."""
    result: ir.Value = value.try_cast("uuid")
    return result


def parse_uuid(text: ir.Value) -> ir.Value:
    """A plain string as an action id (NULL unless a UUID), for the ``urn:uuid:`` form."""
    result: ir.Value = text.try_cast("uuid")
    return result


def json_naive_time(value: ir.Value, unquoted: ir.Value) -> ir.Value:
    """A JSON string already known to be ``YYYY-MM-DDTHH:MM:SS[.f{1,9}]`` as a naive
    timestamp, fractions truncated to microseconds; NULL for an impossible date."""
    result: ir.Value = value.try_cast("timestamp")
    return result


def action_id_literal(text: str) -> ir.Value:
    """An action id (canonical lower-case UUID text) as a literal to compare with."""
    return ibis.literal(text, type="uuid")
