"""A store outage is in the log (issue 34 item 3): every 503 the receiver answers while
the store is unavailable reaches ``delivery_log`` once the store is back, through a
bounded, owner-only spool per worker, replayed once (a crash mid-replay included, and a
SIGKILLed worker's spool taken over by a live one); past its bound a row is counted, not
kept. The age of the oldest action answered only 5xx comes from maintained state.

The outage is a TCP proxy in front of the machine's PostgreSQL that the test cuts and
restores: the server itself is never stopped (other engineers' tests share it).
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import stat
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from gptools.webhooks import ReceiverAuth, WebhookReceiver, open_store
from gptools.webhooks._file_locks import is_held
from gptools.webhooks._outage import OutageRecovery
from gptools.webhooks._records import LogEntry, WriteItem
from gptools.webhooks._spool import Spool, encode, unavailable_row
from tests._support.cli import serve_workers
from tests._support.proxy import TcpProxy
from tests.webhooks.conftest import (
    T0,
    ManualClock,
    ReceiverProcess,
    event,
    log_rows,
    serve_in_thread,
    wire,
)

HEADERS = {"authorization": "Bearer test-key", "content-type": "application/json"}
#: The spool loop at test speed (the defaults are 1 s and 15 s).
FAST = {"replay_every": timedelta(milliseconds=50), "refresh_every": timedelta(milliseconds=100)}
DEADLINE_S = 30.0


def _wait(what: str, predicate: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.02)


def _refused(url: str) -> list[dict[str, Any]]:
    return [r for r in log_rows(url) if r["status"] == 503]


def _count(name: str) -> float:
    """A counter of this process's registry (0 before its first use)."""
    return REGISTRY.get_sample_value(name) or 0.0


def _scrape(base_url: str) -> dict[str, float]:
    text = httpx.get(base_url + "/metrics", timeout=10).text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }


def _ready(base_url: str) -> None:
    """Wait for /readyz: the shared PostgreSQL server may be slow to give the first
    connection (other engineers' tests hold its locks for a while)."""
    _wait("the receiver is ready", lambda: httpx.get(base_url + "/readyz").status_code == 200)


def _settled(base_url: str, expected: dict[str, float]) -> None:
    """Scrape until every metric of ``expected`` has its value (the spool loop sets them
    once a round), or fail with what the last scrape said."""
    seen: dict[str, float] = {}

    def settled() -> bool:
        nonlocal seen
        seen = _scrape(base_url)
        return all(seen.get(name) == value for name, value in expected.items())

    try:
        _wait("the metrics settle", settled)
    except AssertionError:
        raise AssertionError(f"{expected} != { ({k: seen.get(k) for k in expected}) }") from None


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    """A proxy to the machine's PostgreSQL (cut and restored by the test)."""
    with TcpProxy(("127.0.0.1", 5432)) as p:
        yield p


def _through(url: str, proxy: TcpProxy) -> str:
    """``url`` (a store on the machine's PostgreSQL) reached through ``proxy``."""
    return url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}", 1)


def _receiver(store: Any, tmp_path: Path, **options: Any) -> WebhookReceiver:
    """A receiver of ``store`` (the test's key), its spool in the test's folder, its spool
    loop at test speed."""
    return WebhookReceiver(
        store,
        auth=ReceiverAuth.bearer("test-key"),
        spool_dir=tmp_path / "spool",
        outage_options=FAST,
        **options,
    )


def _spooled_lines(folder: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in folder.rglob("*.spool"))


