"""The holdout uplift against the sandbox's truth: its paid play (seeded, with a known true
effect) read back from a delivery log and a ledger gives every player's values exactly, the
95 % interval covers the true effect, a too-small group is refused, and ROI is what its
definition says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools.campaigns import CampaignRegister, CurrencyLine, HoldoutGroups, apply_plan
from gptools.client import Client
from gptools.deliverylog import campaign_results, holdout_uplift
from gptools.deliverylog._uplift import COST_BASES, t_quantile, welch_difference
from gptools.models import dumps_wire, loads_wire
from gptools.sandbox import RunningSandbox
from gptools.sandbox._paid_play import write_paid_ledger
from gptools.wallet import LedgerError
from tests.campaigns.conftest import NOW, make_plan

PLAYERS = tuple(f"u-{i:04d}" for i in range(1000))


def _post(sandbox: RunningSandbox, cid: str, body: dict[str, Any]) -> httpx.Response:
    url = f"{sandbox.base_url}/_sandbox/campaigns/{cid}/paid-play"
    return httpx.post(url, content=dumps_wire(body), timeout=30)


def _line(event: dict[str, Any]) -> bytes:
    moment = datetime.fromisoformat(event["timestamp"]).replace(tzinfo=UTC)
    at = (moment + timedelta(seconds=2)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dumps_wire({"received_at": at, "status": 200, "latency_ms": Decimal(3),
                       "payload": event}) + b"\n"  # fmt: skip


@pytest.fixture
def played(
    client: Client, fresh_sandbox: RunningSandbox, tmp_path: Path
) -> tuple[Any, HoldoutGroups, dict[str, Any], Path, Path]:
    plan = make_plan(
        currencies={"EUR": CurrencyLine(bet=Decimal("20.00"), players=1000, player_ids=PLAYERS)},
        holdout="20%",
        holdout_seed=5,
    )
    register = CampaignRegister(tmp_path / "register.sqlite")
    cid = apply_plan(client, plan, now=NOW, register=register, add_participants=True)
    record = register.get(cid.campaign_ids["EUR"])
    groups = register.holdout_groups(record)
    assert groups is not None and (len(groups.treatment), len(groups.holdout)) == (797, 203)
    answer = _post(fresh_sandbox, record.campaign_id,
                   {"holdout": list(groups.holdout), "seed": 4, "roundsMean": 8})  # fmt: skip
    assert answer.status_code == 200, answer.text
    truth = loads_wire(answer.content)
    # The campaign's own free rounds are in the log too, and never paid play.
    free = loads_wire(httpx.get(
        f"{fresh_sandbox.base_url}/_sandbox/campaigns/{record.campaign_id}/play",
        params={"seed": 4}, timeout=30).content)  # fmt: skip
    assert free["events"] and truth["events"]
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"".join(_line(e) for e in (*truth["events"], *free["events"])))
    ledger = write_paid_ledger(tmp_path / "ledger.csv", truth["ledger"])
    return record, groups, truth, log, ledger


def test_the_uplift_finds_the_truth_and_covers_the_true_effect(played: Any) -> None:
    record, groups, truth, log, ledger = played
    assert truth["trueEffect"] == {"rounds": Decimal("1.6"), "turnover": Decimal("296"),
                                   "ngr": Decimal("29.6")}  # fmt: skip
    before = sum(
        1
        for e in truth["events"]
        if datetime.fromisoformat(e["timestamp"]).replace(tzinfo=UTC) < record.start_utc
    )
    assert before > 0  # paid play before the start: in the log, never counted
    with campaign_results(log, [record]) as results:
        from gptools.deliverylog._uplift import player_values

        values = player_values(results, {record.campaign_id: groups}, ledger=ledger)
        report = holdout_uplift(results, {record.campaign_id: groups}, ledger=ledger)
    assert len(values) == 1000
    for row in values.itertuples():
        mine = truth["players"][row.player_id]
        assert row.arm == mine["group"]
        assert (row.rounds, row.turnover, row.active_days, row.ngr) == (
            mine["rounds"],
            mine["turnover"],
            mine["activeDays"],
            mine["ngr"],
        ), row.player_id
    (campaign,) = report.campaigns
    assert campaign.refused is None
    for name in ("turnover", "ngr"):
        metric = campaign.metric(name)
        assert metric is not None and metric.difference is not None
        d = metric.difference
        assert d.low < truth["trueEffect"][name] < d.high, (name, d)
        assert d.low < d.difference < d.high
    active = campaign.metric("active_days")
    assert active is not None and active.difference is not None and active.difference.low > 0
    rev = campaign.incremental_revenue
    assert rev is not None
    ngr = campaign.metric("ngr").difference  # type: ignore[union-attr]
    assert rev[0] == (ngr.difference * 797).quantize(Decimal("0.01"))
    # No real cost given: costed at the exposure, labelled as the bets' value, no bound.
    assert campaign.cost == results.report.campaigns[0]["exposure_used"]
    assert (
        campaign.cost_basis == COST_BASES["exposure"] and "not the cost" in COST_BASES["exposure"]
    )
    doc = report.to_dict()
    assert doc["campaigns"][0]["incremental_revenue"]["estimate"] == str(rev[0])
    assert "Welch" in doc["method"] and doc["min_group"] == 30
    assert list(report.frame().metric) == ["turnover", "active_days", "ngr"]


def test_roi_against_a_real_cost_and_a_refusal_when_too_small(played: Any) -> None:
    record, groups, _, log, ledger = played
    small = HoldoutGroups(record.campaign_id, groups.share, groups.seed, groups.method,
                          groups.treatment, groups.holdout[:29])  # fmt: skip
    with campaign_results(log, [record]) as results:
        costed = holdout_uplift(results, {record.campaign_id: groups}, ledger=ledger,
                                cost={record.campaign_id: Decimal("1000.00")})  # fmt: skip
        refused = holdout_uplift(results, {record.campaign_id: small}, ledger=ledger)
        no_ledger = holdout_uplift(results, {record.campaign_id: groups})
    (c,) = costed.campaigns
    rev = c.incremental_revenue
    assert rev is not None and c.cost == Decimal("1000.00") and "real cost" in str(c.cost_basis)
    assert c.roi == tuple(float((v - Decimal(1000)) / Decimal(1000)) for v in rev)
    (r,) = refused.campaigns
    assert (
        r.refused == "too small a group to measure: holdout has 29 players, at least 30 are needed"
    )
    assert all(m.difference is None for m in r.metrics)
    assert r.incremental_revenue is None and r.roi is None
    assert r.to_dict()["metrics"][0]["difference"] is None
    (n,) = no_ledger.campaigns
    assert n.metric("ngr") is None and n.incremental_revenue is None and n.roi is None


def test_the_paid_play_endpoint_refuses_bad_asks(
    client: Client, fresh_sandbox: RunningSandbox
) -> None:
    cid = apply_plan(client, make_plan(), now=NOW).campaign_ids["EUR"]
    assert _post(fresh_sandbox, "CMP-404", {}).status_code == 404
    for body, word in (({"holdout": "p1"}, "holdout"), ({"effect": 9}, "effect"),
                       ({"activeShare": 2}, "active_share")):  # fmt: skip
        answer = _post(fresh_sandbox, cid, body)
        assert answer.status_code == 400 and word in answer.text, body
    big = {"holdout": [f"h{i}" for i in range(200_001)]}
    answer = _post(fresh_sandbox, cid, big)
    assert answer.status_code == 400 and "at most 200,000" in answer.text


def test_the_t_quantile_and_a_degenerate_difference() -> None:
    # scipy.stats.t.ppf(0.975, df) for 10, 29 and 1000 degrees of freedom.
    for df, exact in ((10, 2.2281388519649385), (29, 2.045229642132703),
                      (1000, 1.9623390808264078)):  # fmt: skip
        assert abs(t_quantile(0.975, df) - exact) < 1e-5
    same = welch_difference([Decimal(1)] * 3, [Decimal(1)] * 3)
    assert (same.difference, same.low, same.high) == (0, 0, 0)
    d = welch_difference([Decimal(v) for v in (1, 2, 3, 4)], [Decimal(v) for v in (1, 2)])
    assert d.difference == 1 and abs(d.df - 48 / 13) < 1e-12 and d.low < 0 < d.high


def test_the_ledger_reader_nets_paid_rows_only(played: Any, tmp_path: Path) -> None:
    """The uplift reads the ledger with the wallet's reader on the results' engine: paid
    rows of the group's currency from the start net to NGR; a free round, a row before the
    start and another currency's are not revenue; a row the reader rejects is counted by
    its reason."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gptools.deliverylog._uplift import ledger_ngr

    record, groups, _, log, _ = played
    a, b = groups.treatment[0], groups.holdout[0]
    start = record.start_utc

    def at(seconds: int, hours: int = 0) -> str:
        """A time ``seconds`` after the start, written with a zone ``hours`` east of UTC."""
        return (
            (start + timedelta(seconds=seconds))
            .astimezone(timezone(timedelta(hours=hours)))
            .isoformat()
        )

    rows = [  # player, currency, amount, type, free_round, timestamp
        (a, "EUR", "5.00", "debit", "false", at(0)),
        (a, "EUR", "1.25", "credit", "false", at(1)),
        (a, "EUR", "2.00", "debit", "false", at(3600, 2)),
        (a, "EUR", "2.00", "rollback", "false", at(3601, 2)),
        (a, "EUR", "0.20", "debit", "true", at(7200)),  # a free round
        (a, "EUR", "9.00", "debit", "false", at(-1)),  # before the start
        (a, "JPY", "100", "debit", "false", at(10)),  # another currency
        (b, "EUR", "0.10", "debit", "false", at(20)),
        (b, "EUR", "7.00", "bonus", "false", at(20)),  # no known type: rejected
    ]
    columns = ["transaction_id", "round_id", "player_id", "game_id", "currency", "amount",
               "type", "free_round", "timestamp"]  # fmt: skip
    full = [(f"T-{i}", f"R-{i}", p, "vs20olympgate", *rest) for i, (p, *rest) in enumerate(rows)]
    csv_file = tmp_path / "ledger.csv"
    csv_file.write_text("\n".join([",".join(columns), *(",".join(r) for r in full)]) + "\n")
    parquet = tmp_path / "ledger.parquet"
    pq.write_table(pa.table({c: [r[i] for r in full] for i, c in enumerate(columns)}), parquet)
    since = int(start.timestamp() * 1_000_000)
    frame = pd.DataFrame(
        {"campaign_id": ["C", "C"], "player_id": [a, b], "currency_code": ["EUR", "EUR"],
         "since_us": [since, since], "until_us": pd.array([None, None], dtype="Int64")}
    )  # fmt: skip
    with campaign_results(log, [record]) as results:
        for source in (csv_file, parquet):
            got = ledger_ngr(results, source, frame)
            assert got.attrs["rejected_by_reason"] == {"bad_value:type": 1}, source
            assert list(got.player_id) == sorted([a, b])
            ngr = dict(zip(got.player_id, got.ngr, strict=True))
            assert ngr == {a: Decimal("3.75"), b: Decimal("0.10")}, source
            assert all(isinstance(v, Decimal) for v in got.ngr)
        with pytest.raises(LedgerError, match=r"l\.xlsx"):
            ledger_ngr(results, _touch(tmp_path / "l.xlsx"), frame)


