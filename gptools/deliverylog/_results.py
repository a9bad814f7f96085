"""Campaign results from a delivery log: who played, how much, when, and what it cost.

The provider's game events carry no campaign id, so an event is attributed by the assumed
rule :data:`gptools.spec.CAMPAIGN_ATTRIBUTION`: its player is one of the campaign's, its
game one of its games, its currency and bet the campaign's (for AWARDED_FEATURE the
feature cost, with :data:`gptools.spec.FEATURE_EVENT` among the events), its timestamp in
the campaign's window ``[start, end)``. An event that fits two campaigns is *ambiguous*
and counted for none; every action is exactly one of attributed, ambiguous, unattributed.

A log whose :class:`ColumnMapping` names a ``campaign_id`` column says which campaign each
delivery belongs to, and the rule is not used: an action is its first valid delivery's
campaign id's campaign when that id is one of the campaigns reported (whatever its player,
game, bet or time), else unattributed, counted apart as ``unknown_campaign_id`` (an id of a
campaign not reported, or of no campaign gptools knows) or ``without_campaign_id`` (the
delivery's id empty or absent: the log says it is no campaign's play, so the assumed rule
does not guess). Nothing is ambiguous then.

Events are the analyser's actions (:mod:`._metrics`: one distinct valid ``actionId``,
duplicates and retries counted once); an action's fields are those of its first valid
delivery, and an action with no valid delivery is unattributed (an invalid delivery never
counts). Everything runs as Ibis expressions on the log's engine (DuckDB or Spark, the
analyser's readers); only per-campaign aggregates, and the lists asked for, reach Python.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cached_property
from html import escape
from pathlib import Path
from typing import Any

import ibis
import ibis.expr.types as ir
import pandas as pd
import pyarrow as pa

from gptools import spec
from gptools.deliverylog import _metrics as m
from gptools.deliverylog._analysis import _at_exponent
from gptools.deliverylog._contract import (
    BET_DECIMAL,
    CAMPAIGN_ID,
    DEFAULT_MAPPING,
    BaseDeliveryLog,
    ColumnMapping,
    LogFormat,
)
from gptools.deliverylog._engines import LogOptions, open_log
from gptools.deliverylog._files import DEFAULT_MAX_LINE_BYTES
from gptools.deliverylog._owner import LogOwner
from gptools.deliverylog._readers import DEFAULT_MEMORY_LIMIT
from gptools.display import html_table

_DAY_US = 86_400_000_000
_BET = pa.decimal128(BET_DECIMAL.precision or 38, BET_DECIMAL.scale or 9)


@dataclass(frozen=True, slots=True)
class CampaignTerms:
    """What attribution needs of one campaign: its games, currency, bet, betNumber,
    window (aware instants; ``time_zone`` is shown with it) and players.

    ``bet`` is the campaign's bet (AWARDED_FEATURE: the feature cost); ``budget`` the
    plan's maximum exposure (default: players × betNumber × bet).
    :meth:`of` reads any object with these attributes, such as a register's
    :class:`gptools.campaigns.CampaignRecord`.
    """

    campaign_id: str
    campaign_type: str
    currency: str
    bet: Decimal
    bet_number: int
    game_ids: tuple[str, ...]
    start: datetime
    end: datetime
    players: tuple[str, ...] = field(default=(), repr=False)
    time_zone: str = "UTC"
    budget: Decimal | None = None

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError(f"campaign {self.campaign_id}: start and end must be aware")
        if self.bet_number < 1:
            raise ValueError(f"campaign {self.campaign_id}: bet_number must be at least 1")

    @classmethod
    def of(cls, campaign: Any, players: Sequence[str] | None = None) -> CampaignTerms:
        """The terms of ``campaign`` (a :class:`CampaignTerms`, a register's record, or any
        object with the same attributes; ``start_utc``/``end_utc`` are preferred to
        ``start``/``end``), with ``players`` added to its own."""
        start = getattr(campaign, "start_utc", None) or campaign.start
        end = getattr(campaign, "end_utc", None) or campaign.end
        own = tuple(getattr(campaign, "players", ()) or ())
        return cls(
            campaign_id=str(campaign.campaign_id),
            campaign_type=str(campaign.campaign_type),
            currency=str(campaign.currency),
            bet=Decimal(campaign.bet),
            bet_number=int(campaign.bet_number),
            game_ids=tuple(campaign.game_ids),
            start=start,
            end=end,
            players=tuple(dict.fromkeys((*own, *(players or ())))),
            time_zone=str(getattr(campaign, "time_zone", "UTC")),
            budget=getattr(campaign, "budget", None),
        )

    @property
    def needs_feature(self) -> bool:
        """Whether an event must carry the feature event (AWARDED_FEATURE)."""
        return self.campaign_type == spec.CAMPAIGN_TYPE_AWARDED_FEATURE

    @property
    def granted(self) -> int:
        """Rounds or features granted: players × betNumber."""
        return len(self.players) * self.bet_number

    @property
    def max_exposure(self) -> Decimal:
        """The budget: the plan's, else players × betNumber × bet."""
        return self.budget if self.budget is not None else self.bet * self.granted


