"""Sources of any size: one file, a glob, a directory (date=YYYY-MM-DD/ partitions),
JSONL or Parquet, give the same report as the same records in one file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gptools.deliverylog import DeliveryLogError, analyze
from gptools.deliverylog._readers import connect_duckdb
from tests.deliverylog.conftest import LogBuilder, random_log, write_records
from tests.deliverylog.test_readers import _rounded


def _doc(source: Any, **kw: Any) -> dict[str, Any]:
    """The report without its source, floats to 9 significant digits (files read in
    parallel add floats in another order)."""
    with analyze(source, **kw) as analysis:
        doc = analysis.report.to_dict()
    doc.pop("source")
    return _rounded(doc)


@pytest.fixture(scope="module")
def builder() -> LogBuilder:
    return random_log(13, n_actions=120)


@pytest.fixture(scope="module")
def reference(builder: LogBuilder, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _doc(builder.write_jsonl(tmp_path_factory.mktemp("one") / "log.jsonl"))


def _split(builder: LogBuilder, root: Path, fmt: str) -> list[Path]:
    """The records in three daily partitions (and a writer's _SUCCESS marker)."""
    rows = builder.ordered()
    thirds = [rows[: len(rows) // 3], rows[len(rows) // 3 : 2 * len(rows) // 3],
              rows[2 * len(rows) // 3 :]]  # fmt: skip
    out = []
    for day, part in zip(("2026-03-01", "2026-03-02", "2026-03-03"), thirds, strict=True):
        folder = root / f"date={day}"
        folder.mkdir(parents=True)
        if fmt == "jsonl":
            out.append(write_records(folder / "part-0.jsonl", part, as_body=day.endswith("2")))
        else:
            sub = LogBuilder(records=part)
            out.append(sub.write_parquet(folder / "part-0.parquet"))
    (root / "_SUCCESS").write_text("")
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_directory_of_partitions(
    builder: LogBuilder, reference: dict[str, Any], tmp_path: Path, fmt: str
) -> None:
    _split(builder, tmp_path / "logs", fmt)
    assert _doc(tmp_path / "logs") == reference
    assert _doc(f"{tmp_path}/logs/date=*/*.{fmt}") == reference
    assert _doc(f"{tmp_path}/logs/**/*.{fmt}") == reference


def test_glob_and_directory_errors(tmp_path: Path) -> None:
    with pytest.raises(DeliveryLogError, match="no jsonl file matches"):
        analyze(f"{tmp_path}/nothing-*.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DeliveryLogError, match="no JSONL or Parquet log"):
        analyze(tmp_path / "empty")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    LogBuilder(1).write_jsonl(mixed / "a.jsonl")
    LogBuilder(1).write_parquet(mixed / "b.parquet")
    with pytest.raises(DeliveryLogError, match="both JSONL and Parquet"):
        analyze(mixed)
    assert _doc(mixed, format="parquet")["deliveries"] == 0


@pytest.mark.parametrize("fmt", ["auto", "jsonl"])
def test_a_name_that_names_no_log_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """An empty name would read the current folder (here one holding a log); a name
    longer than the system takes is refused as such, not as an I/O failure."""
    LogBuilder(1).write_jsonl(tmp_path / "a.jsonl")
    monkeypatch.chdir(tmp_path)
    for empty in ("", " "):
        with pytest.raises(DeliveryLogError) as caught:
            analyze(empty, format=fmt)  # type: ignore[arg-type]
        assert str(caught.value) == "an empty name names no delivery log"
    with pytest.raises(DeliveryLogError) as caught:
        analyze("y" * 300 + ".jsonl", format=fmt)  # type: ignore[arg-type]
    assert str(caught.value) == f"{'y' * 40}...{'y' * 14}.jsonl: File name too long"
    # 255 bytes is the longest name a Linux file system takes: only "no such file".
    with pytest.raises(DeliveryLogError) as caught:
        analyze("y" * 249 + ".jsonl", format=fmt)  # type: ignore[arg-type]
    assert str(caught.value) == f"{'y' * 249}.jsonl: no such file"


def test_memory_limit_and_spill_directory_are_set(tmp_path: Path) -> None:
    """DuckDB gets a deliberate memory limit and a spill directory (a log bigger than
    memory spills there instead of failing); both can be chosen."""
    con, tmp = connect_duckdb(memory_limit="300MB", temp_directory=tmp_path / "spill")
    try:
        limit = con.raw_sql("SELECT current_setting('memory_limit')").fetchone()[0]
        spill = con.raw_sql("SELECT current_setting('temp_directory')").fetchone()[0]
        assert limit == "286.1 MiB"  # 300 MB as DuckDB shows it: in MiB
        assert spill == str(tmp_path / "spill")
    finally:
        con.disconnect()
    assert tmp is None
    b = random_log(2, n_actions=30)
    path = b.write_jsonl(tmp_path / "log.jsonl")
    with analyze(path, memory_limit="256MB", temp_directory=tmp_path / "spill2") as analysis:
        assert analysis.report.deliveries == b.truth.deliveries
