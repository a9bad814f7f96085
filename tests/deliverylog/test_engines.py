"""DuckDB and Spark give the same answers: summaries, drill-downs and backoff fits, on the
sample log and on generated logs with their own truth (payload and body-text variants,
invalid rows, ties at the microsecond, malformed lines, date partitions, Parquet)."""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gptools.deliverylog import DeliveryAnalysis, analyze
from tests.deliverylog.conftest import START, LogBuilder, random_log, write_records

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample_delivery_log.jsonl"
NUL_LINE = b"\x00" * 64


def _close(a: Any, b: Any, where: str) -> None:
    """Equal, floats to 1e-9 relative (the engines add floats in different orders)."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
            assert a is b or (pd.isna(a) and pd.isna(b)), where
        else:
            assert a == pytest.approx(b, rel=1e-9, abs=1e-12), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _cell(value: Any) -> Any:
    if value is None or (not isinstance(value, (list, dict, str)) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp):
        ts = value.tz_localize("UTC") if value.tzinfo is None else value.tz_convert("UTC")
        return ts.isoformat()
    if isinstance(value, Decimal):
        return value.normalize()
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return value
    return value


def _rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame as rows of plain values, in a defined order (its own when it has one)."""
    rows = [{k: _cell(v) for k, v in r.items()} for r in df.to_dict("records")]
    return sorted(rows, key=lambda r: [str(v) for v in r.values()])


DRILL_DOWNS = (
    "lost_actions", "pending_actions", "actions_frame", "per_hour", "per_game",
    "per_currency", "attempts_per_action", "silent_periods", "retry_gaps_by_retry",
    "malformed_lines",
)  # fmt: skip


def _same(
    duck: DeliveryAnalysis, spark: DeliveryAnalysis, chains: list[str],
    drill_downs: tuple[str, ...] = DRILL_DOWNS,
) -> None:  # fmt: skip
    one, two = duck.report.to_dict(), spark.report.to_dict()
    assert one.pop("source") == two.pop("source")
    _close(one, two, "report")
    for name in drill_downs:
        a, b = getattr(duck, name)(), getattr(spark, name)()
        assert list(a.columns) == list(b.columns), name
        _close(_rows(a), _rows(b), name)
    for action_id in chains:
        _close(_rows(duck.chain(action_id)), _rows(spark.chain(action_id)), action_id)
    for column in ("latency_ms", "gap_s") if drill_downs == DRILL_DOWNS else ():
        _close(_rows(duck.log_histogram(column)), _rows(spark.log_histogram(column)), column)


def test_sample_log_on_both_engines(spark: Any) -> None:
    with analyze(SAMPLE) as duck, analyze(SAMPLE, engine="spark", spark=spark) as sp:
        assert sp.log.engine == "spark" and duck.log.engine == "duckdb"
        lost = list(duck.lost_actions().action_id[:1])
        # The generated log below compares every drill-down; here the lists that matter.
        _same(duck, sp, lost, ("lost_actions", "pending_actions", "per_game"))
        assert sp.report.identity_holds


def _mixed_log(root: Path) -> tuple[LogBuilder, dict[str, list[int]]]:
    """A generated log in two daily partitions (payload objects, then body text), with
    ties at the microsecond, broken bodies, a NUL-filled line and a blank line in the
    middle of the first file and a torn last line in the second. Returns the builder
    (truth adjusted for the malformed lines) and where they are."""
    b = random_log(23, n_actions=90)
    tie = START + timedelta(hours=3, microseconds=17)
    b.action([503, 200], at=tie, gaps=[0.0])
    b.action([200, 200], at=tie, gaps=[0.0])
    b.action([503, 400], at=tie, gaps=[0.0])
    records = b.ordered()
    half = len(records) // 2
    first = write_records(root / "date=2026-03-01" / "part-0.jsonl", records[:half])
    second = write_records(root / "date=2026-03-02" / "part-0.jsonl", records[half:], as_body=True)
    lines = first.read_bytes().splitlines(keepends=True)
    lines[10:10] = [b"\n", NUL_LINE + b"\n"]
    first.write_bytes(b"".join(lines))
    torn = second.read_bytes().splitlines(keepends=True)
    torn.append(b'{"received_at": "2026-03-09T00:00:00.000000Z", "status": 200, "payl')
    second.write_bytes(b"".join(torn))
    t = b.truth
    t.deliveries += 2
    t.invalid += 2
    t.invalid_without_action_id += 2
    t.invalid_by_reason["malformed_line"] += 2
    return b, {str(first): [12], str(second): [len(torn)]}


def test_generated_partitioned_log_on_both_engines(spark: Any, tmp_path: Path) -> None:
    b, malformed = _mixed_log(tmp_path / "log")
    with (
        analyze(tmp_path / "log") as duck,
        analyze(tmp_path / "log", engine="spark", spark=spark) as sp,
    ):
        for analysis in (duck, sp):
            r, t = analysis.report, b.truth
            assert (r.deliveries, r.actions, r.retries, r.duplicate_deliveries) == (
                t.deliveries,
                t.actions,
                t.retries,
                t.duplicates,
            )
            assert (r.lost_actions, r.pending_actions) == (t.lost, t.pending)
            assert r.invalid_by_reason == dict(t.invalid_by_reason)
            assert r.identity_holds
            found = analysis.malformed_lines()
            assert {f: list(g.line) for f, g in found.groupby("file")} == malformed
        _same(duck, sp, sorted(b.truth.lost_ids)[:2])
        # The charts take either engine's analysis (malformed lines have no hour).
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt

        from gptools import deliverylog as wa

        for plot in (wa.plot_duplicates_and_retries, wa.plot_status_mix, wa.plot_retry_gaps,
                     wa.plot_attempts_per_action, wa.plot_latency):  # fmt: skip
            for analysis in (duck, sp):
                fig = plot(analysis)
                fig.savefig(tmp_path / "chart.png")
                plt.close(fig)


def test_parquet_directory_on_both_engines(spark: Any, tmp_path: Path) -> None:
    b = random_log(31, n_actions=60)
    (tmp_path / "pq" / "date=2026-03-01").mkdir(parents=True)
    b.write_parquet(tmp_path / "pq" / "date=2026-03-01" / "a.parquet")
    with analyze(tmp_path / "pq") as duck, analyze(tmp_path / "pq", engine="spark",
                                                   spark=spark) as sp:  # fmt: skip
        assert duck.report.deliveries == b.truth.deliveries
        one, two = duck.report.to_dict(), sp.report.to_dict()
        _close(one, two, "report")


def test_backoff_fit_equal_to_numpy(tmp_path: Path) -> None:
    """The fit equals least squares computed here, to 1e-9 relative (and Spark's equals
    DuckDB's to 1e-9 relative in every comparison of reports above)."""
    import numpy as np

    b = LogBuilder(8)
    for i in range(12):
        b.action([503, 503, 503, 200], at=START + timedelta(minutes=i))
    path = b.write_jsonl(tmp_path / "fit.jsonl")
    xs = np.array([n - 1 for n, _ in b.truth.retry_gaps], dtype=float)
    slope, intercept = np.polyfit(xs, np.log([g for _, g in b.truth.retry_gaps]), 1)
    with analyze(path) as analysis:
        fit = analysis.report.backoff
        assert fit["factor"] == pytest.approx(math.exp(slope), rel=1e-9)
        assert fit["base_s"] == pytest.approx(math.exp(intercept), rel=1e-9)
