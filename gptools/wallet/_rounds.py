"""The reconciliation's relations, as Ibis expressions on the delivery log's engine: the
ledger's rows folded into rounds, each round's campaign, and the exceptions. Pure
expressions; :mod:`._reconcile` runs them."""

from __future__ import annotations

from types import ModuleType

import ibis
import ibis.expr.types as ir

from gptools.deliverylog._ledger_layout import CREDIT, DEBIT, ROLLBACK

#: The exception lists, each a list to act on, in the order the report shows them.
EXCEPTION_KINDS: tuple[str, ...] = (
    "debit_without_credit",
    "credit_without_debit",
    "rollbacks",
    "unattributed_debits",
    "undelivered_rounds",
    "events_without_wallet_round",
    "players_over_bet_number",
    "debit_amount_mismatch",
)


def reasons(rows: ir.Table) -> ir.Table:
    """Per reason (NULL: used), the rows and, of the used ones, the free-round rows."""
    return rows.group_by("reason").aggregate(
        rows=rows.count(), free_round_rows=rows.free_round.fill_null(False).sum()
    )


def rounds(x: ModuleType, rows: ir.Table) -> ir.Table:
    """Per round id of the used free-round rows: how many debits, credits and rollbacks,
    their amounts, the round's player, game and currency, and its debit's time and amount
    in the form the attribution rule compares (``bet``, ``ts_us``; the first debit's)."""
    r = rows.filter(rows.reason.isnull() & rows.free_round)
    debit, credit, rollback = r.kind == DEBIT, r.kind == CREDIT, r.kind == ROLLBACK
    ts_us = x.epoch_us(r.ts)
    return r.group_by("round_id").aggregate(
        debits=debit.sum(),
        credits=credit.sum(),
        rollbacks=rollback.sum(),
        debited=r.amount.sum(where=debit),
        credited=r.amount.sum(where=credit),
        bet=r.amount.min(where=debit),
        player_id=r.player_id.min(),
        game_id=r.game_id.min(),
        currency_code=r.currency_code.min(),
        ts_us=ts_us.min(where=debit),
        first_us=ts_us.min(),
    )


def event_rounds(events: ir.Table, rounds: ir.Table) -> ir.Table:
    """Per round id of ``rounds`` (the wallet's) that the log's valid actions name:
    ``events`` (how many actions name it), ``event_campaign`` and ``event_campaign_last``
    (the first and last campaign its attributed actions name: one campaign when both are
    the same). The log's other rounds (paid play) are left out before grouping."""
    events = events.semi_join(rounds, "round_id")
    # One campaign exactly when the smallest and the largest named are the same: what a
    # distinct count would say, without a set of values per round.
    return events.group_by("round_id").aggregate(
        events=events.count(),
        event_campaign=events.campaign_id.min(),
        event_campaign_last=events.campaign_id.max(),
    )


def _one_campaign(ev: ir.Table) -> ir.Value:
    """Whether a round's game events name exactly one campaign (then it is the round's)."""
    one: ir.Value = ev.event_campaign.notnull() & (ev.event_campaign == ev.event_campaign_last)
    return one


def rule_candidates(r: ir.Table, ev: ir.Table) -> ir.Table:
    """The debited wallet rounds whose game events name no single campaign: the only ones
    the assumed rule can attribute (an event's campaign comes first), in the columns
    :meth:`~gptools.deliverylog.CampaignResults.rule_fits` takes."""
    debited = r.filter(r.debits > 0).anti_join(ev.filter(_one_campaign(ev)), "round_id")
    return debited.select("round_id", "player_id", "game_id", "currency_code", "bet", "ts_us")


def attributed_rounds(r: ir.Table, ev: ir.Table, fits: ir.Table) -> ir.Table:
    """Every wallet round with its campaign: its game event's (``by`` ``event``), else the
    assumed rule applied to its debit (``rule``, ``fits`` of :func:`rule_candidates`),
    else none; ``delivered`` whether the log has a valid game event of the round."""
    j = r.left_join(ev, "round_id").left_join(fits, "round_id")
    by_event = _one_campaign(j)
    by_rule = j.campaigns.fill_null(0) == 1
    return j.select(
        "round_id", "debits", "credits", "rollbacks", "debited", "credited", "bet", "player_id",
        "game_id", "currency_code", "first_us",
        campaign_id=ibis.cases(
            (by_event, j.event_campaign), (by_rule, j.campaign_id), else_=ibis.null("string")
        ),
        by=ibis.cases((by_event, "event"), (by_rule, "rule"), else_=ibis.null("string")),
        delivered=j.events.fill_null(0) > 0,
    )  # fmt: skip