def money(amount: Decimal, currency: str) -> Decimal:
    """``amount`` written at ``currency``'s exponent (JPY 0, EUR 2, KWD 3 decimals), never
    rounding a digit away (the analyser's one rule for showing money)."""
    shown: Decimal = _at_exponent(amount, currency)
    return shown


# --------------------------------------------------------------------------------------
# The relations, as Ibis expressions
# --------------------------------------------------------------------------------------


def has_event(x: m.Dialect, events: ir.Value, name: str) -> ir.Value:
    """Whether the string ``name`` is an element of a canonical (minified) JSON array of
    strings: it follows ``[`` or ``,`` and its closing quote is real (a quote inside a
    string is escaped, so neither pattern can start inside one). Two substring tests: a
    regular expression on every delivery costs several times more."""
    quoted = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return (events.contains("[" + quoted) | events.contains("," + quoted)).fill_null(False)


def plays(
    x: m.Dialect, raw: ir.Table, feature_event: str | None, *, round_ids: bool = False
) -> ir.Table:
    """Per delivery (a narrow table to materialise): what the summary of attempts needs
    (``received_at``, ``status``, ``reason``, ``action_id``, the :func:`order key
    <._metrics.order_key>`) and what attribution reads (player, game, currency, bet, event
    time in epoch microseconds, whether the feature event is among the events), and the
    log's own campaign id when its mapping names one; the ``round_id`` too when
    ``round_ids`` (the wallet's reconciliation joins on it)."""
    v = m.validate(x, raw)
    feature = has_event(x, v.events, feature_event) if feature_event is not None else True
    return v.select(
        "received_at", "status", "reason", "action_id", "player_id", "game_id",
        "currency_code", "bet", *([CAMPAIGN_ID] if CAMPAIGN_ID in v.columns else []),
        *(["round_id"] if round_ids else []),
        key=m.order_key(x, v),
        ts_us=x.epoch_us(v.event_ts),
        feature=feature,
    )  # fmt: skip


def actions(p: ir.Table) -> ir.Table:
    """Per action (a distinct usable ``action_id``): ``valid`` (at least one valid
    delivery) and ``first_key``, the :func:`order key <._metrics.order_key>` of its first
    valid delivery (whose fields are the action's). Narrow on purpose: a hash aggregate of
    integers over every delivery."""
    att = p.filter(p.action_id.notnull())
    valid = att.reason.isnull()
    return att.group_by("action_id").aggregate(
        valid=valid.any(), first_key=att.key.min(where=valid)
    )


def first_valid(p: ir.Table, a: ir.Table) -> ir.Table:
    """The first valid delivery of every action that has one, with the log's campaign id
    (attribution by the log's campaign id column)."""
    valid = p.filter(p.reason.isnull() & p.action_id.notnull())
    first = a.filter(a.valid).select("action_id", "first_key")
    j = valid.inner_join(first, [valid.action_id == first.action_id, valid.key == first.first_key])
    return j.select("action_id", "player_id", "ts_us", CAMPAIGN_ID)


