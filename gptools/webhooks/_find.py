"""``webhooks find``: the actions of a store that match a filter, each with its deliveries
in order (answers, latencies), its outcome (acknowledged, lost, pending: the analyser's
definitions, docs/design.md) and, given campaign terms, the campaign it is attributed to or
why none.

On a store it never reads the whole log: the deliveries are found through an index (the
action id's, a payload field's of ``_find_schema.py``, or ``received_at``), at most
``scan`` rows of them, and only the first ``limit`` actions are kept; each is then read
whole through ``delivery_log_action_id``. Every row found is parsed and checked against
the filter in Python (the index only narrows).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Literal

from gptools import spec
from gptools.models import parse_event_timestamp
from gptools.webhooks._dialects import SQLITE
from gptools.webhooks._find_schema import INDEXED_FIELDS, field_sql

Outcome = Literal["acknowledged", "lost", "pending"]
OUTCOMES: Final = ("acknowledged", "lost", "pending")

#: The most actions a lookup returns unless told otherwise (``--limit``).
DEFAULT_FIND_LIMIT: Final = 100
#: The most a lookup may be asked for: a support lookup, not an export.
MAX_FIND_LIMIT: Final = 10_000
#: The most delivery rows a lookup reads through its index before it stops (the answer
#: then says it is incomplete: narrow the filter).
DEFAULT_FIND_SCAN: Final = 100_000

#: The longest text a filter term may hold (ids are far shorter).
MAX_FILTER_TEXT: Final = 256

#: Actions whose deliveries one query reads (one round trip for a whole answer).
_ONE_READ: Final = 500

#: The filter's payload fields by their wire names.
_WIRE = {
    "round_id": "roundId",
    "player_id": "playerId",
    "game_id": "gameId",
    "currency": "currencyCode",
}


@dataclass(frozen=True, slots=True)
class FindFilter:
    """What to look for; every field given must hold (they combine with AND).

    ``event_type``: one of the notification's ``events``; ``outcome``: acknowledged,
    lost or pending; ``status``: an HTTP status one of its deliveries was answered;
    ``since``/``until``: the action's first delivery in ``[since, until)`` (aware)."""

    action_id: str | None = None
    round_id: str | None = None
    player_id: str | None = None
    game_id: str | None = None
    currency: str | None = None
    event_type: str | None = None
    outcome: Outcome | None = None
    status: int | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        for moment in (self.since, self.until):
            if moment is not None and moment.tzinfo is None:
                raise ValueError("since and until must be timezone-aware")
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}")
        for name in ("action_id", *_WIRE, "event_type"):
            value = getattr(self, name)
            if value is not None and not (0 < len(value) <= MAX_FILTER_TEXT):
                raise ValueError(f"{name} must be 1 to {MAX_FILTER_TEXT} characters long")

    def to_dict(self) -> dict[str, Any]:
        """The filter as JSON-ready data (only the fields given)."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if value is not None:
                out[key] = value.isoformat() if isinstance(value, datetime) else value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FindFilter:
        """The filter :meth:`to_dict` wrote."""
        values = dict(data)
        for key in ("since", "until"):
            if values.get(key) is not None:
                values[key] = datetime.fromisoformat(values[key])
        return cls(**values)

    def fits_payload(self, body: dict[str, Any]) -> bool:
        """Whether a delivery's parsed body satisfies the payload terms."""
        for name, wire in _WIRE.items():
            wanted = getattr(self, name)
            if wanted is not None and body.get(wire) != wanted:
                return False
        if self.event_type is not None:
            events = body.get("events")
            if not isinstance(events, list) or self.event_type not in events:
                return False
        return True


