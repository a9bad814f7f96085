"""The store's side of an outage: the spooled log rows of its 503s written exactly once
(each spool file's replay mark moves in the transaction that writes its rows), and the
actions answered only 5xx so far, kept small so their oldest is one index read."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from gptools.webhooks._log_io import FIRST_SERVER_ERROR, LogOperations
from gptools.webhooks._records import LogEntry, StoreError
from gptools.webhooks._schema import INSERT_LOG


class SpoolMoved(StoreError):
    """Another process moved a spool file's replay mark first (it replays the same file):
    this transaction wrote nothing."""


class OutageOperations(LogOperations):
    """Replays of spooled rows and the table of unacknowledged actions."""

    def replay_spooled(
        self, spool: str, start: int, entries: Sequence[LogEntry | None], now: datetime
    ) -> tuple[int, int]:
        """Write ``entries``, rows ``start`` + 1 onwards of the spool file ``spool`` (None
        for a line that was not a row), those past its replay mark, and move the mark, in
        ONE durable transaction; return the mark and how many rows this call wrote.

        A replay that a crash cut between the commit and the file's deletion is replayed
        again from the mark: nothing is written twice.
        """
        through = start + len(entries)
        try:
            with self._transaction():
                row = self._execute(
                    "SELECT replayed_rows FROM spool_replay_marks WHERE spool = ?", (spool,)
                ).fetchone()
                mark = 0 if row is None else int(row[0])
                if mark >= through:
                    return mark, 0
                if mark < start:
                    raise StoreError(
                        f"spool {spool}: rows {mark + 1} to {start} were never replayed"
                    )
                # Compare-and-set: of two processes replaying one file, one moves the mark
                # and the other writes nothing.
                if row is None:
                    moved = self._execute(
                        "INSERT INTO spool_replay_marks (spool, replayed_rows, updated_at)"
                        " VALUES (?, ?, ?) ON CONFLICT (spool) DO NOTHING",
                        (spool, through, self._ts(now)),
                    ).rowcount
                else:
                    moved = self._execute(
                        "UPDATE spool_replay_marks SET replayed_rows = ?, updated_at = ?"
                        " WHERE spool = ? AND replayed_rows = ?",
                        (through, self._ts(now), spool, mark),
                    ).rowcount
                if moved != 1:
                    raise SpoolMoved(f"spool {spool} is replayed by another process")
                fresh = [e for e in entries[mark - start :] if e is not None]
                cur = self.raw.cursor()
                cur.executemany(self._sql(INSERT_LOG), [self._log_row(e) for e in fresh])
                self._note_unacknowledged(
                    cur,
                    [
                        (e.action_id, self._ts(e.received_at))
                        for e in fresh
                        if e.status >= FIRST_SERVER_ERROR and e.auth_ok and e.action_id
                    ],
                )
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot replay spooled rows into {self.store.url}: {exc}") from exc
        return through, len(fresh)

    def _log_row(self, entry: LogEntry) -> tuple[Any, ...]:
        return (
            self._ts(entry.received_at),
            entry.status,
            entry.latency_ms if entry.latency_ms is not None else 0.0,
            entry.body,
            entry.action_id,
            entry.duplicate,
            entry.auth_ok,
            entry.error,
            entry.remote_addr,
        )

    def forget_spooled(self, spool: str, now: datetime, keep: timedelta) -> None:
        """Drop the replay mark of a spool file that is deleted, and any mark left older
        than ``keep`` (a clean-up that a crash or an outage cut)."""
        with self._errors("drop a spool's replay mark"), self._transaction(durable=False):
            self._execute(
                "DELETE FROM spool_replay_marks WHERE spool = ? OR updated_at < ?",
                (spool, self._ts(now - keep)),
            )

    def oldest_unacknowledged(self, now: datetime, keep: timedelta) -> datetime | None:
        """The first 5xx answer of the oldest action answered only 5xx so far, after
        clearing the actions acknowledged since (stored) and those first answered longer
        ago than ``keep``; None when there is none. Costs a look-up per unacknowledged
        action, whatever the number of acknowledged ones or of log rows."""
        find = "SELECT MIN(first_received_at) FROM unacknowledged_actions"
        with self._errors("read the unacknowledged actions"):
            if self._execute(find).fetchone()[0] is None:
                return None  # the usual case: no write at all
            with self._transaction(durable=False):
                self._execute(
                    "DELETE FROM unacknowledged_actions WHERE EXISTS (SELECT 1 FROM"
                    " webhook_actions a WHERE a.action_id = unacknowledged_actions.action_id)"
                )
                self._execute(
                    "DELETE FROM unacknowledged_actions WHERE first_received_at < ?",
                    (self._ts(now - keep),),
                )
            oldest = self._execute(find).fetchone()[0]
        return None if oldest is None else self._d.from_ts(oldest)
