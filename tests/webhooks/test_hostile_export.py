"""Nothing a stranger sends can break an export or stop retention (issue 34 item 10).

Before: a 401 row holding ``{"bet": NaN}`` made ``webhooks export --format jsonl`` fail
with "a bug in gptools" after writing part of the file under its final name, and with an
``export_target`` every later export failed too, so nothing was ever purged. On
PostgreSQL a body with a NUL byte was answered 503 (and failed its whole group-commit
batch): PostgreSQL's text cannot hold one.

Here every hostile body of ``tests/_support/hostile_bodies.py`` goes to a real
``gptools webhooks serve`` with and without credentials; the log is exported in both
formats with an export target (the first half to JSONL, the rest to Parquet), each row
exactly once, the analyser reads every export, and a purge with a clock past retention
then removes every row.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from gptools import deliverylog, spec
from gptools.webhooks import (
    Maintenance,
    OutputRefusedError,
    ReceiverAuth,
    Store,
    WebhookReceiver,
    export_log,
    open_store,
)
from gptools.webhooks._constants import DEFAULT_PURGE_EVERY, EXPORT_SETTLE
from gptools.webhooks._log_io import LogOperations
from gptools.webhooks._records import LogEntry, StoreError, WriteItem, format_utc
from tests._support.cli import run_gptools
from tests._support.hostile_bodies import HOSTILE_BODIES, with_action_id
from tests.webhooks.conftest import JSON, T0, ManualClock, ReceiverProcess, serve_in_thread

TARGET = "archive"
KEY = {"authorization": "Bearer test-key"}

Key = tuple[str, int]


def _with_target(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}export_target={TARGET}"


def _send(rp: ReceiverProcess, cases: list[tuple[str, bytes]]) -> dict[tuple[str, bool], int]:
    """Each body with and without credentials (each time a fresh actionId): the answers."""
    answers = {}
    with httpx.Client(timeout=30) as http:
        for case, body in cases:
            for credentials in (True, False):
                sent = with_action_id(body, str(uuid.uuid4()))
                headers = {**JSON, **(KEY if credentials else {})}
                answers[case, credentials] = http.post(
                    rp.url, content=sent, headers=headers
                ).status_code
    return answers


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line, parse_float=Decimal) for line in path.read_text().splitlines()]


def _parquet(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    for row in rows:
        row["received_at"] = format_utc(row["received_at"])
    return rows


def _check_exported(
    exported: list[dict[str, Any]], stored: dict[Key, dict[str, Any]]
) -> Counter[Key]:
    """Each exported record is the stored row it names, its body as it is (the parsed
    object, or the text); returns the rows' keys counted."""
    seen: Counter[Key] = Counter()
    for record in exported:
        key = (record["received_at"], record["status"])
        row = stored[key]
        if "payload" in record:
            assert record["payload"] == json.loads(row["body"], parse_float=Decimal), key
        else:
            assert record["body"] == row["body"], key
        seen[key] += 1
    return seen


def _purged_rows(store: Store, clock: ManualClock) -> int:
    """One run of the receiver's purge at ``clock``: the log rows it removed."""
    maintenance = Maintenance(store, clock=clock)
    try:
        return maintenance.run_once()[1]
    finally:
        maintenance.link.close()


def _verdicts(analysis: deliverylog.DeliveryAnalysis) -> list[tuple[str, int, str | None]]:
    """Each delivery's time, status and the analyser's reason (None: a valid one)."""
    frame = analysis.attempts.execute()
    return sorted(
        (str(r.received_at), int(r.status), None if r.reason is None else str(r.reason))
        for r in frame.astype(object).where(frame.notna(), None).itertuples()
    )


def _not_json_at_all(cases: list[tuple[str, bytes]]) -> int:
    """How many bodies no JSON reader parses (nor DuckDB, which takes NaN and Infinity)."""
    unreadable = ("empty", "whitespace", "truncated", "trailing-garbage", "form", "utf-16")
    return sum(1 for case, _ in cases if case in unreadable or "surrogate" in case)


