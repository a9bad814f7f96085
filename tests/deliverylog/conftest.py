"""A generator of webhook delivery logs that knows its own true answer.

:class:`LogBuilder` builds attempt chains (an action answered 503, 503, then 200...) and
invalid deliveries, and keeps, while it builds them, every count the analyser must find.
The truth is tallied from the construction (which statuses a chain got, which bodies were
broken), never by running the analyser's own queries. Writers put the same records in
every format the analyser reads: JSONL (payload objects or body text), Parquet, a SQLite
store and a PostgreSQL table.
"""

from __future__ import annotations

import json
import random
import sqlite3
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gptools.models import dumps_wire

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
GAMES = ("vs20olympgate", "vs10bbbonanza", "vs25wolfgold")
CURRENCIES = ("EUR", "JPY", "KWD")


def iso(moment: datetime) -> str:
    """The contract's ``received_at`` form: UTC, microseconds, ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def naive(moment: datetime) -> str:
    """The payload's ``timestamp`` form: naive UTC with microseconds."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")


@dataclass
class Truth:
    """What the analyser must find in the builder's log."""

    deliveries: int = 0
    actions: int = 0
    acknowledged: int = 0
    first_attempt_successes: int = 0
    retries: int = 0
    duplicates: int = 0
    lost: int = 0
    pending: int = 0
    invalid: int = 0
    invalid_without_action_id: int = 0
    invalid_by_reason: Counter[str] = field(default_factory=Counter)
    status_counts: Counter[int] = field(default_factory=Counter)
    attempts: Counter[int] = field(default_factory=Counter)
    retry_gaps: list[tuple[int, float]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    lost_ids: set[str] = field(default_factory=set)
    pending_ids: set[str] = field(default_factory=set)
    bet_total: Decimal = Decimal(0)
    bets: dict[tuple[str, str], Decimal] = field(default_factory=dict)


@dataclass
class LogBuilder:
    """Builds a delivery log: each call adds deliveries and updates :attr:`truth`."""

    seed: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    truth: Truth = field(default_factory=Truth)
    events: list[tuple[str, datetime, datetime]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def new_id(self) -> str:
        """A fresh actionId, reproducible from the seed."""
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def payload(
        self, action_id: str, event_at: datetime, *, player: str | None = None
    ) -> dict[str, Any]:
        """A valid game event notification."""
        return {
            "roundId": f"R-{self.rng.randrange(10**9)}",
            "gameId": self.rng.choice(GAMES),
            "playerId": player or f"player-{self.rng.randrange(40)}",
            "timestamp": naive(event_at),
            "bet": Decimal(self.rng.randrange(10, 5000)) / 100,
            "currencyCode": self.rng.choice(CURRENCIES),
            "events": self.rng.choice([["COIN"], ["FEATURE"], ["COIN", "FEATURE"], []]),
            "actionId": action_id,
        }

    def latency(self) -> Decimal:
        """A latency in ms: mostly fast, one in twelve over the 1-second budget."""
        if self.rng.random() < 1 / 12:
            return Decimal(self.rng.randrange(1000_000, 3000_000)) / 1000
        return Decimal(self.rng.randrange(500, 400_000)) / 1000

    def _add(self, at: datetime, status: int, *, payload: Any = None, body: str | None = None,
             latency: Decimal | None = None) -> None:  # fmt: skip
        rec: dict[str, Any] = {
            "received_at": iso(at),
            "status": status,
            "latency_ms": latency if latency is not None else self.latency(),
        }
        if payload is not None:
            rec["payload"] = payload
        if body is not None:
            rec["body"] = body
        self.records.append(rec)
        self.truth.deliveries += 1
        self.truth.status_counts[status] += 1
        self.truth.latencies.append(float(rec["latency_ms"]))

    def action(
        self,
        statuses: list[int],
        *,
        at: datetime,
        gaps: list[float] | None = None,
        lag: float = 1.5,
        player: str | None = None,
        broken: dict[int, tuple[str, Any]] | None = None,
    ) -> str:
        """An action delivered once per status; ``gaps`` (seconds) separate the attempts
        (default: the assumed backoff 30 s x 2^(n-1) with +-10 % jitter). ``broken`` maps an
        attempt index to (reason, body-mutation) making that attempt's body invalid while
        keeping its actionId."""
        t = self.truth
        action_id = self.new_id()
        event_at = at - timedelta(seconds=lag)
        body = self.payload(action_id, event_at, player=player)
        if gaps is None:
            gaps = [30 * 2 ** (n - 1) * self.rng.uniform(0.9, 1.1) for n in range(1, len(statuses))]
        moment = at
        acked = False
        bet_seen = False
        for i, status in enumerate(statuses):
            if i:
                gap = round(gaps[i - 1], 6)
                moment = moment + timedelta(seconds=gap)
                if acked:
                    t.duplicates += 1
                else:
                    t.retries += 1
                    t.retry_gaps.append((i, gap))
            this = dict(body)
            if broken and i in broken:
                reason, mutate = broken[i]
                this = mutate(this)
                t.invalid += 1
                t.invalid_by_reason[reason] += 1
            self._add(moment, status, payload=this)
            acked = acked or 200 <= status <= 299  # every 2xx acknowledges
            bet_seen = bet_seen or "bet" in this
        t.actions += 1
        t.bet_total += body["bet"] if bet_seen else 0
        if bet_seen:
            key = (body["gameId"], body["currencyCode"])
            t.bets[key] = t.bets.get(key, Decimal(0)) + body["bet"]
        t.attempts[len(statuses)] += 1
        t.lags.append(lag)
        self.events.append((body["playerId"], at, event_at))
        if 200 <= statuses[0] <= 299:
            t.first_attempt_successes += 1
        if acked:
            t.acknowledged += 1
        elif 400 <= statuses[-1] <= 499:
            t.lost += 1
            t.lost_ids.add(action_id)
        else:
            t.pending += 1
            t.pending_ids.add(action_id)
        return action_id

    def invalid(self, at: datetime, *, reason: str, payload: Any = None, body: str | None = None,
                status: int = 400) -> None:  # fmt: skip
        """A delivery without a usable actionId (counted outside every action)."""
        self._add(at, status, payload=payload, body=body)
        self.truth.invalid += 1
        self.truth.invalid_without_action_id += 1
        self.truth.invalid_by_reason[reason] += 1

    def out_of_order(self) -> tuple[int, int]:
        """(events, out-of-order events): per player, in arrival order, an event whose
        payload time is earlier than the previous arrival's."""
        late = 0
        last: dict[str, datetime] = {}
        for player, _arrived, stamped in sorted(self.events, key=lambda e: (e[1], e[2])):
            if player in last and stamped < last[player]:
                late += 1
            last[player] = stamped
        return len(self.events), late

    # -------------------------------------------------------------- writers

    def ordered(self) -> list[dict[str, Any]]:
        """Records in arrival order, as a receiver writes them."""
        return sorted(self.records, key=lambda r: r["received_at"])

    def body_text(self, rec: dict[str, Any]) -> str:
        """The raw request body of a record."""
        if "payload" in rec:
            return dumps_wire(rec["payload"]).decode()
        return str(rec.get("body", ""))

    def write_jsonl(self, path: Path, *, as_body: bool = False) -> Path:
        """The contract's JSONL; ``as_body`` writes every body as raw text instead."""
        with path.open("wb") as fh:
            for rec in self.ordered():
                out = dict(rec)
                if as_body and "payload" in out:
                    out["body"] = self.body_text(out)
                    del out["payload"]
                fh.write(dumps_wire(out) + b"\n")
        return path

    def write_parquet(self, path: Path) -> Path:
        """The contract's Parquet: ``body`` always raw text."""
        rows = self.ordered()
        table = pa.table(
            {
                "received_at": [r["received_at"] for r in rows],
                "status": pa.array([r["status"] for r in rows], pa.int32()),
                "latency_ms": [float(r["latency_ms"]) for r in rows],
                "body": [self.body_text(r) for r in rows],
                "duplicate": [False for _ in rows],
            }
        )
        pq.write_table(table, path)
        return path

    def store_rows(self) -> list[tuple[Any, ...]]:
        """Rows of the receiver's ``delivery_log`` table."""
        return [
            (r["received_at"], r["status"], float(r["latency_ms"]), self.body_text(r), None,
             0, 1, None, "127.0.0.1")
            for r in self.ordered()
        ]  # fmt: skip

    def write_sqlite(self, path: Path) -> Path:
        """A SQLite store with the contract's ``delivery_log`` table."""
        with sqlite3.connect(path) as db:
            db.execute(
                "CREATE TABLE delivery_log (received_at TEXT NOT NULL, status INTEGER NOT NULL,"
                " latency_ms REAL NOT NULL, body TEXT NOT NULL, action_id TEXT,"
                " duplicate INTEGER NOT NULL, auth_ok INTEGER NOT NULL, error TEXT,"
                " remote_addr TEXT)"
            )
            db.executemany(f"INSERT INTO delivery_log VALUES ({', '.join('?' * 9)})",
                           self.store_rows())  # fmt: skip
        db.close()
        return path

    def write_postgres(self, conn: Any, schema: str) -> None:
        """The contract's ``delivery_log`` table in ``schema`` of a PostgreSQL database."""
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(
            f'CREATE TABLE "{schema}".delivery_log (received_at timestamptz NOT NULL,'
            " status integer NOT NULL, latency_ms double precision NOT NULL, body text NOT NULL,"
            " action_id text, duplicate boolean NOT NULL, auth_ok boolean NOT NULL, error text,"
            " remote_addr text)"
        )
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".delivery_log VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)',
                [(r[0], *r[1:5], bool(r[5]), bool(r[6]), *r[7:]) for r in self.store_rows()],
            )


def random_log(seed: int, n_actions: int = 300) -> LogBuilder:
    """A realistic mix: clean deliveries, duplicates, retries that succeed, lost and
    pending actions, broken bodies with and without an actionId, a silent stretch."""
    b = LogBuilder(seed)
    rng = b.rng
    patterns = [
        ([200], 40), ([200, 200], 8), ([503, 200], 12), ([503, 503, 200], 8),
        ([500, 503, 503, 200, 200], 3), ([400], 5), ([503, 400], 3), ([503], 4),
        ([503, 503, 503, 503], 3), ([504, 200], 4), ([200, 503], 2), ([429, 429], 2),
    ]  # fmt: skip
    choices = [p for p, w in patterns for _ in range(w)]
    at = START
    for i in range(n_actions):
        at += timedelta(seconds=rng.uniform(0.5, 20))
        if i == n_actions // 2:
            at += timedelta(minutes=23)  # a silent stretch the analyser must report
        statuses = list(rng.choice(choices))
        broken = None
        if rng.random() < 0.05:
            broken = {0: ("missing:bet", lambda p: {k: v for k, v in p.items() if k != "bet"})}
        b.action(statuses, at=at, lag=round(rng.uniform(0.2, 4.0), 6), broken=broken)
        if rng.random() < 0.04:
            kind = rng.randrange(4)
            when = at + timedelta(seconds=0.25)
            if kind == 0:
                b.invalid(when, reason="not_json", body="<html>502 Bad Gateway</html>")
            elif kind == 1:
                b.invalid(when, reason="not_object", body="[1, 2, 3]")
            elif kind == 2:
                p = b.payload(b.new_id(), when)
                del p["actionId"]
                b.invalid(when, reason="missing:actionId", payload=p)
            else:
                p = b.payload("not-a-uuid", when)
                b.invalid(when, reason="not_a_uuid:actionId", payload=p)
    return b


@pytest.fixture
def pg_conn() -> Iterator[Any]:
    """A connection to the test PostgreSQL database (autocommit)."""
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        yield conn


@pytest.fixture
def pg_schema(pg_conn: Any) -> Iterator[str]:
    """A schema name of our own, dropped with everything in it after the test."""
    name = f"analyser_{uuid.uuid4().hex[:12]}"
    yield name
    pg_conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def write_json_lines(path: Path, lines: list[Any]) -> Path:
    """Write objects (or raw strings, kept as-is) one per line."""
    with path.open("w") as fh:
        for line in lines:
            fh.write(line if isinstance(line, str) else json.dumps(line))
            fh.write("\n")
    return path


def write_records(path: Path, records: list[dict[str, Any]], *, as_body: bool = False) -> Path:
    """Records as JSONL lines (``as_body``: every payload as raw body text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        for rec in records:
            out = dict(rec)
            if as_body and "payload" in out:
                out["body"] = dumps_wire(out.pop("payload")).decode()
            fh.write(dumps_wire(out) + b"\n")
    return path
