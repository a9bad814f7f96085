"""Every metric equals the truth the generator built in, on generated logs."""

from __future__ import annotations

import itertools
import math
import re
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from gptools.deliverylog import DeliveryAnalysis, analyze
from tests.deliverylog.conftest import START, LogBuilder, iso, random_log


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q * 100))


@pytest.fixture(scope="module", params=[0, 1, 2])
def generated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[LogBuilder, DeliveryAnalysis]:
    b = random_log(request.param)
    path = b.write_jsonl(tmp_path_factory.mktemp("log") / "log.jsonl")
    analysis = analyze(path)
    yield b, analysis
    analysis.close()


def test_counts_equal_the_truth(generated: tuple[LogBuilder, DeliveryAnalysis]) -> None:
    b, analysis = generated
    t, r = b.truth, analysis.report
    assert r.deliveries == t.deliveries
    assert r.actions == t.actions
    assert r.acknowledged_actions == t.acknowledged
    assert r.duplicate_deliveries == t.duplicates
    assert r.retries == t.retries
    assert r.lost_actions == t.lost
    assert r.pending_actions == t.pending
    assert r.pending_actions_expired == 0
    assert r.invalid_deliveries == t.invalid
    assert r.invalid_deliveries_without_action_id == t.invalid_without_action_id
    assert r.invalid_by_reason == dict(t.invalid_by_reason)
    assert r.status_counts == {str(k): v for k, v in t.status_counts.items()}
    assert r.first_attempt_success_rate == t.first_attempt_successes / t.actions
    assert r.eventual_success_rate == t.acknowledged / t.actions
    dist = r.attempts_per_action["distribution"]
    assert dist == {str(k): v for k, v in sorted(t.attempts.items())}
    assert r.attempts_per_action["max"] == max(t.attempts)
    # The summary identity of docs/design.md, and the partition of actions by outcome.
    assert r.identity_holds
    assert r.to_dict()["check"]["holds"] is True
    assert r.deliveries == r.actions + r.retries + r.duplicate_deliveries + (
        r.invalid_deliveries_without_action_id
    )
    assert r.acknowledged_actions + r.lost_actions + r.pending_actions == r.actions


def test_distributions_equal_the_truth(generated: tuple[LogBuilder, DeliveryAnalysis]) -> None:
    b, analysis = generated
    t, r = b.truth, analysis.report
    gaps = [g for _, g in t.retry_gaps]
    assert r.retry_gap_s["count"] == len(gaps)
    for q in (0.5, 0.9, 0.99):
        key = f"p{round(q * 100)}"
        assert r.retry_gap_s[key] == pytest.approx(_pct(gaps, q), rel=1e-9)
        assert r.ack_latency_ms[key] == pytest.approx(_pct(t.latencies, q), rel=1e-9)
        assert r.delivery_lag_s[key] == pytest.approx(_pct(t.lags, q), rel=1e-9)
    assert r.retry_gap_s["max"] == pytest.approx(max(gaps))
    assert r.over_budget == sum(1 for x in t.latencies if x >= 1000)
    events, late = b.out_of_order()
    assert r.out_of_order_events == late
    assert r.out_of_order_share == pytest.approx(late / events)


def test_backoff_fit_recovers_the_schedule(generated: tuple[LogBuilder, DeliveryAnalysis]) -> None:
    b, analysis = generated
    fit = analysis.report.backoff
    # Least squares of ln(gap) on n-1, computed here independently with numpy.
    xs = np.array([n - 1 for n, _ in b.truth.retry_gaps], dtype=float)
    ys = np.log([g for _, g in b.truth.retry_gaps])
    slope, intercept = np.polyfit(xs, ys, 1)
    assert fit["factor"] == pytest.approx(math.exp(slope), rel=1e-6)
    assert fit["base_s"] == pytest.approx(math.exp(intercept), rel=1e-6)
    # The generator used 30 s x 2^(n-1) with +-10 % jitter.
    assert fit["base_s"] == pytest.approx(30, rel=0.1)
    assert fit["factor"] == pytest.approx(2, rel=0.1)
    assert fit["gaps"] == len(b.truth.retry_gaps)
    by_retry = {row["retry"]: row["count"] for row in fit["by_retry"]}
    assert sum(by_retry.values()) == len(b.truth.retry_gaps)


