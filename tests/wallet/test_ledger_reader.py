"""The ledger reader: every format the same answer, every bad row counted by its reason
(rows = used + rejected), another layout through a mapping, clear refusals."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gptools.wallet import LedgerError, LedgerMapping, reconcile
from tests.wallet.ledgers import GOOD, REJECTED, ROWS, TERMS, csv_text, write, write_log

PG = "postgresql://postgres@127.0.0.1:5432/test"


def _check(report: Any) -> None:
    assert report.rows == len(ROWS)
    assert report.rejected_by_reason == REJECTED
    assert report.used == len(GOOD) and report.rejected == len(ROWS) - len(GOOD)
    assert report.free_round_rows == 6 and report.paid_rows == 2
    assert report.identity_holds
    (entry,) = report.campaigns
    assert entry["wallet_rounds"] == 2  # R1, R2; R3 rolled back
    assert entry["game_events"] == 2
    assert entry["winnings"] == Decimal("1.25")
    assert entry["debited"] == Decimal("1.00")
    assert entry["exposure_used"] == Decimal("1.00")
    assert entry["cost_share"] == 1.25
    assert entry["cost_per_reached"] == Decimal("1.2500")
    assert report.exceptions["rollbacks"] == 1


@pytest.mark.parametrize(
    "kind", ["csv", "csv.gz", "csv.zst", "jsonl", "jsonl.gz", "jsonl.zst", "parquet", "sqlite"]
)
def test_every_format_gives_the_same_answer(tmp_path: Path, kind: str) -> None:
    log = write_log(tmp_path / "log.jsonl")
    # A compressed file is told by its first bytes, whatever its name says.
    name = "ledger.sqlite" if kind == "sqlite" else f"ledger.{kind.split('.')[0]}"
    source = write(tmp_path / name, kind)
    with reconcile(source, log, [TERMS]) as rec:
        _check(rec.report)


@pytest.fixture
def pg_table() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    import uuid

    schema = f"ledger_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{schema}"')
        cols = ", ".join(f"{c} text" for c in ROWS[0])
        db.execute(f'CREATE TABLE "{schema}".tx ({cols})')
        with db.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".tx VALUES ({", ".join(["%s"] * len(ROWS[0]))})',
                [tuple(v or None for v in r.values()) for r in ROWS],
            )
    try:
        yield schema
    finally:
        with psycopg.connect(PG, autocommit=True) as db:
            db.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_a_postgresql_table(tmp_path: Path, pg_table: str) -> None:
    log = write_log(tmp_path / "log.jsonl")
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/test?schema={pg_table}"
    with reconcile(url, log, [TERMS], ledger_table="tx") as rec:
        _check(rec.report)


@pytest.mark.parametrize("kind", ["csv", "sqlite"])
def test_another_layout_through_a_mapping(tmp_path: Path, kind: str) -> None:
    names = {"transaction_id": "tx", "type": "kind", "amount": "value"}
    words = {"debit": "bet", "credit": "win", "rollback": "refund", "CREDIT": "WIN"}
    rows = [
        {names.get(k, k): (words.get(v, v) if k == "type" else v) for k, v in r.items()}
        for r in ROWS
    ]
    source: str | Path = tmp_path / f"ledger.{kind}"
    if kind == "csv":
        Path(source).write_text(csv_text(rows, list(rows[0])))
    else:
        # A database's table is read through the mapping too (its copy names fields).
        with contextlib.closing(sqlite3.connect(source)) as db, db:
            db.execute(f"CREATE TABLE wallet_ledger ({', '.join(rows[0])})")
            db.executemany(
                f"INSERT INTO wallet_ledger VALUES ({', '.join('?' * len(rows[0]))})",
                [tuple(v or None for v in r.values()) for r in rows],
            )
        source = f"sqlite:///{source}"
    mapping = LedgerMapping(
        transaction_id="tx", type="kind", amount="value",
        types={"bet": "debit", "win": "credit", "refund": "rollback"},
    )  # fmt: skip
    with reconcile(source, write_log(tmp_path / "log.jsonl"), [TERMS], mapping=mapping) as rec:
        _check(rec.report)


def test_refusals_name_the_problem(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl")
    (tmp_path / "x.txt").write_text("hello\n")
    with pytest.raises(LedgerError, match="cannot tell the ledger format"):
        reconcile(tmp_path / "x.txt", log, [TERMS])
    with pytest.raises(LedgerError, match="no such file"):
        reconcile(tmp_path / "none.csv", log, [TERMS])
    (tmp_path / "l.csv").write_text("a,b\n1,2\n")
    with pytest.raises(LedgerError, match=r"no column for transaction_id \('transaction_id'\)"):
        reconcile(tmp_path / "l.csv", log, [TERMS])
    with pytest.raises(LedgerError, match="no such SQLite file"):
        reconcile(f"sqlite:///{tmp_path}/none.sqlite", log, [TERMS])
    with pytest.raises(ValueError, match="each value must be one of"):
        LedgerMapping(types={"bet": "wager"})


def test_a_broken_line_past_the_sniffed_start_is_refused_in_one_line(tmp_path: Path) -> None:
    # DuckDB sniffs the first 20,480 rows: a line with other columns after them is found
    # only when the whole file is read, and named then, never a traceback of the engine.
    path = tmp_path / "ledger.csv"
    good = csv_text(GOOD)
    body = "".join(good.splitlines(keepends=True)[1:])
    path.write_text(good + body * 3000 + "a,b,c,d,e,f,g,h,i,j,k,l\n")
    with pytest.raises(LedgerError, match=r"ledger\.csv: cannot be read: "):
        reconcile(path, write_log(tmp_path / "log.jsonl"), [TERMS])
