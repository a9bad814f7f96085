"""The webhook receiver: a plain ASGI application, served by uvicorn.

What a delivery goes through, in order (each refusal is logged, then answered):

1. ``POST`` on the configured path (default ``/v1/game-action-events``), else 405/404.
2. A body over ``max_body_bytes`` gets 413; the declared length is checked first and the
   body is read in chunks, stopping as soon as the limit is passed.
3. The ``Authorization`` header is checked in constant time (401 when wrong or missing).
4. ``Content-Type`` must be ``application/json`` (415).
5. The body must be UTF-8 JSON (400) holding a valid game event notification (422, with a
   JSON reason naming each bad field).
6. The action is stored through the group-commit writer together with its log row; 200
   comes only after that commit. A repeated ``actionId`` is answered 200 and logged as a
   duplicate. When the store cannot write, the answer is 503 so the provider retries.

Rule: no answer goes out before its ``delivery_log`` row is committed, except 503 "store
unavailable" (the store is what failed), and every row holds the status that was sent: a
request whose write had not begun when the time-out came is answered 503 and logged 503.

``GET /healthz`` is liveness: 200 while every background loop (writer, sync, processing
queue, purge) runs, 503 when one cannot go on, so that a supervisor restarts the process;
its JSON body also reports the store's state. ``GET /readyz`` is readiness, for load
balancers: 200 only while the receiver is live AND the store is reachable. A store outage
makes the receiver unready, not dead: it reconnects by itself.

On shutdown uvicorn drains in-flight requests first; then the writer commits what it
holds and the processing queue finishes its current run.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from gptools import spec
from gptools._json_depth import exceeds_json_depth
from gptools.models import GameEventNotification, loads_wire
from gptools.openapi import OPENAPI_PATH, receiver_openapi
from gptools.webhooks._auth import ReceiverAuth
from gptools.webhooks._metrics import METRICS_PATH, OUTCOMES, DeliveryMetrics, render
from gptools.webhooks._queue import (
    DEFAULT_MAX_BATCH,
    DEFAULT_WAIT_LIMIT,
    Clock,
    GroupCommitWriter,
    Handler,
    Maintenance,
    ProcessingQueue,
    utc_now,
)
from gptools.webhooks._refusals import (
    DEFAULT_SUMMARY_EVERY,
    RefusalBudget,
    action_id_in,
    body_prefix,
)
from gptools.webhooks._store import LogEntry, Store, StoreError, WriteItem, open_store

logger = logging.getLogger("gptools.webhooks")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: Where the liveness check answers.
HEALTH_PATH = "/healthz"
#: Where the readiness check (for load balancers) answers.
READY_PATH = "/readyz"
#: How much of a refused body (an over-size one too) the log keeps.
LOGGED_PREFIX_BYTES = spec.WEBHOOK_REFUSED_BODY_PREFIX_BYTES

_JSON_MEDIA = spec.WEBHOOK_CONTENT_TYPE.encode()
_JSON_CONTENT_TYPE = (b"content-type", b"application/json")
_ACCEPTED = b'{"status":"accepted","actionId":"'
_DUPLICATE = b'{"status":"duplicate","actionId":"'


#: The headers of the two 200 answers, by body length, built once: both carry a canonical
#: (36-character) actionId.
_OK_HEADERS = {
    n: [_JSON_CONTENT_TYPE, (b"content-length", str(n).encode())]
    for n in (len(_ACCEPTED) + 38, len(_DUPLICATE) + 38)
}


@dataclass(frozen=True, slots=True)
class InjectedFault:
    """What a fault drill does to one valid delivery: wait ``delay`` first, then answer
    ``status`` without storing (when set). Used to rehearse outages and slow answers."""

    delay: timedelta = timedelta(0)
    status: int | None = None


FaultHook = Callable[[], InjectedFault | None]


class WebhookReceiver:
    """The ASGI receiver of game-event webhooks (see the module docstring for the rules).

    ``store`` is a :class:`~gptools.webhooks._store.Store` or its URL; ``auth`` the
    expected credentials; ``handler`` (optional) runs for each new action after the
    acknowledgement, from the durable queue, with ``queue_options`` passed to
    :class:`~gptools.webhooks._queue.ProcessingQueue`. ``ack_timeout`` bounds the wait for
    the durable write: past it the answer is 503 (the provider expects an answer within a
    second and will retry). ``clock`` gives ``received_at``; ``faults`` is a drill hook.
    ``metrics_public``: answer Prometheus scrapes at ``/metrics`` and the OpenAPI
    description at ``/openapi.json`` on this listener (off when ops serve them on a port
    of their own). ``refused_rows_per_second``: log rows
    per second and refusal reason for requests refused before authentication or routing
    (:class:`~gptools.webhooks._refusals.RefusalBudget`; the rest are counted, and a
    summary row every ``refusal_summary_every`` carries the count).
    """

    def __init__(
        self,
        store: Store | str,
        *,
        auth: ReceiverAuth,
        path: str = spec.DEFAULT_WEBHOOK_PATH,
        max_body_bytes: int = spec.WEBHOOK_MAX_BODY_BYTES,
        handler: Handler | None = None,
        queue_options: dict[str, Any] | None = None,
        ack_timeout: timedelta = DEFAULT_WAIT_LIMIT,
        max_batch: int = DEFAULT_MAX_BATCH,
        purge_every: timedelta = timedelta(hours=1),
        clock: Clock = utc_now,
        faults: FaultHook | None = None,
        metrics_public: bool = True,
        refused_rows_per_second: int = spec.WEBHOOK_REFUSED_ROWS_PER_SECOND,
        refusal_summary_every: timedelta = DEFAULT_SUMMARY_EVERY,
    ) -> None:
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/', got {path!r}")
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes}")
        self.store = open_store(store) if isinstance(store, str) else store
        self.auth = auth
        self.path = path
        self.max_body_bytes = max_body_bytes
        self.ack_timeout = ack_timeout
        self.clock = clock
        self.faults = faults
        self.writer = GroupCommitWriter(
            self.store,
            max_batch=max_batch,
            wait_limit=ack_timeout,
            state="pending" if handler is not None else "done",
        )
        self.maintenance = Maintenance(self.store, every=purge_every, clock=clock)
        self.processing = (
            ProcessingQueue(self.store, handler, clock=clock, **(queue_options or {}))
            if handler is not None
            else None
        )
        self.metrics = DeliveryMetrics()
        self.refusals = RefusalBudget(refused_rows_per_second, refusal_summary_every)
        self.metrics_public = metrics_public
        self.writer.on_commit = self.metrics.committed
        if self.processing is not None:
            self.processing.on_failure = self.metrics.handler_failed
        self._flusher: asyncio.Task[None] | None = None
        self._log_accepted = False
        self._started = False

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Open the store and start the writer (and the processing queue)."""
        if self._started:
            return
        if self.auth.kind == "NONE":
            logger.warning(
                "webhook receiver accepts deliveries WITHOUT authentication (NONE); "
                "the provider's document advises against this in production"
            )
        self._log_accepted = logger.isEnabledFor(logging.DEBUG)
        self.writer.start()
        self.maintenance.start()
        if self.processing is not None:
            self.processing.start()
        self._started = True
        logger.info(
            "webhook receiver ready: POST %s, store %s, auth %s",
            self.path,
            self.store.url,
            self.auth.kind,
        )

    def stop(self) -> None:
        """Commit what the writer holds, stop the queue after its current run."""
        if not self._started:
            return
        self.writer.stop()
        self.maintenance.stop()
        if self.processing is not None:
            self.processing.stop()
        self._started = False

    def health(self) -> dict[str, Any]:
        """The state of the receiver: ``live`` (every background loop runs), ``ready``
        (live and the store reachable), the store's state and each loop's."""
        loops = [self.writer.writer_health, self.writer.sync_health, self.maintenance.health]
        if self.processing is not None:
            loops.append(self.processing.health)
        live = self._started and self.writer.alive and all(h.ok for h in loops)
        store_ok = self.writer.store_ok
        store = "ok" if store_ok else f"unreachable: {self.writer.link.error}"
        return {
            "status": "ok" if live else "failing",
            "live": live,
            "ready": live and store_ok,
            "store": store,
            "loops": {h.name: h.describe() for h in loops},
        }

    # -- ASGI -------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point (HTTP and lifespan)."""
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await asyncio.to_thread(self.start)
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                self._report_health()
                self._flusher = asyncio.create_task(self._flush_metrics())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._flusher is not None:
                    self._flusher.cancel()
                await self._write_summaries(final=True)
                self.metrics.flush()
                self.metrics.health(False, False)
                await asyncio.to_thread(self.stop)
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _flush_metrics(self) -> None:
        # Counts reach prometheus_client in bulk, off the hot path; another process (the
        # --metrics-port server, a sibling worker) reads them within half a second.
        while True:
            await asyncio.sleep(0.5)
            self.metrics.flush()
            self._report_health()
            await self._write_summaries()

    def _report_health(self) -> None:
        state = self.health()
        self.metrics.health(state["live"], state["ready"])

    async def _write_summaries(self, *, final: bool = False) -> None:
        """Write the summary rows of suppressed refusals that are due (all when
        ``final``). A store that cannot take them now gets them at the next round."""
        due = self.refusals.summaries(time.monotonic(), self.clock(), final=final)
        for entry in due:
            try:
                await self.writer.write(WriteItem(entry))
            except (StoreError, TimeoutError) as exc:
                self.refusals.restore(entry)
                logger.warning(
                    "summary of suppressed refusals not written yet: %s",
                    str(exc) or "the durable write did not finish in time",
                    extra={"event": "store_unavailable"},
                )
                return

    async def _scrape(self, send: Send) -> None:
        self.metrics.flush()
        body, content_type = await asyncio.to_thread(render, self.store)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", content_type.encode()),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def openapi(self) -> dict[str, Any]:
        """This receiver's OpenAPI description (its path, auth scheme and body limit),
        served at ``/openapi.json`` where ``/metrics`` is."""
        return receiver_openapi(
            path=self.path, auth_kind=self.auth.kind, max_body_bytes=self.max_body_bytes
        )

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        path = scope["path"]
        method = scope["method"]
        if path in (HEALTH_PATH, READY_PATH) and method in ("GET", "HEAD"):
            state = self.health()
            ok = state["live"] if path == HEALTH_PATH else state["ready"]
            await _respond(send, 200 if ok else 503, state)
            return
        if path == METRICS_PATH and method == "GET" and self.metrics_public:
            await self._scrape(send)
            return
        if path == OPENAPI_PATH and method == "GET" and self.metrics_public:
            await _respond(send, 200, self.openapi())
            return
        if path != self.path and method != "POST":
            await _respond(send, 404, {"error": "not_found", "reason": f"no resource at {path}"})
            return
        received_at = self.clock()
        client = scope.get("client")
        entry = LogEntry(
            received_at=received_at,
            status=0,
            body="",
            started=started,
            remote_addr=client[0] if client else None,
        )
        if path != self.path:
            await self._refuse(
                send, entry, 404, "not_found", f"deliveries go to {self.path}, not {path}"
            )
            return
        if method != "POST":
            await self._refuse(
                send,
                entry,
                405,
                "method_not_allowed",
                f"{method} is not allowed; deliveries are POSTed",
                extra=[(b"allow", b"POST")],
            )
            return

        authorization = content_type = content_length = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                content_length = value

        body, too_large = await self._read_body(receive, content_length)
        if too_large:
            entry.body = body_prefix(body)
            entry.action_id = action_id_in(body)
            await self._refuse(
                send,
                entry,
                413,
                "payload_too_large",
                f"body is larger than the limit of {self.max_body_bytes} bytes"
                f" (the log keeps its first {LOGGED_PREFIX_BYTES} bytes)",
                # The rest of the body is never read: the server closes the connection
                # after the answer instead of draining it for the next request.
                extra=[(b"connection", b"close")],
            )
            return
        entry.auth_ok = self.auth.check(authorization)
        if not entry.auth_ok:
            # A stranger's body: only a prefix is kept (and the actionId it names).
            entry.body = body_prefix(body)
            entry.action_id = action_id_in(body)
            challenge = self.auth.challenge()
            extra = [(b"www-authenticate", challenge)] if challenge else []
            reason = "missing credentials" if authorization is None else "wrong credentials"
            await self._refuse(send, entry, 401, "unauthorized", reason, extra=extra)
            return
        if content_type != _JSON_MEDIA and (
            (content_type or b"").split(b";", 1)[0].strip().lower() != _JSON_MEDIA
        ):
            shown = content_type.decode("latin-1") if content_type else "none"
            entry.body = body_prefix(body)
            entry.action_id = action_id_in(body)
            await self._refuse(
                send,
                entry,
                415,
                "unsupported_media_type",
                f"content type must be {spec.WEBHOOK_CONTENT_TYPE}, got {shown}",
            )
            return

        entry.body = body.decode("utf-8", errors="replace")
        if exceeds_json_depth(body):
            # Before either parser below recurses into it (Python's json would raise
            # RecursionError some 1,000 levels down).
            await self._refuse(
                send,
                entry,
                400,
                "invalid_payload",
                f"invalid JSON: nested deeper than {spec.JSON_MAX_DEPTH} levels",
            )
            return
        action_id = _fast_action_id(body)
        if action_id is None:
            event, status, reason, fields = _parse(body)
            if event is None:
                await self._refuse(send, entry, status, "invalid_payload", reason, fields=fields)
                return
            action_id = str(event.action_id)
        entry.action_id = action_id

        if self.faults is not None and (fault := self.faults()) is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay.total_seconds())
            if fault.status is not None:
                await self._refuse(
                    send,
                    entry,
                    fault.status,
                    "injected_fault",
                    "fault drill: answered without storing",
                )
                return

        entry.status = 200
        try:
            new = await self.writer.write(WriteItem(entry, accept=True))
        except (StoreError, TimeoutError) as exc:
            await self._unavailable(send, entry, exc)
            return
        if new and self.processing is not None:
            self.processing.wake()
        # Built by hand: this is the hot path, and a canonical UUID needs no escaping.
        payload = b"".join((_ACCEPTED if new else _DUPLICATE, action_id.encode(), b'"}'))
        await send(
            {"type": "http.response.start", "status": 200, "headers": _OK_HEADERS[len(payload)]}
        )
        await send({"type": "http.response.body", "body": payload})
        latency = time.perf_counter() - started
        self.metrics.answered(200, "stored" if new else "duplicate", latency)
        if self._log_accepted:
            # DEBUG only: a line per accepted delivery would cost the hot path dearly.
            logger.debug(
                "delivery %s",
                "stored" if new else "duplicate",
                extra={
                    "event": "delivery_stored" if new else "delivery_duplicate",
                    "status": 200,
                    "actionId": action_id,
                    "latency_ms": round(latency * 1000, 3),
                },
            )

    async def _read_body(self, receive: Receive, declared: bytes | None) -> tuple[bytes, bool]:
        """The request body and False, or what was read and True once it is known to
        exceed the limit (reading stops there)."""
        if declared is not None:
            try:
                if int(declared) > self.max_body_bytes:
                    return await self._read_prefix(receive), True
            except ValueError:
                pass
        message = await receive()
        if message["type"] != "http.disconnect" and not message.get("more_body", False):
            # The usual case: the whole (small) body in one message.
            body: bytes = message.get("body", b"")
            return body, len(body) > self.max_body_bytes
        chunks: list[bytes] = []
        size = 0
        while True:
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if size > self.max_body_bytes:
                return b"".join(chunks), True
            if not message.get("more_body", False):
                break
            message = await receive()
        return b"".join(chunks), False

    async def _read_prefix(self, receive: Receive) -> bytes:
        """The first ``LOGGED_PREFIX_BYTES`` of a body known to be too large (what its
        log row keeps); reading stops there."""
        chunks: list[bytes] = []
        size = 0
        while size < LOGGED_PREFIX_BYTES:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            chunks.append(chunk)
            size += len(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)[:LOGGED_PREFIX_BYTES]

    async def _refuse(
        self,
        send: Send,
        entry: LogEntry,
        status: int,
        error: str,
        reason: str,
        *,
        extra: list[tuple[bytes, bytes]] | None = None,
        fields: list[dict[str, str]] | None = None,
    ) -> None:
        entry.status = status
        outcome = OUTCOMES.get(error, error)
        entry.error = f"{outcome}: {reason}"
        # A refusal before authentication or routing may come from anyone, at any rate:
        # its row is kept only within the reason's budget, the rest are counted.
        logged = status not in spec.WEBHOOK_REFUSALS or self.refusals.admit(
            outcome, status, time.monotonic(), entry.received_at
        )
        if logged:
            try:
                await self.writer.write(WriteItem(entry))
            except (StoreError, TimeoutError) as exc:
                await self._unavailable(send, entry, exc)
                return
        document: dict[str, Any] = {"error": error, "reason": reason}
        if fields:
            document["fields"] = fields
        await _respond(send, status, document, extra=extra)
        latency = _since(entry)
        self.metrics.answered(status, outcome, latency)
        if not logged:
            self.metrics.suppressed(outcome)
            return
        # The reason, never the headers or the body (which may hold anything).
        logger.info(
            "delivery refused: %s",
            error,
            extra={
                "event": "delivery_refused",
                "status": status,
                "actionId": entry.action_id,
                "latency_ms": round(latency * 1000, 3),
            },
        )

    async def _unavailable(self, send: Send, entry: LogEntry, exc: BaseException) -> None:
        await _respond(
            send,
            503,
            {
                "error": "store_unavailable",
                "reason": "the delivery could not be stored; retry later",
            },
            extra=[(b"retry-after", b"1")],
        )
        latency = _since(entry)
        self.metrics.answered(503, "unavailable", latency)
        logger.warning(
            "answering 503: %s",
            str(exc) or "the durable write did not finish in time",
            extra={
                "event": "store_unavailable",
                "status": 503,
                "actionId": entry.action_id,
                "latency_ms": round(latency * 1000, 3),
            },
        )


