"""The store's writes and reads of the log: a group commit's batch of log rows and
actions in one transaction, the log read back in order, its counts, and the export marks
that tell the retention purge what an export has written."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from gptools.webhooks._connection import ConnectionCore
from gptools.webhooks._constants import LOG_READ_BATCH
from gptools.webhooks._records import ActionState, CommitUncertain, StoreError, WriteItem
from gptools.webhooks._schema import INSERT_LOG, LOG_COLUMNS, NOTE_UNACKNOWLEDGED

#: The first status of a server error: an action answered so is one the provider retries.
FIRST_SERVER_ERROR = 500


class LogOperations(ConnectionCore):
    """Writes and reads of ``delivery_log`` (with the batch's actions) and the export
    marks."""

    def write_batch(
        self,
        items: Sequence[WriteItem],
        *,
        state: ActionState = "pending",
        durable: bool = True,
        on_begin: Callable[[], None] | None = None,
    ) -> list[bool]:
        """Write ``items`` in ONE transaction; return, per item, whether its action was new.

        New actions start in ``state``: ``pending`` when a handler will process them,
        ``done`` when the receiver only stores them (a ``done`` action keeps no copy of
        its body: nothing will read it, and the body is in ``delivery_log`` anyway). With
        ``durable`` false the caller takes over :meth:`Store.make_durable` (one sync can
        then serve several batches); until it has run, nothing written may be
        acknowledged.

        An accepted item whose key already exists (stored earlier or earlier in this
        batch) is logged with ``duplicate`` true. Nothing is visible until the commit; on
        any error the transaction is rolled back and :class:`StoreError` raised, so the
        caller answers 503 for every item of the batch.

        ``on_begin`` runs once the transaction holds the store's write lock, before any
        item is read: the last moment at which the caller may still change the items
        (the writer uses it to log as 503 the requests that timed out while it waited).
        """
        ts_of = self._d.ts
        text = self._d.text
        keep_body = state == "pending"
        fresh: list[bool] = []
        rows: list[tuple[Any, ...]] = []
        unacknowledged: list[tuple[Any, ...]] = []
        now = time.perf_counter()
        try:
            with self._transaction(durable=durable):
                if on_begin is not None:
                    on_begin()
                cur = self.raw.cursor()
                inserts = self._d.action_inserts(cur, items, keep_body=keep_body, state=state)
                # Should the connection break during COMMIT, this id tells whether
                # the rows are in (the answer must say what the log says).
                self.xid = inserts.xid
                for item in items:
                    log = item.log
                    ts = ts_of(log.received_at)
                    new = False
                    if item.accept:
                        new = inserts.add(
                            (log.action_id, ts, log.body if keep_body else "", ts, state)
                        )
                        log.duplicate = not new
                    fresh.append(new)
                    if log.status >= FIRST_SERVER_ERROR and log.auth_ok and log.action_id:
                        unacknowledged.append((log.action_id, ts))
                    if log.latency_ms is None:
                        start = log.started if log.started is not None else now
                        log.latency_ms = round((now - start) * 1000.0, 3)
                    # bools bind as 0/1 in SQLite and as booleans in PostgreSQL.
                    rows.append(
                        (
                            ts,
                            log.status,
                            log.latency_ms,
                            text(log.body),
                            log.action_id,
                            log.duplicate,
                            log.auth_ok,
                            text(log.error),
                            log.remote_addr,
                        )
                    )
                inserts.flush()
                cur.executemany(self._sql(INSERT_LOG), rows)
                self._note_unacknowledged(cur, unacknowledged)
        except CommitUncertain as exc:
            exc.result = fresh
            raise
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"write to {self.store.url} failed: {exc}") from exc
        return fresh

    def _note_unacknowledged(self, cur: Any, notes: list[tuple[Any, ...]]) -> None:
        """Keep the actions of 5xx rows (action_id, received_at) among the
        unacknowledged ones, in the transaction that writes the rows (none on the
        accepted-delivery path: it only compares a status)."""
        if notes:
            cur.executemany(self._sql(NOTE_UNACKNOWLEDGED), notes)

    def export_mark(self, target: str) -> datetime | None:
        """Up to which ``received_at`` the export ``target`` has written the log."""
        with self._errors("read an export mark"):
            row = self._execute(
                "SELECT exported_through FROM log_export_marks WHERE target = ?", (target,)
            ).fetchone()
        return None if row is None else self._d.from_ts(row[0])

    def set_export_mark(self, target: str, through: datetime) -> None:
        """Record that ``target`` has written every log row received up to ``through``."""
        with self._errors("record an export mark"), self._transaction():
            self._execute(
                "INSERT INTO log_export_marks (target, exported_through) VALUES (?, ?)"
                " ON CONFLICT (target) DO UPDATE SET exported_through = excluded.exported_through",
                (target, self._ts(through)),
            )

    def action_ids(self) -> set[str]:
        """Every stored action id (the dedupe keys)."""
        return {str(r[0]) for r in self._execute("SELECT action_id FROM webhook_actions")}

    def iter_log(
        self,
        *,
        batch: int = LOG_READ_BATCH,
        after: datetime | None = None,
        through: datetime | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every ``delivery_log`` row as a dict, oldest ``received_at`` first (only those
        received after ``after`` and up to ``through``, when given)."""
        where, params = [], []
        if after is not None:
            where.append("received_at > ?")
            params.append(self._ts(after))
        if through is not None:
            where.append("received_at <= ?")
            params.append(self._ts(through))
        condition = f" WHERE {' AND '.join(where)}" if where else ""
        cur = self.raw.cursor()
        cur.execute(
            self._sql(
                f"SELECT {', '.join(LOG_COLUMNS)} FROM delivery_log{condition} ORDER BY received_at"
            ),
            params,
        )
        while rows := cur.fetchmany(batch):
            for row in rows:
                rec = dict(zip(LOG_COLUMNS, row, strict=True))
                rec["received_at"] = self._d.from_ts(rec["received_at"])
                rec["duplicate"] = bool(rec["duplicate"])
                rec["auth_ok"] = bool(rec["auth_ok"])
                yield rec

    def log_count(self) -> int:
        """How many rows ``delivery_log`` holds."""
        return int(self._execute("SELECT COUNT(*) FROM delivery_log").fetchone()[0])
