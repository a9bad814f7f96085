"""Every metric of the delivery-log analyser, defined once as Ibis expressions.

The definitions are docs/design.md's ("The analyser's definitions"); this module is their
only implementation. Three relations carry them, each a pure function of the one before:

1. :func:`validate` (per delivery): whether the body is a valid game event notification
   (the declaration ``spec.GAME_EVENT_FIELDS``, which the model follows too, written as
   checks on the JSON text of each field), the first failing ``reason``, and a usable
   ``action_id`` (a UUID value: 16 bytes to sort and group on, shown as canonical lower
   case text in drill-downs) even when another field is wrong.
2. :func:`annotate` (per delivery): the attempt chain of each action, ordered by
   ``received_at``; ties are broken by :func:`delivery_order` (a retried answer, then a
   4xx, then a 2xx), so the order never depends on how a store returns rows. ``kind`` is
   ``first``, ``retry`` (no earlier attempt got 2xx), ``duplicate`` (an earlier one did)
   or ``unattributed`` (an invalid delivery without a usable actionId). Hence, per row,
   deliveries = first attempts + retries + duplicate deliveries + unattributed.
3. :func:`action_table` (per action): attempts, first and last answer, outcome
   (``acknowledged``, ``lost``: latest answer 4xx and no 2xx, ``pending``: anything
   else without a 2xx, which the provider may retry for 7 days after the first attempt),
   and what the payload says (player, game, currency, bet, event time) for drill-down.

Everything else is an aggregate or a window over those relations. The summary uses
narrower forms of 2 and 3 that give the same counts: :func:`deliveries` (materialised
once), :func:`action_summary` (a hash aggregate) and :func:`retry_chains` (a window over
retried actions only). DuckDB executes them (out of core) by default; no Python code looks
at rows one by one. Only aggregated, small results (a handful of numbers per retry
number) reach Python, for the backoff fit.

Two engines run them: DuckDB (one machine, out of core) and Spark (a cluster). The few
operations that need an engine's own function take a *dialect* ``x``, one of two twin
modules with the same names (:mod:`._dialect_duckdb`, :mod:`._dialect_spark`): epoch
microseconds, ``arg_min``/``min_by``, the canonical text of a JSON field, the action id's
type. Everything else here is plain Ibis and means the same on both.

Speed notes (a 5M-delivery log, 2 cores): the log is parsed once, by DuckDB's JSON reader
(reading the eight payload fields as JSON text costs about 0.6 s more than reading the
four fields every analysis needs). Each field's type is checked on its canonical JSON
text instead of re-parsing it. Only what gives a value or decides validity runs on every
delivery (the two costly ones are the actionId's UUID cast, about 0.4 s, and the
timestamp's regular expression and cast, about 0.5 s); the reasons are branches of one
CASE that only invalid rows enter, because a value computed in a stage of its own is
paid by every row. The order key packs the instant and the kind of answer, so per-action
first and last picks are plain ``min``/``max``; picks of other values use ``arg_min`` /
``arg_max`` rather than Ibis' ordered ``FIRST``. Duplicates are counted without a join of
every delivery; windows get only the columns they need (DuckDB carries every column
through their sort). Time differences use epoch microseconds (zoned ``date_diff`` costs
about 100 times more per row); silent periods need no sort of every delivery. Engine
builtins (``arg_min``, ``epoch_us``...; ``min_by``, ``unix_micros``... on Spark) are
called through Ibis' builtin-UDF mechanism, from the dialect modules.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from types import ModuleType
from typing import Any

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

from gptools import spec
from gptools.deliverylog._contract import (
    BET_DECIMAL,
    CAMPAIGN_ID,
    KNOWN_COLUMNS,
    KNOWN_VALID,
    MALFORMED,
    RAW_COLUMNS,
)

#: Percentiles reported for latencies, gaps and lags.
PERCENTILES: tuple[float, ...] = (0.5, 0.9, 0.99)

#: The column naming an action's currency: bets are only ever added within one.
CURRENCY = "currency_code"


_UTC = dt.Timestamp(timezone="UTC")
#: One of the twin dialect modules (:mod:`._dialect_duckdb`, :mod:`._dialect_spark`).
Dialect = ModuleType
#: The declaration every check here follows (``spec.GAME_EVENT_FIELDS``).
_FIELDS = spec.GAME_EVENT_FIELDS
#: The plain string fields: checked by type and length only (the actionId and the
#: timestamp have patterns, checked on their own).
_STRING_FIELDS = tuple(f.name for f in _FIELDS if f.json_type == "string" and f.pattern is None)
_ACTION_ID = spec.GAME_EVENT_FIELD["actionId"]
_TIMESTAMP = spec.GAME_EVENT_FIELD["timestamp"]
_BET = spec.GAME_EVENT_FIELD["bet"]


def seconds_between(x: Dialect, later: ir.Value, earlier: ir.Value) -> ir.Value:
    """``later - earlier`` in seconds (float), from exact microsecond counts."""
    return (x.epoch_us(later) - x.epoch_us(earlier)).cast("float64") / 1e6


# --------------------------------------------------------------------------------------
# 1. Validity, per delivery
# --------------------------------------------------------------------------------------


def _string(x: Dialect, value: ir.Value) -> ir.Value:
    """The string a JSON value holds, NULL when it is not a JSON string. Stripping the
    quotes of its canonical text (:func:`json_text <._dialect_duckdb.json_text>`: a
    string holds a backslash only where it needs an escape) is exact unless the text holds
    an escape, which only the rare rows pay for."""
    text = x.json_text(value)
    unquoted = ibis.cases(
        (text.contains("\\"), x.json_string(value)), else_=text.substr(1, text.length() - 2)
    )
    return ibis.ifelse(text.startswith('"'), unquoted, ibis.null("string"))


# A JSON array whose elements are all strings, in canonical (minified) text.
_STRING_ARRAY_RE = r'^\[("([^"\\]|\\.)*"(,"([^"\\]|\\.)*")*)?\]$'
# How a JSON number's text starts (NaN and Infinity included; null is SQL NULL).
_NUMBER_START_RE = r"^[-0-9NI]"


def _quoted(pattern: str | None) -> str:
    """A declared whole-text pattern of a string, as a pattern of its JSON text."""
    return '^"' + (pattern or "").removeprefix("^").removesuffix("$") + '"$'


#: The layout of the payload's ``timestamp`` (its declared pattern), checked field by field
#: so a value like hour 24 or month 13 fails here, as it fails in the pydantic model
#: (DuckDB's cast would take 24:00:00 as the next midnight), as the JSON text of a string.
_TIMESTAMP_TEXT_RE = _quoted(_TIMESTAMP.pattern)
#: The canonical actionId (its declared pattern: 8-4-4-4-12 hexadecimal, either case) as
#: the JSON text of a string.
_ACTION_ID_TEXT_RE = _quoted(_ACTION_ID.pattern)
#: A bet's JSON text that is certainly sane: plain digits within the declared bounds
#: (trailing zeros of the fraction apart). Any other number is judged by its digits and
#: exponent (:func:`_sane_bet`); only those rare rows pay for it.
_PLAIN_SANE_BET_RE = (
    rf"^(0|[1-9][0-9]{{0,{(_BET.max_integer_digits or 1) - 1}}})"
    rf"(\.[0-9]{{1,{_BET.max_fraction_digits}}}0*)?$"
)
#: A non-negative JSON number's text: integer digits, fraction digits, exponent.
_NUMBER_PARTS_RE = r"^([0-9]+)(\.([0-9]+))?([eE]([-+]?[0-9]+))?$"


def _uuid(x: Dialect, value: ir.Value) -> ir.Value:
    """The actionId as an action id: NULL unless a JSON string in the canonical form
    (:func:`gptools.spec.canonical_action_id`: braces, ``urn:uuid:`` and no hyphens are
    refused, as the model and the receiver refuse them)."""
    return ibis.cases(
        (x.json_text(value).re_search(_ACTION_ID_TEXT_RE), x.json_uuid(value, _string(x, value))),
        else_=ibis.null(x.ACTION_ID_TYPE),
    )


def _naive_time(x: Dialect, value: ir.Value) -> ir.Value:
    """The timestamp as a naive UTC time, NULL unless a JSON string of the layout with
    at most 9 fractional digits (DuckDB's cast truncates them to microseconds, like the
    model) and a real date (year 0 excluded, as in Python). One regular expression on the
    text decides the layout; only the rows it accepts are parsed."""
    text = x.json_text(value)
    well_formed = text.re_search(_TIMESTAMP_TEXT_RE) & ~text.startswith('"0000')
    parsed = x.json_naive_time(value, text.substr(1, text.length() - 2))
    return ibis.cases((well_formed, parsed), else_=ibis.null("timestamp"))


def _nonempty_string(x: Dialect, value: ir.Value) -> ir.Value:
    """Whether a JSON value is a non-empty string (NULL when absent): its text is a quote,
    at least one character and the closing quote. One ``LIKE`` costs less than a prefix
    test and a comparison."""
    return x.json_text(value).like('"__%')


def _unwrap(x: Dialect, raw: ir.Table) -> ir.Table:
    """Stage 1: what every delivery needs, computed once on the canonical JSON text of
    each field (the dialect's ``json_text``; only the two casts and the rare escaped strings parse
    JSON again): the actionId as a UUID, the timestamp parsed, and a flag per remaining
    check. The JSON fields are passed on for the reasons, which only invalid rows
    compute."""
    return raw.select(
        *RAW_COLUMNS,
        *KNOWN_COLUMNS,
        *([CAMPAIGN_ID] if CAMPAIGN_ID in raw.columns else []),
        action_uuid=_uuid(x, raw.actionId),
        ts_parsed=_naive_time(x, raw.timestamp),
        bet_finite=_sane_bet(x, raw),
        events_ok=x.json_text(raw.events).re_search(_STRING_ARRAY_RE),
        **{f"ok_{f}": _nonempty_string(x, raw[f]) for f in _STRING_FIELDS},
    )


def _sane_bet(x: Dialect, raw: ir.Table) -> ir.Value:
    """Whether the bet is a sane amount of money (the declared bet,
    :func:`gptools.models.sane_bet`'s rule), judged on the number's own text (the readers
    keep every digit it was sent with; a double would make 19.99999999999999999 a 20):
    a JSON number, not negative (a ``-0`` also where only the body's text shows it), at
    most ``max_integer_digits`` digits before the point and ``max_fraction_digits`` after
    it, trailing zeros apart. A plain number is decided by one regular expression; any
    other (an exponent, ``NaN``, a sign) by its digits and exponent, exactly."""
    text = x.json_text(raw.bet)
    return ibis.cases(
        (text.re_search(_PLAIN_SANE_BET_RE), ~raw.bet_negative_zero),
        else_=_sane_number_text(text),
    )


def _sane_number_text(text: ir.Value) -> ir.Value:
    """Whether a JSON number's text other than plain digits is a sane bet: non-negative
    (NaN, Infinity and a sign are not) with ``s`` decimals and ``n - s`` integer digits
    once its ``n`` significant digits are scaled by its exponent."""
    whole = text.re_extract(_NUMBER_PARTS_RE, 1)
    fraction = text.re_extract(_NUMBER_PARTS_RE, 3)
    exponent = text.re_extract(_NUMBER_PARTS_RE, 5).nullif("").try_cast("int64").fill_null(0)
    digits = whole.concat(fraction)
    trimmed = digits.re_replace("0+$", "")
    significant = trimmed.re_replace("^0+", "").length()
    # Decimals of the value: the fraction's digits less the exponent and the zeros that
    # ended the digits (negative: that many zeros before the point).
    scale = fraction.length() - exponent - (digits.length() - trimmed.length())
    zero = significant == 0
    # An exponent too long for an integer is no sane bet, unless the digits are all zeros.
    readable = text.re_extract(_NUMBER_PARTS_RE, 5).length() <= 18
    return text.re_search(_NUMBER_PARTS_RE) & (
        zero
        | (
            readable
            & (scale <= (_BET.max_fraction_digits or 0))
            & (significant - scale <= (_BET.max_integer_digits or 0))
        )
    )


def _checks(x: Dialect, p: ir.Table) -> dict[str, list[tuple[ir.Value, str]]]:
    """Per declared field (``spec.GAME_EVENT_FIELDS``), its failure cases in the declared
    order, each with its declared reason. Written inline on the JSON text so that a
    database evaluates them only for rows that are not valid."""
    _text = x.json_text
    wrong_type: dict[str, Callable[[ir.Value], ir.Value]] = {
        "string": lambda v: ~_text(v).startswith('"'),
        "number": lambda v: ~_text(v).re_search(_NUMBER_START_RE),
        "array of string": lambda _: ~p.events_ok,
    }
    failing: dict[str, Callable[[spec.EventField, ir.Value], ir.Value]] = {
        spec.CHECK_MISSING: lambda _, v: v.isnull(),
        spec.CHECK_WRONG_TYPE: lambda f, v: wrong_type[f.json_type](v),
        spec.CHECK_EMPTY: lambda _, v: _text(v) == '""',
        spec.CHECK_NOT_A_UUID: lambda _, __: p.action_uuid.isnull(),
        # A well-formed timestamp never ends like a zone, so only parse failures ask.
        spec.CHECK_HAS_ZONE: lambda f, v: (
            p.ts_parsed.isnull() & _string(x, v).re_search(f.zone_pattern or "")
        ),
        spec.CHECK_BAD_FORMAT: lambda _, __: p.ts_parsed.isnull(),
        spec.CHECK_OUT_OF_RANGE: lambda _, __: ~p.bet_finite,
    }
    return {
        f.name: [(failing[check](f, p[f.name]), f.reason(check)) for check in f.checks]
        for f in _FIELDS
    }


def validate(x: Dialect, raw: ir.Table) -> ir.Table:
    """Per delivery: ``reason`` (NULL when the body is a valid game event notification,
    else the first failing check, e.g. ``not_json``, ``missing:bet``,
    ``has_zone:timestamp``), a usable ``action_id`` and the payload's typed fields.

    The checks are those of :class:`gptools.models.GameEventNotification`: every field
    required; strings strict and non-empty; ``bet`` a finite JSON number; ``events`` an
    array of strings; ``actionId`` a UUID string; ``timestamp`` naive UTC. A field is
    usable on its own even when another one fails (for drill-down), and an absent field
    and a JSON ``null`` both count as missing.
    """
    p = _unwrap(x, raw)
    is_object = p.shape == "object"
    # A summary row (status 0) is no delivery: it is left out of every count by
    # :func:`real_deliveries`, its ``suppressed`` count reported apart.
    is_summary = p.status == spec.WEBHOOK_SUMMARY_STATUS
    refusals = list(spec.WEBHOOK_REFUSALS.items())
    valid = ibis.and_(
        is_object,
        p.events_ok.fill_null(False),
        p.action_uuid.notnull(),
        p.ts_parsed.notnull(),
        p.bet_finite.fill_null(False),
        *(p[f"ok_{name}"].fill_null(False) for name in _STRING_FIELDS),
    )
    checks = _checks(x, p)
    # A body refused before authentication or routing was never read as a delivery: when
    # it is not a valid one, its reason is the refusal's one name (spec.WEBHOOK_REFUSALS).
    ordered = [
        (valid | is_summary, ibis.null("string")),
        *((p.status == status, ibis.literal(name)) for status, name in refusals),
        (~is_object, p.shape),
    ]
    for field in _FIELDS:
        ordered += checks[field.name]
    # Valid bodies, nearly all of them, leave the CASE at its first branch: the other
    # branches (and the expressions in them) are only evaluated for the rest.
    reason = ibis.cases(*ordered, else_=ibis.null("string"))

    def string(name: str) -> ir.Value:
        return ibis.ifelse(p[f"ok_{name}"], _string(x, p[name]), ibis.null("string"))

    # A field's value is usable exactly when none of its checks fails. The reader leaves
    # every field NULL when the body is not an object, so none needs the shape.
    values: dict[str, ir.Value] = {
        "action_id": p.action_uuid,
        "round_id": string("roundId"),
        "game_id": string("gameId"),
        "player_id": string("playerId"),
        "currency_code": string("currencyCode"),
        "event_ts": p.ts_parsed,
        # An exact decimal: engines spell a JSON number's text differently (2.10 is "2.1"
        # to DuckDB, a decimal to Spark), its value is the same.
        "bet": ibis.ifelse(
            p.bet_finite, x.json_text(p.bet).try_cast(BET_DECIMAL), ibis.null(BET_DECIMAL)
        ),
        # The canonical JSON text of the events array (campaign results look in it).
        "events": ibis.ifelse(p.events_ok, x.json_text(p.events), ibis.null("string")),
    }
    # Rows a reader's typed reading proved valid carry their values; the checks above only
    # decide the others (the reader left these rows' JSON fields NULL, so the checks cost
    # them next to nothing). A reader without one proves no row: the same columns, false.
    known = p[KNOWN_VALID]
    reason = ibis.ifelse(known, ibis.null("string"), reason)
    values = {k: ibis.ifelse(known, p[f"known_{k}"], v) for k, v in values.items()}
    count = x.json_text(p.suppressed).try_cast("int64")
    return p.select(
        "received_at",
        "status",
        "latency_ms",
        # The log's own campaign id, passed on when its mapping names one (campaign results).
        *([CAMPAIGN_ID] if CAMPAIGN_ID in p.columns else []),
        suppressed=ibis.ifelse(is_summary, count.fill_null(0), ibis.null("int64")),
        reason=reason,
        **values,
    )


# --------------------------------------------------------------------------------------
# 2. Attempt chains, per delivery
# --------------------------------------------------------------------------------------


#: The tie ranks of :func:`order_key`, in its two lowest bits: an answer the provider
#: retries (5xx, others), a 4xx (never retried), an acknowledgement (never retried either).
RANK_RETRIED, RANK_4XX, RANK_ACK = 0, 1, 2


def acknowledges(status: ir.Value) -> ir.Value:
    """Whether an answer acknowledged the delivery: any 2xx, as :func:`gptools.spec.
    is_acknowledgement` says (the document names 200; ``WEBHOOK_ACKNOWLEDGED_STATUSES``)."""
    return status.between(spec.WEBHOOK_ACK_STATUS_MIN, spec.WEBHOOK_ACK_STATUS_MAX)


def order_key(x: Dialect, t: ir.Table) -> ir.Value:
    """A sortable integer for the order of deliveries in time: epoch microseconds times 4
    plus a tie rank (:data:`RANK_ACK` ...). Ties are broken by what could follow what: an
    answer the provider retries first, then a 4xx, then an acknowledgement (2xx). Two
    deliveries with equal keys are interchangeable for every metric (same instant, same
    kind of answer); listings order them further by status and latency.

    The key holds everything a per-action summary needs about its first and last
    attempt: :func:`key_us` (the instant) and :func:`key_rank` (the kind of answer), so
    those picks are plain ``min``/``max``. Epoch microseconds times 4 stay within int64
    for 73,000 years either side of 1970; both parts are read back with exact bit
    operations (a floor division in Ibis goes through a float, exact only below 2**53)."""
    rank = ibis.cases(
        (acknowledges(t.status), RANK_ACK),
        (t.status.between(400, 499), RANK_4XX),
        else_=RANK_RETRIED,
    )
    return x.epoch_us(t.received_at) * 4 + rank


def key_us(key: ir.Value) -> ir.Value:
    """The instant of an :func:`order_key` in epoch microseconds."""
    result: ir.Value = key >> 2
    return result


def key_rank(key: ir.Value) -> ir.Value:
    """The tie rank of an :func:`order_key` (:data:`RANK_ACK`, :data:`RANK_4XX` or
    :data:`RANK_RETRIED`)."""
    result: ir.Value = key & 3
    return result


def delivery_order(t: ir.Table) -> list[ir.Value]:
    """The full order of deliveries: :func:`order_key` (column ``key``), then status and
    latency, so the order never depends on how a store returns rows."""
    return [t.key, t.status, t.latency_ms]


def deliveries(x: Dialect, v: ir.Table) -> ir.Table:
    """Per delivery, the few columns the summary needs (a narrow table to materialise):
    times, answer, ``reason``, ``action_id``, the player and event time (delivery lag,
    out-of-order), the :func:`order_key` and ``suppressed`` (summary rows only)."""
    return v.select(
        "received_at", "status", "latency_ms", "reason", "action_id", "player_id", "event_ts",
        "suppressed", key=order_key(x, v),
    )  # fmt: skip


def real_deliveries(v: ir.Table) -> ir.Table:
    """The deliveries of :func:`validate`'s (or :func:`deliveries`') table: every row but
    the summary rows, which stand for refusals that got no row of their own."""
    return v.filter(v.suppressed.isnull())


def answer_counts(v: ir.Table) -> ir.Table:
    """Rows of :func:`deliveries`' table (summary rows included) per ``status``, ``reason``
    and ``summary`` (a summary row): ``n`` and ``suppressed`` (the refusals summary rows
    stand for). The status counts, the invalid deliveries by reason and the suppressed
    refusals all come from it: one pass over the deliveries instead of three."""
    return v.group_by("status", "reason", summary=v.suppressed.notnull()).aggregate(
        n=v.count(), suppressed=v.suppressed.sum()
    )


def annotate(x: Dialect, d: ir.Table) -> ir.Table:
    """Per delivery (for drill-downs): ``attempt_no`` in its action's chain, ``kind`` and
    ``gap_s`` (seconds since the previous attempt of the same action). One window over
    every delivery; the summary gets the same counts from hash aggregates instead."""
    d = d.mutate(key=order_key(x, d))
    chain = ibis.window(group_by=d.action_id, order_by=delivery_order(d))
    upto = ibis.window(group_by=d.action_id, order_by=delivery_order(d), rows=(None, 0))
    is_ack = acknowledges(d.status).cast("int64")
    acks_before = is_ack.sum().over(upto) - is_ack
    attempt_no = ibis.row_number().over(chain) + 1
    kind = ibis.cases(
        (d.action_id.isnull(), "unattributed"),
        (attempt_no == 1, "first"),
        (acks_before > 0, "duplicate"),
        else_="retry",
    )
    previous = d.received_at.lag().over(chain)
    gap_s = seconds_between(x, d.received_at, previous)
    return d.mutate(
        attempt_no=ibis.ifelse(d.action_id.isnull(), ibis.null("int64"), attempt_no),
        kind=kind,
        retry=kind == "retry",
        gap_s=ibis.ifelse(d.action_id.isnull(), ibis.null("float64"), gap_s),
    )


# --------------------------------------------------------------------------------------
# 3. Actions
# --------------------------------------------------------------------------------------


def _outcome(acknowledged: ir.Value, last_is_4xx: ir.Value) -> ir.Value:
    return ibis.cases((acknowledged, "acknowledged"), (last_is_4xx, "lost"), else_="pending")


def action_summary(x: Dialect, d: ir.Table) -> ir.Table:
    """Per action, from :func:`deliveries` by one hash aggregate (no sort of the
    deliveries): ``attempts``; ``first_key`` and
    ``last_key``, the :func:`order_key` of its first and last attempt (their instant and
    kind of answer: :func:`key_us`, :func:`key_rank`); ``ack_key``, the key of its first
    2xx (NULL without one); ``player_id`` and ``event_ts`` (naive UTC) of its first
    attempt that carries them. :func:`action_facts` reads first and last attempt, outcome
    and retry window from these.

    Picks use the integer :func:`order_key`: deliveries with equal keys are alike for
    every metric; the drill-downs (:func:`action_table`) use the full order. The two
    payload picks are ``arg_min`` over that key, which costs as much as the rest of the
    aggregate; every other column is a plain extreme of the key."""
    att = d.filter(d.action_id.notnull())

    def first_known(col: ir.Value) -> ir.Value:
        return x.arg_extreme("min", col, att.key, where=col.notnull())

    return att.group_by("action_id").aggregate(
        attempts=att.count(),
        first_key=att.key.min(),
        last_key=att.key.max(),
        ack_key=att.key.min(where=acknowledges(att.status)),
        player_id=first_known(att.player_id),
        event_ts=first_known(att.event_ts),
    )


def action_facts(a: ir.Table) -> dict[str, ir.Value]:
    """What :func:`action_summary`'s keys say per action, as expressions on it:
    ``acknowledged``, ``first_us`` (epoch microseconds of its first attempt), ``first_ok``
    (the first attempt got 2xx), ``outcome`` (``lost``: the last attempt got a 4xx) and
    ``window_end_us`` (when the provider's retry window closes). Integer arithmetic only:
    zoned timestamps would go through a calendar library on every action."""
    acknowledged = a.ack_key.notnull()
    first_us = key_us(a.first_key)
    return {
        "acknowledged": acknowledged,
        "first_us": first_us,
        "first_ok": key_rank(a.first_key) == RANK_ACK,
        "outcome": _outcome(acknowledged, key_rank(a.last_key) == RANK_4XX),
        "window_end_us": first_us + _WINDOW_US,
    }


def retry_chains(d: ir.Table, actions: ir.Table) -> ir.Table:
    """Per delivery of an action that was retried (more than one attempt up to its first
    2xx, or no 2xx at all), up to and including that 2xx: ``attempt_no``, ``retry``
    (no earlier attempt got 2xx), ``gap_s`` (seconds since the previous attempt) and
    ``before_ack`` (earlier than the action's first 2xx).

    Only these deliveries need their neighbours, so only they are ordered (a window over
    a subset: retried chains are a small share of a healthy log); every other delivery is
    a first attempt or a duplicate, counted by hash aggregates."""
    retried = actions.filter(
        (actions.attempts > 1) & (actions.ack_key.isnull() | (actions.first_key < actions.ack_key))
    ).select("action_id", "ack_key")
    # Only what the window needs: DuckDB carries every column through a window's sort.
    # The deliveries on the right: Spark renames the columns of a join's right side when
    # both come from one table, and keeps the partitioning of the deliveries' cached
    # table through that renaming but not the action summary's (it shuffles it again).
    s = retried.inner_join(d.select("action_id", "key"), "action_id")
    s = s.filter(s.ack_key.isnull() | (s.key <= s.ack_key))
    # Deliveries with equal keys are alike: whichever order they take, the chain has the
    # same attempt numbers, gaps and retries, so the key alone orders it.
    chain = ibis.window(group_by=s.action_id, order_by=s.key)
    s = s.mutate(attempt_no=ibis.row_number().over(chain) + 1, previous=s.key.lag().over(chain))
    # Several 2xx answers at the first 2xx's instant: the first of them is the retry, the
    # others are duplicates (its predecessor is then one of them).
    retry = (s.attempt_no > 1) & (
        s.ack_key.isnull() | (s.key < s.ack_key) | (s.previous < s.ack_key)
    )
    return s.select(
        "action_id", "attempt_no",
        retry=retry,
        gap_s=(key_us(s.key) - key_us(s.previous)).cast("float64") / 1e6,
        before_ack=(s.key < s.ack_key).fill_null(False),
    )  # fmt: skip


def chain_counts(chains: ir.Table) -> ir.Table:
    """One row: retries and their gaps (percentiles), from :func:`retry_chains`."""
    aggs: dict[str, ir.Value] = {"retries": chains.retry.sum()}
    aggs |= {f"gap_{k}": v for k, v in percentiles(chains.gap_s, where=chains.retry).items()}
    return chains.aggregate(**aggs)


def duplicate_count(actions: ir.Table, chains: ir.Table) -> tuple[ir.Table, ir.Table]:
    """``duplicate_deliveries`` as two one-row tables whose difference it is: the attempts
    of acknowledged actions from their first 2xx on, less that first 2xx itself. Without a
    join of the deliveries: that is every attempt but one of an acknowledged action
    (``n``), less the attempts before its first 2xx (``m``), which only retried actions
    have and :func:`retry_chains` lists. Two tables, not their cross join: each is a
    plain aggregate that can run in the same pass as the others."""
    acked = actions.aggregate(n=(actions.attempts - 1).sum(where=actions.ack_key.notnull()))
    before = chains.aggregate(m=chains.before_ack.sum())
    return acked, before


def action_table(x: Dialect, a: ir.Table) -> ir.Table:
    """Per action, for drill-downs, from :func:`annotate`: its chain summarised (retries,
    duplicates, invalid attempts), its outcome and what the payload says (round, player,
    game, currency, bet, event time)."""
    att = a.filter(a.action_id.notnull())

    def first_known(col: ir.Value) -> ir.Value:
        return x.arg_extreme("min", col, att.attempt_no, where=col.notnull())

    grouped = att.group_by("action_id").aggregate(
        attempts=att.count(),
        retries=(att.kind == "retry").sum(),
        duplicates=(att.kind == "duplicate").sum(),
        invalid=att.reason.notnull().sum(),
        first_at=att.received_at.min(),
        last_at=att.received_at.max(),
        first_status=x.arg_extreme("min", att.status, att.attempt_no),
        last_status=x.arg_extreme("max", att.status, att.attempt_no),
        acknowledged=acknowledges(att.status).any(),
        round_id=first_known(att.round_id),
        player_id=first_known(att.player_id),
        game_id=first_known(att.game_id),
        currency_code=first_known(att.currency_code),
        bet=first_known(att.bet),
        event_ts=first_known(att.event_ts),
    )
    return grouped.mutate(
        event_ts=grouped.event_ts.cast(_UTC),
        outcome=_outcome(grouped.acknowledged, grouped.last_status.between(400, 499)),
        window_end=grouped.first_at + ibis.interval(_WINDOW_US, unit="us"),
    )


#: The provider's retry window after an action's first attempt, in microseconds.
_WINDOW_US = spec.WEBHOOK_RETRY_WINDOW // timedelta(microseconds=1)


# --------------------------------------------------------------------------------------
# Aggregates (each returns an expression; the caller executes it)
# --------------------------------------------------------------------------------------


def percentiles(col: ir.Value, *, where: ir.Value | None = None) -> dict[str, ir.Value]:
    """p50/p90/p99 (linear interpolation, one ``quantile_cont`` with a list of quantiles:
    one sort of the column), max and count of a numeric column."""
    qs = col.quantile(list(PERCENTILES), where=where)
    out: dict[str, ir.Value] = {"count": col.count(where=where)}
    for i, q in enumerate(PERCENTILES):
        out[f"p{round(q * 100)}"] = qs[i]
    out["max"] = col.max(where=where)
    return out


def delivery_counts(d: ir.Table) -> ir.Table:
    """One row: deliveries, invalid deliveries (with and without a usable actionId; how
    many are malformed lines), latency figures, first and last ``received_at``."""
    budget_ms = spec.WEBHOOK_RESPONSE_BUDGET.total_seconds() * 1000
    aggs: dict[str, ir.Value] = {
        "deliveries": d.count(),
        "unattributed": d.action_id.isnull().sum(),
        "invalid_deliveries": d.reason.notnull().sum(),
        "malformed": (d.reason == MALFORMED).sum(),
        "over_budget": (d.latency_ms >= budget_ms).sum(),
        "first_received_at": d.received_at.min(),
        "last_received_at": d.received_at.max(),
    }
    aggs |= {f"latency_{k}": v for k, v in percentiles(d.latency_ms).items()}
    return d.aggregate(**aggs)


def action_counts(x: Dialect, actions: ir.Table, now: ir.Value) -> ir.Table:
    """One row: actions by outcome, success rates, attempts and delivery lag, from
    :func:`action_summary`."""
    f = action_facts(actions)
    pending = f["outcome"] == "pending"
    now_us = x.epoch_us(now)
    lag_s = (f["first_us"] - x.epoch_us(actions.event_ts)).cast("float64") / 1e6
    aggs: dict[str, ir.Value] = {
        "actions": actions.count(),
        "acknowledged_actions": f["acknowledged"].sum(),
        "lost_actions": (f["outcome"] == "lost").sum(),
        "pending_actions": pending.sum(),
        "pending_actions_expired": (pending & (f["window_end_us"] <= now_us)).sum(),
        "pending_window_closes_first": x.from_epoch_us(
            f["window_end_us"].min(where=pending & (f["window_end_us"] > now_us))
        ),
        "first_attempt_successes": f["first_ok"].sum(),
        "attempts_mean": actions.attempts.mean(),
        "attempts_max": actions.attempts.max(),
    }
    aggs |= {f"lag_{k}": v for k, v in percentiles(lag_s).items()}
    return actions.aggregate(**aggs)


def out_of_order(actions: ir.Table) -> ir.Table:
    """One row: events (actions with a player and event time) and how many arrived after a
    later-stamped event of the same player (payload time earlier than the previous one's),
    from :func:`action_summary`. Actions of one player that arrived at the same instant
    are ordered by event time, so none of them counts as late against another; ties in
    both leave the count the same whatever their order, so nothing else is sorted on."""
    ev = actions.filter(actions.player_id.notnull() & actions.event_ts.notnull())
    # Only what the window needs: DuckDB carries every column through a window's sort.
    ev = ev.select("player_id", "event_ts", first_us=key_us(ev.first_key))
    w = ibis.window(group_by=ev.player_id, order_by=[ev.first_us, ev.event_ts])
    previous = ev.event_ts.lag().over(w)
    flagged = ev.mutate(late=(ev.event_ts < previous).fill_null(False))
    return flagged.aggregate(events=flagged.count(), out_of_order=flagged.late.sum())


def backoff_points(chains: ir.Table) -> ir.Table:
    """Retry gaps by retry number ``n`` (the gap before the n-th retry), for the fit, from
    :func:`retry_chains` (or :func:`annotate`: the same columns)."""
    r = chains.filter(chains.retry & (chains.gap_s > 0))
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


def silent_periods(x: Dialect, a: ir.Table, threshold_s: float) -> ir.Table:
    """Stretches longer than ``threshold_s`` with no delivery at all, between consecutive
    deliveries: ``start`` (the last delivery before), ``end`` (the next) and ``seconds``.

    No sort of every delivery: deliveries fall in buckets of half the threshold, and a
    silence longer than the threshold empties at least one whole bucket, so it lies
    between the last delivery of a bucket and the first of the next non-empty one. Only
    the (few) buckets are ordered.
    """
    half_us = max(1, int(threshold_s * 1e6) // 2)
    t = a.filter(a.received_at.notnull())
    bucket = x.epoch_us(t.received_at) // half_us
    b = t.group_by(bucket=bucket).aggregate(first=t.received_at.min(), last=t.received_at.max())
    previous = b["last"].lag().over(ibis.window(order_by=b.bucket))
    gaps = b.select(start=previous, end=b["first"])
    gaps = gaps.mutate(seconds=seconds_between(x, gaps.end, gaps.start))
    return gaps.filter(gaps.seconds > threshold_s).order_by("start")


def per_hour(a: ir.Table) -> ir.Table:
    """Per hour of ``received_at``: deliveries by kind and by status class, latency p99.
    Malformed lines have no time, so no hour (:meth:`DeliveryAnalysis.malformed_lines`
    lists them)."""
    t = a.filter(a.received_at.notnull())
    t = t.mutate(hour=t.received_at.truncate("h"))
    classes = {c: t.status.between(c * 100, c * 100 + 99) for c in (2, 4, 5)}

    def count(condition: ir.Value) -> ir.Value:
        result: ir.Value = condition.sum().cast("int64")
        return result

    return (
        t.group_by("hour")
        .aggregate(
            deliveries=t.count(),
            first_attempts=count(t.kind == "first"),
            retries=count(t.kind == "retry"),
            duplicates=count(t.kind == "duplicate"),
            invalid=count(t.reason.notnull()),
            status_2xx=count(classes[2]),
            status_4xx=count(classes[4]),
            status_5xx=count(classes[5]),
            status_other=count(~(classes[2] | classes[4] | classes[5])),
            latency_p99_ms=t.latency_ms.quantile(0.99),
        )
        .order_by("hour")
    )


def per_attribute(actions: ir.Table, key: str) -> ir.Table:
    """Per game or currency (``key``): actions by outcome, retries, duplicates, and per
    currency the bets added up (money of different currencies is never added together:
    :func:`bets_per` gives them per game and currency)."""
    money = {"bet_total": actions.bet.try_cast(BET_DECIMAL).sum()} if key == CURRENCY else {}
    return (
        actions.group_by(key)
        .aggregate(
            actions=actions.count(),
            acknowledged=actions.acknowledged.sum(),
            lost=(actions.outcome == "lost").sum(),
            pending=(actions.outcome == "pending").sum(),
            retries=actions.retries.sum(),
            duplicates=actions.duplicates.sum(),
            **money,
        )
        .order_by(key)
    )


def bets_per(actions: ir.Table, key: str) -> ir.Table:
    """Per ``key`` (a game) and currency: actions and their bets added up, exact."""
    return (
        actions.group_by([key, CURRENCY])
        .aggregate(actions=actions.count(), bet_total=actions.bet.try_cast(BET_DECIMAL).sum())
        .order_by([key, CURRENCY])
    )


def time_left_s(x: Dialect, actions: ir.Table, now: ir.Value) -> ir.Value:
    """Seconds left in an action's 7-day retry window at ``now`` (0 once it closed)."""
    left = seconds_between(x, actions.window_end, now)
    return ibis.greatest(left, 0.0)


def literal_time(moment: Any) -> ir.Value:
    """An aware datetime as a UTC timestamp literal."""
    return ibis.literal(moment, type=_UTC)