def _touch(path: Path) -> Path:
    path.write_text("")
    return path


def test_the_roi_chart_hatches_a_cost_at_the_exposure_only() -> None:
    """The chart tells the exposure by the cost basis itself (not by a word in its label):
    that bar hatched and named as the bets' value; the winnings plain."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gptools.deliverylog import plot_roi
    from gptools.deliverylog._uplift import CampaignUplift, UpliftReport, metric_uplift

    ngr = metric_uplift("ngr", "EUR", [Decimal(i % 7) for i in range(40)],
                        [Decimal(i % 5) for i in range(40)])  # fmt: skip
    since = datetime(2030, 3, 1, tzinfo=UTC)
    report = UpliftReport(tuple(
        CampaignUplift(cid, "EUR", since, None, (ngr,), Decimal("100.00"), COST_BASES[basis])
        for cid, basis in (("CMP-1", "exposure"), ("CMP-2", "ledger"))
    ))  # fmt: skip
    fig = plot_roi(report)
    cost_bars = [c for ax in fig.axes for c in ax.containers if c.get_label().startswith("cost")]
    assert [c.get_label() for c in cost_bars] == [
        "cost: exposure (rounds × bet)", "cost: winnings paid"
    ]  # fmt: skip
    assert [c.patches[0].get_hatch() for c in cost_bars] == ["//", None]
    plt.close(fig)
