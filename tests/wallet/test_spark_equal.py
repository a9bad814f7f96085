"""DuckDB and Spark reconcile the same ledger and log to the same report and the same
exception lists (one small ledger with every reason of rejection, in CSV and Parquet)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gptools.deliverylog._engines import LogOptions
from gptools.wallet import EXCEPTION_KINDS, reconcile
from tests.wallet.ledgers import REJECTED, TERMS, write, write_log


def _outcome(rec: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    doc = rec.report.to_dict()
    doc.pop("ledger"), doc.pop("log")
    lists = {k: rec.exceptions(k).astype(str).values.tolist() for k in EXCEPTION_KINDS}
    return doc, lists


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_both_engines_agree(tmp_path: Path, spark: Any, kind: str) -> None:
    log = write_log(tmp_path / "log.jsonl")
    source = write(tmp_path / f"ledger.{kind}", kind)
    with reconcile(source, log, [TERMS]) as rec:
        duck = _outcome(rec)
    options = LogOptions(spark=spark)
    with reconcile(source, log, [TERMS], engine="spark", options=options) as rec:
        sparks = _outcome(rec)
    assert duck == sparks
    assert duck[0]["rejected_by_reason"] == REJECTED
