"""One run per journal: a second run of the same load stops at once (exit 2, naming the
first run's pid) instead of sending the same chunks again; and acknowledgements are
committed to survive a power loss (``synchronous=FULL``)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.participants import JournalBusyError, load_participants
from gptools.participants._journal import Identity, Journal
from gptools.participants._sources import PlayerRow
from gptools.sandbox import FaultRule, RunningSandbox
from tests._support.cli import start_gptools
from tests.participants.conftest import (
    BRAND,
    cli_env,
    load_args,
    make_client,
    new_campaign,
    participant_requests,
)

IDENTITY = Identity("http://h", "CMP-1", BRAND, "f" * 64)


def test_a_second_open_of_an_open_journal_is_refused_with_the_owners_pid(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    first = Journal.open(path, IDENTITY)
    try:
        with pytest.raises(
            JournalBusyError, match=rf"already running \(pid {os.getpid()}\)"
        ) as caught:
            Journal.open(path, IDENTITY)
        assert caught.value.pid == os.getpid()
    finally:
        first.close()
    Journal.open(path, IDENTITY).close()  # free again once the first run closed it


def test_acknowledgements_are_committed_to_survive_a_power_loss(tmp_path: Path) -> None:
    book = Journal.open(tmp_path / "j.sqlite", IDENTITY)
    try:
        book.stage(iter(()), lambda raw: raw or "", chunk_size=10, settings={})

        def synchronous() -> int:
            return int(book._db.execute("PRAGMA synchronous").fetchone()[0])

        assert synchronous() == 2  # FULL: the WAL is synced at every commit
        book.mark_sent(0)  # the one commit that need not be synced ...
        assert synchronous() == 2  # ... leaves the connection durable again
    finally:
        book.close()


def test_a_second_run_of_the_same_load_exits_2_while_the_first_runs(
    fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    with make_client(fresh_sandbox) as client:
        campaign = new_campaign(client)
    ids = [f"l-{i:03d}" for i in range(60)]
    players = tmp_path / "players.csv"
    players.write_text("playerId\n" + "\n".join(ids) + "\n", encoding="utf-8")
    journal = tmp_path / "journal.sqlite"
    env = {**os.environ, **cli_env(fresh_sandbox)}
    args = load_args(players, campaign, tmp_path, "--chunk-size", "10")
    # Slow answers keep the first run busy for a few seconds.
    fresh_sandbox.faults.add(FaultRule("POST /campaign/*/participant", latency_s=1.0))
    first = start_gptools(*args, env=env)
    try:
        lock = journal.with_name(journal.name + ".lock")
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None, f"the first run ended early: {first.communicate()}"
            assert time.monotonic() < deadline, "the first run never took the journal"
            time.sleep(0.01)  # readiness poll, bounded by the deadline
        second = CliRunner().invoke(cli, args, env=cli_env(fresh_sandbox))
        assert first.poll() is None, "the first run must still be running"
        assert second.exit_code == 2, second.output
        assert f"a load of this campaign is already running (pid {first.pid})" in second.output
    finally:
        _out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    # The second run sent nothing: every id went exactly once, from the first run.
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(ids, 1)
    assert len(participant_requests(fresh_sandbox)) == 6
    db = sqlite3.connect(journal)
    assert db.execute("SELECT count(*) FROM chunks WHERE state = 'acknowledged'").fetchone() == (6,)
    db.close()
    # Once the first run is over, the same load may run again (nothing left to send).
    fresh_sandbox.faults.clear()
    with make_client(fresh_sandbox) as client:
        again = load_participants(
            client, campaign, players, brand=BRAND, journal=journal, progress=False
        )
    assert again.resumed and again.complete and again.requests == 0


def test_a_batch_commits_answers_together_and_keeps_them_on_ctrl_c(tmp_path: Path) -> None:
    book = Journal.open(tmp_path / "j.sqlite", IDENTITY)
    try:
        rows = (PlayerRow(line, f"b-{line}") for line in range(1, 7))
        book.stage(rows, lambda raw: raw or "", chunk_size=2, settings={})
        with book.batch():
            book.record(0, loaded=[0, 1])
            book.record(1, loaded=[2, 3])
        with pytest.raises(KeyboardInterrupt), book.batch():
            book.record(2, loaded=[4])
            raise KeyboardInterrupt
        with pytest.raises(RuntimeError), book.batch():
            book.record(2, loaded=[5])
            raise RuntimeError("a failed write")
        counts = book.counts()
        # Both batches' answers are in, the interrupted one included; the failed one is not.
        assert (counts.loaded, counts.not_attempted, counts.chunks_acknowledged) == (5, 1, 2)
    finally:
        book.close()
