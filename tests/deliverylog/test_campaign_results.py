"""Campaign results are exact against a log that knows its own attribution: decoys (another
game, another bet, no FEATURE, another currency, not a participant), both edges of a window
across a DST change, overlapping campaigns sharing players and games (ambiguous, never
counted twice), duplicates, retries and invalid deliveries; DuckDB and Spark agree."""

from __future__ import annotations

import statistics
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gptools.deliverylog import CampaignTerms, analyze, campaign_results
from tests.deliverylog.campaign_logs import AMBIGUOUS, scenario, truth_rows
from tests.deliverylog.test_engines import _close, _rows


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[CampaignTerms], Path]:
    log, terms = scenario()
    path = log.write(tmp_path_factory.mktemp("campaign-log") / "log.jsonl")
    return log, terms, path


def test_every_count_equals_the_truth(built: tuple[Any, list[CampaignTerms], Path]) -> None:
    log, terms, path = built
    truth = truth_rows(log, terms)
    with campaign_results(path, terms) as results:
        report = results.report
        assert report.actions == log.actions
        assert report.attributed == sum(
            n for k, n in log.labels.items() if k not in (None, AMBIGUOUS)
        )
        assert report.ambiguous == log.labels[AMBIGUOUS] == 2
        assert report.unattributed == log.labels[None]
        assert report.without_valid_delivery == 1
        assert report.identity_holds and report.to_dict()["check"]["holds"]
        for entry in report.campaigns:
            want = truth[entry["campaign_id"]]
            got = {k: entry[k] for k in want if k != "unreached"}
            assert got == {k: v for k, v in want.items() if k != "unreached"}, entry["campaign_id"]
        unreached = results.unreached()
        for cid, want in truth.items():
            got = sorted(unreached.player_id[unreached.campaign_id == cid])
            assert got == want["unreached"], cid
        # The same actions as the analyser counts (duplicates and retries once).
        with analyze(path) as analysis:
            assert analysis.report.actions == report.actions


def test_money_is_exact_at_the_currency_exponent(
    built: tuple[Any, list[CampaignTerms], Path],
) -> None:
    _, terms, path = built
    with campaign_results(path, terms) as results:
        doc = {c["campaign_id"]: c for c in results.report.to_dict()["campaigns"]}
        assert doc["A"]["exposure_used"] == "220.00" and doc["B"]["exposure_used"] == "0.80"
        assert doc["J"]["exposure_used"] == "50" and doc["C"]["budget"] == "120.00"
        eur = results.report.by_currency()[0]
        assert str(eur["exposure_used"]) == "260.80" and eur["currency"] == "EUR"


def test_wait_to_first_play_and_uptake(built: tuple[Any, list[CampaignTerms], Path]) -> None:
    log, terms, path = built
    with campaign_results(path, terms) as results:
        by_id = {c["campaign_id"]: c for c in results.report.campaigns}
        uptake = results.uptake()
    for t in terms:
        plays = log.plays[t.campaign_id]
        waits = [(min(v) - t.start).total_seconds() for v in plays.values()]
        entry = by_id[t.campaign_id]
        assert entry["wait_p50_s"] == pytest.approx(statistics.median(waits))
        assert entry["wait_p90_s"] == pytest.approx(float(np.percentile(waits, 90)))
        days: dict[int, int] = {}
        for times in plays.values():
            for moment in times:
                day = (moment - t.start) // timedelta(days=1)
                days[day] = days.get(day, 0) + 1
        mine = uptake[uptake.campaign_id == t.campaign_id]
        assert dict(zip(mine.day, mine.rounds, strict=True)) == days
        assert int(mine.reached.iloc[-1]) == len(plays)


def test_players_frame(built: tuple[Any, list[CampaignTerms], Path]) -> None:
    log, terms, path = built
    with campaign_results(path, terms) as results:
        players = results.players()
    got = {
        (c, p): r
        for c, p, r in zip(players.campaign_id, players.player_id, players.rounds, strict=True)
    }
    want = {(c, p): len(v) for c, ps in log.plays.items() for p, v in ps.items()}
    assert got == want
    assert set(players.player_id[players.completed]) == {"p0", "p5", "p9", "q1"}


