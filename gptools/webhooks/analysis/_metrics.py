"""Every metric of the delivery-log analyser, defined once as Ibis expressions.

The definitions are DESIGN.md's ("The analyser's definitions"); this module is their only
implementation. Three relations carry them, each a pure function of the one before:

1. :func:`validate` (per delivery): whether the body is a valid game event notification
   (the same rules as :class:`gptools.models.GameEventNotification`, written as JSON
   extraction and type checks), the first failing ``reason``, and a usable ``action_id``
   (a UUID string, canonical lower case) even when another field is wrong.
2. :func:`annotate` (per delivery): the attempt chain of each action, ordered by
   ``received_at``; ties are broken by :func:`delivery_order` (a retried answer, then a
   4xx, then a 200), so the order never depends on how a store returns rows. ``kind`` is
   ``first``, ``retry`` (no earlier attempt got 200), ``duplicate`` (an earlier one did)
   or ``unattributed`` (an invalid delivery without a usable actionId). Hence, per row,
   deliveries = first attempts + retries + duplicate deliveries + unattributed.
3. :func:`action_table` (per action): attempts, first and last answer, outcome
   (``acknowledged``, ``lost``: latest answer 4xx and no 200, ``pending``: anything
   else without a 200, which the provider may retry for 7 days after the first attempt),
   and what the payload says (player, game, currency, bet, event time) for drill-down.

Everything else is an aggregate or a window over those relations. DuckDB executes them
(out of core) by default; no Python code looks at rows one by one. Only aggregated,
small results (a handful of numbers per retry number) reach Python, for the backoff fit.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

from gptools import spec
from gptools.webhooks.analysis._readers import PAYLOAD_FIELDS

#: Percentiles reported for latencies, gaps and lags.
PERCENTILES: tuple[float, ...] = (0.5, 0.9, 0.99)

#: Exact decimal type used to add bets up (digits beyond 9 decimals are not expected).
BET_DECIMAL = dt.Decimal(38, 9)

_UTC = dt.Timestamp(timezone="UTC")
# Naive UTC with fractional seconds, as the document says; checked field by field so a
# value like hour 24 or month 13 fails here, as it fails in the pydantic model.
_TIMESTAMP_RE = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?$"
)
_ZONE_SUFFIX_RE = r"(Z|z|[+-][0-9]{2}(:?[0-9]{2})?)$"
_STRING_FIELDS = ("roundId", "gameId", "playerId", "currencyCode")


# --------------------------------------------------------------------------------------
# 1. Validity, per delivery
# --------------------------------------------------------------------------------------


def _unwrap(raw: ir.Table) -> ir.Table:
    """Stage 1: each JSON field unwrapped once into a typed column (NULL when absent or
    of the wrong JSON type), so later stages never parse JSON again."""
    items = raw.events.array
    non_strings = items.filter(lambda item: item.str.isnull()).length()
    return raw.select(
        "received_at",
        "status",
        "latency_ms",
        "shape",
        *(raw[f].notnull().name(f"has_{f}") for f in PAYLOAD_FIELDS),
        *(raw[f].str.name(f"s_{f}") for f in (*_STRING_FIELDS, "actionId", "timestamp")),
        n_bet=raw.bet.float,
        t_bet=raw.bet.cast("string"),
        events_ok=ibis.cases((items.isnull(), False), (non_strings > 0, False), else_=True),
    )


def _parse(u: ir.Table) -> ir.Table:
    """Stage 2: parse the unwrapped strings: the actionId as a canonical UUID (the
    spellings ``uuid.UUID`` accepts: any case, hyphens or none, braces, ``urn:uuid:``), the
    timestamp as naive UTC with at most 9 fractional digits (truncated to microseconds)."""
    text = u.s_actionId
    bare = ibis.cases((text.startswith("urn:uuid:"), text.substr(9)), else_=text)
    ts = u.s_timestamp
    well_formed = ts.re_search(_TIMESTAMP_RE) & (ts.substr(0, 4) != "0000")
    return u.mutate(
        action_uuid=bare.try_cast("uuid").cast("string"),
        ts_zone=ts.re_search(_ZONE_SUFFIX_RE),
        ts_parsed=ibis.cases((well_formed, ts.substr(0, 26)), else_=ibis.null("string"))
        .try_cast("timestamp")
        .cast(_UTC),
        bet_finite=~(u.n_bet.isnan() | u.n_bet.isinf()),
    )


def _checks(p: ir.Table) -> dict[str, list[tuple[ir.Value, str]]]:
    """Per field, the failure cases in order, each with its reason."""
    out: dict[str, list[tuple[ir.Value, str]]] = {
        "actionId": [
            (~p.has_actionId, "missing:actionId"),
            (p.s_actionId.isnull(), "wrong_type:actionId"),
            (p.action_uuid.isnull(), "not_a_uuid:actionId"),
        ],
        "timestamp": [
            (~p.has_timestamp, "missing:timestamp"),
            (p.s_timestamp.isnull(), "wrong_type:timestamp"),
            (p.ts_zone, "has_zone:timestamp"),
            (p.ts_parsed.isnull(), "bad_format:timestamp"),
        ],
        "bet": [
            (~p.has_bet, "missing:bet"),
            (p.n_bet.isnull(), "wrong_type:bet"),
            (~p.bet_finite, "not_finite:bet"),
        ],
        "events": [
            (~p.has_events, "missing:events"),
            (~p.events_ok, "wrong_type:events"),
        ],
    }
    for name in _STRING_FIELDS:
        value = p[f"s_{name}"]
        out[name] = [
            (~p[f"has_{name}"], f"missing:{name}"),
            (value.isnull(), f"wrong_type:{name}"),
            (value.length() == 0, f"empty:{name}"),
        ]
    return out


def validate(raw: ir.Table) -> ir.Table:
    """Per delivery: ``reason`` (NULL when the body is a valid game event notification,
    else the first failing check, e.g. ``not_json``, ``missing:bet``,
    ``has_zone:timestamp``), a usable ``action_id`` and the payload's typed fields.

    The checks are those of :class:`gptools.models.GameEventNotification`: every field
    required; strings strict and non-empty; ``bet`` a finite JSON number; ``events`` an
    array of strings; ``actionId`` a UUID string; ``timestamp`` naive UTC. A field is
    usable on its own even when another one fails (for drill-down), and an absent field
    and a JSON ``null`` both count as missing.
    """
    p = _parse(_unwrap(raw))
    checks = _checks(p)
    is_object = p.shape == "object"
    ordered = [(~is_object, p.shape)]
    for name in PAYLOAD_FIELDS:
        ordered += checks[name]
    reason = ibis.cases(*ordered, else_=ibis.null("string"))

    def usable(value: ir.Value, name: str) -> ir.Value:
        failed = ibis.or_(*(cond.fill_null(True) for cond, _ in checks[name]))
        return ibis.ifelse(is_object & ~failed, value, ibis.null(value.type()))

    return p.select(
        "received_at",
        "status",
        "latency_ms",
        reason=reason,
        action_id=usable(p.action_uuid, "actionId"),
        round_id=usable(p.s_roundId, "roundId"),
        game_id=usable(p.s_gameId, "gameId"),
        player_id=usable(p.s_playerId, "playerId"),
        currency_code=usable(p.s_currencyCode, "currencyCode"),
        event_ts=usable(p.ts_parsed, "timestamp"),
        bet=usable(p.t_bet, "bet"),
    )


# --------------------------------------------------------------------------------------
# 2. Attempt chains, per delivery
# --------------------------------------------------------------------------------------


def delivery_order(t: ir.Table) -> list[ir.Value]:
    """The order of deliveries in time. Ties are broken by what could follow what: an
    answer the provider retries (5xx, others) first, then a 4xx (never retried), then a
    200 (never retried either); then status and latency, so the order never depends on
    how a store returns rows."""
    finality = ibis.cases((t.status == 200, 2), (t.status.between(400, 499), 1), else_=0)
    return [t.received_at, finality, t.status, t.latency_ms]


def annotate(d: ir.Table) -> ir.Table:
    """Per delivery: ``attempt_no`` in its action's chain, ``kind`` and ``gap_s`` (seconds
    since the previous attempt of the same action)."""
    chain = ibis.window(group_by=d.action_id, order_by=delivery_order(d))
    upto = ibis.window(group_by=d.action_id, order_by=delivery_order(d), rows=(None, 0))
    is_200 = (d.status == 200).cast("int64")
    acks_before = is_200.sum().over(upto) - is_200
    attempt_no = ibis.row_number().over(chain) + 1
    kind = ibis.cases(
        (d.action_id.isnull(), "unattributed"),
        (attempt_no == 1, "first"),
        (acks_before > 0, "duplicate"),
        else_="retry",
    )
    previous = d.received_at.lag().over(chain)
    gap_s = d.received_at.delta(previous, unit="microsecond").cast("float64") / 1e6
    return d.mutate(
        attempt_no=ibis.ifelse(d.action_id.isnull(), ibis.null("int64"), attempt_no),
        kind=kind,
        gap_s=ibis.ifelse(d.action_id.isnull(), ibis.null("float64"), gap_s),
    )


# --------------------------------------------------------------------------------------
# 3. Actions
# --------------------------------------------------------------------------------------


def action_table(a: ir.Table) -> ir.Table:
    """Per action: its chain summarised and its outcome."""
    att = a.filter(a.action_id.notnull())

    def first_known(col: ir.Value) -> ir.Value:
        return col.argmin(att.attempt_no, where=col.notnull())

    grouped = att.group_by("action_id").aggregate(
        attempts=att.count(),
        retries=(att.kind == "retry").sum(),
        duplicates=(att.kind == "duplicate").sum(),
        invalid=att.reason.notnull().sum(),
        first_at=att.received_at.min(),
        last_at=att.received_at.max(),
        first_status=att.status.argmin(att.attempt_no),
        last_status=att.status.argmax(att.attempt_no),
        acknowledged=(att.status == 200).any(),
        round_id=first_known(att.round_id),
        player_id=first_known(att.player_id),
        game_id=first_known(att.game_id),
        currency_code=first_known(att.currency_code),
        bet=first_known(att.bet),
        event_ts=first_known(att.event_ts),
    )
    outcome = ibis.cases(
        (grouped.acknowledged, "acknowledged"),
        (grouped.last_status.between(400, 499), "lost"),
        else_="pending",
    )
    return grouped.mutate(
        outcome=outcome, window_end=grouped.first_at + ibis.interval(days=_window_days())
    )


def _window_days() -> int:
    return spec.WEBHOOK_RETRY_WINDOW // timedelta(days=1)


# --------------------------------------------------------------------------------------
# Aggregates (each returns an expression; the caller executes it)
# --------------------------------------------------------------------------------------


def percentiles(col: ir.Value, *, where: ir.Value | None = None) -> dict[str, ir.Value]:
    """p50/p90/p99 (linear interpolation), max and count of a numeric column."""
    out: dict[str, ir.Value] = {"count": col.count(where=where)}
    for q in PERCENTILES:
        out[f"p{round(q * 100)}"] = col.quantile(q, where=where)
    out["max"] = col.max(where=where)
    return out


def delivery_counts(a: ir.Table) -> ir.Table:
    """One row: deliveries by kind, invalid deliveries, latency and retry-gap figures."""
    budget_ms = spec.WEBHOOK_RESPONSE_BUDGET.total_seconds() * 1000
    retry = a.kind == "retry"
    aggs: dict[str, ir.Value] = {
        "deliveries": a.count(),
        "first_attempts": (a.kind == "first").sum(),
        "retries": retry.sum(),
        "duplicate_deliveries": (a.kind == "duplicate").sum(),
        "unattributed": (a.kind == "unattributed").sum(),
        "invalid_deliveries": a.reason.notnull().sum(),
        "over_budget": (a.latency_ms >= budget_ms).sum(),
        "first_received_at": a.received_at.min(),
        "last_received_at": a.received_at.max(),
    }
    aggs |= {f"latency_{k}": v for k, v in percentiles(a.latency_ms).items()}
    aggs |= {f"gap_{k}": v for k, v in percentiles(a.gap_s, where=retry).items()}
    return a.aggregate(**aggs)


def action_counts(actions: ir.Table, now: ir.Value) -> ir.Table:
    """One row: actions by outcome, success rates, attempts and delivery lag."""
    pending = actions.outcome == "pending"
    lag_s = actions.first_at.delta(actions.event_ts, unit="microsecond").cast("float64") / 1e6
    aggs: dict[str, ir.Value] = {
        "actions": actions.count(),
        "acknowledged_actions": actions.acknowledged.sum(),
        "lost_actions": (actions.outcome == "lost").sum(),
        "pending_actions": pending.sum(),
        "pending_actions_expired": (pending & (actions.window_end <= now)).sum(),
        "pending_window_closes_first": actions.window_end.min(
            where=pending & (actions.window_end > now)
        ),
        "first_attempt_successes": (actions.first_status == 200).sum(),
        "attempts_mean": actions.attempts.mean(),
        "attempts_max": actions.attempts.max(),
    }
    aggs |= {f"lag_{k}": v for k, v in percentiles(lag_s).items()}
    return actions.aggregate(**aggs)


def count_by(t: ir.Table, key: str, *, where: ir.Value | None = None) -> ir.Table:
    """Rows per value of ``key`` (optionally filtered), ordered by the key."""
    src = t if where is None else t.filter(where)
    return src.group_by(key).aggregate(n=src.count()).order_by(key)


def out_of_order(actions: ir.Table) -> ir.Table:
    """One row: events (actions with a player and event time) and how many arrived after a
    later-stamped event of the same player (payload time earlier than the previous one's)."""
    ev = actions.filter(actions.player_id.notnull() & actions.event_ts.notnull())
    w = ibis.window(group_by=ev.player_id, order_by=[ev.first_at, ev.event_ts, ev.action_id])
    previous = ev.event_ts.lag().over(w)
    flagged = ev.mutate(late=(ev.event_ts < previous).fill_null(False))
    return flagged.aggregate(events=flagged.count(), out_of_order=flagged.late.sum())


def backoff_points(a: ir.Table) -> ir.Table:
    """Retry gaps by retry number ``n`` (the gap before the n-th retry), for the fit."""
    r = a.filter((a.kind == "retry") & (a.gap_s > 0))
    return r.select(n=r.attempt_no - 1, gap_s=r.gap_s)


def backoff_fit(points: ir.Table) -> ir.Table:
    """One row: least squares of ln(gap) on (n - 1) over every retry gap, so
    gap_n = base * factor^(n-1) with base = exp(intercept), factor = exp(slope)."""
    x = (points.n - 1).cast("float64")
    y = points.gap_s.ln()
    return points.aggregate(
        gaps=points.count(),
        x_mean=x.mean(),
        y_mean=y.mean(),
        cov_xy=x.cov(y, how="pop"),
        var_x=x.var(how="pop"),
        corr=x.corr(y, how="pop"),
    )


def backoff_by_retry(points: ir.Table) -> ir.Table:
    """Per retry number: how many gaps and their median and spread (seconds)."""
    return (
        points.group_by("n")
        .aggregate(
            count=points.count(),
            median_s=points.gap_s.median(),
            p10_s=points.gap_s.quantile(0.1),
            p90_s=points.gap_s.quantile(0.9),
        )
        .order_by("n")
    )


def silent_periods(a: ir.Table, threshold_s: float) -> ir.Table:
    """Stretches longer than ``threshold_s`` with no delivery at all, between consecutive
    deliveries: ``start`` (the last delivery before), ``end`` (the next) and ``seconds``."""
    # Ties do not matter for a gap, so the time alone orders (a cheaper sort).
    previous = a.received_at.lag().over(ibis.window(order_by=a.received_at))
    gaps = a.select(start=previous, end=a.received_at)
    gaps = gaps.mutate(
        seconds=gaps.end.delta(gaps.start, unit="microsecond").cast("float64") / 1e6
    )
    return gaps.filter(gaps.seconds > threshold_s).order_by("start")


def per_hour(a: ir.Table) -> ir.Table:
    """Per hour of ``received_at``: deliveries by kind and by status class, latency p99."""
    t = a.mutate(hour=a.received_at.truncate("h"), cls=a.status // 100)
    return (
        t.group_by("hour")
        .aggregate(
            deliveries=t.count(),
            first_attempts=(t.kind == "first").sum(),
            retries=(t.kind == "retry").sum(),
            duplicates=(t.kind == "duplicate").sum(),
            invalid=t.reason.notnull().sum(),
            status_2xx=(t.cls == 2).sum(),
            status_4xx=(t.cls == 4).sum(),
            status_5xx=(t.cls == 5).sum(),
            status_other=(~t.cls.isin([2, 4, 5])).sum(),
            latency_p99_ms=t.latency_ms.quantile(0.99),
        )
        .order_by("hour")
    )


def per_attribute(actions: ir.Table, key: str) -> ir.Table:
    """Per game or currency (``key``): actions by outcome, retries, duplicates, bets."""
    return (
        actions.group_by(key)
        .aggregate(
            actions=actions.count(),
            acknowledged=actions.acknowledged.sum(),
            lost=(actions.outcome == "lost").sum(),
            pending=(actions.outcome == "pending").sum(),
            retries=actions.retries.sum(),
            duplicates=actions.duplicates.sum(),
            bet_total=actions.bet.try_cast(BET_DECIMAL).sum(),
        )
        .order_by(key)
    )


def time_left_s(actions: ir.Table, now: ir.Value) -> ir.Value:
    """Seconds left in an action's 7-day retry window at ``now`` (0 once it closed)."""
    left = actions.window_end.delta(now, unit="microsecond").cast("float64") / 1e6
    return ibis.greatest(left, 0.0)


def literal_time(moment: Any) -> ir.Value:
    """An aware datetime as a UTC timestamp literal."""
    return ibis.literal(moment, type=_UTC)
