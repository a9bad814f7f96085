"""What the store keeps and hands back (log entries, write items, claimed actions, dead
letters, purge results, queue counts), its errors, and the log's time (its text form and
the default clock)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from gptools.errors import GptoolsError

ActionState = Literal["pending", "done", "dead"]


class StoreError(GptoolsError):
    """The store could not be opened, read or written (the cause is chained)."""


class StoreUnreachableError(StoreError):
    """No connection to the store could be opened (the server is down, refuses, or does
    not answer in time): an outage, which may end by itself."""


class StoreNotFoundError(StoreError):
    """The store does not exist (no SQLite file; no tables in the PostgreSQL schema), and
    this caller may not create it: a mistyped URL must not make an empty store."""


class SchemaVersionError(StoreError):
    """The store's layout is at a schema version this gptools does not run on: an older
    one (``gptools webhooks migrate`` brings it up to date) or a newer one it does not
    know. ``found`` is the store's version (0: laid out before versions existed),
    ``expected`` this gptools'."""

    def __init__(self, message: str, *, found: int, expected: int) -> None:
        super().__init__(message)
        self.found = found
        self.expected = expected


class CommitUncertain(StoreError):
    """The connection broke during COMMIT: the transaction may or may not have been
    committed. ``xid`` lets a new connection find out
    (``StoreConnection.commit_status``); ``result`` is what the write would have
    returned had the COMMIT answered."""

    def __init__(self, message: str, xid: int) -> None:
        super().__init__(message)
        self.xid = xid
        self.result: Any = None


class NotDurable(StoreError):
    """The rows were committed, but the sync that makes them durable failed: the request
    is answered 503 (so the provider retries) while its log row is in the store already
    (a power loss may still take it)."""


#: Where the receiver and its loops read the time (aware UTC); tests pass their own.
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time, aware UTC (the default clock)."""
    return datetime.now(UTC)


def format_utc(moment: datetime) -> str:
    """``moment`` as the log's text form: ISO 8601 UTC, microseconds, trailing ``Z``."""
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment!r}: the store keeps aware UTC times only")
    # isoformat is several times cheaper than strftime, and this runs once per delivery.
    naive = moment.astimezone(UTC).replace(tzinfo=None)
    return naive.isoformat(timespec="microseconds") + "Z"


def parse_utc(text: str) -> datetime:
    """Parse :func:`format_utc`'s form back to an aware UTC datetime."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


@dataclass(slots=True)
class LogEntry:
    """One delivery attempt, as it goes into ``delivery_log``.

    ``started`` is the ``time.perf_counter()`` reading when the request arrived; the
    writer turns it into ``latency_ms`` when it writes the row, so the latency covers
    everything up to the durable write (not the commit itself, a millisecond or so).
    ``latency_ms`` set explicitly wins over ``started``. ``status`` is the answer the
    request means to send; once the entry is handed to the group-commit writer, only the
    writer's hand-over may change it (to 503, when the time-out comes before the write
    begins: ``_writer._Handover.decide``). ``auth_ok`` is true only where the request's
    credentials were checked and held (under NONE: where the check was reached); a
    request refused before authentication (404, 405, 413, a repeated header) never was.
    ``request_id`` is the request's id (``_logs.request_id``) for its log lines and its
    answer; it is not stored.
    """

    received_at: datetime
    status: int
    body: str
    action_id: str | None = None
    auth_ok: bool = False
    error: str | None = None
    remote_addr: str | None = None
    started: float | None = None
    latency_ms: float | None = None
    duplicate: bool = False
    request_id: bytes | None = None


@dataclass(slots=True)
class WriteItem:
    """One unit of a group commit: a log entry and, for a valid delivery, its action.

    When ``accept`` is true the action (``log.action_id`` with ``log.body``) is inserted
    unless its key already exists; the log row then records whether it was a duplicate.
    """

    log: LogEntry
    accept: bool = False


@dataclass(frozen=True, slots=True)
class ClaimedAction:
    """An action whose run has started: its id, raw body, attempt number (this run's,
    1-based) and the lease token that ``StoreConnection.finish`` must present."""

    action_id: str
    body: str
    attempts: int
    owner: str = ""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead-lettered action: kept with its last error until someone retries it."""

    action_id: str
    first_received_at: datetime
    attempts: int
    last_error: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, its time in the log's text form (:func:`format_utc`), as ``gptools
        webhooks dead-letters --json`` lists it."""
        return {
            "action_id": self.action_id,
            "first_received_at": format_utc(self.first_received_at),
            "attempts": self.attempts,
            "last_error": self.last_error,
        }


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """What one purge removed, in how many steps, and the longest any step held the
    store's write lock (seconds)."""

    rows: int = 0
    steps: int = 0
    longest_hold: float = 0.0


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """How many actions are in each processing state."""

    pending: int = 0
    done: int = 0
    dead: int = 0


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """The actions of the processing queue that still need someone: ``pending`` (to be
    run) and ``dead`` (given up on, waiting for a retry). Both are counted over partial
    indexes, so the count costs what these actions are, never what the processed ones
    are (those are not counted here: :class:`QueueCounts` counts them, by reading them).
    """

    pending: int = 0
    dead: int = 0
