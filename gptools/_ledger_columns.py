"""The wallet ledger's columns as the holdout uplift reads them (and the sandbox's paid
play writes them): one row per wallet transaction.

To be unified with the wallet ledger reader's layout (issue 37, item 1), whose default is
an assumption in :mod:`gptools.spec`; until then this module is the one place that names
the columns. Imports nothing of ours, so the sandbox and the analyser can both read it.
"""

from __future__ import annotations

from typing import Final

TRANSACTION_ID: Final = "transaction_id"
ROUND_ID: Final = "round_id"
PLAYER_ID: Final = "player_id"
GAME_ID: Final = "game_id"
CURRENCY: Final = "currency"
#: The amount moved, a non-negative decimal in the currency's units.
AMOUNT: Final = "amount"
#: ``debit`` (a bet taken), ``credit`` (a win paid) or ``rollback`` (a debit given back).
KIND: Final = "kind"
#: Whether the transaction is a free round's (``freeRounds=true`` in the wallet call).
FREE_ROUND: Final = "free_round"
#: When the wallet recorded it, with its zone (ISO 8601 with an offset or ``Z``).
TIMESTAMP: Final = "timestamp"

#: Every column, in the order the sandbox writes them.
LEDGER_COLUMNS: Final = (
    TRANSACTION_ID, ROUND_ID, PLAYER_ID, GAME_ID, CURRENCY, AMOUNT, KIND, FREE_ROUND, TIMESTAMP,
)  # fmt: skip
#: The values of :data:`KIND`.
DEBIT: Final = "debit"
CREDIT: Final = "credit"
ROLLBACK: Final = "rollback"
KINDS: Final = (DEBIT, CREDIT, ROLLBACK)
#: What the uplift needs of a ledger: a paid round's net gaming revenue per player.
UPLIFT_COLUMNS: Final = (PLAYER_ID, CURRENCY, AMOUNT, KIND, FREE_ROUND, TIMESTAMP)
