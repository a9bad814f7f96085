"""Campaign results on a 5,000,000-delivery log with 100 campaigns of 10,000 players each,
against the plain analysis of the same log, measured in the same run.

The log (``tests/_support/generated_log.py``, generated once by DuckDB, cached in
``$BENCH_TMP/bench-campaign-results/``): 4.8M actions, the first 200,000 delivered twice
(a duplicate after a 200, or a retry after a 503); half of the actions are campaign play
(a participant of one campaign, on one of its games, at its bet, inside its window,
FEATURE for an awarded feature), the rest regular play. Campaigns c and c + 4 share 2,000
players, a game, the currency, the bet and four days of their windows, so some plays are
ambiguous.

Each side runs in a fresh interpreter (DuckDB, 2 threads, 1 GB memory limit): the analysis
is ``analyze(log).report``, the results ``campaign_results(log, campaigns).report`` plus
the list of players never reached. ``peak_mb`` is the results' peak RSS (the largest of
the rounds). The two sides alternate ``ROUNDS`` times (3 unless given) and the figures are
medians: on a shared 2-core machine one pair of 15-25 s runs swung from 0.97 to 1.76.

Goals: results_vs_analysis (median of the rounds' ratios) <= 1.5, peak_mb < 1500.

Run: .venv/bin/python tests/benchmarks/bench_campaign_results.py [ROUNDS]
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests._support.generated_log import (  # noqa: E402
    START,
    GeneratedLog,
    campaign_specs,
    write_campaign_log,
)

# BENCH_SCALE shrinks the log and the campaigns (a quick check of the script, not a result).
_SCALE = float(os.environ.get("BENCH_SCALE", "1"))
SHAPE = GeneratedLog(
    deliveries=int(5_000_000 * _SCALE),
    doubled=int(200_000 * _SCALE),
    campaigns=100,
    players=int(10_000 * _SCALE),
    shift=int(2_000 * _SCALE),
    regular_players=400_000,
)
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3


_CHILD = """
import json, sys, time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
side, path, spec_json = sys.argv[1], sys.argv[2], sys.argv[3]
from gptools.deliverylog import CampaignTerms, analyze, campaign_results
t = time.perf_counter()
if side == "analysis":
    with analyze(path, threads=2, memory_limit="1GB") as a:
        doc = a.report.to_dict()
    out = {"actions": doc["actions"], "deliveries": doc["deliveries"]}
else:
    start = datetime.fromisoformat(START_ISO)
    terms = []
    for c in json.loads(open(spec_json).read()):
        first = c["first_player"]
        s = start + timedelta(hours=c["start_h"])
        terms.append(CampaignTerms(
            campaign_id=c["campaign_id"], campaign_type=c["campaign_type"],
            currency=c["currency"], bet=Decimal(c["bet"]), bet_number=c["bet_number"],
            game_ids=tuple(c["game_ids"]), start=s, end=s + timedelta(days=c["days"]),
            players=tuple(f"p{first + i}" for i in range(PLAYERS)),
        ))
    with campaign_results(path, terms, threads=2, memory_limit="1GB") as r:
        doc = r.report.to_dict()
        unreached = len(r.unreached())
    out = {"actions": doc["actions"], "attributed": doc["attributed"],
           "ambiguous": doc["ambiguous"], "unattributed": doc["unattributed"],
           "holds": doc["check"]["holds"], "unreached": unreached}
out["elapsed"] = time.perf_counter() - t
print(json.dumps(out))
"""


def run(side: str, path: Path, spec_path: Path) -> tuple[float, float, dict[str, Any]]:
    """One side in a fresh interpreter: seconds, peak RSS (MB) of its process, its figures."""
    code = _CHILD.replace("START_ISO", repr(START.isoformat())).replace(
        "PLAYERS", str(SHAPE.players)
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, side, str(path), str(spec_path)],
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
    base = Path(os.environ.get("BENCH_TMP", "/tmp")) / "bench-campaign-results"
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"log-{SHAPE.deliveries}.jsonl"
    spec_path = base / f"campaigns-{SHAPE.deliveries}.json"
    spec_path.write_text(json.dumps(campaign_specs(SHAPE)))
    if not path.exists():
        t = time.perf_counter()
        write_campaign_log(
            path.with_suffix(".tmp"), SHAPE, settings="SET threads = 2; SET memory_limit = '1GB'"
        )
        path.with_suffix(".tmp").rename(path)
        print(f"generated {SHAPE.deliveries:,} deliveries, {path.stat().st_size / 1e9:.2f} GB in "
              f"{time.perf_counter() - t:.0f} s (cached in {base})", flush=True)  # fmt: skip
    analysis_runs: list[float] = []
    results_runs: list[float] = []
    ratios: list[float] = []
    peak_mb = 0.0
    for n in range(ROUNDS):
        analysis_s, analysis_mb, a = run("analysis", path, spec_path)
        print(f"round {n + 1} analysis: {analysis_s:.2f} s, peak {analysis_mb:.0f} MB, {a}")
        results_s, results_mb, r = run("results", path, spec_path)
        print(f"round {n + 1} results:  {results_s:.2f} s, peak {results_mb:.0f} MB, {r}")
        assert r["holds"] and r["actions"] == a["actions"] == SHAPE.actions
        analysis_runs.append(analysis_s)
        results_runs.append(results_s)
        ratios.append(results_s / analysis_s)
        peak_mb = max(peak_mb, results_mb)
        print(f"round {n + 1} ratio: {ratios[-1]:.2f}", flush=True)
    print(
        f"RESULT results_s={statistics.median(results_runs):.2f} "
        f"analysis_s={statistics.median(analysis_runs):.2f} "
        f"results_vs_analysis={statistics.median(ratios):.2f} peak_mb={peak_mb:.0f}"
    )


if __name__ == "__main__":
    main()
