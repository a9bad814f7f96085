"""What the operator's wallet records when the sandbox's players play free rounds.

For each played round the service sends the wallet a debit flagged ``freeRounds=true``
and then a credit with the winnings (the document's sequence); the model adds what a
real ledger holds too, each seeded: a rollback now and then (the debit given back, no
credit, and no game event), rounds whose game event is never delivered (a lost
delivery), and one of each decoy the reconciliation must find: a debit with no credit, a
credit with no debit, a debit of another amount than the bet, a player given one round
more than ``betNumber`` (delivered), a game event whose round the wallet never saw, a free
round of another campaign, and two paid rows.

:func:`wallet_side` is a pure function of (seed, what was played): the ledger's rows in
the assumed layout (``spec.WALLET_LEDGER_COLUMNS``), the events to deliver, and the truth
every reconciled number is checked against, tallied from the construction.
"""

from __future__ import annotations

import csv
import io
import os
import random
import uuid
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from gptools import spec
from gptools._private_files import private_replacement
from gptools.models import GameEventNotification
from gptools.sandbox._catalogue import minor_unit_exponent
from gptools.sandbox._paid_play import WIN_MULTIPLIERS
from gptools.sandbox._players import CampaignPlayed

#: The model's defaults: rounds rolled back, rounds whose event is never delivered, rounds
#: that win something, and the win multipliers of the bet a winning round draws from.
DEFAULT_ROLLBACK_SHARE = 0.03
DEFAULT_UNDELIVERED_SHARE = 0.03
#: The exception kinds the truth lists round ids (or players) for.
TRUTH_KINDS = (
    "debit_without_credit", "credit_without_debit", "rollbacks", "unattributed_debits",
    "undelivered_rounds", "events_without_wallet_round", "players_over_bet_number",
    "debit_amount_mismatch",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class WalletModel:
    """How the wallet side is drawn: shares of rollbacks and undelivered rounds, and
    whether the decoys are added; ``seed`` makes it reproducible. A round's win is its bet
    times one of the paid play's :data:`~gptools.sandbox._paid_play.WIN_MULTIPLIERS`."""

    seed: int = 0
    rollback_share: float = DEFAULT_ROLLBACK_SHARE
    undelivered_share: float = DEFAULT_UNDELIVERED_SHARE
    decoys: bool = True

    def __post_init__(self) -> None:
        for name in ("rollback_share", "undelivered_share"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value}")


@dataclass(frozen=True, slots=True)
class CampaignWallet:
    """The wallet side of one campaign's play: ledger rows (dicts in the assumed layout),
    the events to deliver, and the truth (:meth:`truth`)."""

    campaign_id: str
    currency: str
    rows: tuple[dict[str, Any], ...] = field(repr=False)
    delivered: tuple[GameEventNotification, ...] = field(repr=False)
    counts: Mapping[str, Any] = field(repr=False)
    lists: Mapping[str, tuple[str, ...]] = field(repr=False)

    def truth(self) -> dict[str, Any]:
        """What the reconciliation must find for this campaign (money as Decimals), and
        the exception lists (round ids; players for ``players_over_bet_number``)."""
        exceptions = {k: list(v) for k, v in self.lists.items()}
        return {"campaignId": self.campaign_id, "currency": self.currency, **self.counts,
                "exceptions": exceptions}  # fmt: skip


def _ts(moment: datetime) -> str:
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def wallet_side(
    played: CampaignPlayed, body: Mapping[str, Any], model: WalletModel = WalletModel()
) -> CampaignWallet:
    """The wallet side of ``played`` (a campaign's play, its stored request ``body``)."""
    cid = played.campaign_id
    currency = str(body["currencyCode"])
    bet = Decimal(str(body["bet"]))
    quantum = minor_unit_exponent(currency)
    rng = random.Random(f"{model.seed}:{cid}:wallet")
    rows: list[dict[str, Any]] = []
    lists: dict[str, list[str]] = defaultdict(list)
    tx = iter(range(1, 10**9))

    def row(e: GameEventNotification, kind: str, amount: Decimal, *, free: bool = True,
            round_id: str | None = None, player: str | None = None, game: str | None = None,
            delay: int = 0) -> None:  # fmt: skip
        rows.append({
            "transaction_id": f"{cid}-T{next(tx):07d}",
            "round_id": round_id or e.round_id,
            "player_id": player or e.player_id,
            "game_id": game or e.game_id,
            "currency": currency,
            "amount": amount,
            "type": kind,
            "free_round": "true" if free else "false",
            "timestamp": _ts(e.timestamp + timedelta(milliseconds=delay)),
        })  # fmt: skip

    events = list(played.events)
    # The decoys' rounds: distinct, fixed by position (the earliest rounds).
    decoy: dict[str, str] = {}
    if model.decoys and len(events) >= 3:
        decoy = {
            n: events[i].round_id for i, n in enumerate(("no_credit", "mismatch", "no_wallet"))
        }
    special = set(decoy.values())
    delivered: list[GameEventNotification] = []
    winnings = debited = Decimal(0)
    wallet_rounds = settled = delivered_rounds = game_events = 0
    per_player: Counter[str] = Counter()
    for e in events:
        r = e.round_id
        if r == decoy.get("no_wallet"):
            delivered.append(e)
            game_events += 1
            lists["events_without_wallet_round"].append(r)
            continue
        amount = bet + quantum if r == decoy.get("mismatch") else bet
        row(e, "debit", amount)
        if r not in special and rng.random() < model.rollback_share:
            row(e, "rollback", amount, delay=500)
            lists["rollbacks"].append(r)
            continue
        wallet_rounds += 1
        per_player[e.player_id] += 1
        debited += amount
        if r == decoy.get("no_credit"):
            lists["debit_without_credit"].append(r)
        else:
            # The paid rounds' win table: a free round plays the same game (return to
            # player RTP), so its winnings are below its bet on average, not always.
            win = (bet * rng.choice(WIN_MULTIPLIERS)).quantize(quantum)
            row(e, "credit", win, delay=900)
            winnings += win
            settled += 1
        if r == decoy.get("mismatch"):
            lists["debit_amount_mismatch"].append(r)
        if r not in special and rng.random() < model.undelivered_share:
            lists["undelivered_rounds"].append(r)
        else:
            delivered.append(e)
            delivered_rounds += 1
            game_events += 1
    if decoy:
        first = events[0]
        # A player given one round more than betNumber (delivered): one who used them all.
        full = sorted(p for p, n in per_player.items() if n >= played.bet_number)
        if full:
            p = full[0]
            own = next(e for e in events if e.player_id == p)
            extra = own.model_copy(
                update={
                    "round_id": f"R-{rng.getrandbits(48):012x}",
                    "action_id": uuid.UUID(int=rng.getrandbits(128), version=4),
                    "timestamp": own.timestamp + timedelta(microseconds=1),
                }
            )
            row(extra, "debit", bet)
            row(extra, "credit", bet, delay=900)
            delivered.append(extra)
            wallet_rounds += 1
            settled += 1
            delivered_rounds += 1
            game_events += 1
            debited += bet
            winnings += bet
            per_player[p] += 1
        # A free round of another campaign: another player and game, never delivered.
        foreign = f"R-{rng.getrandbits(48):012x}"
        row(first, "debit", bet, round_id=foreign, player=f"other-{cid}", game="other-game")
        row(first, "credit", Decimal(0), round_id=foreign, player=f"other-{cid}",
            game="other-game", delay=900)  # fmt: skip
        lists["unattributed_debits"].append(foreign)
        lists["undelivered_rounds"].append(foreign)
        # A credit with no debit (no event either).
        orphan = f"R-{rng.getrandbits(48):012x}"
        row(first, "credit", bet, round_id=orphan, delay=900)
        lists["credit_without_debit"].append(orphan)
        # Two paid rows (a paid round), outside the free-round reconciliation.
        paid = f"R-{rng.getrandbits(48):012x}"
        row(first, "debit", bet, round_id=paid, free=False)
        row(first, "credit", Decimal(0), round_id=paid, free=False, delay=900)
    over = sorted(p for p, n in per_player.items() if n > played.bet_number)
    lists["players_over_bet_number"] = over
    for kind in ("debit_without_credit", "credit_without_debit", "unattributed_debits",
                 "undelivered_rounds"):  # fmt: skip
        lists.setdefault(kind, [])
    counts = {
        "roundsGranted": played.participants * played.bet_number,
        "gameEvents": game_events,
        "walletRounds": wallet_rounds,
        "settledRounds": settled,
        "deliveredRounds": delivered_rounds,
        "debited": debited,
        "winnings": winnings,
        "ledgerRows": len(rows),
        "freeRoundRows": sum(1 for r in rows if r["free_round"] == "true"),
    }
    delivered.sort(key=lambda e: (e.timestamp, str(e.action_id)))
    return CampaignWallet(
        cid, currency, tuple(rows), tuple(delivered), counts,
        {k: tuple(sorted(lists.get(k, ()))) for k in TRUTH_KINDS},
    )  # fmt: skip


def ledger_csv(wallets: Sequence[CampaignWallet]) -> str:
    """The ledger of ``wallets`` as CSV text in the assumed layout (a header line, money
    as its digits, timestamps ISO 8601 UTC with ``Z``)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(spec.WALLET_LEDGER_COLUMNS), lineterminator="\n")
    writer.writeheader()
    for w in wallets:
        for r in w.rows:
            writer.writerow({**r, "amount": str(r["amount"])})
    return out.getvalue()


def write_ledger(path: str | os.PathLike[str], wallets: Sequence[CampaignWallet]) -> Path:
    """Write the ledger of ``wallets`` to ``path`` as CSV (:func:`ledger_csv`): owner-only,
    whole or not at all, like the truth file."""
    with private_replacement(path) as fh:
        fh.write(ledger_csv(wallets).encode())
    return Path(path)
