"""Campaign results take the log's reading options on Spark exactly as on DuckDB (one
``open_log`` for both): ``force`` (the same refusal, then the same results),
``max_line_bytes`` (the same line counted malformed) and ``temp_directory`` (where both
put the stand-in copy of a log with an over-long line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gptools.deliverylog import CampaignTerms, DeliveryLogError, campaign_results
from tests.deliverylog.campaign_logs import CampaignLog, scenario
from tests.deliverylog.test_engines import _close

#: Not JSON objects, more of them than the scenario has deliveries: the sniff refuses.
JUNK_LINES = 200
#: Below the padded line's length, above every other line's.
LIMIT = 4096


def _report(results: Any) -> dict[str, Any]:
    doc: dict[str, Any] = results.report.to_dict()
    doc.pop("source")
    return doc


Built = tuple[CampaignLog, list[CampaignTerms], Path]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Built:
    log, terms = scenario()
    return log, terms, log.write(tmp_path_factory.mktemp("clean") / "log.jsonl")


def test_force_on_spark_as_on_duckdb(clean: Built, spark: Any, tmp_path: Path) -> None:
    _, terms, path = clean
    junk = tmp_path / "junk.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    junk.write_bytes(b"".join([b"received_at,status,latency_ms\n"] * JUNK_LINES + lines))
    refusal = (
        f"{junk}: does not look like a JSONL delivery log ({JUNK_LINES} of its first "
        f"{JUNK_LINES + len(lines)} lines are not JSON objects); force=True / --force "
        "analyses it anyway"
    )
    for engine in ("duckdb", "spark"):
        with pytest.raises(DeliveryLogError) as refused:
            campaign_results(junk, terms, engine=engine, spark=spark)
        assert str(refused.value) == refusal, engine
    with campaign_results(path, terms) as reference:
        want = _report(reference)
    with (
        campaign_results(junk, terms, force=True) as duck,
        campaign_results(junk, terms, engine="spark", spark=spark, force=True) as sp,
    ):
        # The junk lines are invalid deliveries outside every action: the results stand.
        assert _report(duck) == want
        _close(_report(sp), want, "forced")


def test_max_line_bytes_and_temp_directory_on_spark_as_on_duckdb(
    clean: Built, spark: Any, tmp_path: Path
) -> None:
    log, terms, path = clean
    # p2's one play, at the very start of A, made longer than the limit.
    padded = next(r for r in log.records if r["payload"]["playerId"] == "p2")
    padded["pad"] = "x" * LIMIT
    long_path = log.write(tmp_path / "long.jsonl")
    del padded["pad"]
    with campaign_results(path, terms) as reference:
        full = reference.report
    reports = {}
    for engine in ("duckdb", "spark"):
        spill = tmp_path / f"spill-{engine}"
        spill.mkdir()
        with campaign_results(
            long_path, terms, engine=engine, spark=spark, max_line_bytes=LIMIT,
            temp_directory=spill,
        ) as results:  # fmt: skip
            # The copy without the long line, in the directory given.
            assert [p.name for p in spill.glob("gptools-log-*/*")] == ["0-long.jsonl"], engine
            reports[engine] = _report(results)
        assert not list(spill.glob("gptools-log-*")), engine
    duck, sp = reports["duckdb"], reports["spark"]
    # The long line is a malformed line: p2's play is no action, so A lost one.
    assert duck["actions"] == full.actions - 1
    assert duck["attributed"] == full.attributed - 1
    a = next(c for c in duck["campaigns"] if c["campaign_id"] == "A")
    a_full = next(c for c in full.to_dict()["campaigns"] if c["campaign_id"] == "A")
    assert a["rounds_used"] == a_full["rounds_used"] - 1
    _close(sp, duck, "limited")
