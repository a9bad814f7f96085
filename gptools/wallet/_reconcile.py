"""Reconciling the operator wallet's ledger with the delivery log, per campaign and
currency: free-round debits against attributed game events against rounds granted, the
winnings credited (the campaign's real cost) against its exposure, and the exceptions,
each a list to act on.

A wallet round is the rows of one round id flagged free round. Its campaign is that of
its game event (joined on the round id, the event attributed as the campaign results
attribute it), else the assumed rule (:data:`gptools.spec.CAMPAIGN_ATTRIBUTION`) applied
to its debit (player, game, currency, amount as the bet, time in the window), else none.
A round counts as played when it has a debit and no rollback; the winnings are the
credits of the campaign's rounds not rolled back. Money is exact (``DECIMAL(38, 9)`` on
the engine, :class:`~decimal.Decimal` here), shown at the currency's exponent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from functools import cached_property
from html import escape
from pathlib import Path
from typing import Any

import ibis.expr.types as ir
import pandas as pd

from gptools import spec
from gptools.deliverylog import ColumnMapping, LogFormat
from gptools.deliverylog._engines import LogOptions, open_log
from gptools.deliverylog._ledger import (
    LedgerError,
    LedgerFormat,
    LedgerSource,
    normalise,
    open_ledger,
)
from gptools.deliverylog._ledger_layout import DEFAULT_LEDGER_MAPPING, LedgerMapping
from gptools.deliverylog._owner import LogOwner
from gptools.deliverylog._results import CampaignResults, CampaignTerms, money
from gptools.display import html_table
from gptools.errors import GptoolsError
from gptools.wallet import _rounds as q

_EXCEPTION_COLUMNS = {
    "round": ["round_id", "campaign_id", "player_id", "game_id", "currency_code", "debits",
              "credits", "rollbacks", "debited", "credited", "first_at"],
    "events_without_wallet_round": ["action_id", "round_id", "campaign_id", "bet"],
    "players_over_bet_number": ["campaign_id", "player_id", "rounds", "bet_number"],
    "debit_amount_mismatch": ["round_id", "campaign_id", "player_id", "currency_code",
                              "debited", "campaign_bet", "debits"],
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ReconciliationReport:
    """The reconciliation's summary (:meth:`to_dict`): the ledger's rows (``check``:
    rows = used + rejected, the rejected by reason), the wallet rounds and how they were
    attributed, one entry per campaign, totals per currency, and the size of every
    exception list."""

    ledger: str
    log: str
    rows: int
    used: int
    rejected: int
    rejected_by_reason: Mapping[str, int]
    free_round_rows: int
    paid_rows: int
    wallet_rounds: int
    attributed_by_event: int
    attributed_by_rule: int
    unattributed_rounds: int
    campaigns: tuple[dict[str, Any], ...]
    exceptions: Mapping[str, int]

    @property
    def identity_holds(self) -> bool:
        """Whether rows = used + rejected, and the rejected add up by reason."""
        return (
            self.rows == self.used + self.rejected
            and sum(self.rejected_by_reason.values()) == self.rejected
            and self.used == self.free_round_rows + self.paid_rows
        )

    def winnings(self) -> dict[str, Decimal]:
        """Per campaign id the ledger holds free rounds of, the winnings they were credited:
        its real cost, in its currency (what :func:`gptools.deliverylog.holdout_uplift`
        takes as ``cost``). A campaign with no wallet round is left out: a ledger without
        its free rounds does not know its cost (zero would be a claim)."""
        return {c["campaign_id"]: c["winnings"] for c in self.campaigns if c["wallet_rounds"]}

    def by_currency(self) -> list[dict[str, Any]]:
        """Per currency: campaigns, rounds granted, game events, wallet rounds, debited,
        winnings, exposure and the winnings' share of it."""
        out: dict[str, dict[str, Any]] = {}
        keys = ("rounds_granted", "game_events", "wallet_rounds", "debited", "winnings",
                "exposure_used")  # fmt: skip
        for c in self.campaigns:
            row = out.setdefault(
                c["currency"],
                {"currency": c["currency"], "campaigns": 0, **{k: 0 for k in keys}},
            )
            row["campaigns"] += 1
            for k in keys:
                row[k] += c[k]
        rows = []
        for cur, r in sorted(out.items()):
            for k in ("debited", "winnings", "exposure_used"):
                r[k] = money(Decimal(r[k]), cur)
            r["cost_share"] = _share(r["winnings"], r["exposure_used"])
            rows.append(r)
        return rows

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; money as strings (every digit kept), times ISO 8601 UTC."""
        return {
            "ledger": self.ledger,
            "log": self.log,
            "rows": self.rows,
            "used": self.used,
            "rejected": self.rejected,
            "rejected_by_reason": dict(self.rejected_by_reason),
            "free_round_rows": self.free_round_rows,
            "paid_rows": self.paid_rows,
            "check": {"identity": "rows = used + rejected", "holds": self.identity_holds},
            "wallet_rounds": self.wallet_rounds,
            "attributed_by_event": self.attributed_by_event,
            "attributed_by_rule": self.attributed_by_rule,
            "unattributed_rounds": self.unattributed_rounds,
            "campaigns": [{k: _plain(v) for k, v in c.items()} for c in self.campaigns],
            "by_currency": [{k: _plain(v) for k, v in r.items()} for r in self.by_currency()],
            "exceptions": dict(self.exceptions),
        }

    def summary(self) -> str:
        """Two lines for a terminal."""
        cost = ", ".join(f"{r['winnings']} {r['currency']}" for r in self.by_currency())
        exc = ", ".join(f"{k} {v}" for k, v in self.exceptions.items() if v)
        return (
            f"{self.rows:,} ledger rows ({self.used:,} used, {self.rejected:,} rejected), "
            f"{self.wallet_rounds:,} free rounds; winnings paid: {cost or 'none'}\n"
            f"exceptions: {exc or 'none'}"
        )

    def _repr_html_(self) -> str:
        frame = pd.DataFrame(list(self.campaigns))
        cols = ["campaign_id", "currency", "rounds_granted", "game_events", "wallet_rounds",
                "winnings", "exposure_used", "cost_share", "cost_per_reached",
                "cost_per_completed"]  # fmt: skip
        table = html_table(frame[cols]) if len(frame) else "<p>no campaign</p>"
        exc = "".join(f"<li>{escape(k)}: {v}</li>" for k, v in self.exceptions.items())
        return (
            f"<h4>Wallet reconciliation</h4><p>{self.rows:,} ledger rows: {self.used:,} "
            f"used, {self.rejected:,} rejected</p>{table}<ul>{exc}</ul>"
        )


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, datetime):
        return v.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return v


def _share(part: Decimal, whole: Decimal) -> float | None:
    return float(part / whole) if whole else None


def _per(amount: Decimal, n: int, currency: str) -> Decimal | None:
    # Cost per player: exact to the currency's exponent would round; keep the quotient's
    # digits to the exponent plus two (a share of a minor unit), never a float.
    if not n:
        return None
    digits = spec.currency_decimals(currency)
    quantum = Decimal(1).scaleb(-((2 if digits is None else digits) + 2))
    return (amount / n).quantize(quantum)


class Reconciliation(LogOwner):
    """The wallet ledger reconciled with a delivery log (:func:`reconcile`).

    :attr:`report` is the summary (``to_dict()``); :meth:`exceptions` the lists, one
    frame per kind (:data:`EXCEPTION_KINDS`); :attr:`results` the campaign results of the
    same log. Close it (or use ``with``) to release the engine and the ledger's
    temporary files.
    """

    def __init__(self, results: CampaignResults, ledger: LedgerSource, mapping: LedgerMapping):
        self.results = results
        self.log = results.log
        self.ledger = ledger
        x = results.x
        self._rows = normalise(ledger.raw, mapping)
        try:
            # The first full scan of the ledger: a file the engine cannot read past its
            # sniffed start (a line with other columns, a broken compression) fails here.
            self._r = self.log.materialise("gp_wallet_rounds", q.rounds(x, self._rows))
        except GptoolsError:
            raise
        except Exception as exc:  # the engines' own errors: one line naming the ledger
            text = str(exc).strip()
            first = text.splitlines()[0] if text else type(exc).__name__
            raise LedgerError(f"{ledger.source}: cannot be read: {first}") from None
        self._events = self.log.materialise("gp_wallet_events", results.event_rounds())
        r = self._r
        ev = self.log.materialise("gp_wallet_event_rounds", q.event_rounds(self._events, r))
        fits = self.log.materialise("gp_wallet_fits", results.rule_fits(q.rule_candidates(r, ev)))
        self._ra = self.log.materialise("gp_wallet_attr", q.attributed_rounds(r, ev, fits))
        self._terms = results._c

    def close(self) -> None:
        """Release the engine and remove the ledger's temporary files."""
        try:
            super().close()
        finally:
            self.ledger.close()

    @cached_property
    def report(self) -> ReconciliationReport:
        """The summary."""
        counts = self._df(q.reasons(self._rows))
        used_rows = counts[counts["reason"].isna()]
        rejected = {
            str(k): int(v)
            for k, v in zip(counts["reason"], counts["rows"], strict=True)
            if isinstance(k, str)
        }
        used = int(used_rows["rows"].sum())
        free = int(used_rows["free_round_rows"].sum())
        ra = self._ra
        by = self._df(ra.group_by("by").aggregate(n=ra.count()))
        by_n = {
            (b if isinstance(b, str) else None): int(n)
            for b, n in zip(by["by"], by["n"], strict=True)
        }
        per = {str(r["campaign_id"]): r for r in self._df(q.per_campaign(ra)).to_dict("records")}
        results = {c["campaign_id"]: c for c in self.results.report.campaigns}
        counts_df = self._df(q.exception_counts(ra, self._events, self._r, self._terms))
        own_counts: dict[str, dict[str, int]] = {k: {} for k in q.EXCEPTION_KINDS}
        totals = dict.fromkeys(q.EXCEPTION_KINDS, 0)
        for kind, cid, n in zip(
            counts_df["kind"], counts_df["campaign_id"], counts_df["n"], strict=True
        ):
            totals[kind] += int(n)
            if isinstance(cid, str):
                own_counts[kind][cid] = int(n)
        entries = []
        for cid, t in self.results.campaigns.items():
            row, res = per.get(cid, {}), results[cid]
            cur = t.currency
            winnings = money(_dec(row.get("winnings")), cur)
            exposure = res["exposure_used"]
            own = {k: own_counts[k].get(cid, 0) for k in q.EXCEPTION_KINDS}
            entries.append(
                {
                    "campaign_id": cid,
                    "currency": cur,
                    "bet": money(t.bet, cur),
                    "bet_number": t.bet_number,
                    "assigned": res["assigned"],
                    "rounds_granted": t.granted,
                    "game_events": res["rounds_used"],
                    "wallet_rounds": _n(row.get("wallet_rounds")),
                    "settled_rounds": _n(row.get("settled")),
                    "delivered_rounds": _n(row.get("delivered_rounds")),
                    "debited": money(_dec(row.get("debited")), cur),
                    "winnings": winnings,
                    "exposure_used": exposure,
                    "cost_share": _share(winnings, exposure),
                    "reached": res["reached"],
                    "completed": res["completed"],
                    "cost_per_reached": _per(winnings, res["reached"], cur),
                    "cost_per_completed": _per(winnings, res["completed"], cur),
                    "exceptions": own,
                }
            )
        return ReconciliationReport(
            ledger=self.ledger.source,
            log=self.log.source,
            rows=used + sum(rejected.values()),
            used=used,
            rejected=sum(rejected.values()),
            rejected_by_reason=dict(sorted(rejected.items())),
            free_round_rows=free,
            paid_rows=used - free,
            wallet_rounds=sum(by_n.values()),
            attributed_by_event=by_n.get("event", 0),
            attributed_by_rule=by_n.get("rule", 0),
            unattributed_rounds=by_n.get(None, 0),
            campaigns=tuple(entries),
            exceptions=totals,
        )

    def rounds(self) -> pd.DataFrame:
        """Every wallet round with its campaign (``by``: ``event`` or ``rule``), counts,
        amounts (exact, at the currency's exponent) and ``delivered``."""
        return self._money(self._texts(self._ra.order_by("round_id")))

    def exceptions(self, kind: str) -> pd.DataFrame:
        """One exception list (a kind of :data:`EXCEPTION_KINDS`), ordered by round id (or
        campaign and player): what to act on."""
        if kind not in q.EXCEPTION_KINDS:
            raise ValueError(f"kind must be one of {', '.join(q.EXCEPTION_KINDS)}, got {kind!r}")
        if kind == "events_without_wallet_round":
            expr = q.events_without_round(self._events, self._r)
            df = self._texts(expr.order_by(["round_id", "action_id"]))
            df["action_id"] = df["action_id"].astype(str)
        elif kind == "players_over_bet_number":
            df = self._df(
                q.players_over(self._ra, self._terms).order_by(["campaign_id", "player_id"])
            )
        elif kind == "debit_amount_mismatch":
            df = self._texts(q.amount_mismatch(self._ra, self._terms).order_by("round_id"))
        else:
            df = self._texts(q.exception_rounds(self._ra, kind).order_by("round_id"))
            df["first_at"] = pd.to_datetime(df["first_us"], unit="us", utc=True)
            kind = "round"
        return self._money(df[_EXCEPTION_COLUMNS.get(kind, _EXCEPTION_COLUMNS["round"])])

    def _texts(self, expr: ir.Table) -> pd.DataFrame:
        # Amounts leave the engine as their decimal text: the frame library's own
        # conversion of a decimal column builds and normalises a Decimal per value, the
        # larger part of the time a list of 100,000s of rounds takes; :meth:`_money`
        # makes the one Decimal each needs from the text.
        money = {c: expr[c].cast("string") for c in _MONEY_COLUMNS if c in expr.columns}
        return self._df(expr.mutate(**money) if money else expr)

    def _money(self, df: pd.DataFrame) -> pd.DataFrame:
        currency = self._currencies(df)
        places = {c: spec.currency_decimals(c) or 0 for c in set(currency)}
        for col in _MONEY_COLUMNS:
            if col in df.columns:
                shown: list[Any] = [
                    None if v is None or v is pd.NA or v != v else _shown_text(v, places[c])
                    for v, c in zip(df[col], currency, strict=True)
                ]
                df[col] = pd.Series(shown, index=df.index, dtype=object)
        return df.reset_index(drop=True)

    def _currencies(self, df: pd.DataFrame) -> list[str]:
        if "currency_code" in df.columns:
            return [str(c) for c in df["currency_code"]]
        terms = self.results.campaigns
        return [terms[c].currency if c in terms else "" for c in df.get("campaign_id", [])]


