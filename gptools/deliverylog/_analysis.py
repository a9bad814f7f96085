"""The analysis of one delivery log: runs the metrics of :mod:`._metrics` and hands small
results to pandas (drill-downs) and to :class:`DeliveryReport` (the summary)."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cached_property
from pathlib import Path
from typing import Any

import ibis
import ibis.expr.operations as ops
import ibis.expr.types as ir
import pandas as pd

from gptools import spec
from gptools.deliverylog import _metrics as m
from gptools.deliverylog._contract import (
    DEFAULT_MAPPING,
    MALFORMED,
    BaseDeliveryLog,
    ColumnMapping,
    DeliveryLogError,
    LogFormat,
)
from gptools.deliverylog._engines import LogOptions, open_log
from gptools.deliverylog._files import DEFAULT_MAX_LINE_BYTES
from gptools.deliverylog._owner import LogOwner
from gptools.deliverylog._readers import DEFAULT_MEMORY_LIMIT
from gptools.deliverylog._report import DeliveryReport

#: A gap between consecutive deliveries longer than this is a silent period by default.
DEFAULT_SILENCE_THRESHOLD = timedelta(minutes=5)
#: How many silent periods the summary lists (all of them: :meth:`DeliveryAnalysis.silent_periods`).
SUMMARY_SILENT_PERIODS = 20


#: New values :meth:`DeliveryAnalysis.new_in_log` lists per kind at most (a log of endless
#: new game ids stays a short answer).
NEW_VALUES_SHOWN = 100
#: Distinct event arrays it reads at most (each a combination of event types).
NEW_EVENT_ARRAYS_READ = 10_000


#: A lost action as a record (:meth:`DeliveryAnalysis.lost_records`): what a replay request
#: needs.
LOST_COLUMNS: tuple[str, ...] = (
    "action_id", "round_id", "player_id", "game_id", "currency_code", "bet", "event_ts",
    "first_at", "last_at", "attempts", "last_status",
)  # fmt: skip


def plain_value(value: Any) -> Any:
    """A value of an analysis frame as plain Python for JSON or CSV: missing (None, NaN,
    NaT) as ``None``, a time as ISO 8601 UTC text ending in ``Z`` (every time of the
    analysis is UTC; Spark hands some back without their zone), a numpy scalar as its
    Python value, anything else (a Decimal bet, a text) unchanged."""
    if value is None or value != value:  # None, NaN, NaT
        return None
    if isinstance(value, datetime):
        aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return aware.isoformat().replace("+00:00", "Z")
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


class DeliveryAnalysis(LogOwner):
    """Everything the analyser knows about one delivery log.

    Opening it scans the log once into two narrow engine tables (:attr:`deliveries` and
    :attr:`action_summary`), enough for :attr:`report`. The drill-downs (attempt chains,
    per hour, game and currency, lost and pending lists) use :attr:`attempts` and
    :attr:`actions`, built from the log on first use. ``now`` is the moment pending
    actions are judged against (time left in their 7-day window); by default it is the
    log's last ``received_at``, so a result never depends on when it was computed.
    ``silence_threshold`` is the gap between consecutive deliveries that counts as a
    silent period.

    Drill-downs return pandas DataFrames; :attr:`report` is the summary; both are the same
    whichever engine ran them. ``strict=True`` refuses a log with a malformed line (a
    :class:`DeliveryLogError` naming the first one) instead of counting it. Close the
    analysis (or use ``with``) to release the engine.
    """

    def __init__(
        self,
        log: BaseDeliveryLog,
        *,
        now: datetime | None = None,
        silence_threshold: timedelta = DEFAULT_SILENCE_THRESHOLD,
        strict: bool = False,
    ) -> None:
        if now is not None and now.tzinfo is None:
            raise ValueError("now must be timezone-aware (for example datetime.now(UTC))")
        if silence_threshold <= timedelta(0):
            raise ValueError(f"silence_threshold must be positive, got {silence_threshold}")
        self.log = log
        self.silence_threshold = silence_threshold
        self.x = x = log.dialect
        # The summary needs one narrow table of deliveries and one of actions, both built
        # by hash aggregates; the per-delivery chains (a window over every delivery) and
        # the payload's other fields are only built when a drill-down asks for them.
        loaded = log.load("gp_deliveries", lambda raw: m.deliveries(x, m.validate(x, raw)))
        self.deliveries: ir.Table = m.real_deliveries(loaded)
        self._counts = _row(log.execute(m.delivery_counts(self.deliveries)))
        self._loaded = loaded
        if strict and _int(self._counts["malformed"]):
            first = log.places(lambda t: t.shape == MALFORMED, limit=1)[0]
            raise DeliveryLogError(
                f"{log.source}: {first} is not a JSON object (torn, truncated or binary; "
                f"{_int(self._counts['malformed'])} such line(s)); without strict=True / "
                "--strict it is counted as an invalid delivery (malformed_line)"
            )
        self.action_summary: ir.Table = log.materialise(
            "gp_action_summary", m.action_summary(x, self.deliveries)
        )
        last = _datetime(self._counts["last_received_at"])
        self.now: datetime | None = now.astimezone(UTC) if now is not None else last

    @cached_property
    def attempts(self) -> ir.Table:
        """Per delivery, every payload field and its place in its action's chain
        (``attempt_no``, ``kind``, ``gap_s``); built (one more scan of the log and a
        window over every delivery) on first use."""
        x = self.x
        valid = m.real_deliveries(m.validate(x, self.log.raw))
        return self.log.materialise("gp_attempts", m.annotate(x, valid))

    @cached_property
    def actions(self) -> ir.Table:
        """Per action, its chain summarised, its outcome and its payload fields (round,
        player, game, currency, bet); built on first use."""
        return self.log.materialise("gp_actions", m.action_table(self.x, self.attempts))

    @cached_property
    def _chains(self) -> ir.Table:
        return self.log.materialise(
            "gp_chains", m.retry_chains(self.deliveries, self.action_summary)
        )

    def _now(self) -> ir.Value:
        # An empty log has no "last delivery"; nothing is pending then, any time will do.
        return m.literal_time(self.now or datetime(1970, 1, 1, tzinfo=UTC))

    # ---------------------------------------------------------------- summary

    @cached_property
    def report(self) -> DeliveryReport:
        """The summary of every metric, with warnings (see :class:`DeliveryReport`)."""
        c = self._counts
        summary, points = self.action_summary, self._backoff_points
        acked_after_first, before_ack = m.duplicate_count(summary, self._chains)
        # Every aggregate of the summary in one query (one job on Spark), split again.
        parts = _together(
            self.log,
            {
                "a": (m.action_counts(self.x, summary, self._now()), []),
                "ooo": (m.out_of_order(summary), []),
                "chains": (m.chain_counts(self._chains), []),
                "dup_n": (acked_after_first, []),
                "dup_m": (before_ack, []),
                "answers": (m.answer_counts(self._loaded), []),
                "attempts": (self._attempts_per_action(), ["attempts"]),
                "silent": (self._silent_periods(), ["start"]),
                "fit": (m.backoff_fit(points), []),
                "by_retry": (m.backoff_by_retry(points), ["n"]),
            },
        )
        a, ooo, chains = (_row(parts[k]) for k in ("a", "ooo", "chains"))
        duplicates = _int(_row(parts["dup_n"])["n"]) - _int(_row(parts["dup_m"])["m"])
        invalid, status, suppressed = _answers(parts["answers"])
        attempts = parts["attempts"]
        silent = parts["silent"]
        actions = _int(a["actions"])
        events = _int(ooo["events"])
        return DeliveryReport(
            source=self.log.source,
            now=self.now,
            first_received_at=_datetime(c["first_received_at"]),
            last_received_at=_datetime(c["last_received_at"]),
            deliveries=_int(c["deliveries"]),
            actions=actions,
            acknowledged_actions=_int(a["acknowledged_actions"]),
            duplicate_deliveries=duplicates,
            retries=_int(chains["retries"]),
            lost_actions=_int(a["lost_actions"]),
            pending_actions=_int(a["pending_actions"]),
            pending_actions_expired=_int(a["pending_actions_expired"]),
            pending_window_closes_first=_datetime(a["pending_window_closes_first"]),
            invalid_deliveries=_int(c["invalid_deliveries"]),
            invalid_deliveries_without_action_id=_int(c["unattributed"]),
            refusals_suppressed=suppressed,
            invalid_by_reason=invalid,
            status_counts=status,
            first_attempt_success_rate=_ratio(_int(a["first_attempt_successes"]), actions),
            eventual_success_rate=_ratio(_int(a["acknowledged_actions"]), actions),
            attempts_per_action={
                "mean": _float(a["attempts_mean"]),
                "max": _int(a["attempts_max"]) if actions else None,
                "distribution": {
                    str(k): int(v) for k, v in zip(attempts.attempts, attempts.actions, strict=True)
                },
            },
            retry_gap_s=_stats(chains, "gap_"),
            backoff=_backoff(parts["fit"], parts["by_retry"]),
            delivery_lag_s=_stats(a, "lag_"),
            out_of_order_events=_int(ooo["out_of_order"]),
            out_of_order_share=_ratio(_int(ooo["out_of_order"]), events),
            ack_latency_ms=_stats(c, "latency_"),
            over_budget=_int(c["over_budget"]),
            budget_ms=spec.WEBHOOK_RESPONSE_BUDGET.total_seconds() * 1000,
            silent_periods={
                "threshold_s": self.silence_threshold.total_seconds(),
                "count": len(silent),
                "total_s": float(silent.seconds.sum()),
                "longest_s": float(silent.seconds.max()) if len(silent) else None,
                "periods": [
                    {"start": _iso(s), "end": _iso(e), "seconds": float(x)}
                    for s, e, x in zip(
                        silent.start[:SUMMARY_SILENT_PERIODS],
                        silent.end[:SUMMARY_SILENT_PERIODS],
                        silent.seconds[:SUMMARY_SILENT_PERIODS],
                        strict=True,
                    )
                ],
            },
            first_attempts=actions,
        )

    # ---------------------------------------------------------------- drill-downs

    def actions_frame(self) -> pd.DataFrame:
        """One row per action: chain summary, outcome, payload fields, time left."""
        t = self.actions
        frame = self._df(
            t.mutate(
                action_id=t.action_id.cast("string"),
                time_left_s=m.time_left_s(self.x, t, self._now()),
            ).order_by(["first_at", "action_id"])
        )
        return _money_at_exponent(frame, "bet")

    def chain(self, action_id: str) -> pd.DataFrame:
        """The attempt chain of one action, in order (kind, status, gap, reason)."""
        t = self.attempts
        key = _canonical_uuid(action_id)
        return self._df(
            t.filter(t.action_id == self.x.action_id_literal(key))
            .select("attempt_no", "received_at", "status", "latency_ms", "kind", "gap_s", "reason")
            .order_by("attempt_no")
        )

    def lost_actions(self) -> pd.DataFrame:
        """Actions the provider will not deliver again (latest answer 4xx, never 200), with
        what a replay request needs: ids, player, game, currency, bet, times."""
        return self._outcome_frame("lost")

    def lost_records(self) -> list[dict[str, Any]]:
        """:meth:`lost_actions` as plain records of :data:`LOST_COLUMNS`
        (:func:`plain_value`): what ``gptools webhooks analyze`` prints and writes."""
        frame = self.lost_actions()
        return [{k: plain_value(row[k]) for k in LOST_COLUMNS} for row in frame.to_dict("records")]

    def pending_actions(self) -> pd.DataFrame:
        """Actions without a 200 whose latest answer was not 4xx, with ``time_left_s`` in
        their 7-day window at :attr:`now` (0: the provider has stopped retrying)."""
        return self._outcome_frame("pending")

    def _outcome_frame(self, outcome: str) -> pd.DataFrame:
        t = self.actions
        t = t.filter(t.outcome == outcome)
        frame = self._df(
            t.select(
                t.action_id.cast("string").name("action_id"), "round_id", "player_id",
                "game_id", "currency_code", "bet", "event_ts", "first_at", "last_at",
                "attempts", "last_status", "window_end",
                time_left_s=m.time_left_s(self.x, t, self._now()),
            ).order_by(["first_at", "action_id"])
        )  # fmt: skip
        return _money_at_exponent(frame, "bet")

    def malformed_lines(self) -> pd.DataFrame:
        """The lines that are not JSON objects (torn, truncated, binary), each an invalid
        delivery ``malformed_line``: ``file`` and true 1-based ``line``, in file order."""
        return self.log.malformed_lines()

    def per_hour(self) -> pd.DataFrame:
        """Per hour: deliveries by kind and status class, latency p99."""
        return self._df(m.per_hour(self.attempts))

    def per_game(self) -> pd.DataFrame:
        """Per game: actions by outcome, retries, duplicates (bets: :meth:`bets_per_game`)."""
        return self._df(m.per_attribute(self.actions, "game_id"))

    def bets_per_game(self) -> pd.DataFrame:
        """Per game and currency: actions and the sum of their bets, an exact ``Decimal``
        at the currency's exponent (bets of different currencies are never added up)."""
        return _money_at_exponent(self._df(m.bets_per(self.actions, "game_id")))

    def per_currency(self) -> pd.DataFrame:
        """Per currency: actions by outcome, retries, duplicates, and the sum of the bets
        (an exact ``Decimal`` at the currency's exponent)."""
        return _money_at_exponent(self._df(m.per_attribute(self.actions, m.CURRENCY)))

    def new_in_log(
        self,
        known: Mapping[str, Iterable[str]] | None = None,
        *,
        limit: int = NEW_VALUES_SHOWN,
    ) -> pd.DataFrame:
        """The values of the payload's open fields (``spec.OPEN_VALUE_KINDS``) that this
        log's valid deliveries hold and ``known`` does not: ``kind`` (event_type,
        currency, game), ``value``, ``first_received_at`` and ``deliveries``, earliest
        first, at most ``limit`` per kind. ``known`` maps a kind to the values that are
        no news; a kind it leaves out takes the document's (``spec.KNOWN_OPEN_VALUES``:
        COIN and FEATURE, no currency, no game). Top-level field names are not in the
        analyser's relation (the receiver's contract watcher records those)."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        given = dict(known or {})
        unknown = sorted(set(given) - set(spec.OPEN_VALUE_KINDS))
        if unknown:
            raise ValueError(f"no such kind of value: {', '.join(unknown)}")
        news = {
            kind: frozenset(given[kind]) if kind in given else spec.KNOWN_OPEN_VALUES[kind]
            for kind in spec.OPEN_VALUE_KINDS
        }
        v = self.attempts  # materialised once (Spark: a plan of its own per part ran out of heap)
        v = v.filter(v.reason.isnull())
        parts: dict[str, tuple[ir.Table, list[str]]] = {}
        for kind, column, most in (
            ("event_type", "events", NEW_EVENT_ARRAYS_READ),
            ("currency", m.CURRENCY, limit),
            ("game", "game_id", limit),
        ):
            t = v.filter(v[column].notnull())
            g = t.group_by(value=t[column]).aggregate(
                first_received_at=t.received_at.min(), deliveries=t.count()
            )
            if kind != "event_type" and news[kind]:
                g = g.filter(~g.value.isin(sorted(news[kind])))
            parts[kind] = (g.order_by(["first_received_at", "value"]).limit(most), [])
        found = _together(self.log, parts)
        rows: list[tuple[str, str, Any, int]] = []
        # The events column holds each delivery's array (canonical JSON): its types.
        types: dict[str, list[Any]] = {}
        r: dict[Any, Any]
        for r in found["event_type"].to_dict("records"):
            for name in dict.fromkeys(json.loads(str(r["value"]))):
                if name in news["event_type"]:
                    continue
                first, count = types.get(name, [r["first_received_at"], 0])
                types[name] = [min(first, r["first_received_at"]), count + int(r["deliveries"])]
        rows += [("event_type", k, f, n) for k, (f, n) in types.items()]
        for kind in ("currency", "game"):
            rows += [
                (kind, str(r["value"]), r["first_received_at"], int(r["deliveries"]))
                for r in found[kind].to_dict("records")
            ]
        frame = pd.DataFrame(rows, columns=["kind", "value", "first_received_at", "deliveries"])
        if len(frame):
            # Spark's materialised relation hands its timestamps back without the zone its
            # session computed them in (UTC); DuckDB's carry it.
            frame["first_received_at"] = pd.to_datetime(frame["first_received_at"], utc=True)
        order = {k: i for i, k in enumerate(spec.OPEN_VALUE_KINDS)}
        frame = frame.sort_values(
            ["kind", "first_received_at", "value"],
            key=lambda c: c.map(order) if c.name == "kind" else c,
            kind="stable",
        )
        frame = frame.groupby("kind", sort=False).head(limit)
        return frame.reset_index(drop=True)

    def _attempts_per_action(self) -> ir.Table:
        t = self.action_summary
        return t.group_by("attempts").aggregate(actions=t.count()).order_by("attempts")

    def attempts_per_action(self) -> pd.DataFrame:
        """How many actions needed 1, 2, ... attempts (all deliveries of the action)."""
        return self._df(self._attempts_per_action())

    def _silent_periods(self) -> ir.Table:
        threshold_s = self.silence_threshold.total_seconds()
        return m.silent_periods(self.x, self.deliveries, threshold_s)

    def silent_periods(self) -> pd.DataFrame:
        """Gaps with no delivery longer than the threshold: start, end, seconds."""
        return self._df(self._silent_periods())

    @property
    def _backoff_points(self) -> ir.Table:
        return m.backoff_points(self._chains)

    def retry_gaps_by_retry(self) -> pd.DataFrame:
        """Per retry number n: count, median, p10, p90 of the gap before the n-th retry."""
        return self._df(m.backoff_by_retry(self._backoff_points))

    def backoff(self) -> dict[str, Any]:
        """The fitted schedule gap_n = base_s * factor^(n-1), its r², and the gaps per retry."""
        points = self._backoff_points
        return _backoff(self._df(m.backoff_fit(points)), self.retry_gaps_by_retry())

    def log_histogram(self, column: str, *, per_decade: int = 10) -> pd.DataFrame:
        """Counts of a positive column (``latency_ms`` or ``gap_s`` of retries) in
        logarithmic bins: ``lo``, ``hi``, ``count``; computed in the engine, for charts."""
        t = self.attempts
        if column == "gap_s":
            t = t.filter(t.kind == "retry")
        elif column != "latency_ms":
            raise ValueError(f"column must be 'latency_ms' or 'gap_s', got {column!r}")
        col = t[column]
        t = t.filter(col > 0)
        b = (t[column].log10() * per_decade).floor()
        counts = t.group_by(bin=b).aggregate(count=t.count()).order_by("bin")
        df = self._df(counts)
        df["lo"] = 10 ** (df["bin"].astype(float) / per_decade)
        df["hi"] = 10 ** ((df["bin"].astype(float) + 1) / per_decade)
        return df[["lo", "hi", "count"]]


def analyze(
    source: str | Path | BaseDeliveryLog,
    *,
    format: LogFormat = "auto",
    mapping: ColumnMapping = DEFAULT_MAPPING,
    table: str = "delivery_log",
    now: datetime | None = None,
    silence_threshold: timedelta = DEFAULT_SILENCE_THRESHOLD,
    strict: bool = False,
    engine: str = "duckdb",
    spark: Any = None,
    spark_master: str | None = None,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int | None = None,
    temp_directory: str | Path | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    force: bool = False,
) -> DeliveryAnalysis:
    """Open and analyse a delivery log (a path, a glob, a directory, a store URL or a
    log already open on either engine).

    ``engine="duckdb"`` (default) runs on this machine, out of core: ``memory_limit``,
    ``threads`` and ``temp_directory`` (where it spills) bound it. ``engine="spark"`` runs
    the same metrics on Spark (JSONL or Parquet files; the ``[spark]`` extra): on the
    ``spark`` session given, else on one built for ``spark_master`` (default
    ``GP_SPARK_MASTER``, else ``local[*]``). ``strict=True`` refuses a malformed line.
    A JSONL line over ``max_line_bytes`` (16 MiB by default) is a malformed line, never
    parsed; ``force=True`` analyses a JSONL file that does not look like a delivery log.

    >>> with analyze("data/sample_delivery_log.jsonl") as analysis:  # doctest: +SKIP
    ...     print(analysis.report.lost_actions)
    """
    options = LogOptions(
        format=format, mapping=mapping, table=table, spark=spark, spark_master=spark_master,
        memory_limit=memory_limit, threads=threads, temp_directory=temp_directory,
        max_line_bytes=max_line_bytes, force=force,
    )  # fmt: skip
    log = open_log(source, engine, options)
    try:
        return DeliveryAnalysis(log, now=now, silence_threshold=silence_threshold, strict=strict)
    except BaseException:
        log.close()
        raise


# --------------------------------------------------------------------------------------
# Small conversions of engine results
# --------------------------------------------------------------------------------------


def _backoff(fit_frame: pd.DataFrame, by_retry: pd.DataFrame) -> dict[str, Any]:
    """The backoff fit's figures from :func:`._metrics.backoff_fit` and
    :func:`._metrics.backoff_by_retry`."""
    fit = _row(fit_frame)
    gaps = _int(fit["gaps"])
    base = factor = r2 = None
    if gaps:
        var_x = _float(fit["var_x"]) or 0.0
        slope = (_float(fit["cov_xy"]) or 0.0) / var_x if var_x > 0 else None
        y_mean = _float(fit["y_mean"]) or 0.0
        x_mean = _float(fit["x_mean"]) or 0.0
        # With every gap at n = 1 there is no slope: base is their geometric mean.
        base = math.exp(y_mean - (slope or 0.0) * x_mean)
        factor = math.exp(slope) if slope is not None else None
        corr = _float(fit["corr"])
        r2 = corr * corr if corr is not None else None
    return {
        "base_s": base,
        "factor": factor,
        "r2": r2,
        "gaps": gaps,
        "by_retry": [
            {"retry": int(n), "count": int(k), "median_s": float(med)}
            for n, k, med in zip(by_retry.n, by_retry["count"], by_retry.median_s, strict=True)
        ],
    }


def _together(
    log: BaseDeliveryLog, parts: dict[str, tuple[ir.Table, list[str]]]
) -> dict[str, pd.DataFrame]:
    """Several small results computed by one query and split again: each part's columns
    side by side in one wide union (NULL in the other parts' rows), so an engine runs one
    job where it would run one per part (Spark: about 40 jobs down to a few). A part's
    order is restored from its keys (a union keeps none)."""
    columns: dict[str, Any] = {}
    for name, (table, _) in parts.items():
        for col, dtype in table.schema().items():
            columns[f"{name}__{col}"] = dtype
    selects = []
    for name, (table, _) in parts.items():
        if isinstance(table.op(), ops.Sort):
            # Sorted again below; an engine would sort it inside the union for nothing
            # (Spark samples the rows for a range partitioning first: a job of its own).
            table = table.op().parent.to_expr()
        own = {f"{name}__{col}": table[col] for col in table.columns}
        row = {k: own.get(k, ibis.null(dtype)) for k, dtype in columns.items()}
        selects.append(table.select(_part=ibis.literal(name), **row))
    stacked = selects[0].union(*selects[1:]) if len(selects) > 1 else selects[0]
    frame: pd.DataFrame = log.execute(stacked)
    out: dict[str, pd.DataFrame] = {}
    for name, (table, keys) in parts.items():
        rows = frame[frame["_part"] == name]
        part = rows[[f"{name}__{c}" for c in table.columns]]
        part.columns = list(table.columns)
        for col, dtype in table.schema().items():
            # The union's other rows are NULL here, so pandas made integers floats.
            if dtype.is_integer():
                values = part[col]
                part[col] = (
                    values.astype("int64")
                    if values.notna().all()
                    else values.map(lambda v: None if pd.isna(v) else int(v)).astype(object)
                )
        if keys:
            part = part.sort_values(keys, kind="stable")
        out[name] = part.reset_index(drop=True)
    return out


def _row(df: pd.DataFrame) -> dict[str, Any]:
    return {str(k): (None if _missing(v) else v) for k, v in df.iloc[0].to_dict().items()}


def _missing(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _answers(df: pd.DataFrame) -> tuple[dict[str, int], dict[str, int], int]:
    """:func:`._metrics.answer_counts`' rows as the invalid deliveries by reason and the
    deliveries by status (plain dicts ordered by key, str keys and Python ints, for JSON),
    and the refusals the summary rows stand for."""
    summary = df["summary"].astype(bool)
    real = df[~summary]

    def by(key: str) -> dict[str, int]:
        rows = real[real[key].notna()]
        sums = rows.groupby(key, sort=True)["n"].sum()
        return {str(k): int(n) for k, n in sums.items()}

    return by("reason"), by("status"), int(df.loc[summary, "suppressed"].fillna(0).sum())


def _int(value: Any) -> int:
    return 0 if value is None else int(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _datetime(value: Any) -> datetime | None:
    if value is None:
        return None
    moment: datetime = pd.Timestamp(value).to_pydatetime()
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _iso(value: Any) -> str | None:
    moment = _datetime(value)
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def _stats(row: dict[str, Any], prefix: str) -> dict[str, float | int | None]:
    out: dict[str, float | int | None] = {"count": _int(row[f"{prefix}count"])}
    for q in m.PERCENTILES:
        out[f"p{round(q * 100)}"] = _float(row[f"{prefix}p{round(q * 100)}"])
    out["max"] = _float(row[f"{prefix}max"])
    return out


def _canonical_uuid(text: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError as exc:
        raise ValueError(f"action id {text!r} is not a UUID") from exc


def _money_at_exponent(df: pd.DataFrame, column: str = "bet_total") -> pd.DataFrame:
    """``column`` (an amount) of each row shown at its currency's exponent (JPY 0, EUR 2,
    KWD 3 decimals, from Babel) instead of the engine's 9; an amount with more digits than
    its currency allows (or of an unknown currency) keeps them all, so nothing is rounded
    away."""
    df[column] = [
        _at_exponent(total, currency)
        for total, currency in zip(df[column], df[m.CURRENCY], strict=True)
    ]
    return df


def _at_exponent(total: Any, currency: Any) -> Any:
    if not isinstance(total, Decimal) or not isinstance(currency, str) or not total.is_finite():
        return total
    places = spec.currency_decimals(currency) or 0
    exponent = total.normalize().as_tuple().exponent
    needed = -exponent if isinstance(exponent, int) else 0
    return total.quantize(Decimal(1).scaleb(-max(places, needed)))
