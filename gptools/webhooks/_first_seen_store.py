"""The contract watcher's operations on the store (``webhook_first_seen``): record first
sightings once across every worker and host (an insert that does nothing on conflict,
within the per-kind cap), read them back, and accept a value a kind set to refuse
refused."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from gptools.webhooks._connection import ConnectionCore


@dataclass(frozen=True, slots=True)
class Sighting:
    """A value of ``kind`` seen in a delivery: when (``seen_at``), in which action, and
    whether the receiver refused the delivery for it."""

    kind: str
    value: str
    seen_at: datetime
    action_id: str
    refused: bool = False


#: What recording a sighting did: ``new`` (this insert was the first), ``known`` (a row
#: was there already) or ``capped`` (the kind holds its maximum of values: not kept).
Recorded = tuple[Sighting, str]


class FirstSeenOperations(ConnectionCore):
    """The ``webhook_first_seen`` table as the contract watcher uses it."""

    def record_first_seen(self, sightings: Sequence[Sighting], *, cap: int) -> list[Recorded]:
        """Record each sighting unless its value of its kind is recorded already or the
        kind holds ``cap`` values; one transaction. Returns each with what happened."""
        insert = (
            "INSERT INTO webhook_first_seen (kind, value, first_seen_at, first_action_id,"
            " refused) SELECT ?, ?, ?, ?, ?"
            " WHERE (SELECT COUNT(*) FROM webhook_first_seen WHERE kind = ?) < ?"
            " ON CONFLICT (kind, value) DO NOTHING"
        )
        out: list[Recorded] = []
        with self._errors("record first sightings"), self._transaction():
            for s in sightings:
                value = self._d.text(s.value) or ""
                cur = self._execute(
                    insert,
                    (s.kind, value, self._ts(s.seen_at), s.action_id, s.refused, s.kind, cap),
                )
                if int(cur.rowcount) == 1:
                    out.append((s, "new"))
                    continue
                there = self._execute(
                    "SELECT 1 FROM webhook_first_seen WHERE kind = ? AND value = ?",
                    (s.kind, value),
                ).fetchone()
                out.append((s, "known" if there is not None else "capped"))
        return out

    def first_seen(self, kind: str | None = None) -> list[Sighting]:
        """Every recorded first sighting (of ``kind``, or all), by kind then time."""
        sql = "SELECT kind, value, first_seen_at, first_action_id, refused FROM webhook_first_seen"
        params: tuple[str, ...] = ()
        if kind is not None:
            sql += " WHERE kind = ?"
            params = (kind,)
        with self._errors("read the first sightings"):
            rows = self._execute(sql + " ORDER BY kind, first_seen_at, value", params).fetchall()
        return [
            Sighting(str(r[0]), str(r[1]), self._d.from_ts(r[2]), str(r[3]), bool(r[4]))
            for r in rows
        ]

    def accept_first_seen(self, kind: str, value: str) -> bool:
        """Accept a refused value of ``kind`` (workers started from now on let it in);
        True when a refused row changed."""
        with self._errors("accept a first-seen value"), self._transaction():
            cur = self._execute(
                "UPDATE webhook_first_seen SET refused = ? WHERE kind = ? AND value = ?"
                " AND refused = ?",
                (False, kind, value, True),
            )
            return int(cur.rowcount) == 1