def test_lost_and_pending_lists(generated: tuple[LogBuilder, DeliveryAnalysis]) -> None:
    b, analysis = generated
    lost = analysis.lost_actions()
    assert set(lost.action_id) == b.truth.lost_ids
    assert lost.last_status.between(400, 499).all()
    assert lost.player_id.notna().all() and lost.game_id.notna().all()
    pending = analysis.pending_actions()
    assert set(pending.action_id) == b.truth.pending_ids
    assert (pending.time_left_s > 0).all()


def test_silent_periods_equal_the_truth(generated: tuple[LogBuilder, DeliveryAnalysis]) -> None:
    b, analysis = generated
    times = sorted(datetime.fromisoformat(r["received_at"]) for r in b.records)
    truth = [(y - x).total_seconds() for x, y in itertools.pairwise(times)]
    truth = [g for g in truth if g > 300]
    silent = analysis.report.silent_periods
    assert truth, "the generator always leaves one silent stretch"
    assert silent["count"] == len(truth)
    assert silent["longest_s"] == pytest.approx(max(truth))
    assert list(analysis.silent_periods().seconds) == pytest.approx(truth)


def test_drill_downs_add_up(generated: tuple[LogBuilder, DeliveryAnalysis]) -> None:
    b, analysis = generated
    r = analysis.report
    hours = analysis.per_hour()
    assert hours.deliveries.sum() == r.deliveries
    assert hours.retries.sum() == r.retries and hours.duplicates.sum() == r.duplicate_deliveries
    assert (hours.status_2xx + hours.status_4xx + hours.status_5xx + hours.status_other).sum() == (
        r.deliveries
    )
    games = analysis.per_game()
    assert games.actions.sum() == r.actions
    assert games.lost.sum() == r.lost_actions
    # Bets are exact decimals, summed in the engine per game and currency, never across.
    assert "bet_total" not in games.columns
    bets = analysis.bets_per_game()
    assert {
        (g, c): v for g, c, v in zip(bets.game_id, bets.currency_code, bets.bet_total, strict=True)
    } == b.truth.bets
    assert sum(currencies_total(analysis), Decimal(0)) == b.truth.bet_total
    currencies = analysis.per_currency()
    assert currencies.actions.sum() == r.actions
    chain_id = next(iter(b.truth.lost_ids))
    chain = analysis.chain(chain_id)
    assert list(chain.attempt_no) == list(range(1, len(chain) + 1))
    assert chain.kind.iloc[0] == "first"


def test_bets_are_summed_per_currency_at_its_exponent(tmp_path: Path) -> None:
    b = LogBuilder(seed=7)
    bets = [
        ("g1", "EUR", "10.5"),
        ("g1", "EUR", "2.25"),
        ("g1", "JPY", "1500"),
        ("g1", "JPY", "300"),
        ("g1", "KWD", "1.25"),
        ("g2", "BRL", "0.1"),
        ("g2", "ZZZ", "7"),
    ]
    for n, (game, currency, bet) in enumerate(bets):
        b.action([200], at=START + timedelta(minutes=n))
        b.records[-1]["payload"].update(gameId=game, currencyCode=currency, bet=Decimal(bet))
    with analyze(b.write_jsonl(tmp_path / "log.jsonl")) as analysis:
        games = analysis.per_game()
        assert list(games.game_id) == ["g1", "g2"] and "bet_total" not in games.columns
        rows = analysis.bets_per_game()
        shown = {
            (g, c): str(v)
            for g, c, v in zip(rows.game_id, rows.currency_code, rows.bet_total, strict=True)
        }
        # Each at its currency's exponent; ZZZ (not an ISO code) keeps its own digits.
        assert shown == {
            ("g1", "EUR"): "12.75",
            ("g1", "JPY"): "1800",
            ("g1", "KWD"): "1.250",
            ("g2", "BRL"): "0.10",
            ("g2", "ZZZ"): "7",
        }
        assert list(rows.actions) == [2, 2, 1, 1, 1]
        currencies = analysis.per_currency().set_index("currency_code")
        assert str(currencies.at["EUR", "bet_total"]) == "12.75"
        assert str(currencies.at["JPY", "bet_total"]) == "1800"
        # One action's bet, in the per-action listings, too: never the engine's 9 digits.
        one = analysis.actions_frame()
        assert [str(v) for v in one.bet] == ["10.50", "2.25", "1500", "300", "1.250", "0.10", "7"]


