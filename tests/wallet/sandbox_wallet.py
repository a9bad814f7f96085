"""A sandbox campaign played with its wallet: the ledger and the log written from the
sandbox's inspection endpoint, and the truth it gives."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

from gptools import spec
from gptools.campaigns import CampaignRegister, CurrencyLine, apply_plan
from gptools.client import Client
from gptools.models import dumps_wire, loads_wire
from gptools.sandbox import RunningSandbox
from tests.campaigns.conftest import NOW, make_plan

PLAYERS = tuple(f"pl-{i:03d}" for i in range(60))


def wallet_of(sandbox: RunningSandbox, campaign_id: str, **query: Any) -> dict[str, Any]:
    """The inspection endpoint's wallet side of one campaign's play."""
    url = f"{sandbox.base_url}/_sandbox/campaigns/{campaign_id}/wallet"
    answer = httpx.get(url, params=query, timeout=10)
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = loads_wire(answer.content)
    return doc


def played_campaigns(
    client: Client, sandbox: RunningSandbox, tmp_path: Path, *, seed: int = 5
) -> tuple[Path, Path, list[Any], dict[str, dict[str, Any]]]:
    """Two campaigns (EUR, JPY) played with their wallet: the ledger CSV, the log JSONL
    (every delivered event once, the first one twice: a duplicate delivery), the register's
    records, and the truth per campaign id."""
    plan = make_plan(
        currencies={
            "EUR": CurrencyLine(bet=Decimal("20.00"), players=40, player_ids=PLAYERS[:40]),
            "JPY": CurrencyLine(bet=Decimal("2000"), players=20, player_ids=PLAYERS[40:]),
        },
        bet_number=4,
    )
    ids = apply_plan(client, plan, now=NOW, add_participants=True).campaign_ids
    docs = {cid: wallet_of(sandbox, cid, seed=seed, wallet_seed=seed) for cid in ids.values()}
    ledger = tmp_path / "ledger.csv"
    with ledger.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(spec.WALLET_LEDGER_COLUMNS))
        writer.writeheader()
        for doc in docs.values():
            writer.writerows(doc["rows"])
    lines = []
    for doc in docs.values():
        for i, event in enumerate(doc["delivered"]):
            at = event["timestamp"][:19] + ".500000Z"
            line = {"received_at": at, "status": 200, "latency_ms": Decimal(3), "payload": event}
            lines.append(line)
            if i == 0:  # delivered again a second later: a duplicate
                lines.append({**line, "received_at": event["timestamp"][:19] + ".900000Z"})
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"".join(dumps_wire(line) + b"\n" for line in lines))
    records = [r for r in CampaignRegister().campaigns() if r.campaign_id in docs]
    return ledger, log, records, {cid: doc["truth"] for cid, doc in docs.items()}
