"""The summary of a delivery-log analysis: headline numbers, warnings, HTML and JSON."""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from gptools.display import cell_text


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class DeliveryReport:
    """Every metric of the analyser for one log (docs/design.md's definitions).

    Counts are integers, rates are shares in [0, 1] (``None`` when there is nothing to
    divide), durations are seconds (``_s``) or milliseconds (``_ms``). Percentile dicts
    hold ``count``, ``p50``, ``p90``, ``p99`` and ``max``. ``now`` is the moment pending
    actions were judged against (default: the last ``received_at``).
    :meth:`to_dict` is the JSON document of ``gptools webhooks analyze --json``.
    """

    source: str
    now: datetime | None
    first_received_at: datetime | None
    last_received_at: datetime | None
    deliveries: int
    actions: int
    acknowledged_actions: int
    duplicate_deliveries: int
    retries: int
    lost_actions: int
    pending_actions: int
    pending_actions_expired: int
    pending_window_closes_first: datetime | None
    invalid_deliveries: int
    invalid_deliveries_without_action_id: int
    #: Refusals (before authentication or routing) the receiver answered without a log row
    #: of their own, past its row budget: its summary rows count them. They are no
    #: deliveries; their actions (a provider answered 401, say) cannot be listed.
    refusals_suppressed: int
    invalid_by_reason: dict[str, int]
    status_counts: dict[str, int]
    first_attempt_success_rate: float | None
    eventual_success_rate: float | None
    attempts_per_action: dict[str, Any]
    retry_gap_s: dict[str, float | int | None]
    backoff: dict[str, Any]
    delivery_lag_s: dict[str, float | int | None]
    out_of_order_events: int
    out_of_order_share: float | None
    ack_latency_ms: dict[str, float | int | None]
    over_budget: int
    budget_ms: float
    silent_periods: dict[str, Any]
    first_attempts: int
    warnings: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "warnings", tuple(_warnings(self)))

    @property
    def identity_holds(self) -> bool:
        """deliveries = first attempts + retries + duplicate deliveries + invalid
        deliveries without a usable actionId, and first attempts = actions."""
        total = (
            self.first_attempts
            + self.retries
            + self.duplicate_deliveries
            + self.invalid_deliveries_without_action_id
        )
        return total == self.deliveries and self.first_attempts == self.actions

    def to_dict(self) -> dict[str, Any]:
        """Every metric as JSON-ready values (times as ISO 8601 UTC with ``Z``)."""
        out = {k: _jsonable(v) for k, v in asdict(self).items() if k != "first_attempts"}
        out["check"] = {
            "deliveries": self.deliveries,
            "first_attempts": self.first_attempts,
            "retries": self.retries,
            "duplicate_deliveries": self.duplicate_deliveries,
            "invalid_deliveries_without_action_id": self.invalid_deliveries_without_action_id,
            "holds": self.identity_holds,
        }
        out["warnings"] = list(self.warnings)
        return out

    def headline(self) -> list[tuple[str, str]]:
        """The numbers an operator looks at first, as (label, formatted value) pairs."""
        lat = self.ack_latency_ms
        fit = self.backoff
        # Only a log with summary rows has this line (a flood, a rotated key).
        unseen = (
            [("Refusals not logged one by one", f"{self.refusals_suppressed:,}")]
            if self.refusals_suppressed
            else []
        )
        return [
            ("Deliveries", f"{self.deliveries:,}"),
            *unseen,
            ("Actions (distinct actionId)", f"{self.actions:,}"),
            ("Acknowledged actions", f"{self.acknowledged_actions:,}"),
            ("Duplicate deliveries", f"{self.duplicate_deliveries:,}"),
            ("Retries", f"{self.retries:,}"),
            ("Lost actions (4xx, never retried)", f"{self.lost_actions:,}"),
            ("Pending actions (no 200 yet)", f"{self.pending_actions:,}"),
            ("Invalid deliveries", f"{self.invalid_deliveries:,}"),
            ("First-attempt success", _pct(self.first_attempt_success_rate)),
            ("Eventual success", _pct(self.eventual_success_rate)),
            ("Fitted backoff", _backoff_text(fit)),
            ("Ack latency p50 / p99", f"{_num(lat['p50'])} / {_num(lat['p99'])} ms"),
            (f"Answers ≥ {self.budget_ms:,.0f} ms", f"{self.over_budget:,}"),
            ("Out-of-order events", _pct(self.out_of_order_share)),
            ("Silent periods", f"{self.silent_periods['count']:,}"),
        ]

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:right'>{html.escape(v)}</td></tr>"
            for k, v in self.headline()
        )
        warn = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        warn_html = f"<p><b>Warnings</b></p><ul>{warn}</ul>" if warn else "<p>No warnings.</p>"
        return (
            f"<div><p><b>Webhook delivery log</b>: {html.escape(self.source)}"
            f" ({html.escape(cell_text(self.first_received_at))} to"
            f" {html.escape(cell_text(self.last_received_at))})</p>"
            f"<table>{rows}</table>{warn_html}</div>"
        )

    def __repr__(self) -> str:
        return (
            f"DeliveryReport(source={self.source!r}, deliveries={self.deliveries},"
            f" actions={self.actions}, lost_actions={self.lost_actions},"
            f" pending_actions={self.pending_actions}, warnings={len(self.warnings)})"
        )

    def __str__(self) -> str:
        lines = [f"{k}: {v}" for k, v in self.headline()]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _warnings(r: DeliveryReport) -> list[str]:
    out = []
    if not r.identity_holds:
        out.append(
            "the counts do not add up: deliveries != first attempts + retries + duplicates"
            " + invalid deliveries without an actionId (please report this log)"
        )
    if r.now is not None and r.first_received_at is not None and r.now < r.first_received_at:
        out.append(
            f"now ({cell_text(r.now)}) is before the whole log (its first delivery at"
            f" {cell_text(r.first_received_at)}): pending actions are judged at a time"
            " before they arrived"
        )
    if r.lost_actions:
        out.append(
            f"{r.lost_actions:,} actions lost: answered 4xx, the provider will not retry"
            " (lost_actions() lists what a replay request needs)"
        )
    open_pending = r.pending_actions - r.pending_actions_expired
    if open_pending:
        out.append(
            f"{open_pending:,} actions pending: no 200 yet, the provider may still retry them;"
            f" the first 7-day window closes at {cell_text(r.pending_window_closes_first)}"
        )
    if r.pending_actions_expired:
        out.append(
            f"{r.pending_actions_expired:,} pending actions are past their 7-day retry window:"
            " the provider has stopped retrying, treat them as lost"
        )
    if r.invalid_deliveries:
        top = sorted(r.invalid_by_reason.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        reasons = ", ".join(f"{k} {v:,}" for k, v in top)
        out.append(f"{r.invalid_deliveries:,} invalid deliveries ({reasons})")
    if r.refusals_suppressed:
        out.append(
            f"{r.refusals_suppressed:,} refusals the receiver did not log one by one (past its"
            " --refused-rows-per-second): the analysis cannot see them, nor list their"
            " actions"
        )
    if r.over_budget:
        out.append(
            f"{r.over_budget:,} deliveries answered in {r.budget_ms:,.0f} ms or more"
            " (the provider expects under 1 second)"
        )
    if r.silent_periods["count"]:
        out.append(
            f"{r.silent_periods['count']:,} silent periods over"
            f" {r.silent_periods['threshold_s']:,.0f} s without any delivery, longest"
            f" {r.silent_periods['longest_s']:,.0f} s"
        )
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | int | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _backoff_text(fit: dict[str, Any]) -> str:
    if fit["base_s"] is None:
        return "no retries"
    if fit["factor"] is None:
        return f"{fit['base_s']:,.1f} s (one retry level only)"
    return f"{fit['base_s']:,.1f} s × {fit['factor']:.2f}^(n-1)"