#: The wire names of a notification's fields; a body with exactly these keys may take
#: the fast check below, anything else (extra fields, snake_case names) goes to the model.
_FIELDS = frozenset(
    ("roundId", "gameId", "playerId", "timestamp", "bet", "currencyCode", "events", "actionId")
)
#: The one actionId rule (spec.ACTION_ID_PATTERN, as spec.canonical_action_id applies it).
_CANONICAL_UUID = re.compile(spec.ACTION_ID_PATTERN)
#: A bet the fast check vouches for: a plain non-negative number within the digits of
#: spec.BET_MAX_INTEGER_DIGITS / BET_MAX_FRACTION_DIGITS (no sign, exponent or -0: those
#: are the model's to judge).
_SANE_BET = re.compile(
    rf"(0|[1-9][0-9]{{0,{spec.BET_MAX_INTEGER_DIGITS - 1}}})"
    rf"(\.[0-9]{{1,{spec.BET_MAX_FRACTION_DIGITS}}})?"
)


class _Number(str):
    """A JSON number's own text (the fast check reads the bet's digits, not a float's)."""

    __slots__ = ()


_PLAIN_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}")


def _fast_action_id(body: bytes) -> str | None:
    """The canonical ``actionId`` of a body the model certainly accepts, else None.

    A strict subset of :class:`~gptools.models.GameEventNotification`'s rules, about half
    its cost: exactly the eight fields, no escape sequences, plain ASCII-digit timestamp
    with microseconds, canonical UUID (``spec.ACTION_ID_PATTERN``, either case; returned
    lower-case, as stored). Whatever it does not vouch for goes to
    the model, which alone decides (and explains) a refusal; so the two can only differ
    in speed. ``tests/webhooks/test_fast_check.py`` holds it to that.
    """
    if b"\\" in body:  # escapes (lone surrogates, ...) are the model's business
        return None
    try:
        # Numbers stay text (a _Number, which no check of a string field takes for a
        # str); NaN and Infinity parse as floats, which no check below lets through.
        data = json.loads(body.decode(), parse_int=_Number, parse_float=_Number)
    except ValueError:  # also UnicodeDecodeError and JSONDecodeError
        return None
    if type(data) is not dict or data.keys() != _FIELDS:
        return None
    action_id = data["actionId"]
    timestamp = data["timestamp"]
    bet = data["bet"]
    events = data["events"]
    for name in ("roundId", "gameId", "playerId", "currencyCode"):
        value = data[name]
        if type(value) is not str or not value:
            return None
    if (
        type(action_id) is not str
        or not _CANONICAL_UUID.fullmatch(action_id)
        or type(timestamp) is not str
        or not _PLAIN_TIMESTAMP.fullmatch(timestamp)
        or type(bet) is not _Number
        or not _SANE_BET.fullmatch(bet)
        or type(events) is not list
        or any(type(e) is not str for e in events)
    ):
        return None
    try:
        datetime.fromisoformat(timestamp)  # the model's range check (month 13, ...)
    except ValueError:
        return None
    return action_id.lower()


