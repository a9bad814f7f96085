"""A load killed with a real SIGKILL at a seeded point, then resumed: every valid id is
loaded and no acknowledged chunk is sent again (read from the sandbox's own records)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from gptools.sandbox import RunningSandbox
from tests._support.cli import start_gptools
from tests.participants.conftest import (
    cli_env,
    load_args,
    make_client,
    new_campaign,
    participant_requests,
)

CHUNK = 50
IDS = 10_000
SEED = 20260321


def _acknowledged(journal: Path) -> int:
    if not journal.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=1)
        try:
            return int(
                db.execute("SELECT count(*) FROM chunks WHERE state = 'acknowledged'").fetchone()[0]
            )
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0  # the file exists but its tables are not created yet


@pytest.mark.slow
def test_sigkill_then_resume(fresh_sandbox: RunningSandbox, tmp_path: Path) -> None:
    with make_client(fresh_sandbox) as client:
        campaign = new_campaign(client)
    ids = [f"k-{i:05d}" for i in range(IDS)]
    players = tmp_path / "players.csv"
    players.write_text("playerId\n" + "\n".join(ids) + "\n", encoding="utf-8")
    journal = tmp_path / "journal.sqlite"
    env = {**os.environ, **cli_env(fresh_sandbox)}
    args = load_args(players, campaign, tmp_path, "--chunk-size", str(CHUNK), "--json")
    total_chunks = IDS // CHUNK
    threshold = random.Random(SEED).randint(20, total_chunks - 60)

    proc = start_gptools(*args, env=env)
    deadline = time.monotonic() + 120
    try:
        while _acknowledged(journal) < threshold:
            assert proc.poll() is None, f"the load ended before the kill: {proc.communicate()}"
            assert time.monotonic() < deadline, "the load never reached the kill point"
            time.sleep(0.002)  # readiness poll of the journal, bounded by the deadline
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.communicate(timeout=30)  # reaps it and closes its pipes
    assert proc.returncode == -signal.SIGKILL
    killed_at = time.monotonic()

    db = sqlite3.connect(journal)
    states = db.execute("SELECT chunk_no, first_seq, last_seq, state FROM chunks").fetchall()
    seq_to_id = dict(db.execute("SELECT seq, player_id FROM ids").fetchall())
    db.close()
    acked_ids = {
        seq_to_id[s] for _, a, b, st in states if st == "acknowledged" for s in range(a, b + 1)
    }
    unknown_ids = {seq_to_id[s] for _, a, b, st in states if st == "sent" for s in range(a, b + 1)}
    acked = sum(st == "acknowledged" for *_, st in states)
    assert threshold <= acked < total_chunks
    before = len(participant_requests(fresh_sandbox))

    resumed = start_gptools(*args, env=env)
    out, err = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, err
    summary = json.loads(out)
    assert summary["resumed"] is True
    assert summary["loaded"] == IDS and summary["complete"] and summary["balanced"]
    assert summary["loaded_this_run"] == IDS - len(acked_ids)
    assert summary["unknown_resent"] == sum(st == "sent" for *_, st in states)
    assert time.monotonic() - killed_at < 180

    # Every valid id is a participant; ids of acknowledged chunks were added exactly once;
    # only chunks in flight at the kill (answer unknown) may have been added twice.
    counts = fresh_sandbox.state.participants(campaign)
    assert set(counts) == set(ids)
    assert all(counts[p] == 1 for p in acked_ids)
    assert {p for p, n in counts.items() if n > 1} <= unknown_ids
    # The resumed run's requests named no id of an acknowledged chunk.
    after = participant_requests(fresh_sandbox)[before:]
    sent_again = {p for r in after for p in json.loads(r.body)["playerIds"]}
    assert sent_again.isdisjoint(acked_ids)
    assert sent_again == set(ids) - acked_ids
