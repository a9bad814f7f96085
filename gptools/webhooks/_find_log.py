"""``webhooks find --log``: the same lookup as :func:`~gptools.webhooks.find_actions` over
a delivery log in any format the analyser reads (JSONL, Parquet, a store's tables, files
in a folder), through the analyser's own tables (``gptools.deliverylog``; the
``analysis`` extra): its per-action table is filtered by the engine and only the
``limit`` first matches' deliveries reach Python."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from gptools.webhooks._find import (
    DEFAULT_FIND_LIMIT,
    FindFilter,
    FindResult,
    FoundAction,
    FoundDelivery,
    attributed,
    check_bounds,
)

_COLUMNS = {
    "round_id": "round_id",
    "player_id": "player_id",
    "game_id": "game_id",
    "currency": "currency_code",
}


def _aware(value: Any) -> datetime | None:
    if value is None or value != value:  # NaT
        return None
    moment: datetime = value.to_pydatetime() if hasattr(value, "to_pydatetime") else value
    return moment


def find_in_log(
    source: Any,
    wanted: FindFilter,
    *,
    limit: int = DEFAULT_FIND_LIMIT,
    campaigns: Sequence[Any] = (),
    **log_options: Any,
) -> FindResult:
    """The actions of the delivery log ``source`` (what
    :func:`gptools.deliverylog.analyze` opens, with ``log_options``) that match
    ``wanted``, at most ``limit``, oldest first, each with its deliveries in order."""
    check_bounds(limit, 1)
    from gptools.deliverylog import analyze
    from gptools.deliverylog._results import has_event

    with analyze(source, **log_options) as analysis:
        a = analysis.actions
        t = analysis.attempts
        cond = []
        if wanted.action_id is not None:
            cond.append(a.action_id.cast("string") == wanted.action_id.lower())
        for name, column in _COLUMNS.items():
            value = getattr(wanted, name)
            if value is not None:
                cond.append(a[column] == value)
        if wanted.outcome is not None:
            cond.append(a.outcome == wanted.outcome)
        if wanted.since is not None:
            cond.append(a.first_at >= wanted.since)
        if wanted.until is not None:
            cond.append(a.first_at < wanted.until)
        if cond:
            a = a.filter(cond)
        if wanted.event_type is not None:
            with_event = t.filter(has_event(analysis.x, t.events, wanted.event_type))
            a = a.semi_join(with_event.select("action_id"), "action_id")
        if wanted.status is not None:
            answered = t.filter(t.status == wanted.status)
            a = a.semi_join(answered.select("action_id"), "action_id")
        head = (
            a.order_by(["first_at", "action_id"])
            .limit(limit + 1)
            .select(
                a.action_id.cast("string").name("action_id"),
                "round_id",
                "player_id",
                "game_id",
                "currency_code",
                "bet",
                "event_ts",
                "outcome",
            )
            .execute()
        )
        truncated = len(head) > limit
        head = head.iloc[:limit]
        ids = list(head.action_id)
        rows = (
            t.filter(t.action_id.cast("string").isin(ids))
            .select(
                t.action_id.cast("string").name("action_id"),
                "attempt_no",
                "received_at",
                "status",
                "latency_ms",
                "kind",
                "reason",
                "events",
            )
            .order_by(["action_id", "attempt_no"])
            .execute()
            if ids
            else None
        )
    per: dict[str, list[FoundDelivery]] = {i: [] for i in ids}
    events: dict[str, tuple[str, ...]] = {}
    if rows is not None:
        import json

        for r in rows.itertuples(index=False):
            per[r.action_id].append(
                FoundDelivery(
                    _aware(r.received_at) or datetime.min,
                    int(r.status),
                    float(r.latency_ms) if r.latency_ms == r.latency_ms else 0.0,
                    r.kind == "duplicate",
                    r.reason if isinstance(r.reason, str) else None,
                )
            )
            if r.action_id not in events and isinstance(r.events, str):
                try:
                    parsed = json.loads(r.events)
                except ValueError:
                    parsed = []
                if isinstance(parsed, list):
                    events[r.action_id] = tuple(e for e in parsed if isinstance(e, str))
    found = [
        FoundAction(
            action_id=h.action_id,
            round_id=_text(h.round_id),
            player_id=_text(h.player_id),
            game_id=_text(h.game_id),
            currency=_text(h.currency_code),
            bet=None if h.bet is None or h.bet != h.bet else Decimal(str(h.bet)),
            events=events.get(h.action_id, ()),
            event_time=_aware(h.event_ts),
            outcome=h.outcome,
            deliveries=tuple(per[h.action_id]),
        )
        for h in head.itertuples(index=False)
    ]
    return FindResult(str(source), wanted, tuple(attributed(found, campaigns)), limit, truncated)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
