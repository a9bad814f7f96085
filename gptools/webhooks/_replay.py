"""``webhooks replay``: run the handler again for stored actions that a filter chooses,
through the durable processing queue.

A replay has an id (given, or derived from its filter: the same command twice is the same
replay). Its first run records it (``replays``: who, when, the filter, the counts) and
lists its actions (``replay_items``); each batch then puts its actions back in the
processing queue (``webhook_actions``: pending, attempts from zero, due now) and marks
them queued **in the same transaction**, at most ``rate`` actions a second. So a replay
stopped anywhere (a crash, Ctrl-C, a kill) and run again queues only what it had not
queued, and a replay run again after it finished queues nothing. The queue then runs
them as it runs live deliveries: leases, retries with backoff, dead letters, one
successful run per action. With a ``handler`` the replay runs the queue itself until its
actions are done; without one, a receiver serving the store runs them.

A replay may forward instead (``forward``: destination names): each chosen action is put
back in the queue of each named destination of the forwarding stage (``webhook_forwards``:
pending, attempts from zero, due now; a destination that never had it gets it), in the
same batches and with the same bookkeeping, and the handler is not run again. A receiver
serving the store with those destinations publishes them, each with its actionId as the
message id, as it forwards live actions.

Only stored actions can be replayed (acknowledged ones; their dedupe key keeps them for
the store's ``retention``). Actions the filter matches in the log whose stored copy is
gone past that retention are counted apart (``gone``) and named in the plan.

The receiver's metrics about replays come from the ``replays`` rows
(:func:`replay_totals`, which each worker's store watch reads), not from counters of
this process: a replay usually runs as a command of its own, whose counters would end
with it, out of the receiver's reach.
"""

from __future__ import annotations

import getpass
import json
import logging
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from gptools._progress import progress
from gptools.webhooks._dialects import SQLITE
from gptools.webhooks._find import FindFilter
from gptools.webhooks._find_schema import INDEXED_FIELDS, field_sql
from gptools.webhooks._forward_destinations import DESTINATION_NAME
from gptools.webhooks._forward_store import REQUEUE_FORWARD
from gptools.webhooks._queue import Handler, ProcessingQueue
from gptools.webhooks._records import Clock, utc_now
from gptools.webhooks._store import Store, StoreConnection

logger = logging.getLogger("gptools.webhooks")

#: Actions put back in the queue per transaction.
REPLAY_BATCH: Final = 500
#: The most actions one replay may choose (a bigger one is several replays by time).
MAX_REPLAY_ACTIONS: Final = 10_000_000
_NAMESPACE = uuid.UUID("7f3c1f40-55f5-4b9f-9a55-3c1d2b0e4a38")


#: What a replay that forwards again is called (its target, and part of its id).
FORWARD_TARGET: Final = "forward to "


def forward_target(destinations: Sequence[str]) -> str:
    """The target of a replay that forwards again to ``destinations``."""
    return FORWARD_TARGET + ", ".join(dict.fromkeys(destinations))


