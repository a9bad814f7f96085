"""A small ledger that knows its own answer, written in every format the reader takes,
and the delivery log of its rounds."""

from __future__ import annotations

import csv
import gzip
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from gptools import spec
from gptools.deliverylog import CampaignTerms
from gptools.models import dumps_wire

START = datetime(2030, 3, 1, tzinfo=UTC)
TERMS = CampaignTerms(
    campaign_id="C1", campaign_type="FREE_ROUNDS", currency="EUR", bet=Decimal("0.50"),
    bet_number=3, game_ids=("g1",), start=START, end=START + timedelta(days=7),
    players=("p1", "p2"),
)  # fmt: skip
COLUMNS = list(spec.WALLET_LEDGER_COLUMNS)


def _row(n: int, round_id: str, kind: str, amount: str, **changes: str) -> dict[str, str]:
    at = START + timedelta(hours=n)
    row = {
        "transaction_id": f"T{n}", "round_id": round_id, "player_id": "p1", "game_id": "g1",
        "currency": "EUR", "amount": amount, "type": kind, "free_round": "true",
        "timestamp": at.isoformat().replace("+00:00", "Z"),
    }  # fmt: skip
    row.update(changes)
    return row


#: Good rows: R1 and R2 settled (winnings 1.25 + 0.00), R3 rolled back, one paid round.
GOOD = [
    _row(1, "R1", "debit", "0.50"),
    _row(2, "R1", "CREDIT", "1.25"),
    _row(3, "R2", "debit", "0.50", timestamp="2030-03-01T05:00:00+02:00"),
    _row(4, "R2", "credit", "0"),
    _row(5, "R3", "debit", "0.50"),
    _row(6, "R3", "rollback", "0.50"),
    _row(7, "P1", "debit", "2.00", free_round="false"),
    _row(8, "P1", "credit", "0.00", free_round="0"),
]
#: Bad rows, one per reason, each with the reason it must be rejected for.
BAD = [
    (_row(20, "", "debit", "0.50"), "missing:round_id"),
    (_row(21, "R9", "bonus", "0.50"), "bad_value:type"),
    (_row(22, "R9", "debit", "0.50", free_round="maybe"), "bad_value:free_round"),
    (_row(23, "R9", "debit", "1.2.3"), "bad_format:amount"),
    (_row(24, "R9", "debit", "-1"), "bad_format:amount"),
    (_row(25, "R9", "debit", "0.50", timestamp="2030-03-02T10:00:00"), "has_no_zone:timestamp"),
    (_row(26, "R9", "debit", "0.50", timestamp="2030-02-30T10:00:00Z"), "bad_format:timestamp"),
]
ROWS = GOOD + [r for r, _ in BAD]
REJECTED = {
    "bad_format:amount": 2, "bad_format:timestamp": 1, "bad_value:free_round": 1,
    "bad_value:type": 1, "has_no_zone:timestamp": 1, "missing:round_id": 1,
}  # fmt: skip


def write_log(path: Path) -> Path:
    """The log: the events of R1 and R2 (R1 delivered twice), acknowledged."""
    lines = []
    for i, (round_id, hour) in enumerate((("R1", 1), ("R1", 1), ("R2", 3))):
        at = START + timedelta(hours=hour)
        payload = {
            "roundId": round_id, "gameId": "g1", "playerId": "p1",
            "timestamp": at.replace(tzinfo=None).isoformat(timespec="microseconds"),
            "bet": Decimal("0.50"), "currencyCode": "EUR", "events": ["COIN"],
            "actionId": f"00000000-0000-4000-8000-00000000000{1 if round_id == 'R1' else 2}",
        }  # fmt: skip
        received = (at + timedelta(seconds=1 + i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        line = {"received_at": received, "status": 200, "latency_ms": 3, "payload": payload}
        lines.append(dumps_wire(line) + b"\n")
    path.write_bytes(b"".join(lines))
    return path


def csv_text(rows: list[dict[str, str]], columns: list[str] = COLUMNS) -> str:
    import io

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def write(path: Path, kind: str, rows: list[dict[str, str]] = ROWS) -> str:
    """Write ``rows`` as ``kind``; return the source to name."""
    if kind == "csv":
        path.write_text(csv_text(rows))
    elif kind == "csv.gz":
        path.write_bytes(gzip.compress(csv_text(rows).encode()))
    elif kind in ("csv.zst", "jsonl.zst"):
        text = csv_text(rows) if kind == "csv.zst" else _jsonl(rows)
        with pa.output_stream(str(path), compression="zstd") as out:
            out.write(text.encode())
    elif kind == "jsonl":
        path.write_text(_jsonl(rows))
    elif kind == "jsonl.gz":
        path.write_bytes(gzip.compress(_jsonl(rows).encode()))
    elif kind == "parquet":
        table = pa.table({c: pa.array([r[c] or None for r in rows], pa.string()) for c in COLUMNS})
        pq.write_table(table, path)
    elif kind == "sqlite":
        with sqlite3.connect(path) as db:
            db.execute(f"CREATE TABLE wallet_ledger ({', '.join(COLUMNS)})")
            db.executemany(
                f"INSERT INTO wallet_ledger VALUES ({', '.join('?' * len(COLUMNS))})",
                [tuple(r[c] or None for c in COLUMNS) for r in rows],
            )
        db.close()
        return f"sqlite:///{path}"
    else:
        raise ValueError(kind)
    return str(path)


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps({k: v for k, v in r.items() if v != ""}) + "\n" for r in rows)
