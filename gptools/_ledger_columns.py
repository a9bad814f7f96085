"""The wallet ledger's columns by name, for the code that reads or writes a ledger in its
assumed default layout (the sandbox's paid play).

The layout itself is written once, in :data:`gptools.spec.WALLET_LEDGER_COLUMNS` and
:data:`gptools.spec.WALLET_LEDGER_TYPES` (an assumption: the document does not show the
wallet interface); this module only gives each column a name to import, so a change there
is a change here.
"""

from __future__ import annotations

from typing import Final

from gptools import spec

(
    TRANSACTION_ID,
    ROUND_ID,
    PLAYER_ID,
    GAME_ID,
    CURRENCY,
    AMOUNT,
    KIND,
    FREE_ROUND,
    TIMESTAMP,
) = spec.WALLET_LEDGER_COLUMNS

#: Every column, in the order the ledger is written.
LEDGER_COLUMNS: Final = spec.WALLET_LEDGER_COLUMNS
#: The values of :data:`KIND`: a debit (a bet taken), a credit (a win paid), a rollback.
DEBIT, CREDIT, ROLLBACK = spec.WALLET_LEDGER_TYPES
KINDS: Final = spec.WALLET_LEDGER_TYPES