@dataclass(frozen=True, slots=True)
class FoundDelivery:
    """One delivery of a found action: when, the answer, how long it took."""

    received_at: datetime
    status: int
    latency_ms: float
    duplicate: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class FoundAction:
    """A found action: its payload's fields (of its first delivery that has them), its
    deliveries in order, its outcome and, with campaign terms, its campaign
    (``campaign_id``) or why none (``attribution``)."""

    action_id: str
    round_id: str | None
    player_id: str | None
    game_id: str | None
    currency: str | None
    bet: Decimal | None
    events: tuple[str, ...]
    event_time: datetime | None
    outcome: Outcome
    deliveries: tuple[FoundDelivery, ...]
    campaign_id: str | None = None
    attribution: str | None = None

    @property
    def first_at(self) -> datetime:
        """When its first delivery arrived."""
        return self.deliveries[0].received_at

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (money as text, times ISO 8601)."""
        out = asdict(self)
        out["bet"] = None if self.bet is None else str(self.bet)
        out["events"] = list(self.events)
        out["event_time"] = None if self.event_time is None else self.event_time.isoformat()
        out["deliveries"] = [
            {**asdict(d), "received_at": d.received_at.isoformat()} for d in self.deliveries
        ]
        return out


@dataclass(frozen=True, slots=True)
class FindResult:
    """What a lookup found: ``actions`` (at most ``limit``, oldest first) and whether it
    stopped before looking at everything that may match (``truncated``: more than
    ``limit`` actions, or the scan bound reached)."""

    source: str
    filter: FindFilter
    actions: tuple[FoundAction, ...]
    limit: int
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (``gptools webhooks find --json``)."""
        return {
            "source": self.source,
            "filter": self.filter.to_dict(),
            "limit": self.limit,
            "truncated": self.truncated,
            "actions": [a.to_dict() for a in self.actions],
        }

    def frames(self) -> tuple[Any, Any]:
        """Two pandas frames: the actions (one row each) and their deliveries (one row
        per delivery, ``action_id`` and ``attempt_no`` first)."""
        import pandas as pd

        rows = []
        deliveries = []
        for a in self.actions:
            row = a.to_dict()
            row.pop("deliveries")
            row["bet"] = a.bet
            row["event_time"] = a.event_time
            row["events"] = ",".join(a.events)
            row["attempts"] = len(a.deliveries)
            row["first_at"] = a.first_at
            rows.append(row)
            for n, d in enumerate(a.deliveries, 1):
                deliveries.append({"action_id": a.action_id, "attempt_no": n, **asdict(d)})
        action_columns = [*_ACTION_COLUMNS]
        delivery_columns = ["action_id", "attempt_no", "received_at", "status", "latency_ms",
                            "duplicate", "error"]  # fmt: skip
        return (
            pd.DataFrame(rows, columns=action_columns),
            pd.DataFrame(deliveries, columns=delivery_columns),
        )

    def __str__(self) -> str:
        if not self.actions:
            return f"no action in {self.source} matches {self.filter.to_dict() or 'everything'}"
        lines = []
        for a in self.actions:
            head = (
                f"{a.action_id}  {a.outcome}  player {a.player_id}  round {a.round_id}  "
                f"game {a.game_id}  {a.bet} {a.currency}  {'/'.join(a.events)}"
            )
            lines.append(head)
            if a.attribution is not None:
                lines.append(f"  campaign: {a.campaign_id or 'none'} ({a.attribution})")
            for n, d in enumerate(a.deliveries, 1):
                dup = "  duplicate" if d.duplicate else ""
                err = f"  {d.error}" if d.error else ""
                lines.append(
                    f"  {n}. {d.received_at.isoformat()}  {d.status}  {d.latency_ms:.1f} ms"
                    f"{dup}{err}"
                )
        more = " (more match: narrow the filter or raise --limit)" if self.truncated else ""
        lines.append(f"{len(self.actions)} action{'s' if len(self.actions) != 1 else ''}{more}")
        return "\n".join(lines)


_ACTION_COLUMNS = (
    "action_id", "outcome", "player_id", "round_id", "game_id", "currency", "bet", "events",
    "event_time", "first_at", "attempts", "campaign_id", "attribution",
)  # fmt: skip


def outcome_of(statuses: Sequence[int]) -> Outcome:
    """An action's outcome from its answers in order (docs/design.md): acknowledged with
    any 2xx, lost when the latest is 4xx, else pending."""
    if any(200 <= s < 300 for s in statuses):
        return "acknowledged"
    if statuses and 400 <= statuses[-1] < 500:
        return "lost"
    return "pending"