def _parse(
    body: bytes,
) -> tuple[GameEventNotification | None, int, str, list[dict[str, str]] | None]:
    """Validate a body: (event, 0, "", None) or (None, status, reason, field errors)."""
    try:
        # pydantic's own JSON parser first (for what _fast_action_id left). It reads numbers
        # as floats, which is harmless here: the raw body is what gets stored, and the
        # processing queue decodes it again with exact Decimals. Anything it refuses gets
        # the slower, exact decoding below, which also explains the refusal. It reads -0
        # as 0, so a body that may hold one goes to the exact decoding at once.
        if b"-0" not in body:
            return GameEventNotification.model_validate_json(body), 0, "", None
    except ValidationError:
        pass
    if not body.strip():
        return None, 400, "empty body", None
    try:
        data = loads_wire(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return None, 400, f"body is not UTF-8: {exc.reason} at byte {exc.start}", None
    except json.JSONDecodeError as exc:
        return None, 400, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", None
    except ValueError as exc:  # e.g. an integer longer than Python's digit limit
        return None, 400, f"invalid JSON: {exc}", None
    if not isinstance(data, dict):
        return None, 422, f"body must be a JSON object, got {type(data).__name__}", None
    try:
        return GameEventNotification.model_validate(data), 0, "", None
    except ValidationError as exc:
        fields = [
            {"field": ".".join(str(p) for p in err["loc"]) or "(body)", "reason": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)
        ]
        names = ", ".join(f["field"] for f in fields)
        if any(_is_bad_action_id(err) for err in exc.errors(include_url=False)):
            # The delivery's identity is unreadable (braces, urn:uuid:, no dashes, ...):
            # a bad request, like unreadable JSON, not merely a bad field.
            return (
                None,
                400,
                (f"actionId must be a UUID in the canonical 8-4-4-4-12 hexadecimal form ({names})"),
                fields,
            )
        return None, 422, f"not a valid game event notification ({names})", fields


def _is_bad_action_id(error: Any) -> bool:
    """Whether a validation error is a present but non-canonical ``actionId``."""
    return tuple(error["loc"]) == ("actionId",) and error["type"] != "missing"


def _since(entry: LogEntry) -> float:
    """Seconds since the request arrived (its entry always has ``started`` here)."""
    return time.perf_counter() - (entry.started or time.perf_counter())


async def _respond(
    send: Send,
    status: int,
    document: dict[str, Any],
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    payload = json.dumps(document, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


# -- configuration from the environment (one receiver per uvicorn worker process) ------

ENV_STORE = "GP_WEBHOOK_STORE"
ENV_AUTH = "GP_WEBHOOK_AUTH"
ENV_PATH = "GP_WEBHOOK_PATH"
ENV_MAX_BODY = "GP_WEBHOOK_MAX_BODY_BYTES"
ENV_HANDLER = "GP_WEBHOOK_HANDLER"
ENV_METRICS_PUBLIC = "GP_WEBHOOK_METRICS_PUBLIC"
ENV_REFUSED_ROWS = "GP_WEBHOOK_REFUSED_ROWS_PER_SECOND"
DEFAULT_STORE_URL = "sqlite:///webhooks.sqlite3"


def load_handler(spec_text: str) -> Handler:
    """Import ``module:function`` and return the function (the user's handler)."""
    module_name, sep, attr = spec_text.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"handler {spec_text!r} must look like package.module:function")
    function = getattr(importlib.import_module(module_name), attr, None)
    if not callable(function):
        raise ValueError(f"handler {spec_text!r}: {attr} is not a callable in {module_name}")
    handler: Handler = function
    return handler


def receiver_environment(
    store_url: str,
    auth_kind: str,
    *,
    path: str = spec.DEFAULT_WEBHOOK_PATH,
    max_body_bytes: int = spec.WEBHOOK_MAX_BODY_BYTES,
    handler: str | None = None,
    metrics_public: bool = True,
    refused_rows_per_second: int = spec.WEBHOOK_REFUSED_ROWS_PER_SECOND,
) -> dict[str, str]:
    """The ``GP_WEBHOOK_*`` variables :func:`receiver_from_env` reads, for these settings
    (secrets are not among them: each worker reads those from its own environment);
    ``metrics_public`` false keeps ``/metrics`` off the delivery listener."""
    env = {
        ENV_STORE: store_url,
        ENV_AUTH: auth_kind,
        ENV_PATH: path,
        ENV_MAX_BODY: str(max_body_bytes),
        ENV_METRICS_PUBLIC: "1" if metrics_public else "0",
        ENV_REFUSED_ROWS: str(refused_rows_per_second),
    }
    if handler:
        env[ENV_HANDLER] = handler
    return env


def receiver_from_env() -> WebhookReceiver:
    """Build a receiver from ``GP_WEBHOOK_*`` variables (what ``gptools webhooks serve``
    sets for each worker): store URL, auth kind and secrets, path, body limit, handler,
    refused rows per second."""
    env = os.environ
    handler_text = env.get(ENV_HANDLER)
    return WebhookReceiver(
        env.get(ENV_STORE, DEFAULT_STORE_URL),
        auth=ReceiverAuth.from_env(env.get(ENV_AUTH, "bearer")),
        path=env.get(ENV_PATH, spec.DEFAULT_WEBHOOK_PATH),
        max_body_bytes=int(env.get(ENV_MAX_BODY, str(spec.WEBHOOK_MAX_BODY_BYTES))),
        handler=load_handler(handler_text) if handler_text else None,
        metrics_public=env.get(ENV_METRICS_PUBLIC, "1") != "0",
        refused_rows_per_second=int(
            env.get(ENV_REFUSED_ROWS, str(spec.WEBHOOK_REFUSED_ROWS_PER_SECOND))
        ),
    )