def replay_id_of(wanted: FindFilter, target: str) -> str:
    """The id of the replay of ``wanted`` to ``target`` when none is given: the same
    filter and target are the same replay (running it twice queues nothing new)."""
    text = json.dumps({"filter": wanted.to_dict(), "target": target}, sort_keys=True)
    return str(uuid.uuid5(_NAMESPACE, text))


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """What a replay would do: its id, the stored actions it chooses (``actions``) and
    their deliveries in the log (``deliveries``), those matched but gone past the
    retention (``gone``), how many it has queued already (``queued``; 0 for a new one),
    and what runs them (``target``)."""

    replay_id: str
    filter: FindFilter
    target: str
    actions: int
    deliveries: int
    gone: int
    queued: int
    retention: timedelta

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (``--plan --json``)."""
        return {
            "replay_id": self.replay_id,
            "filter": self.filter.to_dict(),
            "target": self.target,
            "actions": self.actions,
            "deliveries": self.deliveries,
            "gone": self.gone,
            "queued": self.queued,
            "retention_s": self.retention.total_seconds(),
        }

    def __str__(self) -> str:
        lines = [
            f"replay {self.replay_id}: {self.actions} stored actions ({self.deliveries} "
            f"deliveries) match {self.filter.to_dict() or 'everything'}; {self.target} "
            + (
                "would send each again"
                if self.target.startswith(FORWARD_TARGET)
                else "would run each once"
            )
        ]
        if self.queued:
            lines.append(f"  {self.queued} of them were queued by an earlier run of this replay")
        if self.gone:
            lines.append(
                f"  {self.gone} matched actions are gone: their stored copy is kept "
                f"{self.retention} (the store's retention), so they cannot be replayed"
            )
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """A replay's outcome: ``queued`` now (this run), ``queued_total`` over every run,
    ``actions`` chosen, ``gone``, and ``done`` (its actions all run, when this run ran
    them)."""

    replay_id: str
    actions: int
    queued: int
    queued_total: int
    gone: int
    done: bool
    forward: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "replay_id": self.replay_id,
            "actions": self.actions,
            "queued": self.queued,
            "queued_total": self.queued_total,
            "gone": self.gone,
            "done": self.done,
            "forward": list(self.forward),
        }

    def __str__(self) -> str:
        state = (
            "all run"
            if self.done
            else f"queued for the receiver's forwarding to {', '.join(self.forward)}"
            if self.forward
            else "queued for the receiver's handler"
        )
        return (
            f"replay {self.replay_id}: {self.actions} actions, {self.queued} queued now "
            f"({self.queued_total} in all), {state}; {self.gone} gone past retention"
        )


@dataclass(frozen=True, slots=True)
class ReplayTotals:
    """What the store's replays add up to (the receiver's metrics): replays ``started``
    (recorded, one each however often it was resumed), those ``finished`` (that ran every
    action to the end themselves: a handler or a URL; one queued for the receiver is never
    marked so), and the actions queued again by target: ``handler`` (the processing
    queue, whoever runs it) and ``forwarded``, by destination (a replay to two
    destinations counts its actions for each)."""

    started: int = 0
    finished: int = 0
    handler: int = 0
    forwarded: dict[str, int] = field(default_factory=dict)


def replay_totals(conn: StoreConnection) -> ReplayTotals:
    """The store's :class:`ReplayTotals`: one grouped read of ``replays`` (a row per
    replay, never per action, so it stays small), cheap enough for every count of the
    store watch."""
    with conn._errors("count the replays"):
        rows = conn._execute(
            "SELECT target, COUNT(*), COUNT(finished_at), COALESCE(SUM(queued), 0)"
            " FROM replays GROUP BY target"
        ).fetchall()
    started = finished = handler = 0
    forwarded: dict[str, int] = {}
    for target, replays, done, queued in rows:
        started += int(replays)
        finished += int(done)
        text = str(target)
        if not text.startswith(FORWARD_TARGET):
            handler += int(queued)
            continue
        # forward_target's list: names never hold ", " (DESTINATION_NAME).
        for name in text[len(FORWARD_TARGET) :].split(", "):
            forwarded[name] = forwarded.get(name, 0) + int(queued)
    return ReplayTotals(started, finished, handler, forwarded)


def _engine(conn: StoreConnection) -> Any:
    return "sqlite" if conn._d is SQLITE else "postgres"


def _chosen_sql(conn: StoreConnection, wanted: FindFilter) -> tuple[str, list[Any]]:
    """The stored actions ``wanted`` chooses: a ``FROM webhook_actions w WHERE ...``
    tail, through an index (the key, a payload field's index, ``first_received_at``)."""
    where: list[str] = ["1 = 1"]
    params: list[Any] = []
    if wanted.action_id is not None:
        where.append("w.action_id = ?")
        params.append(wanted.action_id)
    for name, wire in (("player_id", "playerId"), ("round_id", "roundId"), ("game_id", "gameId")):
        value = getattr(wanted, name)
        if value is not None and wire in INDEXED_FIELDS:
            where.append(
                "w.action_id IN (SELECT action_id FROM delivery_log"
                f" WHERE {field_sql(_engine(conn), wire)} = ?)"
            )
            params.append(value)
    if wanted.since is not None:
        where.append("w.first_received_at >= ?")
        params.append(conn._ts(wanted.since))
    if wanted.until is not None:
        where.append("w.first_received_at < ?")
        params.append(conn._ts(wanted.until))
    return "FROM webhook_actions w WHERE " + " AND ".join(where), params


def _needs_body_check(wanted: FindFilter) -> bool:
    return wanted.currency is not None or wanted.event_type is not None


def _refuse(wanted: FindFilter) -> None:
    if wanted.outcome not in (None, "acknowledged"):
        raise ValueError(
            f"only acknowledged actions are stored, and so replayable; {wanted.outcome} "
            "ones never reached the handler (find lists them)"
        )
    if wanted.status is not None:
        raise ValueError("a replay chooses actions by their payload and time, not by status")


def _body_of(conn: StoreConnection, action_id: str, stored: str) -> str:
    """An action's body: its stored copy, else (a receiver without a handler keeps none)
    its first accepted delivery's."""
    if stored:
        return stored
    row = conn._execute(
        "SELECT body FROM delivery_log WHERE action_id = ? AND status = 200"
        " ORDER BY received_at LIMIT 1",
        (action_id,),
    ).fetchone()
    return "" if row is None else str(row[0])


def _chosen(conn: StoreConnection, wanted: FindFilter) -> Iterator[str]:
    """The ids of the stored actions ``wanted`` chooses, in key order."""
    tail, params = _chosen_sql(conn, wanted)
    if not _needs_body_check(wanted):
        rows = conn._execute(f"SELECT w.action_id {tail} ORDER BY w.action_id", params)
        for (action_id,) in rows.fetchall():
            yield str(action_id)
        return
    rows = conn._execute(f"SELECT w.action_id, w.body {tail} ORDER BY w.action_id", params)
    for action_id, stored in rows.fetchall():
        try:
            body = json.loads(_body_of(conn, str(action_id), str(stored)))
        except ValueError:
            continue
        if isinstance(body, dict) and wanted.fits_payload(body):
            yield str(action_id)


def _gone(conn: StoreConnection, wanted: FindFilter) -> int:
    """Actions acknowledged in the log within the filter's range but no longer stored."""
    where = ["d.status = 200", "d.action_id IS NOT NULL"]
    params: list[Any] = []
    if wanted.action_id is not None:
        where.append("d.action_id = ?")
        params.append(wanted.action_id)
    for name, wire in (("player_id", "playerId"), ("round_id", "roundId"), ("game_id", "gameId")):
        value = getattr(wanted, name)
        if value is not None:
            where.append(f"{field_sql(_engine(conn), wire).replace('body', 'd.body')} = ?")
            params.append(value)
    if wanted.since is not None:
        where.append("d.received_at >= ?")
        params.append(conn._ts(wanted.since))
    if wanted.until is not None:
        where.append("d.received_at < ?")
        params.append(conn._ts(wanted.until))
    if len(params) == 0:
        return 0  # no bound: counting the whole log is not a plan's job
    row = conn._execute(
        f"SELECT COUNT(DISTINCT d.action_id) FROM delivery_log d WHERE {' AND '.join(where)}"
        " AND NOT EXISTS (SELECT 1 FROM webhook_actions w WHERE w.action_id = d.action_id)",
        params,
    ).fetchone()
    return int(row[0])


def _deliveries(conn: StoreConnection, replay_id: str) -> int:
    row = conn._execute(
        "SELECT COUNT(*) FROM delivery_log d JOIN replay_items r ON r.action_id = d.action_id"
        " WHERE r.replay_id = ?",
        (replay_id,),
    ).fetchone()
    return int(row[0])


def _existing(conn: StoreConnection, replay_id: str) -> tuple[str, int, int, int] | None:
    row = conn._execute(
        "SELECT filter, actions, gone, queued FROM replays WHERE replay_id = ?", (replay_id,)
    ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]), int(row[2]), int(row[3]))


