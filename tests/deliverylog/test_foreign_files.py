"""Files that are not what their name says: compressed logs under any name, a Parquet
export named .jsonl, a CSV read as JSONL, lines over the reader's limit, a Parquet file
whose payload struct lacks fields, a file whose name holds glob characters. Each is read
for what it is, or refused in one line (exit 2); DuckDB and Spark agree on every log."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import gptools.cli._analyze  # noqa: F401  (registers the command until the CLI imports it)
from gptools.cli import cli
from gptools.deliverylog import DEFAULT_MAX_LINE_BYTES, DeliveryLogError, _files, analyze
from tests.deliverylog.conftest import START, LogBuilder, random_log
from tests.deliverylog.test_engines import _close, _same
from tests.deliverylog.test_readers import _rounded

BAD = b"\xff\xfe binary \x00\x01"


def _doc(source: Any, **kw: Any) -> dict[str, Any]:
    with analyze(source, **kw) as analysis:
        doc = analysis.report.to_dict()
    doc.pop("source")
    return _rounded(doc)


def _with_bad_line(path: Path, at: int) -> Path:
    """A binary line inserted before line ``at`` (1-based) of a JSONL file."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(at - 1, BAD + b"\n")
    path.write_bytes(b"".join(lines))
    return path


def _compress(plain: Path, target: Path, codec: str) -> Path:
    data = plain.read_bytes()
    if codec == "gzip":
        target.write_bytes(gzip.compress(data))
    else:
        with pa.output_stream(str(target), compression="zstd") as out:
            out.write(data)
    return target


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated log with a binary line at line 7."""
    folder = tmp_path_factory.mktemp("plain")
    return _with_bad_line(random_log(41, n_actions=80).write_jsonl(folder / "log.jsonl"), 7)


@pytest.mark.parametrize(
    ("name", "codec"),
    [("log.jsonl.gz", "gzip"), ("log.jsonl.zst", "zstd"), ("gz.jsonl", "gzip"),
     ("zst.jsonl", "zstd"), ("no-suffix", "gzip")],
)  # fmt: skip
def test_compressed_log_is_read_whatever_its_name(
    plain: Path, tmp_path: Path, name: str, codec: str
) -> None:
    path = _compress(plain, tmp_path / name, codec)
    assert _doc(path) == _doc(plain)
    with analyze(path) as analysis:
        assert analysis.report.invalid_by_reason["malformed_line"] == 1
        # The malformed line is named in the user's file, at its true number.
        found = analysis.malformed_lines()
        assert list(found.file) == [str(path)] and list(found.line) == [7]


def test_compressed_logs_on_both_engines(spark: Any, plain: Path, tmp_path: Path) -> None:
    """One folder of every compression under honest and misleading names (Spark picks
    gzip by name and has no zstd here: it reads stand-ins), plus the plain log."""
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(plain.read_bytes())
    misleading = [("b.jsonl.gz", "gzip"), ("c.jsonl.zst", "zstd"), ("d.jsonl", "gzip"),
                  ("e.jsonl", "zstd")]  # fmt: skip
    for i, (name, codec) in enumerate(misleading):
        log = random_log(50 + i, n_actions=20).write_jsonl(tmp_path / f"{i}.jsonl")
        _with_bad_line(log, 3)
        _compress(log, folder / name, codec)
    with analyze(folder) as duck, analyze(folder, engine="spark", spark=spark) as sp:
        assert duck.report.invalid_by_reason["malformed_line"] == 5
        _same(duck, sp, list(duck.lost_actions().action_id[:2]))


def test_parquet_named_jsonl_is_read_as_parquet(tmp_path: Path) -> None:
    b = random_log(43, n_actions=60)
    reference = _doc(b.write_parquet(tmp_path / "log.parquet"))
    assert _doc(b.write_parquet(tmp_path / "out.jsonl")) == reference
    # Said to be JSONL, it is refused for what it is, not read as 500 malformed lines.
    with pytest.raises(DeliveryLogError, match=r"out\.jsonl: is a Parquet file, not JSONL"):
        analyze(tmp_path / "out.jsonl", format="jsonl")


def _csv(path: Path, rows: int = 2_000) -> Path:
    path.write_text("player_id\n" + "".join(f"u-{i}\n" for i in range(rows)))
    return path


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_a_file_that_is_not_jsonl_is_refused(tmp_path: Path, engine: str, spark: Any) -> None:
    path = _csv(tmp_path / "big.csv")
    args = ["webhooks", "analyze", str(path), "--format", "jsonl", "--engine", engine,
            "--spark-master", "local[2]"]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "does not look like a JSONL delivery log" in result.output
    assert "1000 of its first 1000 lines are not JSON objects" in result.output
    assert "--force" in result.output and "Traceback" not in result.output
    forced = CliRunner().invoke(cli, [*args, "--force", "--json"])
    assert forced.exit_code == 0, forced.output
    doc = json.loads(forced.stdout)
    assert doc["deliveries"] == 2_001 and doc["invalid_by_reason"] == {"malformed_line": 2_001}


def test_mostly_objects_is_a_log_and_an_empty_file_too(tmp_path: Path) -> None:
    """The sniff refuses only when more than half of the sampled lines are not objects."""
    b = LogBuilder(3)
    b.action([200, 200], at=START)
    path = b.write_jsonl(tmp_path / "log.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    path.write_bytes(lines[0] + BAD + b"\n" + lines[1] + BAD + b"\n")  # half are objects
    with analyze(path) as analysis:
        assert analysis.report.invalid_by_reason == {"malformed_line": 2}
    path.write_bytes(lines[0] + (BAD + b"\n") * 2 + lines[1] + BAD + b"\n")
    with pytest.raises(DeliveryLogError, match="3 of its first 5 lines are not JSON objects"):
        analyze(path)
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with analyze(tmp_path / "empty.jsonl") as analysis:
        assert analysis.report.deliveries == 0


def _long_line_log(tmp_path: Path, json_bytes: int, binary_bytes: int) -> tuple[Path, LogBuilder]:
    """A generated log with a JSON object line of ``json_bytes`` at line 4 and a binary
    line of ``binary_bytes`` at line 9, written without holding either in memory whole."""
    b = random_log(47, n_actions=30)
    path = b.write_jsonl(tmp_path / "long.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    head = b'{"received_at": "2026-03-01T12:00:00.000000Z", "status": 200, "body": "'
    with path.open("wb") as out:
        for number, line in enumerate(lines, start=1):
            if number == 4:
                out.write(head)
                _fill(out, json_bytes - len(head) - 2, b"x")
                out.write(b'"}\n')
            if number == 8:
                _fill(out, binary_bytes, b"\x00\xff")
                out.write(b"\n")
            out.write(line)
    t = b.truth
    t.deliveries += 2
    t.invalid += 2
    t.invalid_without_action_id += 2
    t.invalid_by_reason["malformed_line"] += 2
    return path, b


def _fill(out: Any, n: int, unit: bytes) -> None:
    block = (unit * (1 << 20))[: 1 << 20]
    for _ in range(n // len(block)):
        out.write(block)
    out.write(block[: n % len(block)])


def _truth_holds(analysis: Any, b: LogBuilder, path: Path) -> None:
    r, t = analysis.report, b.truth
    assert (r.deliveries, r.actions, r.retries, r.duplicate_deliveries) == (
        t.deliveries, t.actions, t.retries, t.duplicates,
    )  # fmt: skip
    assert r.invalid_by_reason == dict(t.invalid_by_reason) and r.identity_holds
    found = analysis.malformed_lines()
    assert list(found.file) == [str(path)] * 2 and list(found.line) == [4, 9]


def test_lines_over_a_configured_limit_on_both_engines(spark: Any, tmp_path: Path) -> None:
    path, b = _long_line_log(tmp_path, json_bytes=20_000, binary_bytes=9_000)
    kw: dict[str, Any] = {"max_line_bytes": 8_192}
    with analyze(path, **kw) as duck, analyze(path, engine="spark", spark=spark, **kw) as sp:
        for analysis in (duck, sp):
            _truth_holds(analysis, b, path)
        _same(duck, sp, sorted(b.truth.lost_ids)[:2])
    # Under the default limit the JSON line is an object (invalid: no payload).
    with analyze(path) as analysis:
        assert analysis.report.invalid_by_reason["malformed_line"] == 1
    with pytest.raises(DeliveryLogError, match=rf"{path} line 4 is not a JSON object"):
        analyze(path, strict=True, **kw)


def test_long_lines_at_the_default_limit_in_bounded_memory(tmp_path: Path) -> None:
    """A 200 MB JSON line and a 100 MB binary line: each one malformed line with its
    number, exit 0, and the process never holds either line."""
    path, b = _long_line_log(tmp_path, json_bytes=200_000_000, binary_bytes=100_000_000)
    # The command reports its own peak as it exits: the high-water RSS of its own address
    # space (VmHWM, reset by exec). Not ru_maxrss: Linux carries the parent's high-water
    # RSS into a child's ru_maxrss across fork and exec, so the command would "peak" at
    # whatever this test session's process had grown to (Spark, in-process analyses:
    # 400-465 MB after other analysis tests, 256 MB alone).
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write(''.join("
        "'PEAK_KB ' + l.split()[1] + '\\n' for l in open('/proc/self/status') "
        "if l.startswith('VmHWM:'))))\n"
        "from gptools.cli import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "webhooks", "analyze", str(path), "--json"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["deliveries"] == b.truth.deliveries and doc["check"]["holds"]
    assert doc["invalid_by_reason"]["malformed_line"] == 2
    peaks = [line.split()[1] for line in result.stderr.splitlines() if line.startswith("PEAK_KB ")]
    assert len(peaks) == 1, result.stderr
    peak_mb = int(peaks[0]) / 1024
    print(f"peak {peak_mb:.0f} MB")
    # The command alone peaks at about 260 MB (the interpreter, DuckDB, 110 MB of it mapped
    # libraries), whatever ran before it. Holding the 200 MB line would add it once as bytes
    # and once decoded (400 MB more); 350 MB leaves room for the machine's variation and
    # none for holding even the 100 MB binary line.
    assert peak_mb < 350, peak_mb
    with analyze(path) as analysis:
        _truth_holds(analysis, b, path)


def test_max_line_bytes_is_an_option(tmp_path: Path) -> None:
    path, _ = _long_line_log(tmp_path, json_bytes=20_000, binary_bytes=9_000)
    args = ["webhooks", "analyze", str(path), "--json"]
    default = json.loads(CliRunner().invoke(cli, args).stdout)
    limited = json.loads(CliRunner().invoke(cli, [*args, "--max-line-bytes", "8192"]).stdout)
    assert default["invalid_by_reason"]["malformed_line"] == 1
    assert limited["invalid_by_reason"]["malformed_line"] == 2
    bad = CliRunner().invoke(cli, [*args, "--max-line-bytes", "0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "16 MiB" in CliRunner().invoke(cli, ["webhooks", "analyze", "--help"]).output
    assert DEFAULT_MAX_LINE_BYTES == 16 * 2**20


def _reference_split(data: bytes, limit: int) -> bytes:
    """The rule, line by line: a line over ``limit`` bytes (its newline apart) becomes
    the marker."""
    parts = data.split(b"\n")
    return b"\n".join(_files.OVERSIZED_MARKER if len(p) > limit else p for p in parts)


@pytest.mark.parametrize("seed", range(40))
def test_long_line_rule_at_every_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Lines at, under and over the limit, across read boundaries (tiny reads), equal to
    the rule applied line by line."""
    rng = random.Random(seed)
    limit = rng.choice([1, 5, 16, 33])
    monkeypatch.setattr(_files, "_CHUNK", rng.choice([1, 3, 7, 64]))
    lines = [b"a" * rng.choice([0, limit - 1, limit, limit + 1, 3 * limit, rng.randrange(80)])
             for _ in range(60)]  # fmt: skip
    data = b"\n".join(lines) + rng.choice([b"", b"\n"])
    path = tmp_path / "lines.jsonl"
    path.write_bytes(data)
    got = b"".join(_files.OVERSIZED_MARKER if p is None else p for p in _files.pieces(path, limit))
    assert got == _reference_split(data, limit)
    expected = sum(len(p) > limit for p in data.split(b"\n"))
    assert _files.count_long_lines(path, limit) == expected