def _parse(body: str) -> dict[str, Any]:
    if len(body) > spec.WEBHOOK_MAX_BODY_BYTES:
        return {}
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def build_action(
    action_id: str, rows: Iterable[tuple[datetime, int, float, bool, str | None, str]]
) -> tuple[FoundAction, list[dict[str, Any]]]:
    """A :class:`FoundAction` from its delivery rows in order (received_at, status,
    latency_ms, duplicate, error, body), and the parsed bodies."""
    deliveries = []
    bodies = []
    for received_at, status, latency, duplicate, error, body in rows:
        deliveries.append(
            FoundDelivery(received_at, int(status), float(latency), bool(duplicate), error)
        )
        bodies.append(_parse(body))
    usable = next((b for b in bodies if b.get("playerId") is not None), bodies[0] if bodies else {})
    bet: Decimal | None = None
    if usable.get("bet") is not None:
        try:
            bet = Decimal(str(usable["bet"]))
        except InvalidOperation:
            bet = None
    events = usable.get("events")
    event_time = None
    if isinstance(usable.get("timestamp"), str):
        try:
            event_time = parse_event_timestamp(usable["timestamp"])
        except ValueError:
            event_time = None
    action = FoundAction(
        action_id=action_id,
        round_id=_text(usable.get("roundId")),
        player_id=_text(usable.get("playerId")),
        game_id=_text(usable.get("gameId")),
        currency=_text(usable.get("currencyCode")),
        bet=bet,
        events=tuple(e for e in events if isinstance(e, str)) if isinstance(events, list) else (),
        event_time=event_time,
        outcome=outcome_of([d.status for d in deliveries]),
        deliveries=tuple(deliveries),
    )
    return action, bodies


def fits(action: FoundAction, bodies: Sequence[dict[str, Any]], wanted: FindFilter) -> bool:
    """Whether an action (read whole) satisfies every term of ``wanted``."""
    if wanted.action_id is not None and action.action_id != wanted.action_id:
        return False
    if not any(wanted.fits_payload(b) for b in bodies):
        return False
    if wanted.outcome is not None and action.outcome != wanted.outcome:
        return False
    if wanted.status is not None and all(d.status != wanted.status for d in action.deliveries):
        return False
    first = action.first_at
    if wanted.since is not None and first < wanted.since:
        return False
    return not (wanted.until is not None and first >= wanted.until)


def store_lookup_sql(
    engine: Literal["sqlite", "postgres"], wanted: FindFilter
) -> tuple[str, list[Any]]:
    """The query that finds candidate action ids through one index (a ``?`` statement and
    its parameters): the action id's, else a payload field's, else ``received_at``'s;
    the time range always bounds it."""
    where: list[str] = ["action_id IS NOT NULL"]
    params: list[Any] = []
    if wanted.action_id is not None:
        where.append("action_id = ?")
        params.append(wanted.action_id)
    else:
        for name, wire in _WIRE.items():
            value = getattr(wanted, name)
            if value is not None and wire in INDEXED_FIELDS:
                where.append(f"{field_sql(engine, wire)} = ?")
                params.append(value)
                break
    return " AND ".join(where), params


def find_in_store(
    conn: Any,
    wanted: FindFilter,
    *,
    limit: int = DEFAULT_FIND_LIMIT,
    scan: int = DEFAULT_FIND_SCAN,
    campaigns: Sequence[Any] = (),
) -> FindResult:
    """The actions of the store behind ``conn`` (a ``StoreConnection``) that match
    ``wanted``: at most ``limit``, oldest first; at most ``scan`` delivery rows read
    through the index before the answer says it is incomplete."""
    check_bounds(limit, scan)
    d = conn._d
    engine: Literal["sqlite", "postgres"] = "sqlite" if d is SQLITE else "postgres"
    where, params = store_lookup_sql(engine, wanted)
    # An action's first delivery may lie before `since` while a later one does not: the
    # range bounds the scan from above only; fits() checks the first delivery.
    if wanted.until is not None:
        where += " AND received_at < ?"
        params.append(d.ts(wanted.until))
    if wanted.since is not None and wanted.action_id is None:
        where += " AND received_at >= ?"
        params.append(d.ts(wanted.since))
    ids: dict[str, None] = {}
    truncated = False
    read = 0
    last: Any = None
    with conn._errors("find actions"):
        while len(ids) <= limit:
            page = min(1000, scan - read)
            if page <= 0:
                truncated = True
                break
            cond = where + (" AND received_at >= ?" if last is not None else "")
            args = [*params, *([last] if last is not None else [])]
            rows = conn._execute(
                f"SELECT action_id, received_at FROM delivery_log WHERE {cond}"
                f" ORDER BY received_at LIMIT {page}",
                args,
            ).fetchall()
            read += len(rows)
            for action_id, _ in rows:
                ids.setdefault(str(action_id))
            if len(rows) < page:
                break
            # Rows at the page's last instant are read again with the next page (kept
            # once): ids are a set, so a delivery seen twice changes nothing.
            if last == rows[-1][1]:
                truncated = True  # more than a page at one instant: stop rather than loop
                break
            last = rows[-1][1]
        found: list[FoundAction] = []
        chosen = list(ids)
        for start in range(0, len(chosen), _ONE_READ):
            part = chosen[start : start + _ONE_READ]
            marks = ", ".join("?" for _ in part)
            rows = conn._execute(
                "SELECT action_id, received_at, status, latency_ms, duplicate, error, body"
                f" FROM delivery_log WHERE action_id IN ({marks}) ORDER BY received_at",
                part,
            ).fetchall()
            per: dict[str, list[Any]] = {a: [] for a in part}
            for r in rows:
                per[str(r[0])].append((d.from_ts(r[1]), r[2], r[3], r[4], r[5], r[6]))
            for action_id in part:
                action, bodies = build_action(action_id, per[action_id])
                if fits(action, bodies, wanted):
                    found.append(action)
            if len(found) > limit:
                break
    if len(found) > limit:
        truncated = True
        found = found[:limit]
    found.sort(key=lambda a: (a.first_at, a.action_id))
    return FindResult(conn.store.url, wanted, tuple(attributed(found, campaigns)), limit, truncated)


