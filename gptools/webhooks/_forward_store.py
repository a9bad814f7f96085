"""The forwarding stage's operations on the store (``webhook_forwards``, one row per
action and destination): enqueue an action for its destinations (once: an insert that
does nothing on conflict), lease the due rows of a destination and count their attempts,
record a publication's outcome (only the lease holder may), count the rows, list the
dead-lettered ones (bounded), and set rows pending again (a replay, a retry of dead
letters)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from gptools.webhooks._connection import ConnectionCore
from gptools.webhooks._records import ActionState, format_utc

#: The most dead-lettered forwards one listing reads: the table may hold millions of rows
#: (a destination down for days), and a listing is for a person or a script to read.
DEAD_FORWARDS_LISTED: Final = 1000

#: Put an action back in one destination's queue: pending, attempts from zero, due now,
#: the body as given; inserted when that destination never had it (a replay to one added
#: since). A row still pending is left as it is: it is sent anyway.
REQUEUE_FORWARD: Final = (
    "INSERT INTO webhook_forwards (action_id, destination, first_received_at, body,"
    " next_attempt_at) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (action_id, destination) DO UPDATE SET state = 'pending', attempts = 0,"
    " lease_until = NULL, lease_owner = NULL, last_error = NULL,"
    " next_attempt_at = excluded.next_attempt_at, body = excluded.body"
    " WHERE webhook_forwards.state <> 'pending'"
)


@dataclass(frozen=True, slots=True)
class ClaimedForward:
    """One action leased for one destination: its stored ``body``, the attempt this run
    is (``attempts``, counted at the claim) and the lease's ``owner``."""

    action_id: str
    destination: str
    body: str
    attempts: int
    owner: str


@dataclass(frozen=True, slots=True)
class ForwardRow:
    """A forward as the store keeps it (for tools and tests)."""

    action_id: str
    destination: str
    state: ActionState
    attempts: int
    last_error: str | None
    forwarded_at: datetime | None