_MONEY_COLUMNS = ("debited", "credited", "bet", "campaign_bet")


def _shown_text(value: Any, places: int) -> Decimal:
    # ``_shown`` of a plain decimal text ("12.500000000") by cutting its trailing zeros
    # down to the currency's places: a string operation and one Decimal, not three
    # Decimal operations. Anything else (an exponent, a Decimal) takes ``_shown``.
    text = value if isinstance(value, str) else ""
    head, dot, frac = text.partition(".")
    if not dot or not head or "e" in text or "E" in text:
        return _shown(Decimal(value), places)
    frac = frac.rstrip("0").ljust(places, "0")
    return Decimal(f"{head}.{frac}" if frac else head)


def _shown(amount: Decimal, places: int) -> Decimal:
    # The analyser's rule for showing money (``money``), with the currency's places looked
    # up once per frame: the currency's exponent, never rounding a digit away.
    exponent = amount.normalize().as_tuple().exponent
    needed = -exponent if isinstance(exponent, int) else 0
    return amount.quantize(Decimal(1).scaleb(-max(places, needed)))


def _dec(v: Any) -> Decimal:
    return Decimal(0) if v is None or pd.isna(v) else Decimal(v)


def _n(v: Any) -> int:
    return 0 if v is None or pd.isna(v) else int(v)


