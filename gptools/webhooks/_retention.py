"""The retention purges on the store: processed actions' dedupe keys and log rows past
their retention, in small steps (each one write transaction), never a log row an export
target has not written; and the lease that gives each round of purges to one worker of
all those sharing the store. Each purge finds its rows through an index
(``_schema.PURGE_INDEX_DDL``), never by a scan of its table."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from gptools.webhooks._log_io import LogOperations
from gptools.webhooks._records import PurgeResult

#: The purges' conditions: each matches its table's purge index (``_schema.py``).
PURGE_KEYS_WHERE = "state = 'done' AND first_received_at < ?"
PURGE_LOG_WHERE = "received_at < ?"


class RetentionOperations(LogOperations):
    """The purges (they read the export marks of :class:`LogOperations`)."""

    def take_lease(self, name: str, holder: str, now: datetime, length: timedelta) -> bool:
        """Hold the store-wide job ``name`` for ``length`` from ``now``, as ``holder``:
        True when it was free (never taken, or its lease ran out) or already ``holder``'s,
        False when another holder has it. Workers that share a store call this before a
        job each of them would otherwise do (the purge), so that one does it."""
        with self._errors(f"take the lease {name!r}"), self._transaction(durable=False):
            cur = self._execute(
                "INSERT INTO webhook_leases (name, holder, held_until) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
                " held_until = excluded.held_until"
                " WHERE webhook_leases.held_until <= ? OR webhook_leases.holder = excluded.holder",
                (name, holder, self._ts(now + length), self._ts(now)),
            )
            return int(cur.rowcount) == 1

    def purge(self, now: datetime) -> int:
        """Delete the dedupe keys of actions processed (``done``) and first received
        longer ago than the store's retention, in small steps. Pending actions are never
        purged, and dead-lettered ones are kept for someone to look at and retry.
        Returns how many went."""
        cutoff = self._ts(now - self.store.retention)
        return self._purge_steps("webhook_actions", PURGE_KEYS_WHERE, (cutoff,)).rows

    def purge_log(self, now: datetime) -> PurgeResult:
        """Delete ``delivery_log`` rows older than the store's log retention, in small
        steps; with an ``export_target``, never a row that target has not exported."""
        cutoff = now - self.store.log_retention
        target = self.store.export_target
        if target is not None:
            mark = self.export_mark(target)
            if mark is None:
                return PurgeResult()  # nothing exported yet: everything must stay
            cutoff = min(cutoff, mark)
        return self._purge_steps("delivery_log", PURGE_LOG_WHERE, (self._ts(cutoff),))

    def _purge_steps(self, table: str, where: str, params: tuple[Any, ...]) -> PurgeResult:
        # The rows of a step are found by a read outside the write lock (in SQLite, a
        # scan can take long when few old rows are left); the delete by row address
        # re-checks the condition, so a row that changed in between is left alone.
        address = self._d.row_address
        find = self._sql(f"SELECT {address} FROM {table} WHERE {where} LIMIT {self.purge_step}")
        rows = steps = 0
        longest = 0.0
        while True:
            with self._errors(f"purge {table}"):
                found = [r[0] for r in self._execute(find, params).fetchall()]
            if not found:
                return PurgeResult(rows, steps, longest)
            with self._errors(f"purge {table}"):
                sql, at = self._d.delete_at(table, where, found)
                args: tuple[Any, ...] = (at, *params)
                with self._transaction(durable=False):
                    rows += int(self.raw.execute(self._sql(sql), args).rowcount)
            longest = max(longest, self.last_hold)
            steps += 1
            if len(found) < self.purge_step:
                return PurgeResult(rows, steps, longest)