def test_the_503s_of_an_outage_reach_the_log_and_the_analysis(
    pg_url: str, proxy: TcpProxy, tmp_path: Path
) -> None:
    clock = ManualClock()
    receiver = _receiver(_through(pg_url, proxy), tmp_path, clock=clock)
    before = [str(uuid.uuid4()) for _ in range(5)]
    during = [str(uuid.uuid4()) for _ in range(10)]
    #: (actionId or None, body sent, status meant, answer, received_at)
    sent: list[tuple[str | None, bytes, int, int, datetime]] = []
    replayed_before = _count("gptools_webhook_spool_replayed_total")
    with serve_in_thread(receiver) as srv, httpx.Client(headers=HEADERS, timeout=10) as http:
        _ready(srv.base_url)

        def post(body: bytes, action_id: str | None, meant: int, **headers: str) -> int:
            clock.now += timedelta(seconds=1)  # every request its own received_at
            status = http.post(srv.url, content=body, headers=headers).status_code
            sent.append((action_id, body, meant, status, clock.now))
            return status

        for a in before:
            assert post(wire(event(a)), a, 200) == 200
        proxy.cut()
        for a in [*during, *during[:2]]:  # two of them retried during the outage
            post(wire(event(a)), a, 200)
        post(b'{"hello": "stranger"}', None, 401, authorization="Bearer wrong")
        post(wire(event(actionId=None)), None, 422)  # no actionId: a 422 when the store is up
        assert [s for *_, s, _ in sent[5:]] == [503] * 14
        _wait("the spool holds every 503", lambda: receiver.outage.spool.waiting == 14)
        # The store is down: the oldest action answered only 5xx is read from the spool.
        assert receiver.outage.oldest_unacknowledged() == (clock.now - sent[5][4]).total_seconds()
        outage_over = clock.now
        proxy.open()
        _wait("the spool replayed", lambda: len(_refused(pg_url)) == 14)
        _wait("the spool emptied", lambda: receiver.outage.spool.waiting == 0)
        first_503 = {a: at for a, _, _, s, at in reversed(sent) if s == 503 and a}
        # The oldest action answered only 5xx: the first one refused.
        _wait(
            "the oldest unacknowledged action read",
            lambda: (
                receiver.outage.oldest_unacknowledged()
                == (clock.now - first_503[during[0]]).total_seconds()
            ),
        )
        for a in during[:5]:  # the provider's retries, acknowledged
            assert post(wire(event(a)), a, 200) == 200
        # Acknowledged ones are cleared: the oldest is now the first never acknowledged.
        age = (clock.now - first_503[during[5]]).total_seconds()
        _settled(
            srv.base_url,
            {
                "gptools_webhook_oldest_unacknowledged_seconds": age,
                "gptools_webhook_spool_rows": 0,
                "gptools_webhook_spool_replayed_total": replayed_before + 14,
            },
        )

    rows = log_rows(pg_url)
    refused = [r for r in rows if r["status"] == 503]
    answered = [(a, body, meant, at) for a, body, meant, s, at in sent if s == 503]
    assert Counter(r["action_id"] for r in refused) == Counter(a for a, *_ in answered)
    by_time = {r["received_at"]: r for r in refused}
    assert len(by_time) == len(refused) == 14
    for action_id, body, meant, at in answered:
        row = by_time[at]
        assert row["action_id"] == action_id
        assert row["body"] == body.decode()
        assert row["error"] == (
            f"unavailable: the store could not be written (it was to be answered {meant})"
        )
        assert row["auth_ok"] is (meant != 401)
        assert row["remote_addr"] == "127.0.0.1"
        assert row["duplicate"] is False
        assert row["latency_ms"] > 0
        assert sent[4][4] < row["received_at"] <= outage_over

    from gptools.deliverylog import analyze

    with analyze(pg_url) as analysis:
        report = analysis.report
        pending = set(analysis.pending_actions()["action_id"])
    # 5 acknowledged before; 10 refused (two of them twice), 5 of them acknowledged after;
    # two refused bodies without an actionId.
    assert report.deliveries == 5 + 14 + 5
    assert report.actions == 15
    assert report.acknowledged_actions == 10
    assert report.retries == 2 + 5
    assert report.pending_actions == 5
    assert report.lost_actions == 0
    assert report.invalid_deliveries_without_action_id == 2
    assert report.status_counts["503"] == 14
    assert pending == set(during[5:])


def test_rows_the_time_out_answered_before_the_batch_failed_are_spooled(
    pg_url: str, proxy: TcpProxy, tmp_path: Path
) -> None:
    store = open_store(_through(pg_url, proxy), connect_timeout=timedelta(seconds=1))
    receiver = _receiver(store, tmp_path, ack_timeout=timedelta(milliseconds=300))
    ids = [str(uuid.uuid4()) for _ in range(3)]
    with serve_in_thread(receiver) as srv:
        _ready(srv.base_url)
        assert httpx.post(srv.url, content=wire(event()), headers=HEADERS).status_code == 200
        # The server's host goes away: the writer's reconnection hangs for a second, past
        # the requests' time-out; then the batch fails.
        proxy.hang()
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            answers = list(
                pool.map(
                    lambda a: (
                        httpx.post(
                            srv.url, content=wire(event(a)), headers=HEADERS, timeout=10
                        ).status_code
                    ),
                    ids,
                )
            )
        assert answers == [503] * 3
        _wait("the writer spooled them", lambda: receiver.outage.spool.waiting == 3)
        proxy.open()
        _wait("the spool replayed", lambda: len(_refused(pg_url)) == 3)
        _wait("the spool emptied", lambda: receiver.outage.spool.waiting == 0)
    refused = _refused(pg_url)
    assert sorted(r["action_id"] for r in refused) == sorted(ids)
    assert {r["error"] for r in refused} == {
        "unavailable: the durable write did not begin within the time-out"
        " (it was to be answered 200)"
    }
    assert all(r["latency_ms"] >= 300 for r in refused)