def test_lost_and_pending_bets_are_at_their_currencys_exponent(tmp_path: Path) -> None:
    b = LogBuilder(seed=7)
    for n, (status, currency, bet) in enumerate(
        [(401, "JPY", "10"), (401, "KWD", "0.5"), (503, "EUR", "0.1")]
    ):
        b.action([status], at=START + timedelta(minutes=n))
        b.records[-1]["payload"].update(currencyCode=currency, bet=Decimal(bet))
    with analyze(b.write_jsonl(tmp_path / "log.jsonl")) as analysis:
        assert [str(v) for v in analysis.lost_actions().bet] == ["10", "0.500"]
        assert [str(v) for v in analysis.pending_actions().bet] == ["0.10"]


def currencies_total(analysis: DeliveryAnalysis) -> list[Decimal]:
    totals = analysis.per_currency().bet_total.dropna()
    assert all(isinstance(x, Decimal) for x in totals)
    return list(totals)


# ------------------------------------------------------------------ edge cases


def test_ties_in_received_at(tmp_path: Path) -> None:
    """Same instant: a retried answer, then a 4xx, then a 200. So 503+200 is a retry that
    succeeded, 200+200 a first attempt and a duplicate, 503+400 a lost action, whatever
    the line order."""
    b = LogBuilder(1)
    b.action([503, 200], at=START, gaps=[0.0])
    b.action([200, 200], at=START + timedelta(seconds=5), gaps=[0.0])
    b.action([503, 400], at=START + timedelta(seconds=9), gaps=[0.0])
    b.records.reverse()  # line order must not matter
    path = tmp_path / "ties.jsonl"
    with path.open("wb") as fh:
        from gptools.models import dumps_wire

        for rec in b.records:
            fh.write(dumps_wire(rec) + b"\n")
    with analyze(path) as analysis:
        r = analysis.report
        assert (r.retries, r.duplicate_deliveries, r.acknowledged_actions) == (2, 1, 2)
        assert r.lost_actions == 1 and r.pending_actions == 0
        assert r.identity_holds


def test_summary_counts_agree_with_the_attempt_chains(tmp_path: Path) -> None:
    """The summary counts retries and duplicates from per-action keys and the retried
    chains only; the drill-down orders every delivery. Both agree with the truth, also
    with two 200s at the first 200's instant and attempts after it."""
    b = LogBuilder(5)
    b.action([503, 200, 200, 503], at=START, gaps=[10.0, 0.0, 20.0])
    b.action([200, 503, 200], at=START + timedelta(seconds=1), gaps=[5.0, 5.0])
    b.action([503, 503, 400, 200, 200], at=START + timedelta(seconds=2), gaps=[1.0, 2.0, 4.0, 0.0])
    b.action([503, 400, 503], at=START + timedelta(seconds=3), gaps=[3.0, 6.0])
    path = b.write_jsonl(tmp_path / "chains.jsonl")
    with analyze(path) as analysis:
        r = analysis.report
        t = analysis.attempts
        kinds = analysis.log.con.execute(t.group_by("kind").aggregate(n=t.count()))
        by_kind = dict(zip(kinds.kind, kinds.n, strict=True))
        assert (r.retries, r.duplicate_deliveries) == (b.truth.retries, b.truth.duplicates)
        assert (by_kind["retry"], by_kind["duplicate"]) == (r.retries, r.duplicate_deliveries)
        assert r.first_attempt_success_rate == 1 / 4
        assert (r.acknowledged_actions, r.lost_actions, r.pending_actions) == (3, 0, 1)
        assert r.identity_holds