def check_bounds(limit: int, scan: int) -> None:
    """Refuse a ``limit`` or ``scan`` out of bounds (ValueError)."""
    if not 1 <= limit <= MAX_FIND_LIMIT:
        raise ValueError(f"limit must be 1 to {MAX_FIND_LIMIT}, got {limit}")
    if scan < 1:
        raise ValueError(f"scan must be at least 1, got {scan}")


def attributed(found: list[FoundAction], campaigns: Sequence[Any]) -> list[FoundAction]:
    """``found`` with each action's campaign or why none (none given: unchanged)."""
    if not campaigns:
        return found
    return [replace(a, **attribute(a, campaigns)) for a in found]


def attribute(action: FoundAction, campaigns: Sequence[Any]) -> dict[str, Any]:
    """The campaign an action is attributed to by :data:`gptools.spec.CAMPAIGN_ATTRIBUTION`
    among ``campaigns`` (objects with the attributes of
    :class:`gptools.deliverylog.CampaignTerms`), or why none: ``campaign_id`` and
    ``attribution`` (a short reason). The rule's terms in order: player, game, currency,
    bet (the feature cost with the feature event for AWARDED_FEATURE), time window."""
    if action.player_id is None:
        return {"campaign_id": None, "attribution": "no valid delivery"}
    fitted: list[str] = []
    nearest = "the player is in no campaign given"
    for c in campaigns:
        why = _misfit(action, c)
        if why is None:
            fitted.append(str(c.campaign_id))
        elif action.player_id in tuple(c.players):
            nearest = f"campaign {c.campaign_id}: {why}"
    if len(fitted) == 1:
        return {"campaign_id": fitted[0], "attribution": "fits every term"}
    if len(fitted) > 1:
        return {
            "campaign_id": None,
            "attribution": f"ambiguous: fits {', '.join(sorted(fitted))}",
        }
    return {"campaign_id": None, "attribution": nearest}


def _misfit(action: FoundAction, c: Any) -> str | None:
    if action.player_id not in tuple(c.players):
        return "not its player"
    if action.game_id not in tuple(c.game_ids):
        return f"game {action.game_id} is not one of its games"
    if action.currency != c.currency:
        return f"currency {action.currency}, the campaign's is {c.currency}"
    if action.bet is None or action.bet != Decimal(c.bet):
        return f"bet {action.bet}, the campaign's is {c.bet}"
    if (
        c.campaign_type == spec.CAMPAIGN_TYPE_AWARDED_FEATURE
        and spec.FEATURE_EVENT not in action.events
    ):
        return f"no {spec.FEATURE_EVENT} event"
    when = action.event_time
    start = getattr(c, "start_utc", None) or c.start
    end = getattr(c, "end_utc", None) or c.end
    if when is None or when.tzinfo is None or not (start <= when < end):
        return f"played at {when}, outside [{start}, {end})"
    return None


def find_actions(
    store: Any,
    wanted: FindFilter,
    *,
    limit: int = DEFAULT_FIND_LIMIT,
    scan: int = DEFAULT_FIND_SCAN,
    campaigns: Sequence[Any] = (),
) -> FindResult:
    """The actions of ``store`` (a :class:`~gptools.webhooks.Store`) that match ``wanted``
    (see :func:`find_in_store`); ``result.frames()`` gives them as two pandas frames."""
    conn = store.connect()
    try:
        return find_in_store(conn, wanted, limit=limit, scan=scan, campaigns=campaigns)
    finally:
        conn.close()
