"""What a refused request may cost: a short body prefix and a bounded number of log rows.

Requests refused before authentication or routing (``spec.WEBHOOK_REFUSALS``: 401, 403,
404, 405, 413, 415, 431) come from anyone on the network. Each keeps at most
``spec.WEBHOOK_REFUSED_BODY_PREFIX_BYTES`` of its body, and :class:`RefusalBudget` lets
through at most ``rate`` log rows per second and per reason; past it a refusal is only
counted, and :meth:`RefusalBudget.summaries` hands out one summary row per reason and
interval with the count (``status`` ``spec.WEBHOOK_SUMMARY_STATUS``, a body that says how
many, of which reason, over which period). So a flood grows the store by at most
``rate`` rows of about 1 KB per second and reason, whatever its own rate.

A kept row keeps the ``actionId`` its prefix holds (a provider whose key was rotated is
answered 401 and never retries: those actions are lost, and the analyser lists them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gptools import spec
from gptools.webhooks._constants import DEFAULT_SUMMARY_EVERY
from gptools.webhooks._records import LogEntry, format_utc, parse_utc

#: The ``error`` prefix of a summary row.
SUMMARY_ERROR = "suppressed"

_ACTION_ID = re.compile(
    rb'"actionId"\s*:\s*"(' + spec.ACTION_ID_PATTERN.strip("^$").encode() + rb')"'
)


def body_prefix(body: bytes) -> str:
    """The part of a refused body its log row keeps, as text (a character cut in two at
    the end becomes U+FFFD)."""
    return body[: spec.WEBHOOK_REFUSED_BODY_PREFIX_BYTES].decode("utf-8", errors="replace")


def action_id_in(prefix: bytes) -> str | None:
    """The canonical ``actionId`` a body prefix names (lower-case), else None: a plain
    search, never a parse of what a stranger sent."""
    found = _ACTION_ID.search(prefix[: spec.WEBHOOK_REFUSED_BODY_PREFIX_BYTES])
    return found.group(1).decode().lower() if found else None


@dataclass(slots=True)
class _Reason:
    """One reason's state: the current one-second window and what was suppressed since
    its last summary row."""

    status: int
    window: int = -1
    rows: int = 0
    suppressed: int = 0
    since: datetime | None = None
    until: datetime | None = None
    summarised_at: float = 0.0


@dataclass(slots=True)
class RefusalBudget:
    """Per refusal reason, ``rate`` log rows per second (``0``: none, only counts); the
    rest counted until :meth:`summaries` turns them into summary rows. Used from one event
    loop's thread, so it needs no lock. ``every`` is the least time between two summary
    rows of one reason."""

    rate: int = spec.WEBHOOK_REFUSED_ROWS_PER_SECOND
    every: timedelta = DEFAULT_SUMMARY_EVERY
    _reasons: dict[str, _Reason] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rate < 0:
            raise ValueError(f"refused rows per second must be 0 or more, got {self.rate}")
        if self.every <= timedelta(0):
            raise ValueError(f"the summary interval must be positive, got {self.every}")

    def admit(self, reason: str, status: int, now: float, at: datetime) -> bool:
        """Whether this refusal (``now``: a monotonic reading in seconds, ``at``: its
        ``received_at``) gets a log row of its own; if not, it is counted."""
        state = self._reasons.get(reason)
        if state is None:
            state = self._reasons[reason] = _Reason(status, summarised_at=now)
        window = int(now)
        if window != state.window:
            state.window, state.rows = window, 0
        if state.rows < self.rate:
            state.rows += 1
            return True
        state.suppressed += 1
        state.since = state.since or at
        state.until = at
        return False

    def summaries(self, now: float, at: datetime, *, final: bool = False) -> list[LogEntry]:
        """The summary rows due at ``now`` (every reason with suppressed refusals whose
        last summary is ``every`` old, or all of them when ``final``), counts reset."""
        due: list[LogEntry] = []
        every = self.every.total_seconds()
        for reason, state in self._reasons.items():
            if not state.suppressed or (not final and now - state.summarised_at < every):
                continue
            due.append(summary_entry(reason, state.status, state.suppressed, state, at))
            state.suppressed, state.since, state.until = 0, None, None
            state.summarised_at = now
        return due

    def restore(self, entry: LogEntry) -> None:
        """Count a summary row's refusals again (its write failed; the next one carries
        them)."""
        summary = json.loads(entry.body)
        state = self._reasons[summary["reason"]]
        state.suppressed += summary["suppressed"]
        state.since = parse_utc(summary["since"])  # earlier than anything counted since
        state.until = state.until or parse_utc(summary["until"])
        state.summarised_at = 0.0


def summary_entry(reason: str, status: int, count: int, span: _Reason, at: datetime) -> LogEntry:
    """The log row standing for ``count`` refusals of ``reason`` that got no row."""
    since = format_utc(span.since or at)
    until = format_utc(span.until or at)
    body = {
        "suppressed": count,
        "reason": reason,
        "status": status,
        "since": since,
        "until": until,
    }
    return LogEntry(
        received_at=at,
        status=spec.WEBHOOK_SUMMARY_STATUS,
        body=json.dumps(body, separators=(",", ":")),
        auth_ok=False,
        error=(
            f"{SUMMARY_ERROR}: {count} {reason} refusals ({status}) answered without a row of"
            f" their own, {since} to {until}"
        ),
        latency_ms=0.0,
    )