def id_matches(firsts: ir.Table, c: ir.Table) -> ir.Table:
    """Per action whose first valid delivery names a campaign reported: that campaign
    (the same columns as :func:`matches`)."""
    j = firsts.inner_join(c.select(CAMPAIGN_ID, "start_us"), CAMPAIGN_ID)
    return j.select("action_id", "campaign_id", "player_id", "ts_us", "start_us")


def id_counts(firsts: ir.Table, c: ir.Table) -> ir.Table:
    """One row: the actions whose first valid delivery has no campaign id
    (``without_campaign_id``) and those whose id names no campaign reported
    (``unknown_campaign_id``); both are unattributed."""
    named = firsts.filter(firsts[CAMPAIGN_ID].notnull())
    unknown = named.anti_join(c, CAMPAIGN_ID)
    without = firsts.aggregate(without_campaign_id=firsts[CAMPAIGN_ID].isnull().sum())
    return without.cross_join(unknown.aggregate(unknown_campaign_id=unknown.count()))


def delivery_matches(p: ir.Table, g: ir.Table, keys: ir.Table) -> ir.Table:
    """Per (valid delivery, campaign) that fits every term of the attribution rule.
    ``keys`` has one row per campaign and player with the campaign's currency, bet,
    window and whether it needs the feature event, so the one large join is an equi-join
    on (player, currency, bet), where a delivery meets only the few campaigns of its own
    player at its own bet; the window is a filter on that join's rows (a separate table of
    campaigns would let the engine plan a range join of every delivery with every
    campaign). The games are a second, tiny table."""
    valid = p.filter(p.reason.isnull() & p.action_id.notnull())
    j = valid.inner_join(keys, ["player_id", "currency_code", "bet"])
    j = j.filter((j.ts_us >= j.start_us) & (j.ts_us < j.end_us) & (j.feature | ~j.needs_feature))
    j = j.inner_join(g, ["campaign_id", "game_id"])
    return j.select("action_id", "key", "campaign_id", "player_id", "ts_us", "start_us")


def matches(dm: ir.Table, a: ir.Table) -> ir.Table:
    """Per (action, campaign) that fits: the :func:`delivery_matches` of each action's
    first valid delivery (whose fields are the action's)."""
    first = a.filter(a.valid).select("action_id", "first_key")
    j = dm.inner_join(first, [dm.action_id == first.action_id, dm.key == first.first_key])
    return j.select("action_id", "campaign_id", "player_id", "ts_us", "start_us")


def attribution(fits: ir.Table) -> ir.Table:
    """Per action that fits at least one campaign: how many (``campaigns``) and, when
    exactly one, which, with the play's player, time and the campaign's start."""
    return fits.group_by("action_id").aggregate(
        campaigns=fits.count(),
        campaign_id=fits.campaign_id.min(),
        player_id=fits.player_id.min(),
        ts_us=fits.ts_us.min(),
        start_us=fits.start_us.min(),
    )


def attribution_counts(a: ir.Table, t: ir.Table) -> ir.Table:
    """One row: actions, attributed, ambiguous, unattributed (counted apart, as the actions
    that fit no campaign, so that the identity is a check), and the actions without a
    valid delivery (unattributed by definition)."""
    totals = a.aggregate(actions=a.count(), without_valid_delivery=(~a.valid).sum())
    fitted = t.aggregate(attributed=(t.campaigns == 1).sum(), ambiguous=(t.campaigns > 1).sum())
    rest = a.anti_join(t, "action_id")
    none = rest.aggregate(unattributed=rest.count())
    return totals.cross_join(fitted).cross_join(none)


def per_player(t: ir.Table) -> ir.Table:
    """Per campaign and player who played it: rounds used, first and last play (epoch
    microseconds) and the campaign's start."""
    att = t.filter(t.campaigns == 1)
    return att.group_by(["campaign_id", "player_id"]).aggregate(
        rounds=att.count(),
        first_us=att.ts_us.min(),
        last_us=att.ts_us.max(),
        start_us=att.start_us.min(),
    )


