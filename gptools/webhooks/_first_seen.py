"""The contract watcher: values the receiver has not seen before in the fields whose set
the provider's document leaves open (``spec.OPEN_VALUE_KINDS``: event types, top-level
field names, currencies, game ids).

On the request path it costs a set lookup per value (:meth:`FirstSeenWatch.check`): a
worker knows the document's values (``spec.KNOWN_OPEN_VALUES``) and those its store has
recorded (read at start). A value it does not know is either refused (the kind is set to
refuse: the delivery is answered 422, which the provider never retries) or, by default,
let through; either way the sighting is noted and recorded in the background
(:meth:`FirstSeenWatch.flush`, every half second) in ``webhook_first_seen``, once across
every worker and host: the worker whose insert took counts it
(``gptools_webhook_first_seen_total{kind}``) and logs one ``first_seen`` line. A kind
holds at most ``first_seen_max_values`` values, in a worker's memory and in the table;
past that a new value is counted (``gptools_webhook_first_seen_dropped_total{kind}``)
and not kept.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from gptools import spec
from gptools.webhooks._constants import FIRST_SEEN_MAX_VALUE_CHARS
from gptools.webhooks._first_seen_store import Sighting
from gptools.webhooks._metric_families import Families, counter
from gptools.webhooks._records import StoreError
from gptools.webhooks._store import Store, StoreConnection

logger = logging.getLogger("gptools.webhooks")

#: The kinds whose new values mean the payload changed (the alert's, a warning line).
ALERTED_KINDS = frozenset({"event_type", "field"})

_COUNTERS = Families(
    first_seen=counter(
        "gptools_webhook_first_seen_total",
        "Values seen for the first time in a field whose set the provider's document "
        "leaves open, by kind (event_type, field, currency, game); each value counted "
        "once across all workers.",
        "kind",
    ),
    dropped=counter(
        "gptools_webhook_first_seen_dropped_total",
        "New values not kept because their kind holds first_seen_max_values already.",
        "kind",
    ),
)


def shown_value(value: str) -> str:
    """A value as the watcher keeps and logs it: at most ``FIRST_SEEN_MAX_VALUE_CHARS``
    characters (a longer one cut, ending in "…")."""
    if len(value) <= FIRST_SEEN_MAX_VALUE_CHARS:
        return value
    return value[: FIRST_SEEN_MAX_VALUE_CHARS - 1] + "…"


def open_values(data: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Each (kind, value) of a notification's body (a JSON object already checked valid)
    in the kinds of ``spec.OPEN_VALUE_KINDS``."""
    for name in data:
        yield "field", name
    for kind, name in spec.OPEN_VALUE_FIELDS.items():
        value = data.get(name)
        if isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    yield kind, item
        elif isinstance(value, str):
            yield kind, value


def refused_kinds(text: str) -> frozenset[str]:
    """The kinds a ``first_seen_refuse`` setting names (comma-separated); ValueError for
    one that is not a kind."""
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(kinds - set(spec.OPEN_VALUE_KINDS))
    if unknown:
        raise ValueError(
            f"names no kind of value the receiver watches: {', '.join(unknown)} "
            f"(the kinds: {', '.join(spec.OPEN_VALUE_KINDS)})"
        )
    return kinds


