"""A line that is not a JSON object (torn by a crash, truncated, binary) is an invalid
delivery ``malformed_line`` at its true line number; ``strict`` makes it an error."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import gptools.cli._analyze  # noqa: F401  (registers the command until the CLI imports it)
from gptools.cli import cli
from gptools.deliverylog import DeliveryLogError, analyze
from tests.deliverylog.conftest import START, LogBuilder, random_log


def _torn_log(tmp_path: Path) -> tuple[Path, LogBuilder, int]:
    """A log whose last line (the only attempt of an acknowledged action) is cut
    mid-object, as a receiver that crashed mid-write leaves it."""
    b = random_log(3, n_actions=40)
    last = START + timedelta(days=1)
    b.action([200], at=last)
    path = b.write_jsonl(tmp_path / "torn.jsonl")
    data = path.read_bytes()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: cut + 60])  # the last line keeps 60 bytes, no newline
    n_lines = data.count(b"\n")
    return path, b, n_lines


def test_torn_last_line_is_counted(tmp_path: Path) -> None:
    path, b, n_lines = _torn_log(tmp_path)
    t = b.truth
    with analyze(path) as analysis:
        r = analysis.report
        # The torn line is still a delivery, but no longer an attempt of its action.
        assert r.deliveries == t.deliveries
        assert r.actions == t.actions - 1 and r.acknowledged_actions == t.acknowledged - 1
        assert r.invalid_by_reason["malformed_line"] == 1
        assert r.invalid_deliveries == t.invalid + 1
        assert r.invalid_deliveries_without_action_id == t.invalid_without_action_id + 1
        assert r.identity_holds
        lines = analysis.malformed_lines()
        assert list(lines.line) == [n_lines] and list(lines.file) == [str(path)]
        # It has no time: the period and the status counts are the other deliveries'.
        assert sum(r.status_counts.values()) == r.deliveries - 1
        assert r.last_received_at is not None and r.last_received_at < START + timedelta(days=1)


def test_nul_filled_line_in_the_middle(tmp_path: Path) -> None:
    b = LogBuilder(9)
    for i in range(6):
        b.action([503, 200], at=START + timedelta(minutes=i), gaps=[30.0])
    path = b.write_jsonl(tmp_path / "nul.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    # Line 5 is blank (not a delivery) and line 6 a run of NUL bytes (a delivery).
    lines[4:4] = [b"\n", b"\x00" * 200 + b"\n"]
    path.write_bytes(b"".join(lines))
    with analyze(path) as analysis:
        r = analysis.report
        assert r.deliveries == b.truth.deliveries + 1
        assert (r.actions, r.retries, r.acknowledged_actions) == (6, 6, 6)
        assert r.invalid_by_reason == {"malformed_line": 1} and r.identity_holds
        assert list(analysis.malformed_lines().line) == [6]
        # The NUL line has no time, so no hour.
        hours = analysis.per_hour()
        assert hours.deliveries.sum() == r.deliveries - 1


@pytest.mark.parametrize(
    "line",
    [b'{"received_at": "2026-03-01T12:00:00.000000Z", "status": 200, "payload": {"actionId"',
     b"[1, 2, 3]", b'"just a string"', b"\xff\xfe\xfd not utf-8", b"{not json}"],
    ids=["truncated", "array", "string", "binary", "not-json"],
)  # fmt: skip
def test_every_kind_of_malformed_line(tmp_path: Path, line: bytes) -> None:
    b = LogBuilder(4)
    b.action([200], at=START)
    b.action([400], at=START + timedelta(seconds=1))
    path = b.write_jsonl(tmp_path / "log.jsonl")
    path.write_bytes(line + b"\n" + path.read_bytes())
    with analyze(path) as analysis:
        r = analysis.report
        assert (r.deliveries, r.actions, r.lost_actions) == (3, 2, 1)
        assert r.invalid_by_reason == {"malformed_line": 1} and r.identity_holds
        assert list(analysis.malformed_lines().line) == [1]


def test_strict_names_the_line(tmp_path: Path) -> None:
    path, _, n_lines = _torn_log(tmp_path)
    with pytest.raises(DeliveryLogError, match=rf"{path} line {n_lines} is not a JSON object"):
        analyze(path, strict=True)
    clean = LogBuilder(1)
    clean.action([200], at=START)
    with analyze(clean.write_jsonl(tmp_path / "clean.jsonl"), strict=True) as analysis:
        assert analysis.report.deliveries == 1


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_cli_strict_and_engine(tmp_path: Path, engine: str, spark: Any) -> None:
    path, b, n_lines = _torn_log(tmp_path)
    args = ["webhooks", "analyze", str(path), "--engine", engine, "--spark-master", "local[2]"]
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["invalid_by_reason"]["malformed_line"] == 1 and doc["check"]["holds"]
    assert doc["deliveries"] == b.truth.deliveries
    result = CliRunner().invoke(cli, [*args, "--strict"])
    assert result.exit_code == 2
    assert f"line {n_lines} is not a JSON object" in result.output
    assert "Traceback" not in result.output