def test_log_spanning_more_than_seven_days(tmp_path: Path) -> None:
    b = LogBuilder(2)
    old = b.action([503, 503], at=START, gaps=[60.0])
    recent = b.action([503], at=START + timedelta(days=8))
    b.action([200], at=START + timedelta(days=8, hours=1))
    path = b.write_jsonl(tmp_path / "long.jsonl")
    with analyze(path) as analysis:
        r = analysis.report
        assert r.pending_actions == 2 and r.pending_actions_expired == 1
        assert analysis.now == START + timedelta(days=8, hours=1)
        pending = analysis.pending_actions().set_index("action_id")
        assert pending.loc[old, "time_left_s"] == 0
        assert pending.loc[recent, "time_left_s"] == pytest.approx(
            timedelta(days=7, hours=-1).total_seconds()
        )
        assert any("past their 7-day retry window" in w for w in r.warnings)
    # An explicit "now" moves the judgement.
    with analyze(path, now=START + timedelta(days=20)) as analysis:
        assert analysis.report.pending_actions_expired == 2


def test_actions_with_only_4xx_are_lost(tmp_path: Path) -> None:
    b = LogBuilder(3)
    a1 = b.action([400], at=START)
    a2 = b.action([422, 409], at=START + timedelta(seconds=1), gaps=[5.0])
    path = b.write_jsonl(tmp_path / "lost.jsonl")
    with analyze(path) as analysis:
        r = analysis.report
        assert r.lost_actions == 2 and r.acknowledged_actions == 0 and r.pending_actions == 0
        assert set(analysis.lost_actions().action_id) == {a1, a2}
        assert r.eventual_success_rate == 0
        assert any(w.startswith("2 actions lost: answered 4xx") for w in r.warnings)


def test_every_2xx_acknowledges(tmp_path: Path) -> None:
    """The document names 200 and leaves only "non-2xx/4xx/5xx" codes unknown, so a 201 or
    204 acknowledges like a 200 (spec.WEBHOOK_ACKNOWLEDGED_STATUSES): the action is
    acknowledged, a later delivery of it is a duplicate, not a retry."""
    b = LogBuilder(5)
    a1 = b.action([204, 204], at=START, gaps=[40.0])
    a2 = b.action([503, 201], at=START + timedelta(seconds=1), gaps=[30.0])
    a3 = b.action([202], at=START + timedelta(seconds=2))
    path = b.write_jsonl(tmp_path / "acks.jsonl")
    with analyze(path) as analysis:
        r = analysis.report
        assert r.acknowledged_actions == 3 and r.pending_actions == 0 and r.lost_actions == 0
        assert r.duplicate_deliveries == 1 and r.retries == 1
        assert r.first_attempt_success_rate == 2 / 3
        assert list(analysis.chain(a1).kind) == ["first", "duplicate"]
        assert set(analysis.pending_actions().action_id).isdisjoint({a1, a2, a3})


def test_bodies_without_action_id(tmp_path: Path) -> None:
    b = LogBuilder(4)
    p = b.payload(b.new_id(), START)
    del p["actionId"]
    b.invalid(START, reason="missing:actionId", payload=p)
    b.invalid(START + timedelta(seconds=1), reason="not_json", body="{not json")
    b.invalid(START + timedelta(seconds=2), reason="no_body", body=None)
    b.action([200], at=START + timedelta(seconds=3))
    path = b.write_jsonl(tmp_path / "noid.jsonl")
    with analyze(path) as analysis:
        r = analysis.report
        assert r.deliveries == 4 and r.actions == 1
        assert r.invalid_deliveries_without_action_id == 3
        assert r.invalid_by_reason == {"missing:actionId": 1, "not_json": 1, "no_body": 1}
        assert r.identity_holds


