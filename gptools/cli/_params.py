"""Option and argument types the commands share: a value is checked where it is parsed, so
a wrong one is a usage error (exit 2) naming the option, never a traceback further on."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import click

from gptools import spec


class BrandId(click.ParamType[int]):
    """A brand id as the API document types it: an integer within int32
    (:func:`gptools.spec.is_brand_id`)."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """The brand id, or a usage error naming the option and the range."""
        if spec.is_brand_id(value):
            return int(value)
        try:
            number = int(str(value).strip())
        except ValueError:
            self.fail(f"{value!r} is not a brand id (a whole number)", param, ctx)
        if not spec.is_brand_id(number):
            self.fail(
                f"{value} is not a brand id: brand ids are integers from "
                f"{spec.BRAND_ID_MIN} to {spec.BRAND_ID_MAX} (int32)",
                param,
                ctx,
            )
        return number


#: The type of every ``--brand`` option.
BRAND_ID = BrandId()


class NonEmptyText(click.ParamType[str]):
    """Text that names something (a campaign id, a game id): not empty, not only spaces."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The text without surrounding spaces, or a usage error when nothing is left."""
        text = str(value).strip()
        if not text:
            self.fail("must not be empty", param, ctx)
        return text


#: The type of every campaign-id option and argument.
CAMPAIGN_ID = NonEmptyText()


class FilePath(click.Path):
    """A :class:`click.Path` that refuses an empty value (which would name the current
    folder) with a usage error, instead of a failure deep in the command."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The path, or a usage error for an empty one."""
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path names no file", param, ctx)
        return super().convert(value, param, ctx)


class LedgerSource(FilePath):
    """A wallet ledger as ``--ledger`` names it: a database URL (``sqlite:///PATH``,
    ``postgresql://...``) as given, else a file that exists. The ledger's reader checks
    a URL (it alone knows which it can open); a missing file is a usage error here."""

    def __init__(self) -> None:
        super().__init__(exists=True, dir_okay=False)
        self.name = "file|url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The URL or the file's path, as text."""
        if isinstance(value, str) and "://" in value:
            return value.strip()
        return str(super().convert(value, param, ctx))


#: The type of a ``--ledger`` option.
LEDGER_SOURCE = LedgerSource()


class _Number(click.ParamType[float]):
    """A number its :meth:`refusal` accepts, or a usage error naming the range. Each
    range is a comparison, false for NaN, so NaN is refused too (a
    :class:`click.FloatRange` lets it through, as it compares false with any bound)."""

    def refusal(self, number: float, value: Any) -> str | None:
        """Why ``number`` (``value`` as given) is out of range, or None."""
        raise NotImplementedError

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        """The number, or a usage error naming the range."""
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if (reason := self.refusal(number, value)) is not None:
            self.fail(reason, param, ctx)
        return number


class PositiveFinite(_Number):
    """A number above zero and at most ``maximum``; NaN and infinity are refused."""

    name = "float"

    def __init__(self, maximum: float) -> None:
        self.maximum = maximum

    def refusal(self, number: float, value: Any) -> str | None:
        """Unless 0 < ``number`` <= ``maximum``: the range."""
        if 0 < number <= self.maximum:
            return None
        return f"{value} is not in the range 0<x<={self.maximum:g}"


class Between(_Number):
    """A number from ``minimum`` to ``maximum`` (both included); NaN is refused, and
    infinity unless it is a bound."""

    name = "float"

    def __init__(self, minimum: float, maximum: float) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def refusal(self, number: float, value: Any) -> str | None:
        """Unless ``minimum`` <= ``number`` <= ``maximum``: the range."""
        if self.minimum <= number <= self.maximum:
            return None
        return f"{value} is not in the range {self.minimum:g}<=x<={self.maximum:g}"


class Finite(_Number):
    """Any finite number (NaN and infinity are refused); the setting it goes to checks
    its range."""

    name = "float"

    def refusal(self, number: float, value: Any) -> str | None:
        """Unless ``number`` is finite: that."""
        return None if math.isfinite(number) else f"{value} is not a finite number"


#: The type of an option whose setting checks the range of a number.
FINITE = Finite()


class Seconds(click.ParamType[timedelta]):
    """A duration given in seconds, as a :class:`~datetime.timedelta`: a finite number
    that fits one; the setting it goes to checks its range."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        """The duration, or a usage error for what is no number of seconds."""
        if isinstance(value, timedelta):
            return value
        number = FINITE.convert(value, param, ctx)
        try:
            return timedelta(seconds=number)
        except OverflowError:
            self.fail(f"{value} seconds is longer than any duration", param, ctx)


#: The type of every option of a duration in seconds whose setting checks its range.
SECONDS = Seconds()


class Share(_Number):
    """A share between 0 and 1 (both included); NaN and infinity are refused."""

    name = "share"

    def refusal(self, number: float, value: Any) -> str | None:
        """Unless 0 <= ``number`` <= 1: the range."""
        return None if 0 <= number <= 1 else f"{value} is not a share between 0 and 1"


class StoreUrl(click.ParamType[str]):
    """A webhook store: ``sqlite:///PATH``, ``postgresql://...``, or a bare path, which
    names a SQLite file as ``webhooks analyze`` reads one (one rule for every command)."""

    name = "store"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The store URL, a bare path made ``sqlite:///PATH``."""
        text = str(value).strip()
        if not text:
            self.fail("must name a store: sqlite:///PATH, a path, or postgresql://...", param, ctx)
        return text if "://" in text else f"sqlite:///{text}"


