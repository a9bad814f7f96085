"""Scale curve of the delivery-log analyser: DuckDB at 1M, 5M and 20M lines, Parquet at
20M, and Spark (local mode) at 5M.

In one run: generated JSONL logs of 1M, 5M and 20M lines (the 20M one, about 7 GB, also as
Parquet with ``body`` text, the receiver's export), each analysed in a fresh interpreter
(open + report: every metric) with its time and the peak RSS of the whole process tree
(polled every 50 ms; Spark's JVM included). Spark runs the same analysis on the 5M log in
local mode on every core, and its report must equal DuckDB's (floats to 1e-9 relative):
on one machine Spark has no speed goal, its place is a cluster.

Goals: peak_mb_20m < 1500; growth_20m_vs_5m <= 5.0, a no-regression bound;
Spark equal to DuckDB. parquet_vs_jsonl_20m is printed for information (its goal, 0.5,
was retired: docs/performance.md says why). Generated files go to a temporary
folder (``BENCH_TMP``, default /tmp; about 12 GB free needed) and are removed afterwards.

Run: .venv/bin/python tests/benchmarks/bench_analysis_scale.py
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analysis import generate

# BENCH_SCALE shrinks every size (a quick check of the script itself, not a result).
_SCALE = float(os.environ.get("BENCH_SCALE", "1"))
SIZES = tuple(int(n * _SCALE) for n in (1_000_000, 5_000_000, 20_000_000))
SPARK_SIZE = SIZES[1]
THREADS = 2


def to_parquet(src: Path, dst: Path) -> None:
    """The JSONL log as the receiver's Parquet export: the body as raw text."""
    con = duckdb.connect()
    con.execute(f"SET threads = {THREADS}; SET memory_limit = '1GB'")
    con.execute(
        f"""COPY (SELECT received_at, status, latency_ms,
                         coalesce(CAST(to_json(payload) AS VARCHAR), body) AS body
                  FROM read_json('{src}', format = 'newline_delimited', columns = {{
                    received_at: 'VARCHAR', status: 'INTEGER', latency_ms: 'DOUBLE',
                    payload: 'JSON', body: 'VARCHAR'}}))
            TO '{dst}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)"""
    )
    con.close()


def run(path: Path, engine: str) -> tuple[float, float, dict[str, Any]]:
    """Open + report in a fresh interpreter: seconds, peak MB of the process tree, report."""
    spark = ""
    if engine == "spark":
        # The driver runs the executors in local mode; the JVM's heap is set before it starts.
        spark = (
            "from pyspark.sql import SparkSession\n"
            "SparkSession.builder.master('local[*]').config('spark.driver.memory', '4g')"
            ".config('spark.ui.enabled', 'false').getOrCreate()\n"
            "from gptools.deliverylog._readers_spark import spark_session\n"
            "spark_session('local[*]')\n"
        )
    threads = THREADS if engine == "duckdb" else None
    code = f"""
import json, time
{spark}from gptools.deliverylog import analyze
t = time.perf_counter()
with analyze({str(path)!r}, engine={engine!r}, threads={threads}) as a:
    doc = a.report.to_dict()
print(json.dumps({{"elapsed": time.perf_counter() - t, "report": doc}}))
"""
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    peak = 0
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.05)
    out, err = proc.communicate()
    if proc.returncode:
        sys.exit(f"the {engine} analysis of {path.name} failed:\n{err[-3000:]}")
    res = json.loads(out.strip().splitlines()[-1])
    return float(res["elapsed"]), peak / 2**20, res["report"]


def same(a: Any, b: Any, where: str = "report") -> list[str]:
    """Where two reports differ (floats to 1e-9 relative)."""
    if isinstance(a, float) and isinstance(b, float):
        ok = math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        return [] if ok else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return [d for k in a for d in same(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in same(x, y, f"{where}[{i}]")]  # fmt: skip
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def main() -> None:
    times: dict[int, float] = {}
    peaks: dict[int, float] = {}
    reports: dict[int, dict[str, Any]] = {}
    base = os.environ.get("BENCH_TMP", "/tmp")
    with tempfile.TemporaryDirectory(prefix="bench-analysis-scale-", dir=base) as tmp:
        for lines in SIZES:
            path = Path(tmp) / f"deliveries-{lines}.jsonl"
            t = time.perf_counter()
            generate(path, lines)
            print(f"generated {lines:,} lines, {path.stat().st_size / 1e9:.2f} GB"
                  f" in {time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
            times[lines], peaks[lines], reports[lines] = run(path, "duckdb")
            assert reports[lines]["deliveries"] == lines and reports[lines]["check"]["holds"]
            print(f"  duckdb {lines:,}: {times[lines]:.2f} s, peak {peaks[lines]:.0f} MB",
                  flush=True)  # fmt: skip
            if lines == SPARK_SIZE:
                spark_s, spark_mb, spark_report = run(path, "spark")
                diff = same(
                    {k: v for k, v in reports[lines].items() if k != "source"},
                    {k: v for k, v in spark_report.items() if k != "source"},
                )
                print(f"  spark {lines:,}: {spark_s:.2f} s, peak {spark_mb:.0f} MB,"
                      f" equal to duckdb: {not diff}", flush=True)  # fmt: skip
                for d in diff[:20]:
                    print("    differs:", d)
            if lines != SIZES[-1]:
                path.unlink()
        big = Path(tmp) / f"deliveries-{SIZES[-1]}.jsonl"
        pq = Path(tmp) / "deliveries-20m.parquet"
        t = time.perf_counter()
        to_parquet(big, pq)
        print(f"converted to Parquet, {pq.stat().st_size / 1e9:.2f} GB"
              f" in {time.perf_counter() - t:.0f} s", flush=True)  # fmt: skip
        big.unlink()
        pq_s, pq_mb, pq_report = run(pq, "duckdb")
        pq_diff = same(
            {k: v for k, v in reports[SIZES[-1]].items() if k != "source"},
            {k: v for k, v in pq_report.items() if k != "source"},
        )
        print(f"  duckdb parquet 20M: {pq_s:.2f} s, peak {pq_mb:.0f} MB,"
              f" equal to jsonl: {not pq_diff}", flush=True)  # fmt: skip
    t5, t20 = times[SIZES[1]], times[SIZES[-1]]
    print(f"(Spark equal to DuckDB on 5M: {not diff}; Parquet equal to JSONL: {not pq_diff})")
    print(
        f"RESULT t_5m_s={t5:.2f} t_20m_s={t20:.2f} growth_20m_vs_5m={t20 / t5:.2f} "
        f"peak_mb_20m={peaks[SIZES[-1]]:.0f} parquet_vs_jsonl_20m={pq_s / t20:.2f} "
        f"spark_5m_s={spark_s:.2f} spark_vs_duckdb_5m={spark_s / t5:.2f}"
    )


if __name__ == "__main__":
    main()
