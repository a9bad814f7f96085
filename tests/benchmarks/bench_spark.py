"""Benchmark of the analyser's Spark engine against a hand-written PySpark job (issue 25).

In one Spark session (``local[2]``), on the same generated 1,000,000-line JSONL log,
alternated at least three times:
(a) gptools on Spark: ``analyze(..., engine="spark").report`` (the summary: every metric);
(b) a plain, idiomatic PySpark job written here: ``spark.read.json`` with an explicit
    schema, the canonical-UUID and required-field checks, then the nine summary numbers
    (deliveries, actions, acknowledged, lost, pending, duplicate deliveries, retries,
    invalid deliveries, invalid deliveries without an actionId). Nothing more: it does not
    catch a number where a string belongs, which gptools does;
(c) gptools on DuckDB, for reference.

The log mixes the forms a delivery log takes: payload objects, raw body texts, both, with
invalid bodies (not JSON, missing fields, a non-canonical actionId) and type-confused
fields (a number where a string belongs, a bet written as a string). (a) and (b) must give
the same nine numbers on a second log of the same kind without type confusion, which the
plain job cannot see.

Goals: ``spark_vs_plain`` (median of the alternated runs) <= 2.0; ``jobs`` (Spark jobs
for one summary) <= 12.

Run: .venv/bin/python tests/benchmarks/bench_spark.py [LINES] [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analysis_scale import same

from gptools.deliverylog import analyze
from gptools.deliverylog._readers_spark import spark_session

LINES = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
CHECK_LINES = min(200_000, LINES)
NINE = (
    "deliveries",
    "actions",
    "acknowledged_actions",
    "lost_actions",
    "pending_actions",
    "duplicate_deliveries",
    "retries",
    "invalid_deliveries",
    "invalid_deliveries_without_action_id",
)


def generate(path: Path, lines: int, *, confused: bool) -> None:
    """Write ``lines`` deliveries with DuckDB (vectorised): actions of 1-3 attempts (503
    then 200, some 400, some duplicates); a tenth of the bodies as raw text instead of a
    payload object, a twentieth as both; one line in 500 a body that is not JSON, one in
    700 a payload without ``bet``, one in 900 a braced actionId; with ``confused``, one in
    600 a ``playerId`` written as a number and one in 800 a ``bet`` written as a string."""
    player = "'\"player-' || (hash(a) % 50000)::VARCHAR || '\"'"
    bet = "((a % 50) / 10.0 + 0.1)::DECIMAL(10, 2)::VARCHAR"
    if confused:
        player = f"CASE WHEN i % 600 = 11 THEN (hash(a) % 50000)::VARCHAR ELSE {player} END"
        bet = f"CASE WHEN i % 800 = 13 THEN '\"' || {bet} || '\"' ELSE {bet} END"
    con = duckdb.connect()
    con.execute("SET threads = 2; SET memory_limit = '1GB'")
    con.execute(
        f"""
        COPY (
          WITH base AS (
            SELECT i, i // 3 AS a, (i % 3)::INT AS k, hash(i // 3) % 100 AS fate,
              TIMESTAMP '2026-03-01' + to_microseconds((i // 3) * 150000
                  + (i % 3) * (30000000 * (1 + (i % 3)))) AS ts
            FROM range({lines}) t(i)
          ), doc AS (
            SELECT *,
              '{{"actionId":"' || CASE WHEN i % 900 = 5 THEN '{{' ELSE '' END
                || md5(a::VARCHAR)::UUID::VARCHAR
                || CASE WHEN i % 900 = 5 THEN '}}' ELSE '' END || '",'
              || '"roundId":"R' || a::VARCHAR || '",'
              || '"gameId":"game-' || (a % 12)::VARCHAR || '",'
              || '"playerId":' || {player} || ','
              || '"timestamp":"' || strftime(ts - INTERVAL 2 SECOND, '%Y-%m-%dT%H:%M:%S.%f') || '",'
              || CASE WHEN i % 700 = 3 THEN '' ELSE '"bet":' || {bet} || ',' END
              || '"currencyCode":"EUR","events":["COIN","FEATURE"]}}' AS body
            FROM base
          )
          SELECT
            strftime(ts, '%Y-%m-%dT%H:%M:%S.%fZ') AS received_at,
            CASE WHEN fate < 70 THEN 200
                 WHEN fate < 90 THEN (CASE WHEN k < 2 THEN 503 ELSE 200 END)
                 WHEN fate < 97 THEN 503
                 ELSE 400 END AS status,
            (hash(i * 7) % 120000) / 100.0 AS latency_ms,
            CASE WHEN i % 500 = 7 OR i % 10 = 1 THEN NULL ELSE body::JSON END AS payload,
            CASE WHEN i % 500 = 7 THEN '<html>bad gateway</html>'
                 WHEN i % 10 = 1 OR i % 20 = 2 THEN body END AS body
          FROM doc
        ) TO '{path}' (FORMAT json)
        """
    )
    con.close()


_SCHEMA = (
    "received_at STRING, status BIGINT, latency_ms DOUBLE, body STRING, payload STRUCT<"
    "actionId STRING, roundId STRING, gameId STRING, playerId STRING, timestamp STRING, "
    "bet DOUBLE, currencyCode STRING, events ARRAY<STRING>>"
)
_PAYLOAD = (
    "actionId STRING, roundId STRING, gameId STRING, playerId STRING, timestamp STRING, "
    "bet DOUBLE, currencyCode STRING, events ARRAY<STRING>"
)
_UUID = "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"


def plain_spark(spark: Any, path: Path) -> dict[str, int]:
    """(b) The hand-written job: explicit schema, canonical-UUID and required-field checks,
    the nine numbers in three jobs (the read, one shuffle by action, the collection)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = spark.read.schema(_SCHEMA).json(str(path))
    p = F.coalesce(F.col("payload"), F.from_json("body", _PAYLOAD))
    df = df.select(
        F.to_timestamp("received_at").alias("at"), "status", p.alias("p")
    ).select(
        "at", "status",
        F.when(F.col("p.actionId").rlike(_UUID), F.lower("p.actionId")).alias("action_id"),
        (F.col("p").isNotNull()
         & F.col("p.actionId").rlike(_UUID)
         & F.col("p.roundId").isNotNull() & F.col("p.gameId").isNotNull()
         & F.col("p.playerId").isNotNull() & F.col("p.timestamp").isNotNull()
         & F.col("p.bet").isNotNull() & F.col("p.currencyCode").isNotNull()
         & F.col("p.events").isNotNull()).alias("valid"),
    )  # fmt: skip
    ack = F.col("status").between(200, 299)
    rank = F.when(ack, 2).when(F.col("status").between(400, 499), 1).otherwise(0)
    key = F.unix_micros("at") * 4 + rank
    att = df.filter(F.col("action_id").isNotNull()).withColumn("key", key)
    w = Window.partitionBy("action_id")
    att = att.withColumn("ack_key", F.min(F.when(ack, F.col("key"))).over(w))
    per = att.groupBy("action_id").agg(
        F.count("*").alias("n"),
        F.max("ack_key").alias("ack_key"),
        F.max_by("status", "key").alias("last_status"),
        F.sum(F.when(F.col("key") < F.col("ack_key"), 1).otherwise(0)).alias("before"),
    )
    acked = F.col("ack_key").isNotNull()
    actions = per.agg(
        F.count("*").alias("actions"),
        F.sum(acked.cast("int")).alias("acknowledged_actions"),
        F.sum((~acked & F.col("last_status").between(400, 499)).cast("int")).alias("lost_actions"),
        F.sum((~acked & ~F.col("last_status").between(400, 499)).cast("int")).alias(
            "pending_actions"
        ),
        F.sum(F.when(acked, F.col("n") - 1 - F.col("before")).otherwise(0)).alias(
            "duplicate_deliveries"
        ),
        F.sum(F.when(acked, F.col("before")).otherwise(F.col("n") - 1)).alias("retries"),
    ).first()
    counts = df.agg(
        F.count("*").alias("deliveries"),
        F.sum((~F.col("valid")).cast("int")).alias("invalid_deliveries"),
        F.sum((~F.col("valid") & F.col("action_id").isNull()).cast("int")).alias(
            "invalid_deliveries_without_action_id"
        ),
    ).first()
    out = {**actions.asDict(), **counts.asDict()}
    return {k: int(out[k] or 0) for k in NINE}


def gptools_spark(spark: Any, path: Path) -> tuple[dict[str, Any], int]:
    """(a) gptools on Spark: the summary, and how many Spark jobs it ran."""
    sc = spark.sparkContext
    group = f"gptools-{time.monotonic_ns()}"
    sc.setJobGroup(group, "gptools summary")
    try:
        with analyze(path, engine="spark", spark=spark) as a:
            doc = a.report.to_dict()
    finally:
        sc.setJobGroup("", "")
    jobs = len(sc.statusTracker().getJobIdsForGroup(group))
    return doc, jobs


def gptools_duckdb(path: Path) -> dict[str, Any]:
    """(c) gptools on DuckDB (two threads, its default memory limit)."""
    with analyze(path, threads=2) as a:
        return a.report.to_dict()


def timed(fn: Any, *args: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t, out


def main() -> None:
    spark = spark_session("local[2]")
    with tempfile.TemporaryDirectory(prefix="bench-spark-", dir="/tmp") as tmp:
        log, clean = Path(tmp) / "log.jsonl", Path(tmp) / "clean.jsonl"
        t = time.perf_counter()
        generate(log, LINES, confused=True)
        generate(clean, CHECK_LINES, confused=False)
        print(f"generated {LINES:,} + {CHECK_LINES:,} lines in {time.perf_counter() - t:.1f} s")

        doc, _ = gptools_spark(spark, clean)
        plain = plain_spark(spark, clean)
        mine = {k: int(doc[k]) for k in NINE}
        if mine != plain:
            sys.exit(f"(a) and (b) disagree on the log without type confusion:\n{mine}\n{plain}")
        print(f"(a) and (b) agree on {CHECK_LINES:,} lines: {plain}")
        duck = gptools_duckdb(log)
        # Warm both contenders once (the JVM's JIT, Spark's code generation).
        gptools_spark(spark, log)
        plain_spark(spark, log)

        spark_s, plain_s, ratios, jobs = [], [], [], 0
        for n in range(ROUNDS):
            a_s, (doc, jobs) = timed(gptools_spark, spark, log)
            b_s, _ = timed(plain_spark, spark, log)
            for k in NINE:
                if k != "invalid_deliveries" and doc[k] != duck[k]:
                    sys.exit(f"Spark and DuckDB disagree on {k}: {doc[k]} != {duck[k]}")
            spark_s.append(a_s)
            plain_s.append(b_s)
            ratios.append(a_s / b_s)
            print(f"round {n + 1}: gptools on Spark {a_s:.2f} s ({jobs} jobs), plain {b_s:.2f} s")
        diff = same(doc, duck | {"source": doc["source"]})
        if diff:
            sys.exit(f"gptools on Spark and on DuckDB give different reports: {diff[:5]}")
        duck_runs = [timed(gptools_duckdb, log)[0] for _ in range(ROUNDS)]
    spark_med, plain_med = statistics.median(spark_s), statistics.median(plain_s)
    duck_med = statistics.median(duck_runs)
    print(
        f"RESULT spark_s={spark_med:.2f} plain_spark_s={plain_med:.2f} "
        f"spark_vs_plain={statistics.median(ratios):.2f} duckdb_s={duck_med:.2f} "
        f"spark_vs_duckdb={spark_med / duck_med:.2f} jobs={jobs}"
    )


if __name__ == "__main__":
    main()