@pytest.mark.parametrize("bound", ["rows", "bytes"])
def test_past_its_bound_a_row_is_counted_not_kept(
    pg_url: str,
    proxy: TcpProxy,
    tmp_path: Path,
    bound: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = [f"00000000-0000-4000-8000-{i:012x}" for i in range(5)]
    # A spooled row of these deliveries, to size the byte bound: three fit, four do not.
    sample = LogEntry(T0, 200, wire(event(ids[0])).decode(), ids[0], remote_addr="127.0.0.1")
    line = len(encode(unavailable_row(sample, 0.012345)))
    bounds = {"rows": {"spool_max_rows": 3}, "bytes": {"spool_max_bytes": 3 * line + line // 2}}
    clock = ManualClock()
    receiver = _receiver(_through(pg_url, proxy), tmp_path, clock=clock, **bounds[bound])
    dropped_before = _count("gptools_webhook_spool_dropped_total")
    replayed_before = _count("gptools_webhook_spool_replayed_total")
    with serve_in_thread(receiver) as srv, httpx.Client(headers=HEADERS, timeout=10) as http:
        _ready(srv.base_url)
        assert http.post(srv.url, content=wire(event())).status_code == 200
        proxy.cut()
        answers = []
        for a in ids:
            clock.now += timedelta(seconds=1)
            answers.append(http.post(srv.url, content=wire(event(a))).status_code)
        assert answers == [503] * 5
        _wait("the spool counted the rest", lambda: receiver.outage.spool.waiting == 3)
        _wait(
            "the drops reach the metrics",
            lambda: _count("gptools_webhook_spool_dropped_total") - dropped_before == 2,
        )
        # The store is down: the gauge as the loop set it (a scrape would read the store).
        _wait(
            "the spool gauge says 3",
            lambda: REGISTRY.get_sample_value("gptools_webhook_spool_rows") == 3,
        )
        proxy.open()
        _settled(
            srv.base_url,
            {
                "gptools_webhook_spool_rows": 0,
                "gptools_webhook_spool_replayed_total": replayed_before + 3,
                "gptools_webhook_spool_dropped_total": dropped_before + 2,
            },
        )
    assert [r["action_id"] for r in _refused(pg_url)] == ids[:3]  # the first three kept
    warnings = [r for r in caplog.records if getattr(r, "event", None) == "spool_full"]
    assert len(warnings) == 1  # one line for a burst of drops
    assert (
        warnings[0]
        .getMessage()
        .startswith("log rows of 503 answers not kept: 1 (the spool is full")
    )


@pytest.mark.parametrize("crash", ["between two chunks", "before the file is deleted"])
def test_a_replay_cut_by_a_crash_writes_nothing_twice(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash: str
) -> None:
    store = open_store(store_url)
    store.connect().close()
    entries = [
        LogEntry(
            T0 + timedelta(milliseconds=i),
            503,
            wire(event(f"00000000-0000-4000-8000-{i:012x}")).decode(),
            f"00000000-0000-4000-8000-{i:012x}",
            error="unavailable: the store could not be written (it was to be answered 200)",
            latency_ms=1.5,
            remote_addr="127.0.0.1",
        )
        for i in range(1200)  # three replay transactions: 500, 500, 200
    ]
    first = OutageRecovery(store, spool_dir=tmp_path)
    assert all(first.spool.keep(e) for e in entries)

    class Killed(Exception):
        """The worker died here."""

    if crash == "between two chunks":
        real = Spool.replayed
        calls = []

        def replayed(self: Spool, segment: Any, rows: int) -> None:
            real(self, segment, rows)
            calls.append(rows)
            if len(calls) == 2:
                raise Killed

        monkeypatch.setattr(Spool, "replayed", replayed)
    else:

        def finished(self: Spool, segment: Any) -> None:
            raise Killed

        monkeypatch.setattr(Spool, "finished", finished)
    with pytest.raises(Killed):
        first.run_once()
    monkeypatch.undo()
    written = len(log_rows(store_url))
    assert written == (1000 if crash == "between two chunks" else 1200)
    # The worker dies: its lock is released, its file stays; a live one takes it over.
    first.spool.close()
    first.link.close()
    second = OutageRecovery(store, spool_dir=tmp_path)
    try:
        assert second.run_once() == 1200 - written
    finally:
        second.spool.close()
        second.link.close()
    rows = log_rows(store_url)
    assert Counter(r["received_at"] for r in rows) == Counter(e.received_at for e in entries)
    assert not list(tmp_path.rglob("*.spool"))
    conn = store.connect()
    try:
        assert conn.raw.execute("SELECT COUNT(*) FROM spool_replay_marks").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_sigkilled_workers_spool_is_replayed_once_by_a_live_one(
    pg_url: str,
    proxy: TcpProxy,
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
) -> None:
    spool = tmp_path / "spool"
    rp = receiver_process(_through(pg_url, proxy), workers=2, args=("--spool-dir", str(spool)))
    answers: list[tuple[str, int]] = []

    def deliver(n: int) -> None:
        for _ in range(n):
            a = str(uuid.uuid4())
            # A connection each, so that both workers get some.
            answers.append(
                (a, httpx.post(rp.url, content=wire(event(a)), headers=HEADERS).status_code)
            )

    _ready(rp.base_url)
    deliver(6)
    assert [s for _, s in answers] == [200] * 6
    proxy.cut()
    deliver(30)
    assert [s for _, s in answers[6:]] == [503] * 30
    _wait("every 503 spooled", lambda: _spooled_lines(spool) == 30)
    folder = next(spool.iterdir())
    assert stat.S_IMODE(folder.stat().st_mode) & 0o077 == 0
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in folder.iterdir())
    by_owner = Counter(p.name.split(".")[0] for p in folder.glob("*.spool"))
    owner = by_owner.most_common(1)[0][0]
    victim = int(owner.split("-")[0])
    os.kill(victim, signal.SIGKILL)
    _wait("the worker is dead", lambda: not _alive(victim))
    # While the store is still down, a live worker holds the dead one's spool.
    _wait("a live worker took the spool over", lambda: is_held(folder / f"{owner}.lock"))
    _wait("uvicorn started another worker", lambda: len(serve_workers(rp.proc.pid)) == 2)
    deliver(10)  # the outage goes on
    assert [s for _, s in answers[36:]] == [503] * 10
    proxy.open()
    _wait("every spool replayed", lambda: not list(spool.rglob("*.spool")), timeout=60)
    _wait("no lock of a dead worker left", lambda: len(list(folder.glob("*.lock"))) <= 2)
    refused = Counter(r["action_id"] for r in _refused(pg_url))
    assert refused == Counter(a for a, s in answers if s == 503)  # nothing lost or doubled
    assert rp.proc.poll() is None


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_oldest_unacknowledged_action_is_maintained_state(store_url: str) -> None:
    store = open_store(store_url)
    conn = store.connect()
    kept = timedelta(days=8)

    def rows(*entries: tuple[str, int, datetime, bool]) -> None:
        conn.write_batch(
            [
                WriteItem(
                    LogEntry(at, status, "{}", a, auth_ok=auth, latency_ms=1.0),
                    accept=status == 200,
                )
                for a, status, at, auth in entries
            ]
        )

    a, b, c, d = (str(uuid.uuid4()) for _ in range(4))
    try:
        assert conn.oldest_unacknowledged(T0, kept) is None
        rows((d, 200, T0 - timedelta(hours=3), True))  # acknowledged before its 5xx
        rows(
            (a, 503, T0, True),
            (b, 503, T0 + timedelta(hours=1), True),
            (c, 503, T0 - timedelta(hours=2), False),  # a stranger's: not an action of ours
            (d, 503, T0 - timedelta(hours=1), True),
            (a, 500, T0 + timedelta(hours=2), True),  # a later 5xx keeps the first
        )
        now = T0 + timedelta(days=1)
        assert conn.oldest_unacknowledged(now, kept) == T0
        rows((a, 200, T0 + timedelta(hours=3), True))  # acknowledged: cleared
        assert conn.oldest_unacknowledged(now, kept) == T0 + timedelta(hours=1)
        rows((b, 503, T0 - timedelta(hours=5), True))  # an earlier 5xx, replayed late
        assert conn.oldest_unacknowledged(now, kept) == T0 - timedelta(hours=5)
        # Past the retry window and the dedupe keys' day: the action cannot come again.
        assert conn.oldest_unacknowledged(T0 + timedelta(days=9), kept) is None
    finally:
        conn.close()


def test_the_spool_folder_defaults_follow_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gptools.webhooks._spool import default_spool_root, spool_directory

    sqlite = open_store(f"sqlite:///{tmp_path / 'db' / 'w.sqlite3'}")
    pg = open_store("postgresql://u@db.example/webhooks?schema=a")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_spool_root(sqlite) == tmp_path / "db" / "webhook-spool"
    assert default_spool_root(pg) == tmp_path / "xdg" / "gptools" / "webhook-spool"
    monkeypatch.setenv("STATE_DIRECTORY", f"{tmp_path / 'state'}:/elsewhere")
    assert default_spool_root(sqlite) == tmp_path / "state" / "webhook-spool"
    assert default_spool_root(pg) == tmp_path / "state" / "webhook-spool"
    # One folder per store: two schemas of one server never share a spool.
    other = open_store("postgresql://u@db.example/webhooks?schema=b")
    assert spool_directory(pg).parent == spool_directory(other).parent
    assert spool_directory(pg) != spool_directory(other)


def test_a_failed_batch_settles_the_race_with_the_time_out(tmp_path: Path) -> None:
    """Whoever comes first keeps a refused request's row, and only one: the writer when
    the time-out answered first, the request itself when the batch failed first."""
    import asyncio

    from gptools.webhooks import SQLiteStore
    from gptools.webhooks._writer import GroupCommitWriter, _Handover

    writer = GroupCommitWriter(SQLiteStore(tmp_path / "s.db"))
    handed: list[LogEntry] = []
    writer.on_unwritten = handed.extend
    loop = asyncio.new_event_loop()
    try:
        failed_first, expired_first = _Handover(), _Handover()
        for h in (failed_first, expired_first):
            h.pending.append(
                (WriteItem(LogEntry(T0, 200, "{}", "a"), accept=True), loop.create_future())
            )
        writer._unwritten([failed_first])
        failed_first.expire()  # too late: the request answers 503 and keeps its row
        expired_first.expire()
        writer._unwritten([expired_first])  # the time-out answered: the writer hands it on
    finally:
        loop.close()
    ((item, fut),) = failed_first.pending
    assert not fut.done() and item.log.status == 200
    assert handed == [expired_first.pending[0][0].log]
    assert handed[0].status == 503


def test_a_committed_row_whose_sync_failed_is_not_spooled(tmp_path: Path) -> None:
    """The 503 of a batch that was committed (its sync failed after) is not spooled: its
    row is in the log already, and a replay would write the request twice."""
    from gptools.webhooks import SQLiteStore, StoreError

    class FailingSync(SQLiteStore):
        failing = False

        def make_durable(self) -> None:
            if self.failing:
                raise StoreError("cannot sync: the disk went away")
            super().make_durable()

    store = FailingSync(tmp_path / "s.db")
    receiver = WebhookReceiver(
        store, auth=ReceiverAuth.none(), spool_dir=tmp_path / "spool", outage_options=FAST
    )
    a = str(uuid.uuid4())
    with serve_in_thread(receiver) as srv:
        _ready(srv.base_url)
        store.failing = True
        assert httpx.post(srv.url, content=wire(event(a)), headers=HEADERS).status_code == 503
        store.failing = False
        assert httpx.post(srv.url, content=wire(event(a)), headers=HEADERS).status_code == 200
    # Stopped: a spooled row would have been replayed by now (the store is up).
    rows = [(r["status"], r["duplicate"]) for r in log_rows(store.url) if r["action_id"] == a]
    assert rows == [(200, False), (200, True)]
    assert not list((tmp_path / "spool").rglob("*.spool"))


def test_a_spool_folder_that_cannot_be_made_is_bad_input(tmp_path: Path) -> None:
    from tests._support.cli import run_gptools

    afile = tmp_path / "a-file"
    afile.write_text("")
    result = run_gptools(
        *("webhooks", "serve", "--auth", "none", "--port", "0"),
        *("--store", f"sqlite:///{tmp_path / 's.db'}", "--spool-dir", str(afile / "spool")),
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot keep the outage spool in" in lines[0], result.stderr
    assert "--spool-dir" in lines[0]


def test_the_spool_options_say_their_defaults() -> None:
    from click.testing import CliRunner

    from gptools.cli import cli
    from gptools.webhooks._constants import DEFAULT_SPOOL_MAX_BYTES, DEFAULT_SPOOL_MAX_ROWS

    text = " ".join(CliRunner().invoke(cli, ["webhooks", "serve", "--help"]).output.split())
    # Said by the options' help, from ReceiverConfig's defaults.
    assert f"[default: {DEFAULT_SPOOL_MAX_ROWS}]" in text
    assert f"[default: {DEFAULT_SPOOL_MAX_BYTES}]" in text