def plan_replay(
    store: Store, wanted: FindFilter, *, replay_id: str | None = None, target: str = "the handler"
) -> ReplayPlan:
    """What :func:`replay` would do, without changing anything."""
    _refuse(wanted)
    rid = replay_id or replay_id_of(wanted, target)
    conn = store.connect()
    try:
        with conn._errors("plan a replay"):
            known = _existing(conn, rid)
            if known is not None:
                _same_filter(rid, known[0], wanted)
                return ReplayPlan(
                    rid, wanted, target, known[1], _deliveries(conn, rid), known[2], known[3],
                    store.retention,
                )  # fmt: skip
            ids = list(_chosen(conn, wanted))
            deliveries = 0
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                marks = ", ".join("?" for _ in part)
                deliveries += int(
                    conn._execute(
                        f"SELECT COUNT(*) FROM delivery_log WHERE action_id IN ({marks})", part
                    ).fetchone()[0]
                )
            gone = _gone(conn, wanted)
    finally:
        conn.close()
    return ReplayPlan(rid, wanted, target, len(ids), deliveries, gone, 0, store.retention)


def _same_filter(replay_id: str, stored: str, wanted: FindFilter) -> None:
    if json.loads(stored) != wanted.to_dict():
        raise ValueError(
            f"replay {replay_id} exists with another filter ({stored}); give another --id"
        )


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _start(
    conn: StoreConnection, rid: str, wanted: FindFilter, target: str, now: datetime
) -> tuple[int, int, int]:
    """Record the replay and list its actions (once); (actions, gone, queued so far)."""
    known = _existing(conn, rid)
    if known is not None:
        _same_filter(rid, known[0], wanted)
        return known[1], known[2], known[3]
    ids = list(_chosen(conn, wanted))
    if len(ids) > MAX_REPLAY_ACTIONS:
        raise ValueError(
            f"the filter chooses {len(ids)} actions, more than one replay takes "
            f"({MAX_REPLAY_ACTIONS}): split it by time"
        )
    gone = _gone(conn, wanted)
    false = "0" if conn._d is SQLITE else "false"
    with conn._transaction():
        # The replay's row is written with its whole list: a crash before the commit
        # leaves neither, and the next run starts afresh.
        conn._execute(
            "INSERT INTO replays (replay_id, created_at, created_by, filter, target, actions,"
            " deliveries, queued, gone) VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?)",
            (rid, conn._ts(now), _who(), json.dumps(wanted.to_dict()), target, len(ids), gone),
        )
        cur = conn.raw.cursor()
        cur.executemany(
            conn._sql(
                f"INSERT INTO replay_items (replay_id, action_id, queued) VALUES (?, ?, {false})"
            ),
            [(rid, a) for a in ids],
        )
    return len(ids), gone, 0