def _struct_parquet(path: Path, fields: list[str]) -> Path:
    payload = [{f: "x" for f in fields} for _ in range(3)]
    table = pa.table(
        {
            "received_at": ["2026-03-01T12:00:00.000000Z"] * 3,
            "status": [200] * 3,
            "latency_ms": [1.0] * 3,
            "payload": payload,
        }
    )
    pq.write_table(table, path)
    return path


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_parquet_payload_without_a_field_is_named(tmp_path: Path, engine: str, spark: Any) -> None:
    path = _struct_parquet(tmp_path / "foreign.parquet", ["actionId", "gameId", "playerId"])
    with pytest.raises(DeliveryLogError, match="'payload' column has no field roundId, timestamp"):
        analyze(path, engine=engine, spark=spark)
    args = ["webhooks", "analyze", str(path), "--engine", engine, "--spark-master", "local[2]"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and "roundId" in result.output


def test_an_existing_path_is_read_literally(spark: Any, tmp_path: Path) -> None:
    """``glob[1].jsonl`` is that file, even beside ``glob1.jsonl`` (which the pattern
    would match), on both engines; a pattern that names no file is still a pattern."""
    literal = _with_bad_line(
        random_log(53, n_actions=25).write_jsonl(tmp_path / "glob[1].jsonl"), 2
    )
    random_log(59, n_actions=10).write_jsonl(tmp_path / "glob1.jsonl")
    with analyze(literal) as duck, analyze(literal, engine="spark", spark=spark) as sp:
        assert duck.report.deliveries == random_log(53, n_actions=25).truth.deliveries + 1
        assert list(duck.malformed_lines().file) == [str(literal)]
        _same(duck, sp, [])
    with analyze(tmp_path / "glob[0-9].jsonl") as analysis:
        assert analysis.report.deliveries == random_log(59, n_actions=10).truth.deliveries


def test_an_existing_parquet_path_is_read_literally(spark: Any, tmp_path: Path) -> None:
    literal = random_log(61, n_actions=25).write_parquet(tmp_path / "glob[1].parquet")
    random_log(67, n_actions=10).write_parquet(tmp_path / "glob1.parquet")
    with analyze(literal) as duck, analyze(literal, engine="spark", spark=spark) as sp:
        assert duck.report.deliveries == random_log(61, n_actions=25).truth.deliveries
        one, two = duck.report.to_dict(), sp.report.to_dict()
        assert one.pop("source") == two.pop("source") == str(literal)
        _close(one, two, "report")
