"""``webhooks find`` over a store (issue 38, item 1): each filter alone and combined, the
deliveries of each match in order with answers and latencies, its outcome, the bound on
the answer's size, and the lookups' use of an index (never a scan of the log)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.webhooks import open_store
from gptools.webhooks._find import FindFilter, FindResult, find_in_store
from tests.webhooks.conftest import T0
from tests.webhooks.find_support import ACTIONS, fill

A1, A2, A3, A4, A5 = ACTIONS


def _find(url: str, wanted: FindFilter, **options: object) -> FindResult:
    conn = open_store(url, create=False).connect()
    try:
        return find_in_store(conn, wanted, **options)  # type: ignore[arg-type]
    finally:
        conn.close()


def _ids(result: FindResult) -> list[str]:
    return [a.action_id for a in result.actions]


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        (FindFilter(player_id="p-1"), [A1, A2]),
        (FindFilter(round_id="R-3"), [A3]),
        (FindFilter(game_id="g-a"), [A1, A3, A4]),
        (FindFilter(action_id=A4), [A4]),
        (FindFilter(currency="USD"), [A3, A4]),
        (FindFilter(event_type="FEATURE"), [A2]),
        (FindFilter(outcome="lost"), [A3]),
        (FindFilter(outcome="pending"), [A4]),
        (FindFilter(status=422), [A3]),
        (FindFilter(game_id="g-a", currency="USD", outcome="pending"), [A4]),
        (FindFilter(since=T0 + timedelta(hours=2), until=T0 + timedelta(hours=4)), [A2, A3]),
        (FindFilter(player_id="p-1", since=T0 + timedelta(hours=2)), [A2]),
        (FindFilter(player_id="nobody"), []),
    ],
)
def test_each_filter_alone_and_combined(
    store_url: str, wanted: FindFilter, expected: list[str]
) -> None:
    fill(store_url)
    assert _ids(_find(store_url, wanted)) == expected


def test_a_match_shows_its_deliveries_in_order_with_answers_and_latencies(store_url: str) -> None:
    fill(store_url)
    (action,) = _find(store_url, FindFilter(round_id="R-1")).actions
    assert [(d.status, d.latency_ms, d.duplicate) for d in action.deliveries] == [
        (503, 1.5, False),
        (200, 2.5, False),
    ]
    assert [d.received_at for d in action.deliveries] == [
        T0 + timedelta(hours=1),
        T0 + timedelta(hours=1, minutes=1),
    ]
    assert (action.outcome, action.player_id, action.game_id, action.currency) == (
        "acknowledged", "p-1", "g-a", "EUR",
    )  # fmt: skip
    (twice,) = _find(store_url, FindFilter(round_id="R-2")).actions
    assert [d.duplicate for d in twice.deliveries] == [False, True]


def test_the_answer_is_bounded_and_says_so(store_url: str) -> None:
    fill(store_url)
    result = _find(store_url, FindFilter(), limit=2)
    assert (_ids(result), result.truncated) == ([A1, A2], True)
    whole = _find(store_url, FindFilter(), limit=5)
    assert (len(whole.actions), whole.truncated) == (5, False)
    scanned = _find(store_url, FindFilter(currency="EUR"), scan=3)
    assert scanned.truncated is True
    with pytest.raises(ValueError, match="limit must be 1 to 10000"):
        _find(store_url, FindFilter(), limit=10_001)


def test_lookups_by_player_round_game_and_action_use_an_index(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    fill(url)
    conn = open_store(url, create=False).connect()
    try:
        from gptools.webhooks._find import store_lookup_sql

        for wanted, index in [
            (FindFilter(player_id="p-1"), "delivery_log_player_id"),
            (FindFilter(round_id="R-1"), "delivery_log_round_id"),
            (FindFilter(game_id="g-a"), "delivery_log_game_id"),
            (FindFilter(action_id=A1), "delivery_log_action_id"),
        ]:
            where, params = store_lookup_sql("sqlite", wanted)
            plan = conn.raw.execute(
                f"EXPLAIN QUERY PLAN SELECT action_id, received_at FROM delivery_log WHERE {where}"
                " ORDER BY received_at LIMIT 10",
                params,
            ).fetchall()
            assert index in " ".join(str(r[-1]) for r in plan)
    finally:
        conn.close()


def test_cli_table_and_json(store_url: str) -> None:
    fill(store_url)
    runner = CliRunner()
    done = runner.invoke(
        cli, ["webhooks", "find", "--store", store_url, "--player-id", "p-2", "--json"]
    )
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert [a["action_id"] for a in document["actions"]] == [A3, A4]
    assert [a["outcome"] for a in document["actions"]] == ["lost", "pending"]
    assert [d["status"] for d in document["actions"][0]["deliveries"]] == [503, 422]
    table = runner.invoke(cli, ["webhooks", "find", "--store", store_url, "--round-id", "R-5"])
    assert table.exit_code == 0, table.output
    assert table.stdout.splitlines()[0].startswith(f"{A5}  acknowledged  player p-3")
    assert table.stdout.splitlines()[-1] == "1 action"


def test_each_match_says_its_campaign_or_why_none(tmp_path: object) -> None:
    from decimal import Decimal

    from gptools.deliverylog import CampaignTerms

    url = f"sqlite:///{tmp_path}/s.db"
    fill(url)

    def terms(cid: str, games: tuple[str, ...], kind: str = "FREE_ROUNDS") -> CampaignTerms:
        return CampaignTerms(cid, kind, "EUR", Decimal("2.10"), 10, games,
                             T0, T0 + timedelta(days=30), players=("p-1",))  # fmt: skip

    store = open_store(url, create=False)
    from gptools.webhooks import find_actions

    found = find_actions(
        store,
        FindFilter(player_id="p-1"),
        campaigns=[terms("C-1", ("g-a",)), terms("C-2", ("g-x",))],
    )
    assert [(a.campaign_id, a.attribution) for a in found.actions] == [
        ("C-1", "fits every term"),
        (None, "campaign C-2: game g-b is not one of its games"),
    ]
    other = find_actions(store, FindFilter(player_id="p-3"), campaigns=[terms("C-1", ("g-a",))])
    assert other.actions[0].attribution == "the player is in no campaign given"
    both = find_actions(
        store,
        FindFilter(round_id="R-1"),
        campaigns=[terms("C-1", ("g-a",)), terms("C-3", ("g-a",))],
    )
    assert both.actions[0].attribution == "ambiguous: fits C-1, C-3"
    actions, deliveries = found.frames()
    assert list(actions.action_id) == [A1, A2] and list(deliveries.status) == [503, 200, 200, 200]


def test_find_over_a_delivery_log_file(tmp_path: object) -> None:
    from gptools.webhooks import export_log

    url = f"sqlite:///{tmp_path}/s.db"
    fill(url)
    log = f"{tmp_path}/log.jsonl"
    export_log(open_store(url, create=False), log, format="jsonl")
    done = CliRunner().invoke(
        cli, ["webhooks", "find", "--log", log, "--player-id", "p-2", "--json"]
    )
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert [a["action_id"] for a in document["actions"]] == [A3, A4]
    assert [a["outcome"] for a in document["actions"]] == ["lost", "pending"]
    assert [d["status"] for d in document["actions"][0]["deliveries"]] == [503, 422]
    assert [d["latency_ms"] for d in document["actions"][0]["deliveries"]] == [1.5, 2.5]
    both = CliRunner().invoke(cli, ["webhooks", "find", "--log", log, "--store", url])
    assert both.exit_code == 2 and "give --store or --log" in both.output
