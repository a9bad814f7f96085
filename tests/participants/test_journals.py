"""Issue 23 item 2: a journal is trusted only for the server (and sandbox state) it was
made against; the journals are listed (status), discarded (--restart) and pruned."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.client import Client
from gptools.participants import (
    journal_summaries,
    journal_summary,
    load_participants,
    prune_journals,
)
from gptools.participants._journal import Identity, Journal, JournalMismatchError
from gptools.participants._sources import PlayerRow, open_source
from gptools.participants._validate import check_player_id
from gptools.sandbox import RunningSandbox
from tests.participants.conftest import (
    BRAND,
    cli_env,
    make_client,
    new_campaign,
    participant_requests,
)

IDS = [f"j-{i:03d}" for i in range(30)]


@pytest.fixture
def players(tmp_path: Path) -> Path:
    path = tmp_path / "players.csv"
    path.write_text("playerId\n" + "\n".join(IDS) + "\n", encoding="utf-8")
    return path


def _campaign(sb: RunningSandbox) -> str:
    with make_client(sb) as client:
        return new_campaign(client)


@pytest.mark.parametrize("explicit_journal", [False, True])
def test_a_journal_of_a_reset_sandbox_is_set_aside_never_trusted(
    fresh_sandbox: RunningSandbox,
    players: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    explicit_journal: bool,
) -> None:
    monkeypatch.setenv("GPTOOLS_JOURNAL_DIR", str(tmp_path / "journals"))
    journal = tmp_path / "mine.sqlite" if explicit_journal else None
    campaign = _campaign(fresh_sandbox)
    with make_client(fresh_sandbox) as client:
        first = load_participants(
            client, campaign, players, brand=BRAND, journal=journal, progress=False
        )
    assert first.complete and first.loaded == len(IDS)

    # The sandbox restarts with a fresh state; the plan is applied again: same campaign id.
    fresh_sandbox.reset()
    assert _campaign(fresh_sandbox) == campaign
    notices: list[str] = []
    with make_client(fresh_sandbox) as client:
        again = load_participants(
            client,
            campaign,
            players,
            brand=BRAND,
            journal=journal,
            progress=False,
            notice=notices.append,
        )
    assert not again.resumed and again.loaded_this_run == len(IDS)
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(IDS, 1)
    assert len(notices) == 1 and "\n" not in notices[0]
    assert "set aside" in notices[0] and "another server or sandbox state" in notices[0]
    assert again.set_aside is not None and again.set_aside.exists()
    assert again.journal == first.journal  # the path is reused, the old file moved away
    aside = journal_summary(again.set_aside)
    assert (aside.state, aside.loaded, aside.campaign_id) == ("set aside", len(IDS), campaign)
    assert aside.note is not None and fresh_sandbox.identity in aside.note
    if not explicit_journal:
        listed = {s.path: s.state for s in journal_summaries()}
        assert listed == {again.set_aside: "set aside", again.journal: "complete"}


def test_a_journal_of_another_campaign_or_input_is_still_refused(
    fresh_sandbox: RunningSandbox, players: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "j.sqlite"
    first = _campaign(fresh_sandbox)
    second = _campaign(fresh_sandbox)
    with make_client(fresh_sandbox) as client:
        load_participants(client, first, players, brand=BRAND, journal=journal, progress=False)
        with pytest.raises(Exception, match="journal of another load"):
            load_participants(client, second, players, brand=BRAND, journal=journal, progress=False)
        # --restart discards it deliberately.
        summary = load_participants(
            client, second, players, brand=BRAND, journal=journal, progress=False, restart=True
        )
    assert summary.loaded_this_run == len(IDS) and not summary.resumed


def test_restart_sends_everything_again(
    fresh_sandbox: RunningSandbox, players: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "j.sqlite"
    campaign = _campaign(fresh_sandbox)
    with make_client(fresh_sandbox) as client:
        load_participants(client, campaign, players, brand=BRAND, journal=journal, progress=False)
        before = len(participant_requests(fresh_sandbox))
        resumed = load_participants(
            client, campaign, players, brand=BRAND, journal=journal, progress=False
        )
        assert resumed.resumed and resumed.requests == 0
        again = load_participants(
            client, campaign, players, brand=BRAND, journal=journal, progress=False, restart=True
        )
    assert not again.resumed and again.loaded_this_run == len(IDS)
    assert len(participant_requests(fresh_sandbox)) > before
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(IDS, 2)


def test_an_empty_list_leaves_no_journal(fresh_sandbox: RunningSandbox, tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("playerId\n", encoding="utf-8")
    campaign = _campaign(fresh_sandbox)
    with make_client(fresh_sandbox) as client:
        summary = load_participants(
            client, campaign, empty, brand=BRAND, journal=tmp_path / "j.sqlite", progress=False
        )
    assert summary.rows == 0
    assert not (tmp_path / "j.sqlite").exists()
    assert len(summary.to_frame()) == 0


def _ident(campaign: str, fingerprint: str = "f") -> Identity:
    return Identity("sandbox:0000000000000000", campaign, BRAND, fingerprint)


def _staged(path: Path, campaign: str, ids: list[str], loaded: int) -> None:
    """A journal of ``ids`` into ``campaign`` with the first ``loaded`` acknowledged."""
    book = Journal.open(path, _ident(campaign, path.name))
    try:
        rows = (PlayerRow(i + 1, pid) for i, pid in enumerate(ids))
        book.stage(rows, lambda raw: raw or "", chunk_size=1, settings={"source": "t"})
        for seq in range(loaded):
            book.record(seq, loaded=[seq])
    finally:
        book.close()


def test_a_journal_of_another_server_and_campaign_is_refused_not_set_aside(
    tmp_path: Path,
) -> None:
    # Only a journal that differs by its server alone is set aside; one that is also of
    # another campaign is another load, refused as such, and left where it is.
    path = tmp_path / "j.sqlite"
    Journal.open(path, _ident("CMP-1")).close()
    other = Identity("sandbox:1111111111111111", "CMP-2", BRAND, "f")
    with pytest.raises(JournalMismatchError, match=r"server='sandbox:0+', campaign_id='CMP-1'"):
        Journal.open(path, other)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".sqlite") == ["j.sqlite"]
    kept = Journal.open(path, _ident("CMP-1"))
    try:
        assert kept.set_aside is None and Identity.of_meta(kept.meta()) == _ident("CMP-1")
    finally:
        kept.close()


def test_journal_summaries_and_prune(tmp_path: Path) -> None:
    where = tmp_path / "journals"
    where.mkdir()
    done, pending, other = (where / f"participants-{n}.sqlite" for n in ("a", "b", "c"))
    _staged(done, "CMP-1", ["a", "b", "b"], loaded=2)
    _staged(pending, "CMP-1", ["a", "b", "c"], loaded=1)
    _staged(other, "CMP-2", ["x"], loaded=1)
    (where / "participants-junk.sqlite").write_bytes(b"not a database at all" * 10)

    found = {s.path.name: s for s in journal_summaries(where)}
    assert found["participants-a.sqlite"].state == "complete"
    assert (found["participants-a.sqlite"].loaded, found["participants-a.sqlite"].duplicate) == (
        2,
        1,
    )
    assert found["participants-b.sqlite"].state == "pending"
    assert found["participants-b.sqlite"].pending == 2
    assert found["participants-b.sqlite"].server == "sandbox:0000000000000000"
    assert found["participants-junk.sqlite"].state == "unreadable"
    assert {s.path.name for s in journal_summaries(where, campaign_id="CMP-2")} == {
        "participants-c.sqlite"
    }

    # Recent ones are kept with older_than; one in use is never deleted.
    assert prune_journals(where, older_than=timedelta(days=1)) == []
    busy = Journal.open(other, _ident("CMP-2", other.name))
    try:
        removed = {s.path.name for s in prune_journals(where)}
    finally:
        busy.close()
    assert removed == {"participants-a.sqlite"}
    assert pending.exists() and other.exists() and not done.exists()
    assert (where / "participants-junk.sqlite").exists()


def test_cli_status_journals_and_restart(
    fresh_sandbox: RunningSandbox, players: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {**cli_env(fresh_sandbox), "GPTOOLS_JOURNAL_DIR": str(tmp_path / "journals")}
    campaign = _campaign(fresh_sandbox)
    runner = CliRunner()
    load = ["participants", "load", str(players), "--campaign", campaign, "--brand", str(BRAND)]
    assert runner.invoke(cli, [*load, "--no-progress"], env=env).exit_code == 0

    result = runner.invoke(cli, ["participants", "status", "--json"], env=env)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["journals"]
    assert (row["campaign_id"], row["state"], row["loaded"], row["pending"]) == (
        campaign,
        "complete",
        len(IDS),
        0,
    )
    assert row["server"] == fresh_sandbox.identity  # a served sandbox names its state
    text = runner.invoke(cli, ["participants", "status", "--campaign", campaign], env=env)
    assert campaign in text.stdout and "complete" in text.stdout
    none = runner.invoke(cli, ["participants", "status", "--campaign", "CMP-9", "--json"], env=env)
    assert json.loads(none.stdout) == {"journals": []}

    again = runner.invoke(cli, [*load, "--no-progress", "--restart", "--json"], env=env)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["loaded_this_run"] == len(IDS)

    # `gptools sandbox serve` restarted with a fresh state, the plan applied again: the
    # journal is set aside with one line, and every id is sent again.
    fresh_sandbox.reset()
    assert _campaign(fresh_sandbox) == campaign
    stale = runner.invoke(cli, [*load, "--no-progress", "--json"], env=env)
    assert stale.exit_code == 0, stale.output
    assert json.loads(stale.stdout)["loaded_this_run"] == len(IDS)
    (line,) = [x for x in stale.stderr.splitlines() if "set aside" in x]
    assert line.startswith("notice: the journal")
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(IDS, 1)
    listed = json.loads(runner.invoke(cli, ["participants", "status", "--json"], env=env).stdout)
    assert sorted(j["state"] for j in listed["journals"]) == ["complete", "set aside"]

    pruned = runner.invoke(cli, ["participants", "journals", "--prune", "--json"], env=env)
    assert pruned.exit_code == 0, pruned.output
    assert len(json.loads(pruned.stdout)["pruned"]) == 2
    assert not list((tmp_path / "journals").glob("*.sqlite"))


def test_a_journal_folder_that_cannot_be_written_is_one_line(
    fresh_sandbox: RunningSandbox, players: Path, tmp_path: Path
) -> None:
    # A folder under a regular file cannot be made, whoever runs the test (root too).
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    env = {**cli_env(fresh_sandbox), "GPTOOLS_JOURNAL_DIR": str(blocker / "journals")}
    result = CliRunner().invoke(
        cli,
        ["participants", "load", str(players), "--campaign", "CMP-1", "--brand", str(BRAND)],
        env=env,
    )
    assert result.exit_code == 2
    assert "cannot write the journal" in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert participant_requests(fresh_sandbox) == []


# -- issue 23 item 20: resuming after a partly answered chunk ----------------------------


def test_resume_after_a_partly_answered_chunk_sends_only_the_unanswered_half(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    """A run split chunk 1 after a refusal, got the answer for its first half, and died
    before the second half's: chunk 0 is acknowledged, chunk 1 is ``sent`` with half its
    ids loaded, chunk 2 never went. The next run sends exactly the rest."""
    ids = [f"h-{i:02d}" for i in range(30)]
    src = open_source(ids)
    identity = Identity(client.server_identity, campaign, BRAND, src.fingerprint)
    src.close()
    journal = tmp_path / "j.sqlite"
    book = Journal.open(journal, identity)
    try:
        rows = (PlayerRow(i + 1, pid) for i, pid in enumerate(ids))
        book.stage(rows, check_player_id, chunk_size=10, settings={"source": "ids"})
        book.mark_sent(0)
        assert book.record(0, loaded=list(range(10)))
        book.mark_sent(1)
        assert not book.record(1, loaded=list(range(10, 15)))  # the half that was answered
        assert book.open_chunks() == [(1, 10, 19), (2, 20, 29)]
        assert book.pending_ids(10, 19) == [(s, ids[s]) for s in range(15, 20)]
        assert book.pending_ids(0, 9) == []
    finally:
        book.close()
    client.add_participants(campaign, ids[:15], brand=BRAND)  # what that run delivered
    before = len(participant_requests(fresh_sandbox))

    summary = load_participants(client, campaign, ids, brand=BRAND, journal=journal, progress=False)
    assert summary.resumed and summary.complete and summary.loaded == 30
    assert summary.loaded_this_run == 15 and summary.unknown_resent == 1
    sent = [
        pid
        for r in participant_requests(fresh_sandbox)[before:]
        for pid in json.loads(r.body)["playerIds"]
    ]
    assert sorted(sent) == ids[15:]
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(ids, 1)


def test_reading_a_journal_does_not_date_it_so_prune_takes_it_at_once(
    fresh_sandbox: RunningSandbox, players: Path, tmp_path: Path
) -> None:
    """Issue 35: the empty -wal file SQLite makes for a reader dated a journal's last write
    to that read, so a prune that took a moment between its cutoff and its reading (it
    checks the register first now) found the journal written "after" the cutoff."""
    where = tmp_path / "journals"
    campaign = _campaign(fresh_sandbox)
    with make_client(fresh_sandbox) as client:
        load_participants(client, campaign, players, brand=BRAND, progress=False,
                          journal=where / "participants-one.sqlite")  # fmt: skip
    assert [s.path.name for s in prune_journals(where)] == ["participants-one.sqlite"]
    # Again, with the journal read (twice) before pruning.
    with make_client(fresh_sandbox) as client:
        load_participants(client, campaign, players, brand=BRAND, progress=False,
                          journal=where / "participants-two.sqlite")  # fmt: skip
    (first,) = journal_summaries(where)
    (second,) = journal_summaries(where)
    assert first.state == "complete" and second.updated_at == first.updated_at
    assert [s.path for s in prune_journals(where)] == [first.path]