def counted(ra: ir.Table) -> ir.Value:
    """A round that counts as played: debited and not rolled back."""
    result: ir.Value = (ra.debits > 0) & (ra.rollbacks == 0)
    return result


def per_campaign(ra: ir.Table) -> ir.Table:
    """Per campaign: wallet rounds (debited, not rolled back), settled ones (a credit
    too), delivered ones, the amounts debited and credited (the winnings: the real cost),
    and the exception counts that belong to a campaign."""
    a = ra.filter(ra.campaign_id.notnull())
    played = counted(a)
    return a.group_by("campaign_id").aggregate(
        wallet_rounds=played.sum(),
        settled=(played & (a.credits > 0)).sum(),
        delivered_rounds=(played & a.delivered).sum(),
        debited=a.debited.sum(where=played),
        winnings=a.credited.sum(where=a.rollbacks == 0),
        by_event=(a.by == "event").sum(),
        by_rule=(a.by == "rule").sum(),
    )


def exception_rounds(ra: ir.Table, kind: str) -> ir.Table:
    """The rounds of one round-level exception kind."""
    if kind == "debit_without_credit":
        return ra.filter(counted(ra) & (ra.credits == 0))
    if kind == "credit_without_debit":
        return ra.filter((ra.credits > 0) & (ra.debits == 0))
    if kind == "rollbacks":
        return ra.filter(ra.rollbacks > 0)
    if kind == "unattributed_debits":
        return ra.filter((ra.debits > 0) & ra.campaign_id.isnull())
    if kind == "undelivered_rounds":
        return ra.filter(counted(ra) & ~ra.delivered)
    raise ValueError(f"not a round-level exception: {kind}")


def events_without_round(events: ir.Table, r: ir.Table) -> ir.Table:
    """The attributed game events whose round id has no free-round row in the ledger."""
    attributed = events.filter(events.campaign_id.notnull())
    return attributed.anti_join(r, "round_id")


def players_over(ra: ir.Table, terms: ir.Table) -> ir.Table:
    """Per campaign and player with more played wallet rounds than the campaign's
    betNumber: ``rounds``, ``bet_number`` (a provider-side over-grant)."""
    a = ra.filter(ra.campaign_id.notnull() & counted(ra))
    per = a.group_by(["campaign_id", "player_id"]).aggregate(rounds=a.count())
    j = per.inner_join(terms.select("campaign_id", "bet_number"), "campaign_id")
    return j.filter(j.rounds > j.bet_number)


def amount_mismatch(ra: ir.Table, terms: ir.Table) -> ir.Table:
    """The played wallet rounds of a campaign whose debited amount is not the campaign's
    bet (a second debit included): ``campaign_bet`` beside ``debited``."""
    a = ra.filter(ra.campaign_id.notnull() & counted(ra))
    j = a.inner_join(terms.select("campaign_id", campaign_bet=terms.bet), "campaign_id")
    return j.filter(j.debited != j.campaign_bet)


def exception_counts(ra: ir.Table, events: ir.Table, r: ir.Table, terms: ir.Table) -> ir.Table:
    """Per exception kind and campaign (NULL: none): how many, every kind in one relation
    (the report counts on the engine; the lists are read only when asked for)."""
    parts = []
    for k in EXCEPTION_KINDS[:5]:
        e = exception_rounds(ra, k)
        parts.append(e.group_by("campaign_id").aggregate(n=e.count()).mutate(kind=ibis.literal(k)))
    ew = events_without_round(events, r)
    parts.append(
        ew.group_by("campaign_id")
        .aggregate(n=ew.count())
        .mutate(kind=ibis.literal("events_without_wallet_round"))
    )
    po = players_over(ra, terms)
    parts.append(
        po.group_by("campaign_id")
        .aggregate(n=po.count())
        .mutate(kind=ibis.literal("players_over_bet_number"))
    )
    am = amount_mismatch(ra, terms)
    parts.append(
        am.group_by("campaign_id")
        .aggregate(n=am.count())
        .mutate(kind=ibis.literal("debit_amount_mismatch"))
    )
    return ibis.union(*[p.select("kind", "campaign_id", "n") for p in parts])