def test_every_hostile_body_is_exported_once_then_purged(
    tmp_path: Path,
    store_url: str,
    receiver_process: Callable[..., ReceiverProcess],
) -> None:
    url = _with_target(store_url)
    rp = receiver_process(url, args=("--refused-rows-per-second", "100000"))
    cases = list(HOSTILE_BODIES.items())
    half = len(cases) // 2
    answers = _send(rp, cases[:half])
    store = open_store(url)
    middle = datetime.now(UTC)
    # Nothing exported yet: retention keeps every row, however old the clock says it is.
    far = ManualClock(middle + spec.WEBHOOK_LOG_RETENTION + timedelta(days=1))
    assert _purged_rows(store, far) == 0
    first = export_log(
        store, tmp_path / "first.jsonl", format="jsonl", target=TARGET, now=middle + EXPORT_SETTLE
    )
    answers |= _send(rp, cases[half:])
    rp.terminate()

    # A stranger gets a 4xx, never a 5xx (the provider retries those, as if we were down).
    assert {k: s for k, s in answers.items() if s >= 500} == {}
    conn = store.connect()
    rows = list(conn.iter_log())
    conn.close()
    assert len(rows) == 2 * len(cases)
    stored = {(format_utc(r["received_at"]), r["status"]): r for r in rows}
    assert len(stored) == len(rows)

    second = export_log(
        store,
        tmp_path / "second.parquet",
        format="parquet",
        target=TARGET,
        now=datetime.now(UTC) + EXPORT_SETTLE + timedelta(seconds=1),
    )
    assert (first.records, second.records) == (2 * half, 2 * (len(cases) - half))
    seen = _check_exported(_jsonl(first.path), stored) + _check_exported(
        _parquet(second.path), stored
    )
    assert seen == Counter(dict.fromkeys(stored, 1)), "every row exactly once"

    # Whole exports too, through the command: every row, and the analyser reads each as
    # it reads the store itself (each row as what it is: the export changes no verdict).
    with deliverylog.analyze(store_url) as analysis:
        truth, verdicts = analysis.report.to_dict(), _verdicts(analysis)
    assert truth["deliveries"] == len(rows)
    for fmt in ("jsonl", "parquet"):
        out = tmp_path / f"all.{fmt}"
        done = run_gptools(
            "webhooks", "export", "--store", url, "--format", fmt, str(out), "--json"
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["records"] == len(rows)
        exported = _jsonl(out) if fmt == "jsonl" else _parquet(out)
        assert _check_exported(exported, stored) == Counter(dict.fromkeys(stored, 1))
        with deliverylog.analyze(out) as analysis:
            report, exported_verdicts = analysis.report, _verdicts(analysis)
            nan_rows = analysis.attempts.filter(analysis.attempts.bet.isnull()).execute()
        assert {**report.to_dict(), "source": None} == {**truth, "source": None}, fmt
        assert exported_verdicts == verdicts, fmt
        assert report.identity_holds, fmt
        # Not JSON, NaN, lone surrogates... are invalid deliveries, never a failure.
        assert report.invalid_deliveries >= 2 * _not_json_at_all(cases), fmt
        assert nan_rows.reason.notnull().all(), fmt

    # Both exports moved the mark past every row: the next round (the first one's lease
    # over) purges them all.
    far.now += DEFAULT_PURGE_EVERY
    assert _purged_rows(store, far) == len(rows)
    conn = store.connect()
    assert conn.log_count() == 0
    conn.close()


# -- a failed export -------------------------------------------------------------------


def _store_with_rows(tmp_path: Path, n: int, body: str = '{"bet": NaN}') -> str:
    url = f"sqlite:///{tmp_path / 's.db'}?export_target={TARGET}"
    conn = open_store(url).connect()
    conn.write_batch(
        [
            WriteItem(LogEntry(T0 + timedelta(seconds=i), 401, body, latency_ms=1.0))
            for i in range(n)
        ]
    )
    conn.close()
    return url


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_failed_export_leaves_no_file_and_moves_no_mark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    url = _store_with_rows(tmp_path, 5, body='{"bet": 1}')
    reading = LogOperations.iter_log

    def broken_after_three(self: LogOperations, **kwargs: Any) -> Iterator[dict[str, Any]]:
        for i, row in enumerate(reading(self, **kwargs)):
            if i == 3:
                raise StoreError("the store went away mid-export")
            yield row

    monkeypatch.setattr(LogOperations, "iter_log", broken_after_three)
    out = tmp_path / "out" / f"log.{fmt}"
    out.parent.mkdir()
    store = open_store(url)
    with pytest.raises(StoreError, match="mid-export"):
        export_log(store, out, format=fmt, target=TARGET, now=T0 + timedelta(days=1))
    assert list(out.parent.iterdir()) == []  # neither the name nor a temporary file
    conn = store.connect()
    assert conn.export_mark(TARGET) is None
    conn.close()

    monkeypatch.setattr(LogOperations, "iter_log", reading)
    result = export_log(store, out, format=fmt, target=TARGET, now=T0 + timedelta(days=1))
    assert result.records == 5
    assert [p.name for p in out.parent.iterdir()] == [out.name]
    assert (out.stat().st_mode & 0o777) == 0o600


def test_an_export_never_writes_through_a_symlink(tmp_path: Path) -> None:
    url = _store_with_rows(tmp_path, 2)
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours")
    out = tmp_path / "log.jsonl"
    out.symlink_to(victim)
    # The one rule for an output the user names (gptools._private_files.check_output):
    # a symbolic link is refused, neither written through nor replaced.
    with pytest.raises(OutputRefusedError, match="is a symbolic link"):
        export_log(open_store(url), out, format="jsonl")
    assert victim.read_text() == "not yours"
    assert out.is_symlink()


def test_the_cli_export_of_a_nan_body_is_whole(tmp_path: Path) -> None:
    url = _store_with_rows(tmp_path, 3)
    out = tmp_path / "log.jsonl"
    done = run_gptools("webhooks", "export", "--store", url, "--format", "jsonl", str(out))
    assert done.returncode == 0, done.stderr
    assert [r["body"] for r in _jsonl(out)] == ['{"bet": NaN}'] * 3
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []


def test_a_nul_byte_is_refused_and_logged_on_postgres(pg_url: str) -> None:
    """PostgreSQL's text cannot hold NUL: a body with one was answered 503 and failed the
    whole batch. Now it is refused as any other bad body, its row kept (NUL as U+FFFD)."""
    body = HOSTILE_BODIES["nul-raw"]
    receiver = WebhookReceiver(pg_url, auth=ReceiverAuth.bearer("test-key"))
    with serve_in_thread(receiver) as srv:
        answers = [
            httpx.post(srv.url, content=body, headers={**JSON, **KEY}).status_code,
            httpx.post(srv.url, content=body, headers=JSON).status_code,
            httpx.post(srv.base_url + "/x%00y", content=body, headers={**JSON, **KEY}).status_code,
        ]
    assert answers == [400, 401, 404]
    conn = open_store(pg_url).connect()
    try:
        rows = list(conn.iter_log())
    finally:
        conn.close()
    assert [r["status"] for r in rows] == [400, 401, 404]
    assert rows[0]["body"] == body.decode().replace("\x00", "\ufffd")
