"""The sandbox plays a campaign as players would (seeded: accept, play up to betNumber rounds
inside the window, some finish); its truth, read from the inspection endpoint, is exactly
what the campaign results find in a log of those events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from gptools.campaigns import CampaignRegister, CurrencyLine, apply_plan
from gptools.campaigns._apply import add_players
from gptools.client import Client
from gptools.deliverylog import campaign_results
from gptools.models import dumps_wire, loads_wire
from gptools.sandbox import RunningSandbox
from tests.campaigns.conftest import NOW, make_plan

PLAYERS = tuple(f"pl-{i:03d}" for i in range(60))


def _play(sandbox: RunningSandbox, campaign_id: str, **query: Any) -> dict[str, Any]:
    url = f"{sandbox.base_url}/_sandbox/campaigns/{campaign_id}/play"
    answer = httpx.get(url, params=query, timeout=10)
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = loads_wire(answer.content)
    return doc


def test_played_truth_equals_the_results(
    client: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    plan = make_plan(
        currencies={
            "EUR": CurrencyLine(bet=Decimal("20.00"), players=60, player_ids=PLAYERS[:40]),
            "JPY": CurrencyLine(bet=Decimal("2000"), players=20, player_ids=PLAYERS[40:]),
        },
        bet_number=4,
    )
    result = apply_plan(client, plan, now=NOW, add_participants=True)
    ids = result.campaign_ids
    add_players(client, ids["EUR"], ["late-1", "late-2"], brand=201)
    truths = {c: _play(fresh_sandbox, cid, seed=5) for c, cid in ids.items()}
    # Seeded: the same truth again; another seed, another one.
    assert _play(fresh_sandbox, ids["EUR"], seed=5) == truths["EUR"]
    assert _play(fresh_sandbox, ids["EUR"], seed=6)["rounds"] != truths["EUR"]["rounds"]
    records = {r.campaign_id: r for r in CampaignRegister().campaigns()}
    lines = []
    for currency, truth in truths.items():
        record = records[ids[currency]]
        rounds = truth["rounds"]
        assert truth["participants"] == (42 if currency == "EUR" else 20)
        assert 0 < len(rounds) < truth["participants"]  # some never play
        assert all(1 <= n <= 4 for n in rounds.values())
        assert 0 < truth["completed"] < len(rounds)  # some finish, some stop early
        for event in truth["events"]:
            moment = datetime.fromisoformat(event["timestamp"]).replace(tzinfo=UTC)
            assert record.start_utc <= moment < record.end_utc
            at = (moment + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            lines.append({"received_at": at, "status": 200, "latency_ms": Decimal(3),
                          "payload": event})  # fmt: skip
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"".join(dumps_wire(line) + b"\n" for line in lines))
    late = {ids["EUR"]: ["late-1", "late-2"]}
    with campaign_results(log, records.values(), players=late) as results:
        report = results.report
    assert report.attributed == report.actions == len(lines)
    for entry in report.campaigns:
        currency = entry["currency"]
        truth = truths[currency]
        assert entry["assigned"] == truth["participants"]
        assert entry["reached"] == truth["reached"]
        assert entry["completed"] == truth["completed"]
        assert entry["rounds_used"] == sum(truth["rounds"].values())


def test_an_unknown_campaign_is_404(fresh_sandbox: RunningSandbox) -> None:
    answer = httpx.get(f"{fresh_sandbox.base_url}/_sandbox/campaigns/CMP-404/play", timeout=10)
    assert answer.status_code == 404


def test_a_share_outside_0_1_is_refused(client: Client, fresh_sandbox: RunningSandbox) -> None:
    cid = apply_plan(client, make_plan(), now=NOW).campaign_ids["EUR"]
    url = f"{fresh_sandbox.base_url}/_sandbox/campaigns/{cid}/play"
    answer = httpx.get(url, params={"accept": "1.5"}, timeout=10)
    assert answer.status_code == 400 and "accept_share" in answer.text
