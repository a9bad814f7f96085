"""The wallet reconciliation on a 20,000,000-row ledger and a 5,000,000-delivery log with
100 campaigns, against a plain DuckDB join of the same two files on the round id with one
aggregate, measured in the same run.

The log is bench_campaign_results' (``tests/_support/generated_log.py``: 4.8M actions,
round ids ``R<n>``, half of them campaign play). The ledger (Parquet, typed columns, in
the assumed layout) has a debit and a credit for every action's round, flagged free round
for campaign play, and paid rounds (debit, credit) until it holds ``LEDGER_ROWS`` rows.
Both are generated once by DuckDB and cached in ``$BENCH_TMP/bench-reconcile/``.

Each side runs in a fresh interpreter (DuckDB, 2 threads, 1 GB memory limit): the join is
``SELECT count(*), sum(amount)`` over ledger ⋈ log on the round id; the reconciliation is
``reconcile(ledger, log, campaigns).report`` and every exception list. ``peak_mb`` is the
reconciliation's peak RSS.

Goals: reconcile_vs_join <= 2.5, peak_mb < 2000.

Run: .venv/bin/python tests/benchmarks/bench_reconcile.py [SCALE]   (SCALE 1 is full size;
0.01 checks the script in seconds)
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests._support.generated_log import (  # noqa: E402
    DAYS,
    START,
    GeneratedLog,
    campaign_specs,
    write_campaign_log,
)

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("BENCH_SCALE", "1"))
SHAPE = GeneratedLog(
    deliveries=int(5_000_000 * SCALE),
    doubled=int(200_000 * SCALE),
    campaigns=100,
    players=max(int(10_000 * SCALE), 10),
    shift=int(2_000 * SCALE),
    regular_players=400_000,
)
LEDGER_ROWS = int(20_000_000 * SCALE)

_CHILD = """
import json, sys, time
from datetime import timedelta
from decimal import Decimal
side, ledger, log, spec_json = sys.argv[1:5]
t = time.perf_counter()
if side == "join":
    import duckdb
    con = duckdb.connect()
    con.execute("SET threads = 2; SET memory_limit = '1GB'")
    n, total = con.execute(
        f"SELECT count(*), sum(l.amount) FROM read_parquet('{ledger}') l "
        f"JOIN read_json('{log}', format='newline_delimited') d ON l.round_id = d.payload.roundId"
    ).fetchone()
    out = {"joined": n, "amount": str(total)}
else:
    from datetime import datetime
    from gptools.deliverylog import CampaignTerms
    from gptools.deliverylog._engines import LogOptions
    from gptools.wallet import EXCEPTION_KINDS, reconcile
    start = datetime.fromisoformat(START_ISO)
    terms = []
    for c in json.loads(open(spec_json).read()):
        s = start + timedelta(hours=c["start_h"])
        terms.append(CampaignTerms(
            campaign_id=c["campaign_id"], campaign_type=c["campaign_type"],
            currency=c["currency"], bet=Decimal(c["bet"]), bet_number=c["bet_number"],
            game_ids=tuple(c["game_ids"]), start=s, end=s + timedelta(days=c["days"]),
            players=tuple(f"p{c['first_player'] + i}" for i in range(PLAYERS)),
        ))
    options = LogOptions(threads=2, memory_limit="1GB")
    with reconcile(ledger, log, terms, options=options) as rec:
        doc = rec.report.to_dict()
        sizes = {k: len(rec.exceptions(k)) for k in EXCEPTION_KINDS}
    out = {"rows": doc["rows"], "holds": doc["check"]["holds"],
           "wallet_rounds": doc["wallet_rounds"], "exceptions": sizes}