def per_campaign(pp: ir.Table, c: ir.Table) -> ir.Table:
    """Per campaign played: players reached and completed, rounds used, first and last
    play, time from the start to each player's first play (p50, p90, seconds)."""
    j = pp.inner_join(c.select("campaign_id", "bet_number"), "campaign_id")
    wait_s = (j.first_us - j.start_us).cast("float64") / 1e6
    qs = wait_s.quantile([0.5, 0.9])
    return j.group_by("campaign_id").aggregate(
        reached=j.count(),
        completed=(j.rounds >= j.bet_number).sum(),
        rounds=j.rounds.sum(),
        first_us=j.first_us.min(),
        last_us=j.last_us.max(),
        wait_p50_s=qs[0],
        wait_p90_s=qs[1],
    )


def ambiguous_per_campaign(t: ir.Table, fits: ir.Table) -> ir.Table:
    """Per campaign: how many ambiguous actions it was one of the candidates of."""
    amb = t.filter(t.campaigns > 1).select("action_id")
    j = fits.inner_join(amb, "action_id")
    return j.group_by("campaign_id").aggregate(ambiguous=j.count())


def uptake(t: ir.Table, pp: ir.Table) -> tuple[ir.Table, ir.Table]:
    """Per campaign and day since its start (day 0 is its first 24 hours): rounds used,
    and players whose first play fell that day."""
    att = t.filter(t.campaigns == 1)
    rounds = att.group_by(
        ["campaign_id", ((att.ts_us - att.start_us) // _DAY_US).cast("int64").name("day")]
    ).aggregate(rounds=att.count())
    new = pp.group_by(
        ["campaign_id", ((pp.first_us - pp.start_us) // _DAY_US).cast("int64").name("day")]
    ).aggregate(new_players=pp.count())
    return rounds, new


def unreached(pl: ir.Table, pp: ir.Table) -> ir.Table:
    """The campaign's players with no attributed play."""
    return pl.anti_join(pp, ["campaign_id", "player_id"]).order_by(["campaign_id", "player_id"])


# --------------------------------------------------------------------------------------
# The report and the object that runs it
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CampaignReport:
    """The results: the attribution totals (``check``: attributed + ambiguous +
    unattributed = actions) and one entry per campaign (:meth:`to_dict`).

    ``campaign_id_column`` is the log's campaign id column when the attribution used it
    (``None``: the assumed rule); ``unknown_campaign_id`` and ``without_campaign_id`` are
    then the unattributed actions whose id names no campaign reported, and those without
    an id (``None`` under the rule)."""

    source: str
    actions: int
    attributed: int
    ambiguous: int
    unattributed: int
    without_valid_delivery: int
    campaigns: tuple[dict[str, Any], ...]
    campaign_id_column: str | None = None
    unknown_campaign_id: int | None = None
    without_campaign_id: int | None = None

    @property
    def attributed_by(self) -> str:
        """How actions were attributed: ``"campaign_id"`` (the log's column) or
        ``"assumed_rule"`` (:data:`gptools.spec.CAMPAIGN_ATTRIBUTION`)."""
        return "assumed_rule" if self.campaign_id_column is None else "campaign_id"

    @property
    def identity_holds(self) -> bool:
        """Whether every action is exactly one of attributed, ambiguous, unattributed."""
        return self.attributed + self.ambiguous + self.unattributed == self.actions

    def by_currency(self) -> list[dict[str, Any]]:
        """Per currency: players assigned, reached, completed, exposure used and budget."""
        out: dict[str, dict[str, Any]] = {}
        for c in self.campaigns:
            row = out.setdefault(
                c["currency"],
                {"currency": c["currency"], "campaigns": 0, "assigned": 0, "reached": 0,
                 "completed": 0, "exposure_used": Decimal(0), "budget": Decimal(0)},
            )  # fmt: skip
            row["campaigns"] += 1
            for k in ("assigned", "reached", "completed", "exposure_used", "budget"):
                row[k] += c[k]
        return [
            {**r, "exposure_used": money(r["exposure_used"], r["currency"]),
             "budget": money(r["budget"], r["currency"])}
            for _, r in sorted(out.items())
        ]  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; money as strings (every digit kept), times ISO 8601 UTC."""

        def plain(v: Any) -> Any:
            if isinstance(v, Decimal):
                return str(v)
            if isinstance(v, datetime):
                return v.astimezone(UTC).isoformat().replace("+00:00", "Z")
            return v

        return {
            "source": self.source,
            "actions": self.actions,
            "attributed": self.attributed,
            "ambiguous": self.ambiguous,
            "unattributed": self.unattributed,
            "without_valid_delivery": self.without_valid_delivery,
            "attributed_by": self.attributed_by,
            "campaign_id_column": self.campaign_id_column,
            "unknown_campaign_id": self.unknown_campaign_id,
            "without_campaign_id": self.without_campaign_id,
            "check": {
                "identity": "attributed + ambiguous + unattributed = actions",
                "holds": self.identity_holds,
            },
            "campaigns": [{k: plain(v) for k, v in c.items()} for c in self.campaigns],
            "by_currency": [{k: plain(v) for k, v in r.items()} for r in self.by_currency()],
        }

    def how(self) -> str:
        """How the actions were attributed, in a sentence."""
        if self.campaign_id_column is None:
            return "attributed by the assumed rule spec.CAMPAIGN_ATTRIBUTION"
        return (
            f"attributed by the log's campaign id column {self.campaign_id_column!r}: "
            f"{self.unknown_campaign_id:,} unattributed with the id of no campaign reported, "
            f"{self.without_campaign_id:,} without an id"
        )

    def frame(self) -> pd.DataFrame:
        """One row per campaign (money as Decimals)."""
        return pd.DataFrame(list(self.campaigns), columns=list(SUMMARY_COLUMNS))

    def _repr_html_(self) -> str:
        ok = "holds" if self.identity_holds else "<b>does not hold</b>"
        head = (
            f"<p><b>Campaign results</b> {self.actions} actions: {self.attributed} "
            f"attributed, {self.ambiguous} ambiguous, {self.unattributed} unattributed "
            f"(identity {ok}; {escape(self.how())})</p>"
        )
        return head + html_table(self.frame())


#: The columns of :meth:`CampaignReport.frame`, in order.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "campaign_id", "currency", "type", "bet", "bet_number", "start", "end", "time_zone",
    "assigned", "reached", "completed", "rounds_used", "rounds_granted", "exposure_used",
    "budget", "budget_used", "first_play", "last_play", "wait_p50_s", "wait_p90_s",
    "ambiguous",
)  # fmt: skip


class CampaignResults(LogOwner):
    """The results of some campaigns in one delivery log (:func:`campaign_results`).

    Opening it scans the log once into a narrow table of deliveries, then builds the
    per-action attribution on the engine. :attr:`report` is the summary (with
    ``to_dict()``); :meth:`players`, :meth:`uptake` and :meth:`unreached` are frames.
    Close it (or use ``with``) to release the engine.
    """

    def __init__(
        self,
        log: BaseDeliveryLog,
        campaigns: Sequence[CampaignTerms],
        *,
        feature_event: str | None = spec.FEATURE_EVENT,
        round_ids: bool = False,
    ) -> None:
        ids = [c.campaign_id for c in campaigns]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"campaign id(s) given twice: {', '.join(repeated)}")
        self.log = log
        self.campaigns = {c.campaign_id: c for c in campaigns}
        x = self.x = log.dialect
        self._plays = log.load(
            "gp_campaign_plays", lambda raw: plays(x, raw, feature_event, round_ids=round_ids)
        )
        c, g, pl, keys = self._terms_tables()
        self._c, self._g, self._pl, self._keys = c, g, pl, keys
        self._a = log.materialise("gp_campaign_actions", actions(self._plays))
        #: The log's campaign id column, when attribution is by it instead of the rule.
        self.campaign_id_column = log.mapping.campaign_id
        self._firsts: ir.Table | None = None
        if self.campaign_id_column is not None:
            self._firsts = log.materialise("gp_campaign_firsts", first_valid(self._plays, self._a))
            self._fits = log.materialise("gp_campaign_fits", id_matches(self._firsts, c))
        else:
            # One large hash table per step: a pipeline probing several (the campaign
            # keys', the actions') lets each take memory the others need, and DuckDB can
            # then run out of memory instead of spilling (docs/performance.md).
            dm = log.materialise("gp_campaign_dfits", delivery_matches(self._plays, g, keys))
            self._fits = log.materialise("gp_campaign_fits", matches(dm, self._a))
        self._attr = log.materialise("gp_campaign_attr", attribution(self._fits))
        self._pp = log.materialise("gp_campaign_pp", per_player(self._attr))

    def _upload(self, name: str, table: pa.Table) -> ir.Table:
        # An input table on the log's engine: a view of the in-memory table (the engine
        # registers it), then computed once like every other table of the log.
        view = self.log.con.create_view(
            f"{name}_src_{self.log.tag}", ibis.memtable(table), overwrite=True
        )
        return self.log.materialise(name, view)

    def _terms_tables(self) -> tuple[ir.Table, ir.Table, ir.Table, ir.Table]:
        cs = list(self.campaigns.values())
        us = _epoch_us
        c = pa.table(
            {
                "campaign_id": pa.array([t.campaign_id for t in cs], pa.string()),
                "currency_code": pa.array([t.currency for t in cs], pa.string()),
                "bet": pa.array([t.bet for t in cs], _BET),
                "bet_number": pa.array([t.bet_number for t in cs], pa.int64()),
                "needs_feature": pa.array([t.needs_feature for t in cs], pa.bool_()),
                "start_us": pa.array([us(t.start) for t in cs], pa.int64()),
                "end_us": pa.array([us(t.end) for t in cs], pa.int64()),
            }
        )
        g = pa.table(
            {
                "campaign_id": pa.array(
                    [t.campaign_id for t in cs for _ in t.game_ids], pa.string()
                ),
                "game_id": pa.array([gid for t in cs for gid in t.game_ids], pa.string()),
            }
        )
        pl = pa.table(
            {
                "campaign_id": pa.array(
                    [t.campaign_id for t in cs for _ in t.players], pa.string()
                ),
                "player_id": pa.array([p for t in cs for p in t.players], pa.string()),
            }
        )
        terms = self._upload("gp_campaign_terms", c)
        players = self._upload("gp_campaign_players", pl)
        # One row per campaign and player with the campaign's terms (see matches()).
        keys = self.log.materialise("gp_campaign_keys", players.inner_join(terms, "campaign_id"))
        return terms, self._upload("gp_campaign_games", g), players, keys

    # ---------------------------------------------------------------- for the wallet

    def event_rounds(self) -> ir.Table:
        """Per action with a valid delivery: ``action_id``, ``round_id``, ``bet`` (its first
        valid delivery's) and ``campaign_id``, the campaign it is attributed to (NULL when
        none, or ambiguous). Needs ``round_ids=True`` at opening (the wallet's
        reconciliation joins on the round id)."""
        p, a = self._plays, self._a
        valid = p.filter(p.reason.isnull() & p.action_id.notnull())
        first = a.filter(a.valid).select("action_id", "first_key")
        j = valid.inner_join(
            first, [valid.action_id == first.action_id, valid.key == first.first_key]
        ).select("action_id", "round_id", "bet")
        attr = self._attr.filter(self._attr.campaigns == 1).select("action_id", "campaign_id")
        return j.left_join(attr, "action_id").select("action_id", "round_id", "bet", "campaign_id")

    def rule_fits(self, rows: ir.Table) -> ir.Table:
        """Per ``round_id`` of ``rows`` (columns ``round_id``, ``player_id``, ``game_id``,
        ``currency_code``, ``bet``, ``ts_us``, on this log's engine) that fits at least one
        campaign by the assumed rule (:data:`gptools.spec.CAMPAIGN_ATTRIBUTION`, without the
        events term: a wallet row has none): ``campaigns`` (how many) and ``campaign_id``
        (the one, when exactly one)."""
        keys = self._keys
        j = rows.inner_join(keys, ["player_id", "currency_code", "bet"])
        j = j.filter((j.ts_us >= j.start_us) & (j.ts_us < j.end_us))
        j = j.inner_join(self._g, ["campaign_id", "game_id"])
        return j.group_by("round_id").aggregate(
            campaigns=j.campaign_id.nunique(), campaign_id=j.campaign_id.min()
        )

    # ---------------------------------------------------------------- summary

    @cached_property
    def report(self) -> CampaignReport:
        """The summary: attribution totals and one entry per campaign."""
        totals = self._df(attribution_counts(self._a, self._attr)).iloc[0]
        by_id: dict[str, int | None] = {"unknown_campaign_id": None, "without_campaign_id": None}
        if self._firsts is not None:
            ids = self._df(id_counts(self._firsts, self._c)).iloc[0]
            by_id = {k: int(ids[k] or 0) for k in by_id}
        played = {
            str(r["campaign_id"]): r
            for r in self._df(per_campaign(self._pp, self._c)).to_dict("records")
        }
        amb_df = self._df(ambiguous_per_campaign(self._attr, self._fits))
        amb = {str(k): int(v) for k, v in zip(amb_df.campaign_id, amb_df.ambiguous, strict=True)}
        entries = []
        for cid, t in self.campaigns.items():
            row = played.get(cid)
            reached = _int(row, "reached")
            rounds = _int(row, "rounds")
            exposure = money(t.bet * rounds, t.currency)
            budget = money(t.max_exposure, t.currency)
            entries.append(
                {
                    "campaign_id": cid,
                    "currency": t.currency,
                    "type": t.campaign_type,
                    "bet": money(t.bet, t.currency),
                    "bet_number": t.bet_number,
                    "start": t.start.astimezone(UTC),
                    "end": t.end.astimezone(UTC),
                    "time_zone": t.time_zone,
                    "assigned": len(t.players),
                    "reached": reached,
                    "completed": _int(row, "completed"),
                    "rounds_used": rounds,
                    "rounds_granted": t.granted,
                    "exposure_used": exposure,
                    "budget": budget,
                    "budget_used": float(exposure / budget) if budget else None,
                    "first_play": _moment(row, "first_us"),
                    "last_play": _moment(row, "last_us"),
                    "wait_p50_s": _float(row, "wait_p50_s"),
                    "wait_p90_s": _float(row, "wait_p90_s"),
                    "ambiguous": amb.get(cid, 0),
                }
            )
        return CampaignReport(
            source=self.log.source,
            actions=int(totals["actions"]),
            attributed=int(totals["attributed"] or 0),
            ambiguous=int(totals["ambiguous"] or 0),
            unattributed=int(totals["unattributed"] or 0),
            without_valid_delivery=int(totals["without_valid_delivery"] or 0),
            campaigns=tuple(entries),
            campaign_id_column=self.campaign_id_column,
            **by_id,
        )

    # ---------------------------------------------------------------- frames

    def players(self) -> pd.DataFrame:
        """Per campaign and player who played: ``rounds``, ``first_play``, ``last_play``
        (UTC), ``completed`` (used every round)."""
        df = self._df(self._pp.order_by(["campaign_id", "player_id"]))
        df["first_play"] = _times(df["first_us"])
        df["last_play"] = _times(df["last_us"])
        df["completed"] = [
            r >= self.campaigns[c].bet_number
            for c, r in zip(df["campaign_id"], df["rounds"], strict=True)
        ]
        return df[["campaign_id", "player_id", "rounds", "first_play", "last_play", "completed"]]

    def uptake(self) -> pd.DataFrame:
        """Per campaign and day of its window (day 0 = its first 24 hours from the start):
        ``date`` (the day's start, UTC), ``rounds``, ``new_players`` and the running
        ``reached`` (players who had played by the day's end)."""
        r_expr, n_expr = uptake(self._attr, self._pp)
        rounds, new = self._df(r_expr), self._df(n_expr)
        df = rounds.merge(new, on=["campaign_id", "day"], how="outer").fillna(0)
        df = df.sort_values(["campaign_id", "day"]).reset_index(drop=True)
        df["day"] = df["day"].astype("int64")
        df["rounds"] = df["rounds"].astype("int64")
        df["new_players"] = df["new_players"].astype("int64")
        df["reached"] = df.groupby("campaign_id")["new_players"].cumsum()
        df["date"] = [
            self.campaigns[c].start.astimezone(UTC) + timedelta(days=int(d))
            for c, d in zip(df["campaign_id"], df["day"], strict=True)
        ]
        return df[["campaign_id", "day", "date", "rounds", "new_players", "reached"]]

    def play_span(self) -> tuple[datetime, datetime] | None:
        """The first and the last event time of the log's valid deliveries (UTC), or
        ``None`` when it has none: a log whose span misses every campaign's window can
        attribute nothing by the rule (``gptools campaigns results`` says so)."""
        p = self._plays
        valid = p.filter(p.reason.isnull())
        span = self._df(valid.aggregate(first_us=valid.ts_us.min(), last_us=valid.ts_us.max()))
        row = span.to_dict("records")[0]
        first, last = _moment(row, "first_us"), _moment(row, "last_us")
        return None if first is None or last is None else (first, last)

    def apart_in_time(self) -> str | None:
        """One line when the log's events and the campaigns' windows do not overlap in
        time (nothing could be attributed by the rule, whatever the players), else
        ``None``; always ``None`` when the log's campaign id column attributes (the time
        is not looked at then)."""
        if self.campaign_id_column is not None or not self.campaigns:
            return None
        span = self.play_span()
        if span is None:
            return None
        first, last = span
        start = min(c.start for c in self.campaigns.values()).astimezone(UTC)
        end = max(c.end for c in self.campaigns.values()).astimezone(UTC)
        if first < end and last >= start:
            return None
        return (
            f"the log's events ({first:%Y-%m-%d %H:%M} – {last:%Y-%m-%d %H:%M} UTC) and the "
            f"campaigns' windows ({start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC) do not "
            "overlap in time: no event can be a campaign's (another log, or the campaigns "
            "of another server?)"
        )

    def unreached(self, campaign_id: str | None = None) -> pd.DataFrame:
        """The players never reached (no attributed play): ``campaign_id``, ``player_id``,
        a list to target again."""
        expr = unreached(self._pl, self._pp)
        if campaign_id is not None:
            expr = expr.filter(expr.campaign_id == campaign_id)
        return self._df(expr.select("campaign_id", "player_id"))


def campaign_results(
    source: str | Path | BaseDeliveryLog,
    campaigns: Iterable[Any],
    *,
    players: Mapping[str, Sequence[str]] | None = None,
    feature_event: str | None = spec.FEATURE_EVENT,
    format: LogFormat = "auto",
    mapping: ColumnMapping = DEFAULT_MAPPING,
    table: str = "delivery_log",
    engine: str = "duckdb",
    spark: Any = None,
    spark_master: str | None = None,
    memory_limit: str = DEFAULT_MEMORY_LIMIT,
    threads: int | None = None,
    temp_directory: str | Path | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    force: bool = False,
) -> CampaignResults:
    """The results of ``campaigns`` (:class:`CampaignTerms`, register records or alike)
    in a delivery log (any source :func:`analyze <._analysis.analyze>` reads, on either
    engine, with the same options: the log is opened by the same code).

    ``players`` adds players per campaign id (for example those a participant load
    acknowledged). ``feature_event`` is the event an awarded feature's use carries
    (``None``: the events are not looked at; assumption ``spec.CAMPAIGN_ATTRIBUTION``).
    """
    options = LogOptions(
        format=format, mapping=mapping, table=table, spark=spark, spark_master=spark_master,
        memory_limit=memory_limit, threads=threads, temp_directory=temp_directory,
        max_line_bytes=max_line_bytes, force=force,
    )  # fmt: skip
    terms = [CampaignTerms.of(c, (players or {}).get(str(c.campaign_id))) for c in campaigns]
    log = open_log(source, engine, options)
    try:
        return CampaignResults(log, terms, feature_event=feature_event)
    except BaseException:
        log.close()
        raise


def _epoch_us(moment: datetime) -> int:
    delta = moment.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return delta // timedelta(microseconds=1)


def _int(row: Mapping[Any, Any] | None, key: str) -> int:
    if row is None or pd.isna(row[key]):
        return 0
    return int(row[key])


def _float(row: Mapping[Any, Any] | None, key: str) -> float | None:
    if row is None or pd.isna(row[key]):
        return None
    value = float(row[key])
    return None if math.isnan(value) else value


def _moment(row: Mapping[Any, Any] | None, key: str) -> datetime | None:
    if row is None or pd.isna(row[key]):
        return None
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(row[key]))


def _times(us: pd.Series) -> list[datetime]:
    return [datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(v)) for v in us]