def reconcile(
    ledger: str | Path,
    log: str | Path,
    campaigns: Iterable[Any],
    *,
    players: Mapping[str, Sequence[str]] | None = None,
    mapping: LedgerMapping = DEFAULT_LEDGER_MAPPING,
    ledger_format: LedgerFormat = "auto",
    ledger_table: str = "wallet_ledger",
    log_format: LogFormat = "auto",
    log_mapping: ColumnMapping | None = None,
    engine: str = "duckdb",
    options: LogOptions | None = None,
    feature_event: str | None = spec.FEATURE_EVENT,
) -> Reconciliation:
    """The wallet ``ledger`` (CSV, JSONL, Parquet, or a database URL with
    ``ledger_table``) reconciled with the delivery ``log`` for ``campaigns`` (register
    records, :class:`CampaignTerms` or alike; ``players`` adds players per campaign id),
    on ``engine`` (``duckdb`` or ``spark``; ``options`` as :func:`open_log` takes them).
    """
    o = options if options is not None else LogOptions()
    if log_mapping is not None or log_format != "auto":
        fields = {k: getattr(o, k) for k in o.__dataclass_fields__}
        fields["format"] = log_format if log_format != "auto" else o.format
        fields["mapping"] = log_mapping if log_mapping is not None else o.mapping
        o = LogOptions(**fields)
    terms = [CampaignTerms.of(c, (players or {}).get(str(c.campaign_id))) for c in campaigns]
    opened = open_log(log, engine, o)
    try:
        results = CampaignResults(opened, terms, feature_event=feature_event, round_ids=True)
        source = open_ledger(
            opened, ledger, format=ledger_format, mapping=mapping, table=ledger_table,
            temp_directory=o.temp_directory,
        )  # fmt: skip
    except BaseException:
        opened.close()
        raise
    try:
        return Reconciliation(results, source, mapping)
    except BaseException:
        source.close()
        opened.close()
        raise
