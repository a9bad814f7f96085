"""The loader against the sandbox over loopback: accounting, rejects, resume, bisection,
faults, and the stop on an unknown campaign."""

from __future__ import annotations

import csv
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

from gptools import spec
from gptools.campaigns import CampaignRegister, ParticipantCounts
from gptools.cli import cli
from gptools.client import Client
from gptools.errors import ApiError, InvalidRequestError
from gptools.models import ErrorBody
from gptools.participants import (
    JournalMismatchError,
    LoadStopped,
    LoadSummary,
    Outcome,
    load_participants,
)
from gptools.participants._loader import verdict
from gptools.sandbox import FaultRule, RunningSandbox, SandboxConfig, run_sandbox
from tests.participants.conftest import BRAND, make_client, new_campaign, participant_requests

MESSY = Path(__file__).resolve().parents[2] / "data" / "players_messy.csv"
MESSY_VALID = {
    "p-100001",
    "p-100002",
    "p-100003",
    "p-100004",
    "p-100005",
    "jöhn-77",
    "игрок-5",
    "p-100008",
    "p-100009",
    "p-100011",
    "p-100012",
    "P-100012",
    "p-100013",
    "p-100014",
    "p-100015",
    "p-100016",
    "p-100017",
    "p-100018",
    "p-100019",
    "p-100020",
}
MESSY_REJECTED = {  # line -> reason code
    10: "empty",
    11: "empty",
    16: "too_long",
    17: "header_row",
    18: "control_character",
    19: "missing_field",
    20: "empty",
}
MESSY_DUPLICATES = {9: 4, 15: 3, 26: 6}  # line -> line of the first occurrence


def _load(client: Client, campaign: str, source: Any, journal: Path, **options: Any) -> LoadSummary:
    """``load_participants`` as these tests run it (brand :data:`BRAND`, no progress bar,
    the journal named), with ``options`` for what a test sets on top."""
    return load_participants(
        client, campaign, source, brand=BRAND, journal=journal, progress=False, **options
    )


def _assert_adds_up(summary: LoadSummary) -> pd.DataFrame:
    frame = summary.to_frame()
    counts = frame["outcome"].value_counts().to_dict()
    assert summary.balanced
    assert summary.rows == len(frame)
    for outcome in Outcome:
        assert counts.get(outcome, 0) == getattr(summary, outcome), outcome
    assert summary.rows == (
        summary.loaded + summary.rejected + summary.duplicate + summary.not_attempted
    )
    return frame


