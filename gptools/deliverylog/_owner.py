"""What an analysis that owns a delivery log (either engine's) does with it: closes it once, as a
context manager, and runs its expressions to frames."""

from __future__ import annotations

from typing import Any, Self

import ibis.expr.types as ir
import pandas as pd

from gptools.deliverylog._contract import BaseDeliveryLog


class LogOwner:
    """Base of :class:`DeliveryAnalysis` and :class:`CampaignResults`: both hold the engine
    behind ``self.log`` and a ``report`` that renders in a notebook."""

    log: BaseDeliveryLog
    report: Any

    def close(self) -> None:
        """Release the engine (DuckDB's connection and spill directory, Spark's cached
        tables)."""
        self.log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _repr_html_(self) -> str:
        html: str = self.report._repr_html_()
        return html

    def _df(self, expr: ir.Expr) -> pd.DataFrame:
        df: pd.DataFrame = self.log.execute(expr)
        return df