def test_the_feature_event_is_an_assumption_one_can_drop(
    built: tuple[Any, list[CampaignTerms], Path],
) -> None:
    _, terms, path = built
    with campaign_results(path, terms, feature_event=None) as results:
        a = next(c for c in results.report.campaigns if c["campaign_id"] == "A")
    # Without the events term, p1's COIN-only play and p2's escaped string count for A.
    assert a["rounds_used"] == 13


def test_repeated_campaign_ids_are_refused(built: tuple[Any, list[CampaignTerms], Path]) -> None:
    _, terms, path = built
    with pytest.raises(ValueError, match="given twice: A"):
        campaign_results(path, [terms[0], terms[0]])


def test_both_engines_agree(built: tuple[Any, list[CampaignTerms], Path], spark: Any) -> None:
    _, terms, path = built
    with (
        campaign_results(path, terms) as duck,
        campaign_results(path, terms, engine="spark", spark=spark) as sp,
    ):
        one, two = duck.report.to_dict(), sp.report.to_dict()
        assert one.pop("source") == two.pop("source")
        _close(one, two, "report")
        for name in ("players", "uptake", "unreached"):
            a, b = getattr(duck, name)(), getattr(sp, name)()
            assert list(a.columns) == list(b.columns), name
            _close(_rows(a), _rows(b), name)


def test_charts_draw_every_campaign(built: tuple[Any, list[CampaignTerms], Path]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gptools.deliverylog import plot_budget_used, plot_funnel, plot_uptake
    from gptools.deliverylog._results_charts import budget_ticks

    _, terms, path = built
    with campaign_results(path, terms) as results:
        funnel = plot_funnel(results)
        uptake = plot_uptake(results)
        budget = plot_budget_used(results)
    bars = [round(p.get_height()) for p in funnel.axes[0].patches]
    assert bars == [10, 10, 3, 3, 6, 2, 1, 2, 1, 1, 1, 1]  # assigned, reached, completed
    assert len(uptake.axes[0].get_lines()) == 4
    labels = [t.get_text() for t in budget.axes[0].texts]
    assert "220.00 of 1000.00 EUR" in labels and "50 of 120 JPY" in labels
    # Ticks end at the largest share (every share here is under 100 %): no 120 % on an axis
    # nobody reached; the budget is a dashed line at 100 %.
    ax = budget.axes[0]
    assert max(ax.get_xticks()) == 100 and "budget" in labels
    assert [line.get_xdata()[0] for line in ax.get_lines()] == [100]
    assert budget_ticks(130.5)[-1] == 140 and budget_ticks(100) == [0, 20, 40, 60, 80, 100]
    for fig in (funnel, uptake, budget):
        plt.close(fig)


def test_uptake_counts_stand_at_the_end_of_their_day(
    built: tuple[Any, list[CampaignTerms], Path],
) -> None:
    """Issue 35 item 11: the players reached by the end of a day are drawn at the end of
    that day (never at its start, which would show them reached at the first moment),
    from zero at the campaign's start; the legend names each campaign's currency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    from gptools.deliverylog import plot_uptake
    from gptools.deliverylog._results_charts import uptake_points

    _, terms, path = built
    by_id = {t.campaign_id: t for t in terms}
    with campaign_results(path, terms) as results:
        frame = results.uptake()
        points = uptake_points(results)
        fig = plot_uptake(results)
    played = sorted(frame.campaign_id.unique())
    labels = [f"{cid} ({by_id[cid].currency})" for cid in played]
    assert sorted(points.label.unique()) == labels
    for cid, label in zip(played, labels, strict=True):
        t = by_id[cid]
        start, end = t.start.astimezone(UTC), t.end.astimezone(UTC)
        mine = points[points.label == label]
        assert (mine["at"].iloc[0], mine.reached.iloc[0]) == (start, 0)
        drawn = dict(zip(mine["at"].iloc[1:], mine.reached.iloc[1:], strict=True))
        part = frame[frame.campaign_id == cid]
        for day, reached in zip(part.day, part.reached, strict=True):
            assert drawn[min(start + timedelta(days=int(day) + 1), end)] == reached
        assert len(drawn) == int(part.day.max()) + 1  # every day up to the last, none skipped
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == labels
    first_x = [mdates.num2date(line.get_xdata(orig=False)[0]) for line in lines]
    assert first_x == [by_id[cid].start.astimezone(UTC) for cid in played]
    plt.close(fig)
