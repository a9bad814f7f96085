"""The processing queue's operations on the store: lease the next due action and count
its attempt, record a run's outcome (only the lease holder may), count the queue, list
and retry the dead letters."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from gptools.webhooks._connection import ConnectionCore
from gptools.webhooks._records import (
    ActionState,
    ClaimedAction,
    DeadLetter,
    QueueCounts,
    QueueDepth,
)

logger = logging.getLogger("gptools.webhooks")


class QueueOperations(ConnectionCore):
    """The ``webhook_actions`` table as the processing queue uses it."""

    def claim_next(
        self,
        now: datetime,
        *,
        lease: timedelta,
        max_attempts: int,
    ) -> ClaimedAction | None:
        """Start the run of the next due pending action: lease it for ``lease`` (one run,
        not a batch), count the attempt now, and return it; None when nothing is due.

        A due action whose attempts already reached ``max_attempts`` goes to dead letter
        instead: its last run started and never finished (the worker died or hung), and
        the handler must not take the process down forever.
        """
        # The pick and the lease in one statement (one round trip on PostgreSQL): the
        # attempt is counted first, and a run past ``max_attempts`` is undone into a dead
        # letter just after, under the lease this claim holds.
        claim = (
            "UPDATE webhook_actions SET attempts = attempts + 1, lease_until = ?,"
            " lease_owner = ? WHERE action_id = (SELECT action_id FROM webhook_actions"
            " WHERE state = 'pending' AND next_attempt_at <= ?"
            " AND (lease_until IS NULL OR lease_until <= ?) ORDER BY next_attempt_at"
            f" LIMIT 1{self._d.claim_lock}) RETURNING action_id, body, attempts"
        )
        ts_now = self._ts(now)
        with self._errors("claim an action"):
            while True:
                owner = uuid.uuid4().hex
                rows, _ = self._write_one(
                    claim, (self._ts(now + lease), owner, ts_now, ts_now), durable=False
                )
                if not rows:
                    return None
                action_id, body, attempts = str(rows[0][0]), str(rows[0][1]), int(rows[0][2])
                if attempts <= max_attempts:
                    return ClaimedAction(action_id, body, attempts, owner)
                started = attempts - 1
                self._write_one(
                    "UPDATE webhook_actions SET state = 'dead', attempts = ?,"
                    " lease_until = NULL, lease_owner = NULL, last_error = ?"
                    " WHERE action_id = ? AND lease_owner = ?",
                    (
                        started,
                        f"{started} runs started and the last one never finished (its worker "
                        f"died, hung or ran past its lease); error before that: "
                        f"{self._last_error(action_id)}",
                        action_id,
                        owner,
                    ),
                )
                logger.error(
                    "action %s dead-lettered: its last of %d runs never finished",
                    action_id,
                    started,
                    extra={
                        "event": "action_dead_lettered",
                        "actionId": action_id,
                        "attempt": started,
                    },
                )

    def _last_error(self, action_id: str) -> str | None:
        row = self._execute(
            "SELECT last_error FROM webhook_actions WHERE action_id = ?", (action_id,)
        ).fetchone()
        return None if row is None else row[0]

    def finish(
        self,
        action_id: str,
        state: ActionState,
        *,
        owner: str,
        error: str | None = None,
        retry_at: datetime | None = None,
    ) -> bool:
        """Record a run's outcome: ``done``, ``dead``, or ``pending`` again at ``retry_at``.

        Only the holder of the run's lease (``owner``, from :meth:`claim_next`) may: when
        the lease ran out and another run took the action, this returns False and changes
        nothing.
        """
        if state == "pending" and retry_at is None:
            raise ValueError("a pending action needs retry_at")
        error = self._d.text(error)
        # The claim's own lease (lease_owner, fresh per claim, cleared by every change of
        # state) says the action is still pending and this run's. No "state = 'pending'"
        # here: PostgreSQL would read it as leave to look the row up through the partial
        # index of pending actions, and while its statistics still say few are pending (a
        # burst since the last ANALYZE), scan them all per outcome: 17 ms each at 100,000.
        with self._errors("record a handler run"):
            if state == "pending":
                assert retry_at is not None
                _, changed = self._write_one(
                    "UPDATE webhook_actions SET state = 'pending', lease_until = NULL,"
                    " lease_owner = NULL, last_error = ?, next_attempt_at = ?"
                    " WHERE action_id = ? AND lease_owner = ?",
                    (error, self._ts(retry_at), action_id, owner),
                )
            else:
                _, changed = self._write_one(
                    "UPDATE webhook_actions SET state = ?, lease_until = NULL,"
                    " lease_owner = NULL, last_error = ?"
                    " WHERE action_id = ? AND lease_owner = ?",
                    (state, error, action_id, owner),
                )
            return changed == 1

    def queue_depth(self) -> QueueDepth:
        """How many actions are pending and dead: two counts over the partial indexes
        of those states (``webhook_actions_pending``, ``webhook_actions_dead``), so
        their cost does not grow with the processed actions. What the metrics read."""
        with self._errors("count the queue"):
            pending, dead = self._execute(
                "SELECT (SELECT COUNT(*) FROM webhook_actions WHERE state = 'pending'),"
                " (SELECT COUNT(*) FROM webhook_actions WHERE state = 'dead')"
            ).fetchone()
        return QueueDepth(int(pending), int(dead))

    def queue_counts(self) -> QueueCounts:
        """How many actions are pending, done and dead (reads every action: for tools
        and tests; the metrics read :meth:`queue_depth`)."""
        with self._errors("count the queue"):
            rows = self._execute(
                "SELECT state, COUNT(*) FROM webhook_actions GROUP BY state"
            ).fetchall()
        counts = {str(r[0]): int(r[1]) for r in rows}
        return QueueCounts(counts.get("pending", 0), counts.get("done", 0), counts.get("dead", 0))

    def dead_letters(self) -> list[DeadLetter]:
        """Every dead-lettered action, oldest first."""
        with self._errors("list the dead letters"):
            rows = self._execute(
                "SELECT action_id, first_received_at, attempts, last_error FROM webhook_actions"
                " WHERE state = 'dead' ORDER BY first_received_at, action_id"
            ).fetchall()
        return [DeadLetter(str(r[0]), self._d.from_ts(r[1]), int(r[2]), r[3]) for r in rows]

    def retry_dead(self, now: datetime, action_ids: Sequence[str] | None = None) -> int:
        """Put dead-lettered actions (all, or those of ``action_ids``) back in the queue,
        due at ``now`` with their attempts counted from zero; returns how many."""
        sql = (
            "UPDATE webhook_actions SET state = 'pending', attempts = 0, lease_until = NULL,"
            " lease_owner = NULL, next_attempt_at = ? WHERE state = 'dead'"
        )
        with self._errors("retry the dead letters"), self._transaction():
            if action_ids is None:
                return int(self._execute(sql, (self._ts(now),)).rowcount)
            count = 0
            for action_id in action_ids:
                count += int(
                    self._execute(sql + " AND action_id = ?", (self._ts(now), action_id)).rowcount
                )
            return count
