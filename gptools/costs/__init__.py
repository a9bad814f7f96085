"""Awarded-feature costs: exact arithmetic, the three sources, cross-checks and previews.

Feature Cost = Base Bet × Price Multiplier, in :class:`~decimal.Decimal`, rounded to the
currency's minor units by its own exponent (from Babel). For an AWARDED_FEATURE campaign the
``bet`` is this total cost, never the base bet. The three sources the API document allows
(the configurations endpoint, the game endpoint, a stored file) each give the same tidy
table (see :mod:`gptools.costs._tables` for its columns and the stored file format);
:func:`cross_check` compares any two, naming
each :class:`Difference`; :class:`CostSource` names the sources.
"""

from gptools.costs._crosscheck import (
    CrossCheck,
    Difference,
    cross_check,
)
from gptools.costs._money import (
    UnknownCurrencyError,
    currency_exponent,
    currency_suggestions,
    feature_cost,
    format_money,
    minor_unit,
    round_money,
)
from gptools.costs._preview import (
    CatalogueClient,
    CostBook,
    cost_book,
    cost_chart,
    preview,
)
from gptools.costs._tables import (
    COLUMNS,
    STORED_COLUMNS,
    CostRow,
    CostSource,
    StoredTableError,
    available_costs,
    combine,
    read_stored_table,
    rows_of,
    table_from_configurations,
    table_from_game,
    write_stored_table,
)

__all__ = [
    "COLUMNS",
    "STORED_COLUMNS",
    "CatalogueClient",
    "CostBook",
    "CostRow",
    "CostSource",
    "CrossCheck",
    "Difference",
    "StoredTableError",
    "UnknownCurrencyError",
    "available_costs",
    "combine",
    "cost_book",
    "cost_chart",
    "cross_check",
    "currency_exponent",
    "currency_suggestions",
    "feature_cost",
    "format_money",
    "minor_unit",
    "preview",
    "read_stored_table",
    "round_money",
    "rows_of",
    "table_from_configurations",
    "table_from_game",
    "write_stored_table",
]