def test_empty_log(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with analyze(path) as analysis:
        r = analysis.report
        assert r.deliveries == 0 and r.actions == 0 and r.now is None
        assert r.first_attempt_success_rate is None and r.out_of_order_share is None
        assert r.backoff["base_s"] is None and r.ack_latency_ms["p50"] is None
        assert r.identity_holds and r.warnings == ()
        doc = r.to_dict()
        assert doc["deliveries"] == 0 and doc["check"]["holds"]
        assert analysis.lost_actions().empty and analysis.per_hour().empty
        assert "Deliveries" in r._repr_html_()


def test_report_html_and_dict(generated: tuple[LogBuilder, DeliveryAnalysis]) -> None:
    _, analysis = generated
    r = analysis.report
    html = analysis._repr_html_()
    assert f"{r.deliveries:,}" in html and "Warnings" in html
    # Times to the millisecond in what a person reads (the JSON keeps microseconds).
    assert re.search(r"\d\d:\d\d:\d\d\.\d{3} UTC", html)
    assert not re.search(r"\d\d:\d\d:\d\d\.\d{4}", html)
    doc = r.to_dict()
    for key in (
        "deliveries", "actions", "acknowledged_actions", "duplicate_deliveries", "retries",
        "lost_actions", "pending_actions", "invalid_by_reason", "status_counts",
        "first_attempt_success_rate", "eventual_success_rate", "attempts_per_action",
        "retry_gap_s", "backoff", "delivery_lag_s", "out_of_order_share", "ack_latency_ms",
        "over_budget", "silent_periods", "check", "warnings",
    ):  # fmt: skip
        assert key in doc, key
    assert doc["first_received_at"] == iso(analysis.report.first_received_at)  # type: ignore[arg-type]


@pytest.mark.parametrize("threshold_s", [1.0, 7.5, 300.0])
def test_silent_periods_at_the_threshold_edges(tmp_path: Path, threshold_s: float) -> None:
    # Gaps just under, at and just over the threshold, and long ones straddling several
    # of the engine's half-threshold buckets, at arbitrary (non-aligned) offsets.
    rng = np.random.default_rng(int(threshold_s * 10))
    factors = [0.5, 0.999999, 1.0, 1.000001, 1.5, 1.999999, 2.0, 2.5, 3.7, 10.0]
    gaps = [threshold_s * f for f in rng.permutation(np.repeat(factors, 3))]
    b = LogBuilder(5)
    at = START + timedelta(microseconds=int(rng.integers(0, 10**6)))
    for gap in gaps:
        b.action([200], at=at)
        at += timedelta(microseconds=round(gap * 1e6))
    b.action([200], at=at)
    times = sorted(datetime.fromisoformat(r["received_at"]) for r in b.records)
    truth = [(y - x).total_seconds() for x, y in itertools.pairwise(times)]
    truth = [g for g in truth if g > threshold_s]
    path = b.write_jsonl(tmp_path / "edges.jsonl")
    with analyze(path, silence_threshold=timedelta(seconds=threshold_s)) as analysis:
        assert list(analysis.silent_periods().seconds) == pytest.approx(truth, abs=1e-6)
        assert analysis.report.silent_periods["count"] == len(truth)


def test_escaped_strings_come_out_unescaped(tmp_path: Path) -> None:
    # DuckDB writes a JSON string back with escapes only for quotes, backslashes and
    # control characters; those take the exact (parsing) path, the rest are unquoted.
    b = LogBuilder(6)
    players = ['pl"ayer\\1', "joueur-é-\u2603", "tab\there"]
    ids = {
        p: b.action([400], at=START + timedelta(seconds=i), player=p) for i, p in enumerate(players)
    }
    path = b.write_jsonl(tmp_path / "escaped.jsonl")
    with analyze(path) as analysis:
        lost = analysis.lost_actions().set_index("action_id")
        assert {lost.loc[a, "player_id"]: a for a in ids.values()} == ids
        assert analysis.report.invalid_deliveries == 0
