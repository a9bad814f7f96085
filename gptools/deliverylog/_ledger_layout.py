"""The wallet ledger's layout: which column holds which field, and how the ledger writes
a transaction's type and the free-round flag. The default is the assumption
``spec.WALLET_LEDGER_COLUMNS`` (the wallet interface is not in the provider's document);
:class:`LedgerMapping` names another ledger's columns and values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gptools import spec

#: The fields of a ledger row, as the reconciliation names them, in the layout's order.
LEDGER_FIELDS: tuple[str, ...] = spec.WALLET_LEDGER_COLUMNS
#: The transaction types, as the reconciliation names them.
DEBIT, CREDIT, ROLLBACK = spec.WALLET_LEDGER_TYPES


def _default_types() -> Mapping[str, str]:
    return MappingProxyType({t: t for t in spec.WALLET_LEDGER_TYPES})


def _default_flags() -> Mapping[str, bool]:
    return MappingProxyType(dict(spec.WALLET_FREE_ROUND_VALUES))


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerMapping:
    """Where each field of the assumed ledger layout lives in a ledger written by another
    wallet, and how it writes the transaction type and the free-round flag.

    Each column attribute names the source column (JSONL: top-level key; CSV: header)
    holding that field. ``types`` maps the ledger's own type values (compared without
    regard to case) to ``debit``, ``credit`` or ``rollback``; a value it does not name is
    a rejected row. ``free_round_values`` maps the flag's text to true or false.

    >>> LedgerMapping(transaction_id="tx", type="kind",
    ...               types={"bet": "debit", "win": "credit", "refund": "rollback"})
    ...  # doctest: +ELLIPSIS
    LedgerMapping(...)
    """

    transaction_id: str = "transaction_id"
    round_id: str = "round_id"
    player_id: str = "player_id"
    game_id: str = "game_id"
    currency: str = "currency"
    amount: str = "amount"
    type: str = "type"
    free_round: str = "free_round"
    timestamp: str = "timestamp"
    types: Mapping[str, str] = field(default_factory=_default_types)
    free_round_values: Mapping[str, bool] = field(default_factory=_default_flags)

    def __post_init__(self) -> None:
        for name in LEDGER_FIELDS:
            if not getattr(self, name):
                raise ValueError(f"LedgerMapping.{name} must name a column")
        wrong = sorted(v for v in self.types.values() if v not in spec.WALLET_LEDGER_TYPES)
        if wrong:
            raise ValueError(
                f"LedgerMapping.types maps to {', '.join(wrong)}; each value must be one of "
                f"{', '.join(spec.WALLET_LEDGER_TYPES)}"
            )
        if not self.types:
            raise ValueError("LedgerMapping.types is empty")
        object.__setattr__(
            self, "types", MappingProxyType({k.lower(): v for k, v in self.types.items()})
        )
        object.__setattr__(
            self,
            "free_round_values",
            MappingProxyType({k.lower(): bool(v) for k, v in self.free_round_values.items()}),
        )

    def columns(self) -> dict[str, str]:
        """Field name -> the source column holding it, in the layout's order."""
        return {name: getattr(self, name) for name in LEDGER_FIELDS}

    def with_columns(self, columns: Mapping[str, str]) -> LedgerMapping:
        """This mapping with some fields' columns renamed (``--ledger-column FIELD=NAME``); an
        unknown field is a ``ValueError`` naming the known ones."""
        unknown = sorted(set(columns) - set(LEDGER_FIELDS))
        if unknown:
            raise ValueError(
                f"no ledger field {', '.join(unknown)}; the fields are {', '.join(LEDGER_FIELDS)}"
            )
        values = {**self.columns(), **columns}
        return LedgerMapping(**values, types=self.types, free_round_values=self.free_round_values)


DEFAULT_LEDGER_MAPPING = LedgerMapping()
