"""What a store URL names: the one reading of ``sqlite:///PATH`` and ``postgresql://...``
that the receiver's store, the log analyser and the command line share, with its checks.

A malformed URL is a :class:`ValueError` naming the part and the reason here, when it is
read, and never an error further on (an "unexpected ValueError" from a port out of
range, a worker that cannot connect for ever): an unknown scheme, no path or no host, a
port out of range, an option libpq does not know or a value an option cannot take, a
receiver option (``schema``, ``synchronous``, ``log_retention_days``, ``export_target``)
with a value it cannot take. Messages never carry the URL's password.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from gptools._secrets import scrub

#: The query parameters gptools reads itself (the rest of a PostgreSQL URL's go to libpq).
RECEIVER_OPTIONS = ("schema", "synchronous", "log_retention_days", "export_target")
#: The values ``synchronous`` takes (SQLite's pragma names, any case).
SYNCHRONOUS_VALUES = ("FULL", "NORMAL")
#: libpq's options whose value is a whole number (libpq itself only says so when it
#: connects, which a receiver started during an outage would take for the outage).
_PG_INTEGER_OPTIONS = (
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)
#: libpq's options that take one of a few words, for the same reason.
_PG_WORD_OPTIONS = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "channel_binding": ("disable", "prefer", "require"),
    "target_session_attrs": (
        "any",
        "read-write",
        "read-only",
        "primary",
        "standby",
        "prefer-standby",
    ),
    "load_balance_hosts": ("disable", "random"),
}
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_EXAMPLES = "sqlite:///PATH or postgresql://USER@HOST[:PORT]/DB[?schema=NAME]"


@dataclass(frozen=True, slots=True)
class StoreAddress:
    """A store URL, read: its ``engine``; ``location``, the SQLite file's path or the
    PostgreSQL connection string for libpq (without gptools' own options); the PostgreSQL
    ``schema`` (None: libpq's search path); the receiver's ``options`` as written
    (``synchronous``, ``log_retention_days``, ``export_target``); and ``shown``, the URL as
    messages name it (no password, no query)."""

    engine: Literal["sqlite", "postgres"]
    location: str
    shown: str
    schema: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def parse_store_url(url: str) -> StoreAddress:
    """Read ``url``; :class:`ValueError` naming what is wrong when it is malformed."""
    if url.startswith("sqlite:///"):
        return _sqlite(url)
    if url.startswith(("postgresql://", "postgres://")):
        return _postgres(url)
    scheme = url.partition("://")[0] if "://" in url else url[:20]
    raise ValueError(f"unknown store URL scheme {scheme!r}: use {_EXAMPLES}")


def _sqlite(url: str) -> StoreAddress:
    path, _, query = url[len("sqlite:///") :].partition("?")
    if not path:
        raise ValueError("a sqlite store URL needs a path: sqlite:///PATH")
    options = _options(query, url, allowed=RECEIVER_OPTIONS[1:])
    return StoreAddress("sqlite", path, f"sqlite:///{path}", options=options)


def _postgres(url: str) -> StoreAddress:
    parts = urlsplit(url)
    shown = shown_url(url)
    try:
        port = parts.port
    except ValueError:
        port_text = parts.netloc.rpartition(":")[2]
        raise ValueError(f"{shown}: port {port_text!r} is not a number from 1 to 65535") from None
    if port == 0:
        raise ValueError(f"{shown}: port 0 is not a number from 1 to 65535")
    pairs = _pairs(parts.query, url)
    if not parts.hostname and "host" not in dict(pairs):
        raise ValueError(f"{shown}: no host; write postgresql://USER@HOST/DB")
    options = _options(parts.query, url, allowed=RECEIVER_OPTIONS, passthrough=True)
    schema = options.pop("schema", None)
    if schema is not None and not _SCHEMA_NAME.match(schema):
        raise ValueError(f"{shown}: schema name {schema!r} must be letters, digits and underscores")
    rest = [(k, v) for k, v in pairs if k not in RECEIVER_OPTIONS]
    for name, value in rest:
        _check_libpq_value(shown, name, value)
    query = "&".join(f"{k}={v}" for k, v in rest)
    dsn = urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
    _check_libpq_syntax(dsn, url, shown)
    return StoreAddress("postgres", dsn, shown, schema=schema, options=options)


def shown_url(url: str) -> str:
    """The URL without password, query or fragment (what messages name)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = parts.netloc.rpartition("@")[0].partition(":")[0] if "@" in parts.netloc else ""
    netloc = f"{user}@{host}" if user else host
    return scrub(f"{parts.scheme}://{netloc}{parts.path}", url)


def _pairs(query: str, url: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ValueError(
            scrub(f"store URL query {query!r}: every part must be NAME=VALUE", url)
        ) from None


def _options(
    query: str, url: str, *, allowed: tuple[str, ...], passthrough: bool = False
) -> dict[str, str]:
    """The receiver's options of ``query``, each checked; a name given twice, or one that
    is not ``allowed`` (unless the rest go to libpq, ``passthrough``), is refused."""
    options: dict[str, str] = {}
    seen: set[str] = set()
    for name, value in _pairs(query, url):
        if name in seen:
            raise ValueError(f"store URL option {name!r} is given twice")
        seen.add(name)
        if name not in allowed:
            if passthrough:
                continue
            raise ValueError(
                f"unknown store URL option {name!r}: a SQLite store takes {', '.join(allowed)}"
            )
        options[name] = value
    _check_receiver_options(options)
    return options


def _check_receiver_options(options: dict[str, str]) -> None:
    sync = options.get("synchronous")
    if sync is not None and sync.upper() not in SYNCHRONOUS_VALUES:
        raise ValueError(f"synchronous={sync!r}: use FULL or NORMAL")
    days = options.get("log_retention_days")
    if days is not None:
        try:
            number = float(days)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number <= 0 or number > 36_500:
            raise ValueError(f"log_retention_days={days!r}: give a number of days (at most 36500)")
    if options.get("export_target", "x") == "":
        raise ValueError("export_target= names no export: give it a name")


def _check_libpq_value(shown: str, name: str, value: str) -> None:
    if name in _PG_INTEGER_OPTIONS and not value.strip().lstrip("-").isdigit():
        raise ValueError(f"{shown}: {name}={value!r} is not a whole number")
    words = _PG_WORD_OPTIONS.get(name)
    if words is not None and value not in words:
        raise ValueError(f"{shown}: {name}={value!r}: use one of {', '.join(words)}")


def _check_libpq_syntax(dsn: str, url: str, shown: str) -> None:
    """libpq's own reading of the URL (unknown options, bad escapes), where psycopg is
    installed; without it the caller says which extra is missing."""
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return
    try:
        conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(scrub(f"{shown}: {first}", url)) from None