def _queue_batch(
    conn: StoreConnection,
    rid: str,
    now: datetime,
    batch: int,
    forward: tuple[str, ...] = (),
    after: str = "",
) -> tuple[int, str]:
    """Put the next ``batch`` of the replay's unqueued actions whose id sorts after
    ``after`` back in the processing queue (with ``forward``: in those destinations'
    forwarding queues) and mark them queued, in one transaction; (how many, the last id).

    Batches go in action id order, so the caller's ``after`` (the last batch's last id)
    starts each read where the previous one ended: reading from the first unqueued item
    each time would pass over every queued one again, quadratic in the replay's size."""
    false = "0" if conn._d is SQLITE else "false"
    true = "1" if conn._d is SQLITE else "true"
    with conn._transaction():
        rows = conn._execute(
            "SELECT r.action_id, w.body, w.first_received_at FROM replay_items r"
            " JOIN webhook_actions w ON w.action_id = r.action_id"
            f" WHERE r.replay_id = ? AND r.action_id > ? AND r.queued = {false}"
            f" ORDER BY r.action_id LIMIT {batch}",
            (rid, after),
        ).fetchall()
        if not rows:
            # What is left unqueued was purged since the replay was planned: nothing to
            # run; those count as gone (one pass, at the end).
            missing = conn._execute(
                "SELECT COUNT(*) FROM replay_items r WHERE r.replay_id = ? AND r.queued = "
                f"{false} AND NOT EXISTS (SELECT 1 FROM webhook_actions w"
                " WHERE w.action_id = r.action_id)",
                (rid,),
            ).fetchone()[0]
            if missing:
                conn._execute(
                    f"UPDATE replay_items SET queued = {true} WHERE replay_id = ? AND queued ="
                    f" {false} AND action_id NOT IN (SELECT action_id FROM webhook_actions)",
                    (rid,),
                )
                conn._execute(
                    "UPDATE replays SET gone = gone + ? WHERE replay_id = ?", (missing, rid)
                )
            return 0, after
        ts = conn._ts(now)
        cur = conn.raw.cursor()
        if forward:
            cur.executemany(
                conn._sql(REQUEUE_FORWARD),
                [
                    (str(a), d, first, _body_of(conn, str(a), str(b)), ts)
                    for a, b, first in rows
                    for d in forward
                ],
            )
        else:
            # A pending action runs anyway (it is live): only finished ones go back.
            cur.executemany(
                conn._sql(
                    "UPDATE webhook_actions SET state = 'pending', attempts = 0,"
                    " lease_until = NULL, lease_owner = NULL, last_error = NULL,"
                    " next_attempt_at = ?, body = ? WHERE action_id = ? AND state <> 'pending'"
                ),
                [(ts, _body_of(conn, str(a), str(b)), str(a)) for a, b, _ in rows],
            )
        cur.executemany(
            conn._sql(
                f"UPDATE replay_items SET queued = {true} WHERE replay_id = ? AND action_id = ?"
            ),
            [(rid, str(a)) for a, _, _ in rows],
        )
        conn._execute(
            "UPDATE replays SET queued = queued + ? WHERE replay_id = ?", (len(rows), rid)
        )
    return len(rows), str(rows[-1][0])


