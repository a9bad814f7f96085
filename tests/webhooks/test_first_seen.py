"""The contract watcher (issue 38, item 3): a value never seen before in a field whose set
the document leaves open (event types, top-level fields, currencies, game ids) is
recorded once in the store with its first time and actionId, counted
(``gptools_webhook_first_seen_total{kind}``) and logged one line; a kind set to refuse
answers 422; each kind keeps at most ``first_seen_max_values`` values. Real deliveries
to a receiver served on loopback, real SQLite and PostgreSQL stores."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools.webhooks import ReceiverAuth, ReceiverConfig, SettingError, WebhookReceiver, open_store
from gptools.webhooks._first_seen_store import Sighting
from tests.webhooks.conftest import JSON, T0, ManualClock, event, scrape, serve_in_thread, wire

DEADLINE_S = 10.0

A1 = "00000000-0000-4000-8000-000000000001"
A2 = "00000000-0000-4000-8000-000000000002"
A3 = "00000000-0000-4000-8000-000000000003"


def _rows(store_url: str) -> list[Sighting]:
    conn = open_store(store_url).connect()
    try:
        return conn.first_seen()
    finally:
        conn.close()


def _until(what: str, check: Callable[[], Any]) -> Any:
    """Poll ``check`` until it returns something true (the watcher records every half
    second, off the request path); fail naming ``what`` past the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while not (last := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {DEADLINE_S} s; last {last!r}")
        time.sleep(0.05)
    return last


def _counted(base_url: str) -> dict[str, float]:
    samples = scrape(f"{base_url}/metrics")
    return {labels["kind"]: value for labels, value in samples["gptools_webhook_first_seen_total"]}


def _receiver(store_url: str, **settings: Any) -> WebhookReceiver:
    return WebhookReceiver(store_url, auth=ReceiverAuth.none(), clock=ManualClock(), **settings)


def test_a_new_event_type_is_recorded_counted_and_logged_once(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gptools.webhooks")
    with serve_in_thread(_receiver(store_url)) as srv:
        before = _counted(srv.base_url)
        for action_id in (A1, A2):
            body = wire(event(action_id, events=["COIN", "BONUS_WHEEL"]))
            assert httpx.post(srv.url, content=body, headers=JSON).status_code == 200
        _until(
            "the new event type recorded",
            lambda: [s for s in _rows(store_url) if s.kind == "event_type"],
        )
        after = _until(
            "the counters moved",
            lambda: (c := _counted(srv.base_url)) != before and c,
        )
    # The first delivery names everything for the first time: its currency and game too
    # (the document names none); the event type COIN and the eight fields are the
    # document's own, never news.
    assert _rows(store_url) == [
        Sighting("currency", "EUR", T0, A1),
        Sighting("event_type", "BONUS_WHEEL", T0, A1),
        Sighting("game", "golden-pharaoh", T0, A1),
    ]
    assert {k: after[k] - before.get(k, 0) for k in after} == {
        "event_type": 1,
        "field": 0,
        "currency": 1,
        "game": 1,
    }
    lines = [r for r in caplog.records if getattr(r, "event", None) == "first_seen"]
    assert sorted((r.kind, r.value, r.actionId, r.levelname) for r in lines) == [  # type: ignore[attr-defined]
        ("currency", "EUR", A1, "INFO"),
        ("event_type", "BONUS_WHEEL", A1, "WARNING"),
        ("game", "golden-pharaoh", A1, "INFO"),
    ]


def test_a_new_top_level_field_is_recorded_and_the_delivery_kept(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    with serve_in_thread(_receiver(store_url)) as srv:
        body = wire(event(A1, campaignId="C-7"))
        assert httpx.post(srv.url, content=body, headers=JSON).status_code == 200
        _until("the new field recorded", lambda: any(s.kind == "field" for s in _rows(store_url)))
    assert [s for s in _rows(store_url) if s.kind == "field"] == [
        Sighting("field", "campaignId", T0, A1)
    ]


def test_a_receiver_that_restarts_knows_what_its_store_recorded(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    with serve_in_thread(_receiver(store_url)) as srv:
        httpx.post(srv.url, content=wire(event(A1, events=["SPIN"])), headers=JSON)
        _until("recorded", lambda: len(_rows(store_url)) == 3)
    restarted = _receiver(store_url)
    with serve_in_thread(restarted) as srv:
        httpx.post(srv.url, content=wire(event(A2, events=["SPIN"])), headers=JSON)
        # Nothing new to note: the values were read from the store at start.
        assert restarted.first_seen.take() == ([], {})
    assert [s.action_id for s in _rows(store_url)] == [A1, A1, A1]


def test_a_kind_set_to_refuse_answers_422_and_records_the_refusal_once(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    with serve_in_thread(_receiver(store_url, first_seen_refuse="event_type")) as srv:
        for action_id in (A1, A2):
            answer = httpx.post(
                srv.url, content=wire(event(action_id, events=["JACKPOT"])), headers=JSON
            )
            assert answer.status_code == 422
            assert answer.json() == {
                "error": "new_value",
                "reason": "event_type 'JACKPOT' has not been seen before, and this receiver "
                "refuses new values of event_type (first_seen_refuse)",
            }
        # The document's own event types pass; a new currency is only recorded.
        ok = httpx.post(srv.url, content=wire(event(A3, currencyCode="XBT")), headers=JSON)
        assert ok.status_code == 200
        _until("recorded", lambda: len(_rows(store_url)) == 3)
    assert _rows(store_url) == [
        Sighting("currency", "XBT", T0, A3),
        Sighting("event_type", "JACKPOT", T0, A1, refused=True),
        Sighting("game", "golden-pharaoh", T0, A3),
    ]
    conn = open_store(store_url).connect()
    try:
        # Refused: never stored, so never processed; logged 422.
        assert conn.queue_counts().done == 1
        assert [r["status"] for r in conn.iter_log()] == [422, 422, 200]
        # Accepting it lets it in at the next start.
        assert conn.accept_first_seen("event_type", "JACKPOT") is True
        assert conn.accept_first_seen("event_type", "JACKPOT") is False
    finally:
        conn.close()
    with serve_in_thread(_receiver(store_url, first_seen_refuse="event_type")) as srv:
        answer = httpx.post(srv.url, content=wire(event(A1, events=["JACKPOT"])), headers=JSON)
        assert answer.status_code == 200


def test_each_kind_keeps_at_most_its_cap_and_counts_the_rest(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    receiver = _receiver(store_url, first_seen_max_values=2)
    hostile = {f"x{i}": i for i in range(5)}
    with serve_in_thread(receiver) as srv:
        before = scrape(f"{srv.base_url}/metrics")["gptools_webhook_first_seen_dropped_total"]
        answer = httpx.post(srv.url, content=wire(event(A1, **hostile)), headers=JSON)
        assert answer.status_code == 200
        answer = httpx.post(srv.url, content=wire(event(A2, **hostile)), headers=JSON)
        assert answer.status_code == 200
        _until("recorded", lambda: len(_rows(store_url)) == 4)

        def dropped() -> float:
            samples = scrape(f"{srv.base_url}/metrics")["gptools_webhook_first_seen_dropped_total"]
            was = {labels["kind"]: v for labels, v in before}
            return sum(v - was.get(labels["kind"], 0) for labels, v in samples)

        # Three fields past the cap, in each of the two deliveries.
        _until("the dropped values counted", lambda: dropped() == 6)
        assert receiver.first_seen.known["field"] == {"x0", "x1"}
    assert [(s.kind, s.value) for s in _rows(store_url) if s.kind == "field"] == [
        ("field", "x0"),
        ("field", "x1"),
    ]


def test_the_store_records_a_sighting_once_whoever_records_it(pg_url: str) -> None:
    store = open_store(pg_url)
    one, two = store.connect(), store.connect()
    try:
        seen = Sighting("event_type", "BONUS", T0, A1)
        also = Sighting("event_type", "BONUS", T0, A2)
        assert one.record_first_seen([seen], cap=10) == [(seen, "new")]
        assert two.record_first_seen([also], cap=10) == [(also, "known")]
        assert one.first_seen() == [seen]
    finally:
        one.close()
        two.close()


def test_a_long_value_is_kept_cut(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    with serve_in_thread(_receiver(store_url)) as srv:
        httpx.post(srv.url, content=wire(event(A1, gameId="g" * 500)), headers=JSON)
        _until("recorded", lambda: len(_rows(store_url)) == 2)
    (game,) = [s for s in _rows(store_url) if s.kind == "game"]
    assert game.value == "g" * 199 + "…"


@pytest.mark.parametrize(
    ("refuse", "message"),
    [
        ("event_type,currencies", "first_seen_refuse is not valid: names no kind"),
        ("", None),
        (" field , game ", None),
    ],
)
def test_the_refuse_setting_names_kinds(refuse: str, message: str | None) -> None:
    if message is None:
        ReceiverConfig(first_seen_refuse=refuse)
        return
    with pytest.raises(SettingError, match=message) as refused:
        ReceiverConfig(first_seen_refuse=refuse)
    assert refused.value.setting == "first_seen_refuse"


def test_the_cap_must_be_positive() -> None:
    with pytest.raises(SettingError, match="first_seen_max_values must be at least 1, got 0"):
        ReceiverConfig(first_seen_max_values=0)


def test_the_first_seen_command_lists_and_accepts(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from gptools.cli import cli

    store_url = f"sqlite:///{tmp_path / 's.db'}"
    conn = open_store(store_url).connect()
    try:
        conn.record_first_seen(
            [
                Sighting("event_type", "JACKPOT", T0, A1, refused=True),
                Sighting("currency", "XBT", T0, A2),
            ],
            cap=10,
        )
    finally:
        conn.close()
    runner = CliRunner()
    listed = runner.invoke(cli, ["webhooks", "first-seen", "--store", store_url, "--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == {
        "first_seen": [
            {
                "kind": "currency",
                "value": "XBT",
                "first_seen_at": "2026-03-02T00:00:00+00:00",
                "first_action_id": A2,
                "refused": False,
            },
            {
                "kind": "event_type",
                "value": "JACKPOT",
                "first_seen_at": "2026-03-02T00:00:00+00:00",
                "first_action_id": A1,
                "refused": True,
            },
        ]
    }
    accepted = runner.invoke(
        cli,
        ["webhooks", "first-seen", "--store", store_url, "--kind", "event_type",
         "--accept", "event_type=JACKPOT"],
    )  # fmt: skip
    assert accepted.exit_code == 0, accepted.output
    assert accepted.stdout.splitlines() == [
        f"event_type  JACKPOT  2026-03-02T00:00:00+00:00  {A1}",
        "1 value first seen",
        "event_type=JACKPOT: accepted",
    ]
    bad = runner.invoke(cli, ["webhooks", "first-seen", "--store", store_url, "--accept", "x"])
    assert bad.exit_code == 2


def test_an_extra_field_with_a_long_number_is_recorded(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    with serve_in_thread(_receiver(store_url)) as srv:
        for digits, status in ((4300, 200), (4301, 400)):
            body = wire(event(A1))[:-1] + b', "huge": ' + b"9" * digits + b"}"
            assert httpx.post(srv.url, content=body, headers=JSON).status_code == status
        _until("recorded", lambda: len(_rows(store_url)) == 3)
    assert [s.value for s in _rows(store_url) if s.kind == "field"] == ["huge"]
