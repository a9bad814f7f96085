"""The engine-specific pieces of the metrics, for Spark (twin: :mod:`._dialect_duckdb`).

Same names, same meaning, Spark's own functions. Spark has no JSON type: the Spark reader
(:mod:`._readers_spark`) gives every JSON field as its canonical, minified text (Spark's
``to_json`` of a ``VARIANT``), which is what the DuckDB twin's :func:`json_text` returns, so
the checks of :mod:`._metrics` read the same text on both engines. Action ids are the
canonical lower-case UUID text (Spark has no UUID type).
"""

from __future__ import annotations

from typing import Any

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

NAME = "spark"
#: The type of ``action_id``: the canonical lower-case UUID text.
ACTION_ID_TYPE = dt.string
_UTC = dt.Timestamp(timezone="UTC")
# What DuckDB's UUID cast accepts: 32 hex digits, hyphens anywhere, braces on both sides
# or neither.
_UUID_RE = r"^(\{[0-9A-Fa-f-]*\}|[0-9A-Fa-f-]*)\z"


def java_regex(pattern: str) -> str:
    """``pattern`` (written for RE2, DuckDB's engine) for Spark's RLIKE. Java's ``$`` also
    matches before a final line break, RE2's only at the end of the text: an actionId or
    timestamp ending in ``\\n`` would pass on Spark and fail on DuckDB, so a closing
    ``$`` becomes ``\\z`` (the very end in Java)."""
    if pattern.endswith("$") and not pattern.endswith(r"\$"):
        return pattern[:-1] + r"\z"
    return pattern


def _builtin(name: str, args: tuple[ir.Value, ...], out: dt.DataType) -> ir.Value:
    def one(a: Any) -> Any:
        """The engine's own function; Ibis supplies the call."""
        raise NotImplementedError

    def two(a: Any, b: Any) -> Any:
        """The engine's own function; Ibis supplies the call."""
        raise NotImplementedError

    fn = one if len(args) == 1 else two
    udf = ibis.udf.scalar.builtin(fn, name=name, signature=(tuple(a.type() for a in args), out))
    result: ir.Value = udf(*args)
    return result


def epoch_us(moment: ir.Value) -> ir.Value:
    """Microseconds since the epoch (``unix_micros``; a naive time is taken as UTC)."""
    return _builtin("unix_micros", (moment.cast(_UTC),), dt.int64)


def from_epoch_us(us: ir.Value) -> ir.Value:
    """The UTC timestamp of a count of epoch microseconds (``timestamp_micros``)."""
    return _builtin("timestamp_micros", (us,), _UTC)


def arg_extreme(fn: str, value: ir.Value, key: ir.Value, where: ir.Value | None = None) -> ir.Value:
    """``value`` at the smallest (``fn="min"``) or largest (``"max"``) ``key`` of a group
    (``min_by``/``max_by``: one running value per group, no sort)."""

    def extreme(value: Any, key: Any) -> Any:
        """The engine's own aggregate; Ibis supplies the call."""

    udf = ibis.udf.agg.builtin(
        extreme, name=f"{fn}_by", signature=((value.type(), key.type()), value.type())
    )
    return udf(value, key, where=where)


def json_text(value: ir.Value) -> ir.Value:
    """The canonical, minified JSON text of a JSON field: the reader already holds it."""
    return value


def json_string(value: ir.Value) -> ir.Value:
    """The string a JSON string text holds, escapes resolved (only asked for texts that
    hold a backslash)."""
    wrapped = ibis.literal("[").concat(value, ibis.literal("]"))
    return _builtin("get_json_object", (wrapped, ibis.literal("$[0]")), dt.string)


def parse_uuid(text: ir.Value) -> ir.Value:
    """A plain string as an action id: NULL unless DuckDB's UUID cast would take it."""
    digits = text.lower().re_replace("[-{}]", "")
    canonical = digits.re_replace(
        "^([0-9a-f]{8})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{4})([0-9a-f]{12})$", "$1-$2-$3-$4-$5"
    )
    ok = text.re_search(_UUID_RE) & (canonical.length() == 36)
    return ibis.ifelse(ok, canonical, ibis.null("string"))


def json_uuid(value: ir.Value, unquoted: ir.Value) -> ir.Value:
    """A JSON string as an action id (NULL unless a UUID). ``unquoted`` is the string
    without its JSON quotes, NULL for other JSON types."""
    return parse_uuid(unquoted)


def json_naive_time(value: ir.Value, unquoted: ir.Value) -> ir.Value:
    """A JSON string already known to be ``YYYY-MM-DDTHH:MM:SS[.f{1,9}]`` as a naive
    timestamp, fractions truncated to microseconds; NULL for an impossible date."""
    result: ir.Value = unquoted.try_cast("timestamp")
    return result


def action_id_literal(text: str) -> ir.Value:
    """An action id (canonical lower-case UUID text) as a literal to compare with."""
    return ibis.literal(text, type="string")