def _left(conn: StoreConnection, rid: str) -> int:
    """The replay's queued actions still pending in the queue (read from the pending
    actions, which the queue keeps few, not from the replay's whole list)."""
    true = "1" if conn._d is SQLITE else "true"
    row = conn._execute(
        "SELECT COUNT(*) FROM webhook_actions w WHERE w.state = 'pending' AND EXISTS ("
        "SELECT 1 FROM replay_items r WHERE r.replay_id = ? AND r.action_id = w.action_id"
        f" AND r.queued = {true})",
        (rid,),
    ).fetchone()
    return int(row[0])


def replay(
    store: Store,
    wanted: FindFilter,
    *,
    replay_id: str | None = None,
    handler: Handler | None = None,
    target: str = "the handler",
    rate: float | None = None,
    batch: int = REPLAY_BATCH,
    show_progress: bool | None = None,
    queue_options: dict[str, Any] | None = None,
    clock: Clock = utc_now,
    on_queued: Callable[[int], None] | None = None,
    forward: Sequence[str] = (),
) -> ReplayResult:
    """Replay the stored actions ``wanted`` chooses (see the module's docstring): record
    the replay, queue its actions at most ``rate`` a second (None: as fast as the store
    takes them) in batches of ``batch``, and, with ``handler``, run the processing queue
    (``queue_options`` as :class:`ProcessingQueue` takes them) until they are all run.
    Resumable and idempotent per ``replay_id`` (default: :func:`replay_id_of`). With
    ``forward`` (destination names), the actions are forwarded again instead of run (see
    the module's docstring): no ``handler`` then."""
    _refuse(wanted)
    destinations = tuple(dict.fromkeys(forward))
    if destinations and handler is not None:
        raise ValueError("a replay forwards again or runs a handler, not both")
    bad = [d for d in destinations if not DESTINATION_NAME.fullmatch(d)]
    if bad:
        raise ValueError(f"not a destination name: {', '.join(map(repr, bad))}")
    if rate is not None and rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    if destinations and target == "the handler":
        # Its own id: never the same replay as a handler's run of the same filter.
        target = forward_target(destinations)
    rid = replay_id or replay_id_of(wanted, target)
    step = batch if rate is None else max(1, min(batch, int(rate)))
    queue = ProcessingQueue(store, handler, **(queue_options or {})) if handler else None
    conn = store.connect()
    try:
        with conn._errors("start a replay"):
            actions, gone, before = _start(conn, rid, wanted, target, clock())
        logger.info(
            "replay %s: %d actions (%d queued before), %d gone past retention",
            rid, actions, before, gone,
            extra={"event": "replay_started", "replay_id": rid, "count": actions},
        )  # fmt: skip
        if gone:
            logger.warning(
                "replay %s: %d matched actions are gone past the store's retention",
                rid, gone, extra={"event": "replay_gone", "replay_id": rid, "count": gone},
            )  # fmt: skip
        queued = 0
        with progress(desc=f"replay {rid[:8]}", unit="action", total=actions,
                      initial=before, show=show_progress) as bar:  # fmt: skip
            started = time.monotonic()
            last = ""
            while True:
                with conn._errors("queue a replay's actions"):
                    n, last = _queue_batch(conn, rid, clock(), step, destinations, last)
                if n == 0:
                    break
                queued += n
                bar.update(n)
                if on_queued is not None:
                    on_queued(queued)
                logger.debug(
                    "replay %s: %d actions queued", rid, n,
                    extra={"event": "replay_queued", "replay_id": rid, "count": n},
                )  # fmt: skip
                if queue is not None:
                    # The batch runs before the next is queued: the queue never holds
                    # more than a batch of the replay, and progress means work done.
                    while queue.run_due(conn):
                        pass
                if rate is not None:
                    wait = started + queued / rate - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)  # the rate limit itself, not a wait for a result
        done = False
        if queue is not None:
            idle = queue.idle_wait.total_seconds()
            while True:
                while queue.run_due(conn):
                    pass
                if not _left(conn, rid):
                    break
                time.sleep(idle)  # a lease of a crashed run has to run out first
            done = True
            with conn._errors("record a replay"), conn._transaction():
                conn._execute(
                    "UPDATE replays SET finished_at = ? WHERE replay_id = ?",
                    (conn._ts(clock()), rid),
                )
            logger.info(
                "replay %s finished: %d actions", rid, actions,
                extra={"event": "replay_finished", "replay_id": rid, "count": actions},
            )  # fmt: skip
        with conn._errors("read a replay"):
            total = _existing(conn, rid)
    finally:
        conn.close()
        if queue is not None:
            queue.stop()
    assert total is not None
    return ReplayResult(rid, actions, queued, total[3], total[2], done, destinations)


def post_handler(url: str, *, timeout: timedelta = timedelta(seconds=10)) -> Handler:
    """A handler that POSTs each action's notification (exact JSON) to ``url``; any answer
    but 2xx, or no answer within ``timeout``, is a failed run (retried by the queue)."""
    import httpx

    from gptools.models import dumps_wire

    client = httpx.Client(timeout=timeout.total_seconds())

    def post(event: Any) -> None:
        body = dumps_wire(event.model_dump(by_alias=True, mode="python"))
        answer = client.post(url, content=body, headers={"content-type": "application/json"})
        if not 200 <= answer.status_code < 300:
            raise RuntimeError(f"{url} answered {answer.status_code}")

    return post