class FirstSeenWatch:
    """One worker's contract watcher (see the module docstring). ``refuse``: the kinds
    whose new values are refused; ``max_values``: the cap per kind."""

    def __init__(self, store: Store, *, refuse: frozenset[str], max_values: int) -> None:
        self.store = store
        self.refuse = refuse
        self.max_values = max_values
        self.known: dict[str, set[str]] = {k: set() for k in spec.OPEN_VALUE_KINDS}
        #: Values refused and noted already (each recorded once, refused every time).
        self._refused: dict[str, set[str]] = {k: set() for k in spec.OPEN_VALUE_KINDS}
        self._pending: list[Sighting] = []
        self._dropped: dict[str, int] = {}
        self._loaded = False
        self._conn: StoreConnection | None = None
        self._lock = threading.Lock()  # one flush at a time (the loop's, the last one's)

    def started(self) -> None:
        """The worker serves: every kind's counters exist from now on (at 0), so that
        an alert on their increase sees the first one."""
        made = _COUNTERS.made()
        for kind in spec.OPEN_VALUE_KINDS:
            made.first_seen.labels(kind=kind)
            made.dropped.labels(kind=kind)

    def _is_known(self, kind: str, value: str) -> bool:
        return value in spec.KNOWN_OPEN_VALUES[kind] or value in self.known[kind]

    def check(
        self, data: Mapping[str, Any], action_id: str, seen_at: datetime
    ) -> tuple[list[Sighting], Sighting | None]:
        """The new values of a valid body: the sightings to note once it is stored, and
        the first one of a kind set to refuse (noted now: the delivery is refused)."""
        new: list[Sighting] = []
        refused: Sighting | None = None
        for kind, raw in open_values(data):
            if self._is_known(kind, raw):
                continue
            value = shown_value(raw)
            if kind in self.refuse:
                if refused is None:
                    refused = Sighting(kind, value, seen_at, action_id, refused=True)
                continue
            new.append(Sighting(kind, value, seen_at, action_id))
        if refused is not None:
            kind, value = refused.kind, refused.value
            if value not in self._refused[kind] and self._room(kind, self._refused):
                self._refused[kind].add(value)
                self._pending.append(refused)
        return new, refused

    def _room(self, kind: str, table: dict[str, set[str]]) -> bool:
        if len(table[kind]) < self.max_values:
            return True
        self._dropped[kind] = self._dropped.get(kind, 0) + 1
        return False

    def note(self, sightings: list[Sighting]) -> None:
        """The delivery that carried ``sightings`` is stored: each value is known from
        now on in this worker and goes to the store at the next flush (from the event
        loop's thread, like :meth:`check`)."""
        for s in sightings:
            if s.value in self.known[s.kind] or not self._room(s.kind, self.known):
                continue
            self.known[s.kind].add(s.value)
            self._pending.append(s)

    def take(self) -> tuple[list[Sighting], dict[str, int]]:
        """What is to record and to count as dropped since the last call (the event
        loop's thread hands it to :meth:`flush`'s)."""
        pending, self._pending = self._pending, []
        dropped, self._dropped = self._dropped, {}
        return pending, dropped

    def give_back(self, pending: list[Sighting]) -> None:
        """Sightings a flush could not record: tried again at the next one."""
        self._pending[:0] = pending

    def load(self) -> None:
        """Read the values the store has recorded (once; a refused value of a kind set
        to refuse stays unknown, so it is refused again)."""
        if self._loaded:
            return
        with self._lock:
            rows = self._connection().first_seen()
        for s in rows:
            if s.refused and s.kind in self.refuse:
                self._refused[s.kind].add(s.value)
            elif len(self.known[s.kind]) < self.max_values:
                self.known[s.kind].add(s.value)
        self._loaded = True

    def flush(self, pending: list[Sighting], dropped: dict[str, int]) -> list[Sighting]:
        """Record ``pending`` (from :meth:`take`) in the store and count and log those
        this worker saw first; count ``dropped``. Returns what could not be recorded
        (the store failed), for :meth:`give_back`. Runs in a thread of its own."""
        made = _COUNTERS.made()
        for kind, n in dropped.items():
            made.dropped.labels(kind=kind).inc(n)
        if not pending:
            return []
        try:
            with self._lock:
                recorded = self._connection().record_first_seen(pending, cap=self.max_values)
        except StoreError as exc:
            self._close()
            logger.warning(
                "first sightings not recorded yet: %s",
                exc,
                extra={"event": "first_seen_deferred"},
            )
            return pending
        for sighting, what in recorded:
            if what == "capped":
                made.dropped.labels(kind=sighting.kind).inc()
            elif what == "new":
                made.first_seen.labels(kind=sighting.kind).inc()
                # A new event type or field is the payload changing (a warning, like its
                # alert); a new currency or game is everyday news.
                level = logging.WARNING if sighting.kind in ALERTED_KINDS else logging.INFO
                logger.log(
                    level,
                    "first seen: %s %r%s",
                    sighting.kind,
                    sighting.value,
                    " (refused)" if sighting.refused else "",
                    extra={
                        "event": "first_seen",
                        "kind": sighting.kind,
                        "value": sighting.value,
                        "actionId": sighting.action_id,
                        "refused": sighting.refused,
                    },
                )
        return []

    def _connection(self) -> StoreConnection:
        if self._conn is None:
            self._conn = self.store.connect()
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the watcher's store connection."""
        with self._lock:
            self._close()