out["elapsed"] = time.perf_counter() - t
print(json.dumps(out))
"""


def write_ledger(path: Path, shape: GeneratedLog, rows: int) -> None:
    """The ledger of the log's rounds (the same formulas as ``write_campaign_log``), then
    paid rounds up to ``rows`` rows, as Parquet."""
    con = duckdb.connect()
    con.execute("SET threads = 2; SET memory_limit = '1GB'; SET TimeZone = 'UTC'")
    values = ",".join(
        f"({i}, '{c['currency']}', '{c['bet']}', {c['start_h']}, {c['first_player']})"
        for i, c in enumerate(campaign_specs(shape))
    )
    con.execute(
        f"CREATE TABLE camp AS SELECT * FROM (VALUES {values}) "
        "t(c, currency, bet, start_h, first_player)"
    )
    start = START.replace(tzinfo=None).isoformat(sep=" ")
    paid = max(rows - 2 * shape.actions, 0) // 2
    con.execute(
        f"""
        COPY (
          WITH a AS (
            SELECT n, (hash(n) >> 1)::BIGINT AS h, (hash(n * 3) % {shape.campaigns})::INT AS c,
                   hash(n * 5) % 2 = 0 AS campaign_play
            FROM range({shape.actions}) t(n)
          ),
          play AS (
            SELECT 'R' || a.n::VARCHAR AS round_id, a.n, campaign_play,
              CASE WHEN campaign_play THEN 'p' || (first_player + (h % {shape.players}))::VARCHAR
                   ELSE 'r' || (h % {shape.regular_players})::VARCHAR END AS player,
              CASE WHEN campaign_play THEN 'game-' || ((c + 4 * ((h // 7) % 2)) % 10)::VARCHAR
                   ELSE 'game-' || (h % 12)::VARCHAR END AS game,
              CASE WHEN campaign_play THEN camp.currency ELSE 'EUR' END AS currency,
              CASE WHEN campaign_play THEN camp.bet::DECIMAL(18, 2)
                   ELSE ((h % 50) / 10.0 + 0.1)::DECIMAL(18, 2) END AS bet,
              (TIMESTAMP '{start}' + to_microseconds(
                CASE WHEN campaign_play
                     THEN start_h * 3600000000 + (h // 11) % ({DAYS} * 86400000000)
                     ELSE (h // 13) % ({DAYS + 1} * 86400000000) END))::TIMESTAMPTZ AS ts,
              h
            FROM a JOIN camp USING (c)
          ),
          paid AS (
            SELECT 'P' || m::VARCHAR AS round_id, m AS n, false AS campaign_play,
              'r' || (m % {shape.regular_players})::VARCHAR AS player,
              'game-' || (m % 12)::VARCHAR AS game, 'EUR' AS currency,
              ((m % 50) / 10.0 + 0.1)::DECIMAL(18, 2) AS bet,
              (TIMESTAMP '{start}' + to_microseconds(
                ((hash(m) >> 1)::BIGINT % ({DAYS} * 86400000000))::BIGINT))::TIMESTAMPTZ AS ts,
              (hash(m) >> 1)::BIGINT AS h
            FROM range({paid}) t(m)
          ),
          rounds AS (SELECT * FROM play UNION ALL SELECT * FROM paid)
          SELECT 'T' || round_id || '-' || k::VARCHAR AS transaction_id, round_id,
                 player AS player_id, game AS game_id, currency,
                 CASE WHEN k = 0 THEN bet ELSE (bet * ((h // 17) % 3))::DECIMAL(18, 2) END
                   AS amount,
                 CASE WHEN k = 0 THEN 'debit' ELSE 'credit' END AS type,
                 campaign_play AS free_round,
                 ts + to_microseconds(k * 900000) AS timestamp
          FROM rounds, range(2) k(k)
        ) TO '{path}' (FORMAT parquet)
        """
    )
    con.close()


def run(side: str, ledger: Path, log: Path, spec_path: Path) -> tuple[float, float, dict[str, Any]]:
    """One side in a fresh interpreter: seconds, peak RSS (MB), its figures."""
    code = _CHILD.replace("START_ISO", repr(START.isoformat())).replace(
        "PLAYERS", str(SHAPE.players)
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, side, str(ledger), str(log), str(spec_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    peak = 0
    ps = psutil.Process(proc.pid)
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, ps.memory_info().rss)
        time.sleep(0.05)
    out, err = proc.communicate()
    if proc.returncode:
        sys.exit(f"the {side} run failed:\n{err[-3000:]}")
    res = json.loads(out.strip().splitlines()[-1])
    return float(res.pop("elapsed")), peak / 2**20, res


def main() -> None:
    base = Path(os.environ.get("BENCH_TMP", "/tmp")) / "bench-reconcile"
    base.mkdir(parents=True, exist_ok=True)
    log = base / f"log-{SHAPE.deliveries}.jsonl"
    ledger = base / f"ledger-{LEDGER_ROWS}.parquet"
    spec_path = base / f"campaigns-{SHAPE.deliveries}.json"
    spec_path.write_text(json.dumps(campaign_specs(SHAPE)))
    if not log.exists():
        write_campaign_log(
            log.with_suffix(".tmp"), SHAPE, settings="SET threads = 2; SET memory_limit = '1GB'"
        )
        log.with_suffix(".tmp").rename(log)
    if not ledger.exists():
        write_ledger(ledger.with_suffix(".tmp"), SHAPE, LEDGER_ROWS)
        ledger.with_suffix(".tmp").rename(ledger)
    join_s, join_mb, j = run("join", ledger, log, spec_path)
    print(f"join: {join_s:.2f} s, peak {join_mb:.0f} MB, {j}", flush=True)
    rec_s, rec_mb, r = run("reconcile", ledger, log, spec_path)
    print(f"reconcile: {rec_s:.2f} s, peak {rec_mb:.0f} MB, {r}", flush=True)
    assert r["holds"] and r["rows"] == LEDGER_ROWS - LEDGER_ROWS % 2
    print(
        f"RESULT reconcile_s={rec_s:.2f} join_s={join_s:.2f} "
        f"reconcile_vs_join={rec_s / join_s:.2f} peak_mb={rec_mb:.0f}"
    )


if __name__ == "__main__":
    main()
