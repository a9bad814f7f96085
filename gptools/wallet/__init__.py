"""The operator wallet's side of the campaigns: its ledger read (CSV, JSONL, Parquet, a
database table), reconciled with the delivery log per campaign and currency: the real
cost (the winnings credited) against the exposure, and the exceptions to act on.

Typical use::

    from gptools.wallet import reconcile
    with reconcile("ledger.parquet", "deliveries.parquet", register.campaigns()) as rec:
        rec.report                                # per campaign and currency; to_dict()
        rec.exceptions("undelivered_rounds")      # wallet rounds whose event never came
"""

from gptools.errors import require_extra as _require_extra

_require_extra("analysis", "The wallet reconciliation")

from gptools.deliverylog._ledger import LEDGER_FORMATS, LEDGER_REASONS, LedgerError  # noqa: E402
from gptools.deliverylog._ledger_layout import DEFAULT_LEDGER_MAPPING, LEDGER_FIELDS, LedgerMapping  # noqa: E402
from gptools.wallet._charts import plot_cost  # noqa: E402
from gptools.wallet._reconcile import (  # noqa: E402
    Reconciliation,
    ReconciliationReport,
    reconcile,
)
from gptools.wallet._rounds import EXCEPTION_KINDS  # noqa: E402

__all__ = [
    "DEFAULT_LEDGER_MAPPING",
    "EXCEPTION_KINDS",
    "LEDGER_FIELDS",
    "LEDGER_FORMATS",
    "LEDGER_REASONS",
    "LedgerError",
    "LedgerMapping",
    "Reconciliation",
    "ReconciliationReport",
    "plot_cost",
    "reconcile",
]