#: The type of every ``--store`` option.
STORE_URL = StoreUrl()


#: The fields of :class:`gptools.deliverylog.ColumnMapping` that name a column, in
#: its order (written out so that ``--help`` imports no DuckDB; a test keeps them equal).
MAPPING_FIELDS: tuple[str, ...] = (
    "received_at", "status", "latency_ms", "payload", "body", "campaign_id",
)  # fmt: skip
#: The latency units ``--latency-unit`` takes (``ColumnMapping.latency_unit``).
LATENCY_UNITS: tuple[str, ...] = ("ms", "s", "us")


class ColumnSpec(click.ParamType[tuple[str, str]]):
    """``FIELD=NAME``: the log's column ``NAME`` holds the mapping's ``FIELD``
    (:data:`MAPPING_FIELDS`)."""

    name = "FIELD=NAME"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, str]:
        """The pair, or a usage error naming the fields a mapping has."""
        if isinstance(value, tuple):
            return value
        field, sep, column = str(value).partition("=")
        field, column = field.strip(), column.strip()
        if not sep or field not in MAPPING_FIELDS or not column:
            self.fail(
                f"{value!r} is not FIELD=NAME with FIELD one of {', '.join(MAPPING_FIELDS)} "
                "and NAME the log's column",
                param,
                ctx,
            )
        return field, column


def column_mapping_options(command: Any) -> Any:
    """Add ``--column FIELD=NAME`` (repeatable) and ``--latency-unit`` to a command that
    reads a delivery log: a foreign log's columns, as a ``ColumnMapping`` names them."""
    command = click.option(
        "--latency-unit",
        type=click.Choice(LATENCY_UNITS),
        default="ms",
        show_default=True,
        help="The unit of the log's latency column (converted to milliseconds).",
    )(command)
    return click.option(
        "--column",
        "columns",
        type=ColumnSpec(),
        multiple=True,
        help="A foreign log's column: FIELD=NAME, FIELD one of "
        f"{', '.join(MAPPING_FIELDS)} (repeat; e.g. --column received_at=time "
        "--column campaign_id=promo_id).",
    )(command)


def max_line_bytes_option(command: Any) -> Any:
    """Add ``--max-line-bytes`` to a command that reads a delivery log (``None`` when not
    given: the analyser's own default, ``DEFAULT_MAX_LINE_BYTES``, is not repeated here)."""
    return click.option(
        "--max-line-bytes",
        type=click.IntRange(min=1),
        default=None,
        help="A JSONL line longer than this many bytes is counted as malformed_line, never "
        "parsed [default: 16 MiB].",
    )(command)


def mapping_fields(columns: tuple[tuple[str, str], ...], latency_unit: str) -> dict[str, str]:
    """The keyword arguments of ``ColumnMapping`` for ``--column`` and ``--latency-unit``;
    a field given twice is a usage error."""
    out: dict[str, str] = {}
    for field, column in columns:
        if field in out and out[field] != column:
            raise click.BadParameter(
                f"{field} given twice ({out[field]!r} and {column!r})", param_hint="'--column'"
            )
        out[field] = column
    return {**out, "latency_unit": latency_unit}


class HttpUrl(click.ParamType[str]):
    """An ``http://`` or ``https://`` URL with a host, of at most
    :data:`MAX_URL_LENGTH` characters, without spaces or control characters."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The URL, or a usage error saying what it lacks."""
        from urllib.parse import urlsplit

        text = str(value)
        shown = text if len(text) <= 80 else f"{text[:60]}..."
        if len(text) > MAX_URL_LENGTH:
            self.fail(f"{shown!r} is longer than {MAX_URL_LENGTH} characters", param, ctx)
        if any(c.isspace() or not c.isprintable() for c in text):
            self.fail(f"{shown!r} holds spaces or control characters", param, ctx)
        try:
            parts = urlsplit(text)
            usable = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:  # a malformed IPv6 host
            usable = False
        if not usable:
            self.fail(f"{shown!r} is not an http(s) URL with a host", param, ctx)
        return text


#: The longest URL an option takes (browsers and proxies commonly stop near 2,000).
MAX_URL_LENGTH = 2048
#: The type of an option that names an HTTP endpoint.
HTTP_URL = HttpUrl()