def test_messy_file_every_row_accounted(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    rejects = tmp_path / "rejects.csv"
    summary = _load(client, campaign, MESSY, tmp_path / "j.sqlite", rejects=rejects)
    frame = _assert_adds_up(summary)
    assert (
        summary.rows,
        summary.loaded,
        summary.rejected,
        summary.duplicate,
        summary.not_attempted,
    ) == (30, 20, 7, 3, 0)
    assert summary.complete and not summary.resumed
    assert dict(summary.rejected_by_reason) == {
        "empty": 3,
        "too_long": 1,
        "header_row": 1,
        "control_character": 1,
        "missing_field": 1,
    }
    rejected = frame[frame.outcome == "rejected"]
    assert dict(zip(rejected.line, rejected.reason_code, strict=True)) == MESSY_REJECTED
    duplicates = frame[frame.outcome == "duplicate"]
    assert dict(zip(duplicates.line, duplicates.detail, strict=True)) == {
        line: f"duplicate of line {first}" for line, first in MESSY_DUPLICATES.items()
    }
    assert set(frame[frame.outcome == "loaded"].player_id) == MESSY_VALID
    # The server's own record: every valid id exactly once, nothing else.
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(MESSY_VALID, 1)

    with rejects.open(encoding="utf-8", newline="") as fh:
        lines = list(csv.DictReader(fh))
    assert [int(r["line"]) for r in lines] == sorted(MESSY_REJECTED)
    assert {int(r["line"]): r["reason_code"] for r in lines} == MESSY_REJECTED
    by_line = {int(r["line"]): r for r in lines}
    assert by_line[18]["playerId"] == "p-10\x0710"
    assert by_line[11]["playerId"] == "   "
    assert "limit is 128" in by_line[16]["reason"]


def test_second_run_loads_nothing_new(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    journal = tmp_path / "j.sqlite"
    _load(client, campaign, MESSY, journal)
    sent = len(participant_requests(fresh_sandbox))
    again = _load(client, campaign, MESSY, journal)
    assert len(participant_requests(fresh_sandbox)) == sent == 1
    assert again.resumed and again.requests == 0 and again.loaded_this_run == 0
    assert (again.loaded, again.rejected, again.duplicate) == (20, 7, 3)
    _assert_adds_up(again)


def test_fixed_rejects_fed_back_load_the_rest(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    rejects = tmp_path / "rejects.csv"
    _load(client, campaign, MESSY, tmp_path / "a.sqlite", rejects=rejects)
    text = rejects.read_text(encoding="utf-8").replace("p-10\x0710", "p-101010")
    fixed = tmp_path / "fixed.csv"
    fixed.write_text(text, encoding="utf-8")
    summary = _load(client, campaign, fixed, tmp_path / "b.sqlite")
    assert summary.loaded == 1
    assert summary.rejected == 6
    assert fresh_sandbox.state.participants(campaign)["p-101010"] == 1


def test_chunks_several_in_flight_and_deterministic(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    ids = [f"c-{i:05d}" for i in range(1_000)]
    summary = _load(client, campaign, ids, tmp_path / "j.sqlite", chunk_size=37)
    assert summary.loaded == 1_000 and summary.chunks == 28 and summary.requests == 28
    bodies = [json.loads(r.body)["playerIds"] for r in participant_requests(fresh_sandbox)]
    assert sorted(len(b) for b in bodies) == [1_000 - 27 * 37] + [37] * 27
    assert sorted(p for b in bodies for p in b) == ids
    db = sqlite3.connect(tmp_path / "j.sqlite")
    ranges = db.execute("SELECT first_seq, last_seq FROM chunks ORDER BY chunk_no").fetchall()
    db.close()
    assert ranges == [(i * 37, min(i * 37 + 36, 999)) for i in range(28)]


def test_unknown_campaign_stops_at_the_first_request(
    fresh_sandbox: RunningSandbox, client: Client, tmp_path: Path
) -> None:
    ids = [f"u-{i}" for i in range(500)]
    with pytest.raises(InvalidRequestError, match="'CMP-404' is invalid or does not exist"):
        _load(client, "CMP-404", ids, tmp_path / "j.sqlite", chunk_size=10)
    assert len(participant_requests(fresh_sandbox)) == 1


def test_bisection_isolates_the_ids_the_server_refuses(tmp_path: Path) -> None:
    # The server allows 16 characters, the loader 128: the longer ids reach the server.
    with (
        run_sandbox(SandboxConfig(seed=0, player_id_max_length=16)) as sb,
        make_client(sb) as client,
    ):
        campaign = new_campaign(client)
        ids = [f"b-{i:03d}" for i in range(200)]
        bad = {17: "x" * 20, 90: "y" * 17, 91: "z" * 30, 199: "w" * 64}
        for index, value in bad.items():
            ids[index] = value
        summary = _load(client, campaign, ids, tmp_path / "j.sqlite", chunk_size=50)
        assert summary.complete
        assert (summary.loaded, summary.rejected) == (196, 4)
        assert summary.bisections > 0
        frame = _assert_adds_up(summary)
        refused = frame[frame.outcome == "rejected"]
        assert set(refused.raw) == set(bad.values())
        assert set(refused.reason_code) == {"refused_by_server"}
        assert all(
            "VALIDATION_ERROR" in d and "the limit is 16 characters" in d for d in refused.detail
        )
        loaded = sb.state.participants(campaign)
        assert loaded == {i: 1 for i in ids if i not in bad.values()}
        # Chunks without a bad id went once; each refused chunk was split, never resent whole.
        assert summary.requests < 4 + 2 * 4 * 6 + 4


def _batch_requests(sb: RunningSandbox) -> list[Any]:
    return [
        r for r in sb.state.requests if r.method == "POST" and r.path.endswith("/participant/batch")
    ]


def test_batch_endpoint_same_journal_bisection_and_tiers(tmp_path: Path) -> None:
    """``endpoint="batch"``: the batch participant endpoint (path assumed), with the same
    bisection of refused ids, the same journal (a resumed load keeps the endpoint) and the
    participant rate tiers; nothing goes to the single endpoint."""
    with (
        run_sandbox(SandboxConfig(seed=0, player_id_max_length=16)) as sb,
        make_client(sb) as client,
    ):
        campaign = new_campaign(client)
        ids = [f"b-{i:03d}" for i in range(200)]
        bad = {17: "x" * 20, 150: "y" * 17}
        for index, value in bad.items():
            ids[index] = value
        sb.faults.add(FaultRule(endpoint=spec.ENDPOINT_CLASS_PARTICIPANT, status=503, count=2))
        journal = tmp_path / "j.sqlite"
        summary = _load(client, campaign, ids, journal, chunk_size=50, endpoint="batch")
        assert summary.complete and summary.endpoint == "batch"
        assert (summary.loaded, summary.rejected) == (198, 2) and summary.bisections > 0
        frame = _assert_adds_up(summary)
        assert set(frame[frame.outcome == "rejected"].raw) == set(bad.values())
        assert sb.state.participants(campaign) == {i: 1 for i in ids if i not in bad.values()}
        assert participant_requests(sb) == []
        batch = _batch_requests(sb)
        assert len(batch) == summary.requests + 2  # the client retried the two 503s itself
        assert {spec.endpoint_class("POST", r.path) for r in batch} == {
            spec.ENDPOINT_CLASS_PARTICIPANT
        }
        # Resumed (same journal) without naming the endpoint: it keeps the batch endpoint.
        again = _load(client, campaign, ids, journal, chunk_size=50)
        assert again.endpoint == "batch" and again.requests == 0


def test_batch_endpoint_default_chunk_goes_beyond_the_back_office_import(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    """Batch chunks default to spec.BATCH_PARTICIPANT_MAX_IDS; a list longer than the
    back office's CSV import (spec.BACK_OFFICE_CSV_IMPORT_MAX_ROWS) needs no splitting."""
    n = spec.BACK_OFFICE_CSV_IMPORT_MAX_ROWS + 1
    ids = [f"bo-{i}" for i in range(n)]
    summary = _load(client, campaign, ids, tmp_path / "j.sqlite", endpoint="batch")
    assert summary.complete and summary.loaded == n
    assert summary.chunk_size == spec.BATCH_PARTICIPANT_MAX_IDS
    assert summary.requests == -(-n // spec.BATCH_PARTICIPANT_MAX_IDS)
    assert len(fresh_sandbox.state.participants(campaign)) == n
    with pytest.raises(ValueError, match="endpoint must be one of"):
        _load(client, campaign, ids[:1], tmp_path / "k.sqlite", endpoint="bulk")


@pytest.mark.parametrize(
    "rule",
    [
        FaultRule(endpoint="POST /campaign/*/participant", status=503, rate=0.3),
        FaultRule(endpoint="POST /campaign/*/participant", status=504, rate=0.3),
        FaultRule(endpoint="POST /campaign/*/participant", drop=True, rate=0.3),
        FaultRule(endpoint="POST /campaign/*/participant", status=429, rate=0.5, count=40),
    ],
    ids=["503", "504", "dropped", "rate-limit-storm"],
)
def test_faults_still_load_every_id_exactly_once(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path, rule: FaultRule
) -> None:
    fresh_sandbox.faults.add(rule)
    ids = [f"f-{i:04d}" for i in range(600)]
    summary = _load(client, campaign, ids, tmp_path / "j.sqlite", chunk_size=20, seed=1)
    fresh_sandbox.faults.clear()
    assert summary.complete and summary.loaded == 600 and summary.failed_chunks == 0
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(ids, 1)
    statuses = [r.status for r in participant_requests(fresh_sandbox)]
    assert len(statuses) > 30  # the faults did hit
    # Each rate-limit answer the sandbox gave is counted exactly once.
    assert summary.rate_limited == statuses.count(429)
    if rule.status == 429:
        assert summary.rate_limited > 0


def test_rate_limit_answers_reaching_the_loader_are_counted_once(
    fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    # No client retries: every rate-limit answer is raised to the loader, which used to
    # count it a second time on top of the client's count.
    with make_client(fresh_sandbox, max_retries=0) as client:
        campaign = new_campaign(client)
        fresh_sandbox.faults.add(
            FaultRule(endpoint="POST /campaign/*/participant", status=429, rate=0.5, count=6)
        )
        ids = [f"q-{i:04d}" for i in range(120)]
        summary = _load(client, campaign, ids, tmp_path / "j.sqlite", chunk_size=20, seed=1)
        client_count = client.stats.rate_limited
    refused = [r for r in participant_requests(fresh_sandbox) if r.status == 429]
    assert len(refused) >= 3
    assert summary.rate_limited == client_count == len(refused)
    assert summary.complete and summary.loaded == 120 and summary.rejected == 0
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(ids, 1)


def test_overridden_rate_limit_status_is_a_rate_limit_for_the_loader(
    fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    with make_client(fresh_sandbox, max_retries=0, rate_limit_status=503) as client:
        campaign = new_campaign(client)
        fresh_sandbox.faults.add(
            FaultRule(
                endpoint="POST /campaign/*/participant", status=503, code="SLOW_DOWN", count=3
            )
        )
        ids = [f"o-{i:04d}" for i in range(80)]
        summary = _load(client, campaign, ids, tmp_path / "j.sqlite", chunk_size=20, seed=1)
    refused = [r for r in participant_requests(fresh_sandbox) if r.status == 503]
    assert len(refused) == 3 and summary.rate_limited == 3
    assert summary.complete and summary.loaded == 80 and summary.rejected == 0


# --------------------------------------------------------------------------------------
# Only an answer about the ids condemns ids (issue 17 item 9)
# --------------------------------------------------------------------------------------


def test_a_proxys_408_is_sent_again_not_bisected(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    fresh_sandbox.faults.add(
        FaultRule(
            endpoint="POST /campaign/*/participant", status=408, code="REQUEST_TIMEOUT", count=3
        )
    )
    ids = [f"x-{i:04d}" for i in range(100)]
    summary = _load(client, campaign, ids, tmp_path / "j.sqlite", chunk_size=20, seed=1)
    assert summary.complete and (summary.loaded, summary.rejected) == (100, 0)
    assert summary.bisections == 0
    assert [r.status for r in participant_requests(fresh_sandbox)].count(408) == 3
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(ids, 1)


@pytest.mark.parametrize(
    "rule",
    [
        FaultRule(endpoint="POST /campaign/*/participant", status=409, code="CONFLICT"),
        FaultRule(endpoint="POST /campaign/*/participant", status=400, code="CAMPAIGN_CLOSED"),
        FaultRule(endpoint="POST /campaign/*/participant", status=422, code="UNPROCESSABLE"),
    ],
    ids=["409", "400-about-the-campaign", "422"],
)
def test_a_refusal_not_about_the_ids_stops_the_load_and_rejects_nothing(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path, rule: FaultRule
) -> None:
    fresh_sandbox.faults.add(rule)
    ids = [f"n-{i:04d}" for i in range(100)]
    journal = tmp_path / "j.sqlite"
    with pytest.raises(LoadStopped, match=r"not about its player ids.*run the same load") as caught:
        _load(client, campaign, ids, journal, chunk_size=20, seed=1)
    stopped = caught.value.summary
    assert caught.value.error.status == rule.status
    assert (stopped.rejected, stopped.loaded, stopped.not_attempted) == (0, 0, 100)
    assert stopped.bisections == 0
    assert len(participant_requests(fresh_sandbox)) == 1  # the first chunk goes alone
    _assert_adds_up(stopped)

    # Once the cause is gone, the same load sends every id again.
    fresh_sandbox.faults.clear()
    resumed = _load(client, campaign, ids, journal)
    assert resumed.resumed and resumed.complete
    assert (resumed.loaded, resumed.rejected) == (100, 0)
    assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(ids, 1)


def test_a_stop_midway_keeps_what_loaded_and_rejects_nothing(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    fresh_sandbox.faults.add(
        FaultRule(endpoint="POST /campaign/*/participant", status=409, code="CONFLICT", rate=0.3)
    )
    ids = [f"m-{i:04d}" for i in range(400)]
    journal = tmp_path / "j.sqlite"
    with pytest.raises(LoadStopped) as caught:
        _load(client, campaign, ids, journal, chunk_size=20, seed=1)
    stopped = caught.value.summary
    assert stopped.rejected == 0 and stopped.loaded + stopped.not_attempted == 400
    # Issue 35: what reached the campaign is recorded; what did not stays pending.
    assert stopped.loaded > 0
    counts = CampaignRegister().participant_counts(server=client.server_identity)
    assert counts[(client.server_identity, campaign)] == ParticipantCounts(
        loaded=stopped.loaded, pending=stopped.not_attempted
    )
    fresh_sandbox.faults.clear()
    resumed = _load(client, campaign, ids, journal)
    assert resumed.complete and (resumed.loaded, resumed.rejected) == (400, 0)
    assert set(fresh_sandbox.state.participants(campaign)) == set(ids)


@pytest.mark.parametrize(
    ("status", "code", "meaning"),
    [
        (400, "VALIDATION_ERROR", "bisect"),
        (400, "CAMPAIGN_CLOSED", "stop"),
        (400, None, "stop"),
        (409, "CONFLICT", "stop"),
        (408, None, "resend"),
        (425, None, "resend"),
        (429, None, "resend"),
        (503, "TOO_MANY_REQUESTS", "resend"),
        (500, "UNKNOWN_ERROR", "resend"),
        (403, "INVALID_REQUEST", "fatal"),
        (401, "NOT_AUTHORIZED", "fatal"),
        (404, None, "fatal"),
    ],
)
def test_verdict(status: int, code: str | None, meaning: str) -> None:
    body = ErrorBody.model_validate({"code": code, "message": "m"}) if code else None
    error = ApiError.from_body(status, body, raw="<html>", method="POST", url="http://h/p")
    assert verdict(error) == meaning
    # What counts as "about the ids" is an overridable assumption.
    assert verdict(error, id_refusals={(409, "CONFLICT")}) == (
        "bisect"
        if (status, code) == (409, "CONFLICT")
        else "stop"
        if meaning == "bisect"
        else meaning
    )


def test_commit_then_fail_sends_again_only_what_was_unanswered(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    # The answer is lost after the server applied the change: the API has no idempotency
    # key for participant additions, so those chunks may be counted twice by the server.
    fresh_sandbox.faults.add(
        FaultRule(endpoint="POST /campaign/*/participant", commit_then_fail=True, rate=1.0, count=3)
    )
    ids = [f"t-{i:04d}" for i in range(200)]
    summary = _load(client, campaign, ids, tmp_path / "j.sqlite", chunk_size=20)
    assert summary.complete and summary.loaded == 200
    counts = fresh_sandbox.state.participants(campaign)
    assert set(counts) == set(ids)
    # Exactly: every id was answered once, and an id went again only for each answer lost
    # (504 after the change was applied) on a request that held it.
    requests = participant_requests(fresh_sandbox)
    lost = [json.loads(r.body)["playerIds"] for r in requests if r.status == 504]
    answered = [json.loads(r.body)["playerIds"] for r in requests if r.status == 200]
    assert len(lost) == 3
    assert sorted(p for chunk in answered for p in chunk) == sorted(ids)
    assert counts == dict(Counter(ids) + Counter(p for chunk in lost for p in chunk))


def test_a_request_failing_every_time_is_left_for_the_next_run(
    fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    with make_client(fresh_sandbox, max_retries=0) as client:
        campaign = new_campaign(client)
        fresh_sandbox.faults.add(FaultRule(endpoint="POST /campaign/*/participant", status=500))
        ids = [f"r-{i}" for i in range(30)]
        journal = tmp_path / "j.sqlite"
        first = _load(client, campaign, ids, journal, chunk_size=10, max_attempts=2)
        assert first.failed_chunks >= 1 and not first.complete
        assert first.not_attempted == 30 - first.loaded
        assert "UNKNOWN_ERROR" in (first.last_error or "")
        _assert_adds_up(first)
        fresh_sandbox.faults.clear()
        second = _load(client, campaign, ids, journal)
        assert second.complete and second.loaded == 30 and second.resumed
        assert second.unknown_resent >= 1
        assert fresh_sandbox.state.participants(campaign) == dict.fromkeys(ids, 1)


def test_brand_client_dataframe_and_journal_mismatch(
    fresh_sandbox: RunningSandbox, client: Client, campaign: str, tmp_path: Path
) -> None:
    frame = pd.DataFrame({"Player ID": ["d-1", "d-2", "d-1", None], "x": [1, 2, 3, 4]})
    journal = tmp_path / "j.sqlite"
    summary = load_participants(
        client.brand(BRAND), campaign, frame, journal=journal, progress=False
    )
    assert (summary.loaded, summary.duplicate, summary.rejected) == (2, 1, 1)
    assert summary.brand == BRAND
    with pytest.raises(JournalMismatchError, match=r"journal of another load.*fingerprint"):
        _load(client, campaign, ["other"], journal)
    with pytest.raises(ValueError, match="conflicts"):
        load_participants(client.brand(BRAND), campaign, ["a"], brand=202, progress=False)


def test_summary_display(client: Client, campaign: str, tmp_path: Path) -> None:
    summary = _load(client, campaign, MESSY, tmp_path / "j.sqlite")
    html = summary._repr_html_()
    assert "<table>" in html and "adds up" in html and "players_messy.csv" in html
    text = str(summary)
    assert "rows read      30" in text and "adds up        yes" in text
    data = summary.to_dict()
    assert json.loads(json.dumps(data))["loaded"] == 20
    assert data["balanced"] is True
    assert list(summary.rejects().line) == sorted(MESSY_REJECTED)
    assert summary.counts() == {
        "rows": 30,
        "loaded": 20,
        "loaded_this_run": 20,
        "rejected": len(MESSY_REJECTED),
        "duplicate": 30 - 20 - len(MESSY_REJECTED),
        "not_attempted": 0,
    }


def test_cli_exits_1_and_says_why_the_load_stopped(
    cli_runner: CliRunner,
    client: Client,
    campaign: str,
    fresh_sandbox: RunningSandbox,
    tmp_path: Path,
) -> None:
    players = tmp_path / "players.csv"
    players.write_text("playerId\np-1\np-2\n", encoding="utf-8")
    fresh_sandbox.faults.add(
        FaultRule(endpoint="POST /campaign/*/participant", status=409, code="CONFLICT")
    )
    result = cli_runner.invoke(
        cli,
        [
            "participants",
            "load",
            str(players),
            "--campaign",
            campaign,
            "--brand",
            str(BRAND),
            "--journal",
            str(tmp_path / "j.sqlite"),
            "--rejects",
            str(tmp_path / "r.csv"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "not about its player ids" in result.output
    assert "HTTP 409 CONFLICT" in result.output and "run the same load again" in result.output
    # Nothing was rejected: no rejects file, or its header only.
    rejects = tmp_path / "r.csv"
    assert not rejects.exists() or rejects.read_text(encoding="utf-8").count("\n") == 1
