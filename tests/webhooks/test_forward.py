"""The forwarding stage (issue 38, item 4): every new action, once acknowledged, reaches
each destination once (RabbitMQ with publisher confirms and its actionId as
``message_id``; NATS JetStream with ``Nats-Msg-Id``; an HTTP URL with ``Idempotency-Key``),
through the durable processing queue; a failed publication is retried with backoff and
dead-lettered past its limit; a broker outage mid-stream loses nothing and, where the
broker deduplicates, doubles nothing. Real brokers on this machine, a queue or stream of
each test's own; the outage is a TCP proxy in front of the broker that the test cuts
(the machine's brokers are shared with other tests and are never restarted by one)."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools.errors import MissingExtraError
from gptools.webhooks import ReceiverAuth, ReceiverConfig, SettingError, WebhookReceiver, open_store
from gptools.webhooks._forward import open_publisher
from gptools.webhooks._forward_destinations import parse_destinations
from gptools.webhooks._forward_store import DEAD_FORWARDS_LISTED
from tests._support.brokers import (
    NATS,
    RABBIT,
    body_id,
    http_sink,
    nats_stream,
    rabbit_queue,
)
from tests._support.proxy import TcpProxy
from tests.webhooks.conftest import JSON, T0, ManualClock, event, scrape, serve_in_thread, wire

DEADLINE_S = 20.0
#: Retries come fast in the tests (the defaults are 1 s doubling up to 5 minutes).
FAST = {
    "forward_first_delay": timedelta(milliseconds=50),
    "forward_max_delay": timedelta(milliseconds=200),
    "forward_timeout": timedelta(seconds=2),
    "queue_idle_wait": timedelta(milliseconds=50),
}


def _ids(n: int) -> list[str]:
    return [str(uuid.UUID(int=i + 1, version=4)) for i in range(n)]


def _until(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while not (last := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {DEADLINE_S} s; last {last!r}")
        time.sleep(0.05)
    return last


def _counts(store_url: str) -> dict[str, dict[str, int]]:
    conn = open_store(store_url).connect()
    try:
        return conn.forward_counts()
    finally:
        conn.close()


def _all_done(store_url: str, names: list[str], n: int) -> Callable[[], Any]:
    def check() -> Any:
        counts = _counts(store_url)
        return all(counts.get(name) == {"done": n} for name in names) and counts

    return check


def _forwarded(base_url: str) -> dict[tuple[str, str], float]:
    samples = scrape(f"{base_url}/metrics")["gptools_webhook_forwarded_total"]
    return {(labels["destination"], labels["outcome"]): value for labels, value in samples}


def _post_all(url: str, action_ids: list[str], bodies: dict[str, bytes]) -> None:
    with httpx.Client(timeout=10) as client:
        for action_id in action_ids:
            answer = client.post(url, content=bodies[action_id], headers=JSON)
            assert answer.status_code == 200, answer.text


def test_every_action_reaches_each_destination_once(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    ids = _ids(12)
    bodies = {a: wire(event(a, roundId=f"R-{i}")) for i, a in enumerate(ids)}
    with rabbit_queue() as queue, nats_stream() as stream, http_sink() as sink:
        forward = f"crm={queue.url()} risk={stream.url()} dwh={sink.url}"
        receiver = WebhookReceiver(
            store_url, auth=ReceiverAuth.none(), clock=ManualClock(), forward=forward, **FAST
        )
        with serve_in_thread(receiver) as srv:
            before = _forwarded(srv.base_url)
            # Each action delivered twice (the provider's retry): forwarded once.
            _post_all(srv.url, ids + ids, bodies)
            _until("every forward done", _all_done(store_url, ["crm", "risk", "dwh"], 12))
            after = _forwarded(srv.base_url)
        expected = sorted((a, bodies[a].decode()) for a in ids)
        assert sorted(queue.messages()) == expected
        assert sorted(stream.messages()) == expected
        assert sorted(sink.received) == expected
    assert {k: after[k] - before.get(k, 0) for k in after} == {
        (name, outcome): 12 if outcome == "forwarded" else 0
        for name in ("crm", "risk", "dwh")
        for outcome in ("forwarded", "failed", "dead_lettered")
    }
    conn = open_store(store_url).connect()
    try:
        rows = conn.forwards("crm")
        assert [(r.action_id, r.state, r.attempts, r.forwarded_at) for r in rows] == [
            (a, "done", 1, T0) for a in sorted(ids)
        ]
        # The stage's entry is idempotent: a handler run repeated after a crash adds nothing.
        assert conn.enqueue_forwards(ids[0], "{}", ["crm", "risk", "dwh"], T0) == 0
    finally:
        conn.close()


def _deliver_while(
    url: str, ids: list[str], bodies: dict[str, bytes]
) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            _post_all(url, ids, bodies)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def _outage_mid_stream(
    tmp_path: Path, target: tuple[str, int], url_through: Callable[[int], str], n: int
) -> tuple[dict[tuple[str, str], float], list[str], dict[str, bytes]]:
    """Deliver ``n`` actions to a receiver forwarding through a proxy to ``target``; cut
    the proxy once a third are forwarded, deliver the rest into the outage, open it
    again; return the forwarding counters' change once every forward is done."""
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    ids = _ids(n)
    bodies = {a: wire(event(a)) for a in ids}
    with TcpProxy(target) as proxy:
        receiver = WebhookReceiver(
            store_url,
            auth=ReceiverAuth.none(),
            forward=f"broker={url_through(proxy.port)}",
            forward_max_attempts=1000,  # an outage never dead-letters by itself
            **FAST,
        )
        with serve_in_thread(receiver) as srv:
            before = _forwarded(srv.base_url)
            thread, errors = _deliver_while(srv.url, ids[: n // 2], bodies)
            _until(
                "a third forwarded",
                lambda: _counts(store_url).get("broker", {}).get("done", 0) >= n // 3,
            )
            proxy.cut()  # the broker goes away mid-stream, publications in flight
            thread.join(DEADLINE_S)
            _post_all(srv.url, ids[n // 2 :], bodies)
            _until(
                "publications failing",
                lambda: (
                    _forwarded(srv.base_url).get(("broker", "failed"), 0)
                    > before.get(("broker", "failed"), 0)
                ),
            )
            proxy.open()
            _until("every forward done", _all_done(store_url, ["broker"], n))
            after = _forwarded(srv.base_url)
            assert errors == []
    return {k: after[k] - before.get(k, 0) for k in after}, ids, bodies


def test_a_nats_outage_mid_stream_loses_and_doubles_nothing(tmp_path: Path) -> None:
    with nats_stream() as stream:
        change, ids, bodies = _outage_mid_stream(tmp_path, NATS, stream.url, 40)
        # JetStream dropped every second publication of an action (Nats-Msg-Id): each
        # action is in the stream exactly once.
        assert sorted(stream.messages()) == sorted((a, bodies[a].decode()) for a in ids)
    assert change[("broker", "forwarded")] == 40
    assert change[("broker", "dead_lettered")] == 0


def test_a_rabbitmq_outage_mid_stream_loses_nothing(tmp_path: Path) -> None:
    with rabbit_queue() as queue:
        change, ids, bodies = _outage_mid_stream(tmp_path, RABBIT, queue.url, 40)
        messages = queue.messages()
    # Every action is in the queue, under its own message_id, with its own body; a
    # publication whose confirm the cut lost was published again, and RabbitMQ (which
    # does not deduplicate) may hold that copy too, with the same message_id: a consumer
    # that drops a message_id it has seen reads each action exactly once.
    assert {m: b for m, b in messages} == {a: bodies[a].decode() for a in ids}
    assert all(body_id(b) == m for m, b in messages)
    copies = len(messages) - len(set(messages))
    assert copies <= change[("broker", "failed")]
    assert change[("broker", "forwarded")] == 40  # each row confirmed once
    assert change[("broker", "dead_lettered")] == 0


def test_a_destination_that_keeps_failing_dead_letters_then_is_replayed(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    ids = _ids(3)
    bodies = {a: wire(event(a)) for a in ids}
    with http_sink() as sink:
        sink.fail_with = 503
        receiver = WebhookReceiver(
            store_url,
            auth=ReceiverAuth.none(),
            forward=f"dwh={sink.url}",
            forward_max_attempts=2,
            **FAST,
        )
        with serve_in_thread(receiver) as srv:
            before = _forwarded(srv.base_url)
            _post_all(srv.url, ids, bodies)
            _until("all dead", lambda: _counts(store_url).get("dwh") == {"dead": 3})
            dead = _forwarded(srv.base_url)
            sink.fail_with = None
            conn = open_store(store_url).connect()
            try:
                rows = conn.forwards("dwh")
                assert [(r.state, r.attempts, r.last_error) for r in rows] == [
                    ("dead", 2, "RuntimeError: answered 503")
                ] * 3
                # A replay (or a retry of dead letters) puts them back in the queue.
                assert conn.requeue_forwards(None, T0, states=("dead",)) == 3
            finally:
                conn.close()
            receiver.forwarder.wake()  # type: ignore[union-attr]
            _until("replayed", _all_done(store_url, ["dwh"], 3))
            after = _forwarded(srv.base_url)
        assert sorted(sink.received) == sorted((a, bodies[a].decode()) for a in ids)
    # Each action: one failed attempt, then its second one dead-lettered; then forwarded.
    assert dead[("dwh", "failed")] - before.get(("dwh", "failed"), 0) == 3
    assert dead[("dwh", "dead_lettered")] - before.get(("dwh", "dead_lettered"), 0) == 3
    assert after[("dwh", "forwarded")] - before.get(("dwh", "forwarded"), 0) == 3


def test_a_failing_destination_holds_its_other_rows_without_counting_them(
    tmp_path: Path,
) -> None:
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    ids = _ids(5)
    with http_sink() as sink:
        sink.fail_with = 500
        receiver = WebhookReceiver(
            store_url, auth=ReceiverAuth.none(), forward=f"dwh={sink.url}", **FAST
        )
        assert receiver.processing is not None and receiver.forwarder is not None
        conn = open_store(store_url).connect()
        try:
            for a in ids:
                conn.enqueue_forwards(a, wire(event(a)).decode(), ["dwh"], T0)
            assert receiver.forwarder.run_due(conn) == 0
            rows = conn.forwards("dwh")
        finally:
            conn.close()
    # One publication tried and failed; the four behind it were given back untried.
    assert sorted(r.attempts for r in rows) == [0, 0, 0, 0, 1]
    assert {r.state for r in rows} == {"pending"}


def test_a_missing_broker_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    (rabbit, nats) = parse_destinations(
        "a=amqp://guest:guest@127.0.0.1/%2F?queue=q b=nats://127.0.0.1:4222?subject=s"
    )
    monkeypatch.setitem(sys.modules, "pika", None)
    monkeypatch.setitem(sys.modules, "nats", None)
    for destination, name, what in ((rabbit, "pika", "RabbitMQ"), (nats, "nats", "NATS")):
        expected = (
            f"forwarding to {what}{' JetStream' if what == 'NATS' else ''} needs the optional "
            f"extra [forward] ({name} is not installed): pip install 'gptools[forward]'"
        )
        with pytest.raises(MissingExtraError) as missing:
            open_publisher(destination, timedelta(seconds=1))
        assert str(missing.value) == expected
        # A receiver says so when it starts, not at its first publication.
        with pytest.raises(MissingExtraError) as missing:
            WebhookReceiver(
                "sqlite:///unused.db",
                auth=ReceiverAuth.none(),
                forward=f"{destination.name}={destination.url}",
            )
        assert str(missing.value) == expected


@pytest.mark.parametrize(
    ("forward", "message"),
    [
        ("x=ftp://h/q", "'ftp://h/q': a destination's URL starts amqp://"),
        ("q=amqp://u:pw-7@h/%2F", "'amqp://u:***@h/%2F': name the queue"),
        ("n=nats://h:4222", "'nats://h:4222': name the subject"),
        ("a=https://h/1 a=https://h/2", "two destinations named 'a'"),
        ("bad name=https://h/1", "'bad': a destination's URL starts"),
        ("b@d=https://h/1", "destination name 'b@d': letters"),
    ],
)
def test_a_destination_that_cannot_work_is_refused_by_name(forward: str, message: str) -> None:
    with pytest.raises(SettingError) as refused:
        ReceiverConfig(forward=forward)
    assert refused.value.setting == "forward"
    assert message in str(refused.value)
    assert "pw-7" not in str(refused.value)


def test_done_forwards_are_purged_past_the_logs_retention(store_url: str) -> None:
    from gptools.webhooks._forward_store import ClaimedForward

    store = open_store(store_url)
    conn = store.connect()
    try:
        old, recent, waiting = _ids(3)
        for a in (old, recent, waiting):
            conn.enqueue_forwards(a, "{}", ["dwh"], T0)
        claimed = {
            c.action_id: c
            for c in conn.claim_forwards(
                "dwh", T0, lease=timedelta(minutes=1), max_attempts=3, limit=10
            )
        }
        assert conn.finish_forward(claimed[old], "done", now=T0)
        assert conn.finish_forward(claimed[recent], "done", now=T0 + timedelta(days=2))
        conn.release_forwards([claimed[waiting]], T0)
        # Two rows a step: the purge goes on until a step deletes fewer.
        assert conn.purge_forwards(T0 + timedelta(days=1), step=1) == 1
        assert [(r.action_id, r.state) for r in conn.forwards()] == [
            (recent, "done"),
            (waiting, "pending"),
        ]
        assert isinstance(claimed[waiting], ClaimedForward)
    finally:
        conn.close()


def test_a_replay_forwards_the_chosen_actions_again_to_the_named_destination(
    tmp_path: Path,
) -> None:
    """`webhooks replay --forward NAME` puts the chosen actions back in that destination's
    queue (the others' are untouched); the receiver publishes them again with the same
    actionId as Idempotency-Key; the same replay run again sends nothing new."""
    import json

    from click.testing import CliRunner

    from gptools.cli import cli

    store_url = f"sqlite:///{tmp_path / 's.db'}"
    ids = _ids(4)
    bodies = {a: wire(event(a, playerId="p-a" if i < 2 else "p-b")) for i, a in enumerate(ids)}
    base = ["webhooks", "replay", "--store", store_url, "--player-id", "p-a"]
    with http_sink() as dwh, http_sink() as crm:
        receiver = WebhookReceiver(store_url, auth=ReceiverAuth.none(),
                                   forward=f"dwh={dwh.url} crm={crm.url}", **FAST)  # fmt: skip
        with serve_in_thread(receiver) as srv:
            _post_all(srv.url, ids, bodies)
            _until("forwarded", _all_done(store_url, ["dwh", "crm"], 4))
            plan = CliRunner().invoke(cli, [*base, "--forward", "dwh", "--plan"])
            assert plan.exit_code == 0, plan.output
            assert "forward to dwh would send each again" in plan.output
            first = CliRunner().invoke(cli, [*base, "--forward", "dwh", "--json"])
            assert first.exit_code == 0, first.output
            doc = json.loads(first.stdout)
            assert (doc["actions"], doc["queued"], doc["forward"]) == (2, 2, ["dwh"])
            receiver.forwarder.wake()  # type: ignore[union-attr]
            _until("sent again", lambda: len(dwh.received) == 6)
            _until("done again", _all_done(store_url, ["dwh", "crm"], 4))
            again = CliRunner().invoke(cli, [*base, "--forward", "dwh", "--json"])
            assert again.exit_code == 0, again.output
            assert json.loads(again.stdout)["queued"] == 0
    assert sorted(dwh.received) == sorted((a, bodies[a].decode()) for a in [*ids, *ids[:2]])
    assert sorted(crm.received) == sorted((a, bodies[a].decode()) for a in ids)
    both = CliRunner().invoke(cli, [*base, "--forward", "dwh", "--url", "http://127.0.0.1:9"])
    assert both.exit_code == 2
    assert "--forward sends the actions again, --handler/--url runs them" in both.output
    bad = CliRunner().invoke(cli, [*base, "--forward", "no good"])
    assert bad.exit_code == 2 and "not a destination name: 'no good'" in bad.output


def _dead_forwards_store(store_url: str) -> list[str]:
    """Three actions a minute apart, each forwarded to dwh and crm and one to ops: every
    dwh forward and the second action's crm forward given up on, the rest done."""
    ids = _ids(3)
    conn = open_store(store_url).connect()
    try:
        for i, a in enumerate(ids):
            conn.enqueue_forwards(a, "{}", ["dwh", "crm"], T0 + timedelta(minutes=i))
        conn.enqueue_forwards(ids[0], "{}", ["ops"], T0)
        at = T0 + timedelta(hours=1)
        for name in ("dwh", "crm", "ops"):
            for row in conn.claim_forwards(
                name, at, lease=timedelta(minutes=1), max_attempts=3, limit=10
            ):
                dead = name == "dwh" or (name == "crm" and row.action_id == ids[1])
                error = f"RuntimeError: {name} answered 503" if dead else None
                assert conn.finish_forward(row, "dead" if dead else "done", now=at, error=error)
    finally:
        conn.close()
    return ids


def test_dead_lettered_forwards_are_listed_bounded_and_counted(store_url: str) -> None:
    a1, a2, a3 = _dead_forwards_store(store_url)
    conn = open_store(store_url).connect()
    try:
        oldest = conn.dead_forwards(["dwh"], limit=2)
        assert [(d.action_id, d.destination) for d in oldest.listed] == [(a1, "dwh"), (a2, "dwh")]
        assert (oldest.totals, oldest.total) == ({"dwh": 3}, 3)
        both = conn.dead_forwards(["dwh", "crm", "ops"])
        assert [(d.action_id, d.destination) for d in both.listed] == [
            (a1, "dwh"), (a2, "crm"), (a2, "dwh"), (a3, "dwh"),
        ]  # fmt: skip
        assert both.totals == {"dwh": 3, "crm": 1, "ops": 0}
        assert both.listed[1].to_dict() == {
            "action_id": a2,
            "destination": "crm",
            "first_received_at": "2026-03-02T00:01:00.000000Z",
            "attempts": 1,
            "last_error": "RuntimeError: crm answered 503",
        }
        assert conn.dead_forwards(None, limit=1).totals == {"dwh": 3, "crm": 1}
        assert [conn.has_forwards(n) for n in ("ops", "dwj")] == [True, False]
        with pytest.raises(ValueError, match="limit must be at least 1"):
            conn.dead_forwards(["dwh"], limit=0)
    finally:
        conn.close()


def test_the_cli_lists_and_retries_dead_lettered_forwards(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`webhooks dead-letters --forward NAME`: the forwards that gave up, the oldest listed
    and all counted; --retry queues exactly those of the named destinations again; a name
    the store has no forward to is refused (exit 2) before anything is retried."""
    import json

    from click.testing import CliRunner

    import gptools.cli._webhooks as webhooks_cli
    from gptools.cli import cli

    a1, a2, a3 = _dead_forwards_store(store_url)
    base = ["webhooks", "dead-letters", "--store", store_url]

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, [*base, *args])

    listed = run("--forward", "crm", "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == {
        "dead_forwards": [
            {
                "action_id": a2,
                "destination": "crm",
                "first_received_at": "2026-03-02T00:01:00.000000Z",
                "attempts": 1,
                "last_error": "RuntimeError: crm answered 503",
            }
        ],
        "totals": {"crm": 1},
        "total": 1,
        "retried": 0,
    }
    # The CLI's bound (kept apart so that --help imports no store code) is the store's.
    assert webhooks_cli.DEAD_FORWARDS_SHOWN == DEAD_FORWARDS_LISTED
    monkeypatch.setattr(webhooks_cli, "DEAD_FORWARDS_SHOWN", 2)
    shown = run("--forward", "dwh", "--forward", "ops", "--forward", "dwh")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == [
        f"{a1}  dwh  2026-03-02T00:00:00.000000Z  1 attempts  RuntimeError: dwh answered 503",
        f"{a2}  dwh  2026-03-02T00:01:00.000000Z  1 attempts  RuntimeError: dwh answered 503",
        "3 dead-lettered forwards (dwh 3, ops 0), the oldest 2 listed",
    ]
    # Refused, and nothing retried: a typo must not read as "no dead letters".
    for name, message in [
        ("dwj", "the store has no forward to destination 'dwj'; destinations with "
                "dead-lettered forwards: crm, dwh"),
        ("no good", "--forward 'no good': a destination's name is 1-64 letters"),
    ]:  # fmt: skip
        refused = run("--forward", "crm", "--forward", name, "--retry")
        assert refused.exit_code == 2, refused.output
        assert refused.stdout == "" and message in refused.stderr
    retried = run("--forward", "crm", "--retry", "--json")
    assert retried.exit_code == 0, retried.output
    assert json.loads(retried.stdout)["retried"] == 1
    conn = open_store(store_url).connect()
    try:
        rows = {(r.action_id, r.destination): (r.state, r.attempts) for r in conn.forwards()}
        assert conn.dead_forwards(["crm"]).total == 0
    finally:
        conn.close()
    assert rows == {
        (a1, "dwh"): ("dead", 1), (a2, "dwh"): ("dead", 1), (a3, "dwh"): ("dead", 1),
        (a1, "crm"): ("done", 1), (a2, "crm"): ("pending", 0), (a3, "crm"): ("done", 1),
        (a1, "ops"): ("done", 1),
    }  # fmt: skip
    again = run("--forward", "crm", "--retry")
    assert again.exit_code == 0, again.output
    assert again.stdout == "0 dead-lettered forwards (crm 0); 0 queued again\n"
    # Without --forward: the handler's dead letters, as before (none here).
    assert json.loads(run("--json").stdout) == {"dead_letters": [], "retried": 0}