@dataclass(frozen=True, slots=True)
class DeadForward:
    """A forward given up on: the action, its ``destination``, when the action was first
    received, the attempts made and the last one's error (kept until a retry)."""

    action_id: str
    destination: str
    first_received_at: datetime
    attempts: int
    last_error: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, its time in the log's text form (as ``webhooks dead-letters
        --forward NAME --json`` lists it)."""
        return {
            "action_id": self.action_id,
            "destination": self.destination,
            "first_received_at": format_utc(self.first_received_at),
            "attempts": self.attempts,
            "last_error": self.last_error,
        }


@dataclass(frozen=True, slots=True)
class DeadForwards:
    """The oldest dead-lettered forwards (``listed``: at most the listing's limit, oldest
    action first) and how many each destination asked for has in all (``totals``, 0
    included)."""

    listed: tuple[DeadForward, ...]
    totals: dict[str, int]

    @property
    def total(self) -> int:
        """How many dead-lettered forwards there are in all (listed or not)."""
        return sum(self.totals.values())


class ForwardOperations(ConnectionCore):
    """The ``webhook_forwards`` table as the forwarding stage uses it."""

    def enqueue_forwards(
        self,
        action_id: str,
        body: str,
        destinations: Sequence[str],
        now: datetime,
    ) -> int:
        """Put ``action_id`` in the queue of each destination that does not have it yet,
        due ``now``; returns how many rows are new (0 when it ran before: a handler run
        repeated after a crash forwards nothing twice)."""
        insert = (
            "INSERT INTO webhook_forwards (action_id, destination, first_received_at, body,"
            " next_attempt_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (action_id, destination) DO NOTHING"
        )
        ts = self._ts(now)
        new = 0
        with self._errors("enqueue forwards"), self._transaction():
            for destination in destinations:
                cur = self._execute(insert, (action_id, destination, ts, body, ts))
                new += int(cur.rowcount)
        return new

    def claim_forwards(
        self,
        destination: str,
        now: datetime,
        *,
        lease: timedelta,
        max_attempts: int,
        limit: int,
    ) -> list[ClaimedForward]:
        """Lease up to ``limit`` due pending rows of ``destination`` for ``lease`` and
        count their attempt; a due row whose attempts reached ``max_attempts`` (its last
        run never finished) is dead-lettered instead."""
        pick = (
            "SELECT action_id, attempts FROM webhook_forwards"
            " WHERE state = 'pending' AND destination = ? AND next_attempt_at <= ?"
            " AND (lease_until IS NULL OR lease_until <= ?)"
            f" ORDER BY next_attempt_at LIMIT ?{self._d.claim_lock}"
        )
        ts_now = self._ts(now)
        owner = uuid.uuid4().hex
        out: list[ClaimedForward] = []
        with self._errors("claim forwards"), self._transaction(durable=False):
            rows = self._execute(pick, (destination, ts_now, ts_now, limit)).fetchall()
            for row in rows:
                action_id, attempts = str(row[0]), int(row[1])
                if attempts >= max_attempts:
                    self._execute(
                        "UPDATE webhook_forwards SET state = 'dead', lease_until = NULL,"
                        " lease_owner = NULL, last_error = COALESCE(last_error, '') || ?"
                        " WHERE action_id = ? AND destination = ?",
                        (
                            f" (then {attempts} runs started and the last never finished)",
                            action_id,
                            destination,
                        ),
                    )
                    continue
                body, attempts = self._execute(
                    "UPDATE webhook_forwards SET attempts = attempts + 1, lease_until = ?,"
                    " lease_owner = ? WHERE action_id = ? AND destination = ?"
                    " RETURNING body, attempts",
                    (self._ts(now + lease), owner, action_id, destination),
                ).fetchone()
                out.append(ClaimedForward(action_id, destination, str(body), int(attempts), owner))
        return out

    def finish_forward(
        self,
        claimed: ClaimedForward,
        state: ActionState,
        *,
        now: datetime,
        error: str | None = None,
        retry_at: datetime | None = None,
    ) -> bool:
        """Record a publication's outcome: ``done`` (at ``now``), ``dead``, or
        ``pending`` again at ``retry_at``. False (and nothing changed) when the lease ran
        out and another run took the row over."""
        if state == "pending" and retry_at is None:
            raise ValueError("a pending forward needs retry_at")
        next_at = self._ts(retry_at) if retry_at is not None else None
        with self._errors("record a forward"), self._transaction():
            cur = self._execute(
                "UPDATE webhook_forwards SET state = ?, lease_until = NULL, lease_owner = NULL,"
                " last_error = ?, next_attempt_at = COALESCE(?, next_attempt_at),"
                " forwarded_at = CASE WHEN ? = 'done' THEN ? ELSE forwarded_at END"
                # The lease alone says it is still pending and this run's (see
                # QueueOperations.finish: no partial index of pending rows scanned).
                " WHERE action_id = ? AND destination = ? AND lease_owner = ?",
                (
                    state,
                    self._d.text(error),
                    next_at,
                    state,
                    self._ts(now),
                    claimed.action_id,
                    claimed.destination,
                    claimed.owner,
                ),
            )
            return int(cur.rowcount) == 1

    def release_forwards(self, claimed: Sequence[ClaimedForward], retry_at: datetime) -> int:
        """Give leased rows back untried, due at ``retry_at``, their claim's attempt
        uncounted (their destination failed before their turn)."""
        count = 0
        with self._errors("release forwards"), self._transaction():
            for row in claimed:
                cur = self._execute(
                    "UPDATE webhook_forwards SET attempts = attempts - 1, lease_until = NULL,"
                    " lease_owner = NULL, next_attempt_at = ? WHERE action_id = ?"
                    " AND destination = ? AND lease_owner = ?",
                    (self._ts(retry_at), row.action_id, row.destination, row.owner),
                )
                count += int(cur.rowcount)
        return count

    def requeue_forwards(
        self,
        action_ids: Sequence[str] | None,
        now: datetime,
        *,
        destinations: Sequence[str] | None = None,
        states: Sequence[ActionState] = ("done", "dead"),
    ) -> int:
        """Set the forwards of ``action_ids`` (all when None) to ``destinations`` (all
        when None) in ``states`` pending again, due ``now``, attempts from zero: a replay
        (issue 38, item 2) or a retry of dead letters (``states=("dead",)``). Returns
        how many rows."""
        where = [f"state IN ({', '.join('?' for _ in states)})"]
        params: list[object] = list(states)
        if destinations is not None:
            where.append(f"destination IN ({', '.join('?' for _ in destinations) or 'NULL'})")
            params += list(destinations)
        sql = (
            "UPDATE webhook_forwards SET state = 'pending', attempts = 0, lease_until = NULL,"
            " lease_owner = NULL, next_attempt_at = ? WHERE " + " AND ".join(where)
        )
        count = 0
        with self._errors("requeue forwards"), self._transaction():
            if action_ids is None:
                return int(self._execute(sql, (self._ts(now), *params)).rowcount)
            for action_id in action_ids:
                cur = self._execute(sql + " AND action_id = ?", (self._ts(now), *params, action_id))
                count += int(cur.rowcount)
        return count

    def purge_forwards(self, before: datetime, *, step: int) -> int:
        """Delete the done forwards confirmed before ``before`` (the log's retention: a
        replay can re-enqueue what the log still holds), ``step`` rows per transaction
        over the partial index of done rows; returns how many."""
        sql = (
            "DELETE FROM webhook_forwards WHERE (action_id, destination) IN ("
            "SELECT action_id, destination FROM webhook_forwards"
            " WHERE state = 'done' AND forwarded_at < ? LIMIT ?)"
        )
        total = 0
        while True:
            with self._errors("purge forwards"), self._transaction():
                deleted = int(self._execute(sql, (self._ts(before), step)).rowcount)
            total += deleted
            if deleted < step:
                return total

    def forward_counts(self) -> dict[str, dict[str, int]]:
        """How many rows each destination has in each state (reads every row: for tools
        and tests)."""
        with self._errors("count the forwards"):
            rows = self._execute(
                "SELECT destination, state, COUNT(*) FROM webhook_forwards"
                " GROUP BY destination, state"
            ).fetchall()
        out: dict[str, dict[str, int]] = {}
        for destination, state, n in rows:
            out.setdefault(str(destination), {})[str(state)] = int(n)
        return out

    def dead_forwards(
        self, destinations: Sequence[str] | None = None, *, limit: int = DEAD_FORWARDS_LISTED
    ) -> DeadForwards:
        """The dead-lettered forwards to ``destinations`` (every destination when None):
        the ``limit`` oldest (by the action's first reception, then action and
        destination), and how many each has (each one asked for, 0 included; when None,
        those that have some). Both read the partial index of dead rows, so the cost
        follows the dead letters, never the table; at most ``limit`` rows are loaded."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        names = [] if destinations is None else list(dict.fromkeys(destinations))
        chosen = "state = 'dead'"
        if destinations is not None:
            chosen += f" AND destination IN ({', '.join('?' for _ in names) or 'NULL'})"
        with self._errors("list the dead-lettered forwards"):
            counted = self._execute(
                f"SELECT destination, COUNT(*) FROM webhook_forwards WHERE {chosen}"
                " GROUP BY destination",
                names,
            ).fetchall()
            rows = self._execute(
                "SELECT action_id, destination, first_received_at, attempts, last_error"
                f" FROM webhook_forwards WHERE {chosen}"
                " ORDER BY first_received_at, action_id, destination LIMIT ?",
                (*names, limit),
            ).fetchall()
        totals = dict.fromkeys(names, 0) | {str(d): int(n) for d, n in counted}
        listed = tuple(
            DeadForward(str(r[0]), str(r[1]), self._d.from_ts(r[2]), int(r[3]), r[4]) for r in rows
        )
        return DeadForwards(listed, totals)

    def has_forwards(self, destination: str) -> bool:
        """Whether the store holds any forward to ``destination`` (in any state): a name
        it does not know is a typo or a destination that never got an action. Stops at
        the first row found; a name with none reads the whole table (there is no index
        by destination alone), so ask only when the cheaper counts found nothing."""
        with self._errors("look up a destination"):
            row = self._execute(
                "SELECT 1 FROM webhook_forwards WHERE destination = ? LIMIT 1", (destination,)
            ).fetchone()
        return row is not None

    def forward_depth(self, destination: str) -> tuple[int, int]:
        """How many rows of ``destination`` are pending and dead (the metrics)."""
        with self._errors("count the forwards"):
            pending, dead = self._execute(
                "SELECT (SELECT COUNT(*) FROM webhook_forwards WHERE state = 'pending'"
                " AND destination = ?), (SELECT COUNT(*) FROM webhook_forwards"
                " WHERE state = 'dead' AND destination = ?)",
                (destination, destination),
            ).fetchone()
        return int(pending), int(dead)

    def forwards(self, destination: str | None = None) -> list[ForwardRow]:
        """Every forward (to ``destination``, or all), by action then destination."""
        sql = (
            "SELECT action_id, destination, state, attempts, last_error, forwarded_at"
            " FROM webhook_forwards"
        )
        params: tuple[str, ...] = ()
        if destination is not None:
            sql += " WHERE destination = ?"
            params = (destination,)
        with self._errors("list the forwards"):
            rows = self._execute(sql + " ORDER BY action_id, destination", params).fetchall()
        return [
            ForwardRow(
                str(r[0]),
                str(r[1]),
                r[2],
                int(r[3]),
                r[4],
                None if r[5] is None else self._d.from_ts(r[5]),
            )
            for r in rows
        ]
