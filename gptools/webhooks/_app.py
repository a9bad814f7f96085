"""The webhook receiver: a plain ASGI application, served by uvicorn.

What a delivery goes through, in order (each refusal is logged, then answered):

1. ``POST`` on the configured path (default ``/v1/game-action-events``), else 405/404.
2. A body over ``max_body_bytes`` gets 413; the declared length is checked first and the
   body is read in chunks, stopping as soon as the limit is passed.
3. Two ``Authorization`` or two ``Content-Type`` headers get 400 (which one counts would
   be a parser's guess).
4. The ``Authorization`` header is compared in constant time with every credential
   accepted (401 when it carries none of them).
5. ``Content-Type`` must be ``application/json`` (415).
6. The body must be UTF-8 JSON (400) holding a valid game event notification (422, with a
   JSON reason naming each bad field).
7. The action is stored through the group-commit writer together with its log row; 200
   comes only after that commit. A repeated ``actionId`` is answered 200 and logged as a
   duplicate. When the store cannot write, the answer is 503 so the provider retries.

Rule: no answer goes out before its ``delivery_log`` row is committed, except 503 "store
unavailable" (the store is what failed: its row waits in the outage spool, ``_outage.py``,
and reaches the log once the store is back), and every row holds the status that was
sent: a request whose write had not begun when the time-out came is answered 503 and
logged 503.

``GET /healthz`` is liveness: 200 while every background loop (writer, sync, processing
queue, purge, store watch) runs, 503 when one cannot go on, so that a supervisor restarts
the process; its JSON body also reports the store's state. ``GET /readyz`` is readiness,
for load balancers: 200 only while the receiver is live AND the store is reachable (the
writer's last write or probe, and the store watch's last count, reached it). A store
outage makes the receiver unready, not dead: it reconnects by itself. ``/metrics`` reads
only what the process keeps (the store watch's last counts among it), never the store.

On shutdown uvicorn drains in-flight requests first; then the writer commits what it
holds and the processing queue finishes its current run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from gptools import spec
from gptools._json_depth import exceeds_json_depth
from gptools._secrets import url_secrets
from gptools.openapi import OPENAPI_PATH, receiver_openapi
from gptools.webhooks._auth import CredentialUse, ReceiverAuth
from gptools.webhooks._config import FORWARD_PREFIX, OUTAGE_PREFIX, QUEUE_PREFIX, ReceiverConfig
from gptools.webhooks._constants import METRICS_FLUSH_SECONDS
from gptools.webhooks._first_seen import FirstSeenWatch, refused_kinds, shown_value
from gptools.webhooks._first_seen_store import Sighting
from gptools.webhooks._forward import Forwarder
from gptools.webhooks._forward_destinations import parse_destinations
from gptools.webhooks._logs import (
    REQUEST_ID_HEADER,
    metrics_request_failed,
    remember_secrets,
    request_id,
    scrub,
    secret_values,
)
from gptools.webhooks._maintenance import Maintenance
from gptools.webhooks._metrics import (
    METRICS_PATH,
    OUTCOMES,
    DeliveryMetrics,
    render,
)
from gptools.webhooks._outage import OutageRecovery
from gptools.webhooks._payload import fast_check, parse
from gptools.webhooks._queue import Handler, ProcessingQueue
from gptools.webhooks._records import Clock, LogEntry, StoreError, WriteItem, utc_now
from gptools.webhooks._refusals import RefusalBudget, action_id_in, body_prefix
from gptools.webhooks._store import Store, open_store
from gptools.webhooks._store_watch import StoreWatch
from gptools.webhooks._writer import GroupCommitWriter

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


@functools.lru_cache(maxsize=16)
def _ok_headers(length: int) -> tuple[tuple[bytes, bytes], ...]:
    """The headers of a 200 answer whose body is ``length`` bytes, built once for each
    length (the hot path answers a handful of lengths)."""
    return (_JSON_CONTENT_TYPE, (b"content-length", str(length).encode()))


def _ok_answer(new: bool, action_id: str) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The body and headers (the request id apart) of the 200 that acknowledges
    ``action_id``, stored (``new``) or a duplicate. Built by hand: this is the hot path,
    and an actionId that passed the checks is a UUID, which needs no escaping."""
    body = b"".join((_ACCEPTED if new else _DUPLICATE, action_id.encode(), b'"}'))
    return body, [*_ok_headers(len(body))]


@dataclass(slots=True)
class _Head:
    """What the receiver reads from a request's headers, in one pass over them."""

    authorization: bytes | None = None
    content_type: bytes | None = None
    content_length: bytes | None = None
    incoming_id: bytes | None = None
    #: A header that must come once (``authorization``, ``content-type``) but came again.
    repeated: bytes | None = None

    @classmethod
    def of(cls, headers: list[tuple[bytes, bytes]]) -> _Head:
        """The head of a request with these (lower-case) ``headers``."""
        head = cls()
        for name, value in headers:
            if name == b"authorization":
                if head.authorization is not None:
                    head.repeated = name
                head.authorization = value
            elif name == b"content-type":
                if head.content_type is not None:
                    head.repeated = name
                head.content_type = value
            elif name == b"content-length":
                head.content_length = value
            elif name == REQUEST_ID_HEADER:
                head.incoming_id = value
        return head


@dataclass(frozen=True, slots=True)
class _Refusal:
    """A delivery refused: its status, ``error`` and ``reason``, the answer's ``extra``
    headers, the ``fields`` at fault; ``unread``: a body refused before it was
    authenticated or checked (its log row keeps only a prefix)."""

    status: int
    error: str
    reason: str
    extra: list[tuple[bytes, bytes]] | None = None
    fields: list[dict[str, str]] | None = None
    unread: bytes | None = None


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
    acknowledgement, from the durable queue. Every other setting is a field of
    :class:`~gptools.webhooks.ReceiverConfig` (where each is documented, with its
    default): given whole as ``config``, or one by one as keywords (``ack_timeout=...``,
    which change ``config``'s); ``queue_options`` and ``outage_options`` name the
    ``queue_*`` and ``outage_*`` fields without their prefix (``{"lease": ...}``). A
    setting that cannot work raises :class:`~gptools.webhooks.SettingError` (a
    ``ValueError``). ``clock`` gives ``received_at``; ``faults`` is a drill hook.
    """

    def __init__(
        self,
        store: Store | str,
        *,
        auth: ReceiverAuth,
        handler: Handler | None = None,
        config: ReceiverConfig | None = None,
        clock: Clock = utc_now,
        faults: FaultHook | None = None,
        queue_options: dict[str, Any] | None = None,
        outage_options: dict[str, Any] | None = None,
        **settings: Any,
    ) -> None:
        if isinstance(store, str):
            settings["store"] = store
        settings.update({QUEUE_PREFIX + k: v for k, v in (queue_options or {}).items()})
        settings.update({OUTAGE_PREFIX + k: v for k, v in (outage_options or {}).items()})
        #: The settings this receiver runs with (the worker logs them when it is ready).
        self.config = config = (config or ReceiverConfig()).replaced(**settings)
        self.store = open_store(store) if isinstance(store, str) else store
        self.use_auth(auth)
        # Blanked in every log line and stored error of this process (a handler's
        # exception may quote them).
        remember_secrets(url_secrets(store if isinstance(store, str) else ""))
        self.path = config.path
        self.max_body_bytes = config.max_body_bytes
        self.ack_timeout = config.ack_timeout
        self.clock = clock
        self.faults = faults
        destinations = parse_destinations(config.forward)
        if handler is None and destinations:
            handler = _forward_only  # the queue runs to hand actions to the forwarding stage
        self.writer = GroupCommitWriter(
            self.store,
            max_batch=config.max_batch,
            wait_limit=config.ack_timeout,
            state="pending" if handler is not None else "done",
        )
        self.maintenance = Maintenance(self.store, every=config.purge_every, clock=clock)
        self.processing = (
            ProcessingQueue(self.store, handler, clock=clock, **config.prefixed(QUEUE_PREFIX))
            if handler is not None
            else None
        )
        #: The forwarding stage (None without destinations), fed by the processing queue.
        self.forwarder = (
            Forwarder(self.store, destinations, clock=clock, **config.prefixed(FORWARD_PREFIX))
            if destinations
            else None
        )
        if self.forwarder is not None and self.processing is not None:
            self.processing.after_done = self.forwarder.enqueue
            remember_secrets([s for d in destinations for s in url_secrets(d.url)])
        #: The contract watcher (values not seen before in the document's open fields).
        self.first_seen = FirstSeenWatch(
            self.store,
            refuse=refused_kinds(config.first_seen_refuse),
            max_values=config.first_seen_max_values,
        )
        self.watch = StoreWatch(self.store)
        self.metrics = DeliveryMetrics()
        self.quiet_alert_after = config.quiet_alert_after
        self.credential_use = CredentialUse()
        self.refusals = RefusalBudget(config.refused_rows_per_second, config.refusal_summary_every)
        self.metrics_public = config.metrics_public
        self.writer.on_commit = self.metrics.committed
        self.watch.on_depth = self.metrics.queue
        self.watch.on_replays = functools.partial(
            self.metrics.replays, destinations=tuple(d.name for d in destinations)
        )
        self.outage = OutageRecovery(
            self.store,
            spool_dir=config.spool_dir,
            max_rows=config.spool_max_rows,
            max_bytes=config.spool_max_bytes,
            clock=clock,
            **config.prefixed(OUTAGE_PREFIX),
        )
        self.writer.on_unwritten = self.outage.spool.keep_all
        if self.processing is not None:
            self.processing.on_failure = self.metrics.handler_failed
        self._flusher: asyncio.Task[None] | None = None
        self._log_accepted = False
        self._started = False

    def use_auth(self, auth: ReceiverAuth) -> None:
        """Check deliveries against ``auth`` from the next request on (a reload swaps it
        here), its secrets blanked wherever the receiver's logs and stored errors could
        quote them."""
        remember_secrets(secret_values(auth.credentials))
        self.auth = auth

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> None:
        """Open the store and start the writer (and the processing queue)."""
        if self._started:
            return
        if self.auth.kind == "NONE":
            logger.warning(
                "webhook receiver accepts deliveries WITHOUT authentication (NONE); "
                "the provider's document advises against this in production",
                extra={"event": "auth_disabled"},
            )
        self._log_accepted = logger.isEnabledFor(logging.DEBUG)
        self.writer.start()
        self.outage.start()
        self.maintenance.start()
        self.watch.start()
        if self.processing is not None:
            self.processing.start()
        if self.forwarder is not None:
            self.forwarder.start()
        try:
            self.first_seen.load()
        except StoreError as exc:  # the flush loop reads them once the store answers
            logger.warning(
                "first sightings not read yet: %s", exc, extra={"event": "first_seen_deferred"}
            )
        self._started = True
        logger.info(
            "webhook receiver ready: POST %s, store %s, auth %s",
            self.path,
            self.store.url,
            self.auth.kind,
            extra={"event": "worker_ready", "settings": self.config.shown()},
        )

    def stop(self) -> None:
        """Commit what the writer holds, stop the queue after its current run."""
        if not self._started:
            return
        self.writer.stop()
        self.maintenance.stop()
        self.watch.stop()
        if self.processing is not None:
            self.processing.stop()
        if self.forwarder is not None:
            self.forwarder.stop()
        self.first_seen.close()
        self.outage.stop()  # after the writer, which may still hand it rows
        self._started = False

    def health(self) -> dict[str, Any]:
        """The state of the receiver: ``live`` (every background loop runs), ``ready``
        (live and the store reachable), the store's state and each loop's."""
        loops = [
            self.writer.writer_health,
            self.writer.sync_health,
            self.maintenance.health,
            self.watch.health,
            self.outage.health,
        ]
        if self.processing is not None:
            loops.append(self.processing.health)
        if self.forwarder is not None:
            loops.append(self.forwarder.health)
        live = self._started and self.writer.alive and all(h.ok for h in loops)
        failed = next(
            (link for link in (self.writer.link, self.watch.link) if not link.reachable), None
        )
        store_ok = failed is None
        store = "ok" if failed is None else f"unreachable: {failed.error}"
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
            try:
                await self._http(scope, receive, send)
            except Exception:
                await _failed(scope, send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await asyncio.to_thread(self.start)
                except Exception as exc:
                    logger.exception(
                        "the receiver cannot start: %s",
                        exc,
                        extra={"event": "receiver_start_failed"},
                    )
                    await send({"type": "lifespan.startup.failed", "message": scrub(str(exc))})
                    return
                self.metrics.started(self.quiet_alert_after)
                self.first_seen.started()
                self._report_health()
                self._flusher = asyncio.create_task(self._flush_metrics())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._flusher is not None:
                    self._flusher.cancel()
                await self._write_summaries(final=True)
                await self._record_first_seen()
                self.metrics.flush()
                self.credential_use.flush()
                self.metrics.withdraw()
                await asyncio.to_thread(self.stop)
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _flush_metrics(self) -> None:
        # Counts reach prometheus_client in bulk, off the hot path; another process (the
        # --metrics-port server, a sibling worker) reads them within half a second.
        while True:
            await asyncio.sleep(METRICS_FLUSH_SECONDS)
            self.metrics.flush()
            self.credential_use.flush()
            self._report_health()
            await self._write_summaries()
            await self._record_first_seen()

    async def _record_first_seen(self) -> None:
        """Hand the first sightings noted since the last round to the store (in a
        thread); those it cannot take now wait for the next round."""
        pending, dropped = self.first_seen.take()
        if not pending and not dropped:
            return
        unrecorded = await asyncio.to_thread(self.first_seen.flush, pending, dropped)
        self.first_seen.give_back(unrecorded)

    def _report_health(self) -> None:
        state = self.health()
        self.metrics.health(
            live=state["live"], ready=state["ready"], store_up=state["store"] == "ok"
        )
        if self.store.schema_version is not None:
            self.metrics.schema(self.store.schema_version)

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
                    extra={"event": "refusal_summary_deferred"},
                )
                return

    async def _scrape(self, send: Send, rid: bytes) -> None:
        self.metrics.flush()
        self.credential_use.flush()
        try:
            body, content_type = await asyncio.to_thread(render)
        except Exception:
            metrics_request_failed(rid, scrape=True)
            await _respond(send, 500, {"error": "internal", "reason": "metrics unavailable"})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", content_type.encode()),
                    (b"content-length", str(len(body)).encode()),
                    (REQUEST_ID_HEADER, rid),
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
        """One request: the paths beside deliveries, else a delivery's checks in the
        order of the module docstring, the first that fails answering, else its store."""
        started = time.perf_counter()
        head = _Head.of(scope["headers"])
        rid = request_id(head.incoming_id)
        if await self._answer_beside(scope, send, rid):
            return
        entry = self._entry(scope, rid, started)
        refusal = self._misrouted(scope)
        sightings: list[Sighting] = []
        if refusal is None:
            body, too_large = await self._read_body(receive, head.content_length)
            refusal = (
                self._oversize(body, too_large)
                or _repeated_header(head, body)
                or self._unauthorised(head, body, entry)
                or _unsupported_media(head, body)
            )
            if refusal is None:
                refusal, data = _invalid_payload(body, entry)
                if refusal is None and data is not None:
                    refusal, sightings = self._first_seen_check(data, entry)
        if refusal is None and self.faults is not None:
            refusal = await _drill(self.faults())
        if refusal is not None:
            await self._refuse(send, entry, refusal)
            return
        await self._store(send, entry, started, sightings)

    def _first_seen_check(
        self, data: dict[str, Any], entry: LogEntry
    ) -> tuple[_Refusal | None, list[Sighting]]:
        """422 for a value not seen before of a kind set to refuse; else the new values
        to note once the delivery is stored."""
        new, refused = self.first_seen.check(data, entry.action_id or "", entry.received_at)
        if refused is None:
            return None, new
        shown = shown_value(refused.value)[:64]
        return (
            _Refusal(
                422,
                "new_value",
                f"{refused.kind} {shown!r} has not been seen before, and this receiver "
                f"refuses new values of {refused.kind} (first_seen_refuse)",
            ),
            [],
        )

    async def _answer_beside(self, scope: Scope, send: Send, rid: bytes) -> bool:
        """Answer a request to a path beside the deliveries' (health, readiness, metrics,
        the OpenAPI description; 404 not logged for any other but POST); True if it was
        one of them."""
        path = scope["path"]
        method = scope["method"]
        if path in (HEALTH_PATH, READY_PATH) and method in ("GET", "HEAD"):
            state = self.health()
            ok = state["live"] if path == HEALTH_PATH else state["ready"]
            await _respond(send, 200 if ok else 503, state, request_id=rid)
        elif path == METRICS_PATH and method == "GET" and self.metrics_public:
            await self._scrape(send, rid)
        elif path == OPENAPI_PATH and method == "GET" and self.metrics_public:
            await _respond(send, 200, self.openapi(), request_id=rid)
        elif path != self.path and method != "POST":
            document = {"error": "not_found", "reason": f"no resource at {path}"}
            await _respond(send, 404, document, request_id=rid)
        else:
            return False
        return True

    def _entry(self, scope: Scope, rid: bytes, started: float) -> LogEntry:
        """The log row of a delivery attempt, before anything about it is known."""
        client = scope.get("client")
        return LogEntry(
            received_at=self.clock(),
            status=0,
            body="",
            started=started,
            remote_addr=client[0] if client else None,
            request_id=rid,
        )

    def _misrouted(self, scope: Scope) -> _Refusal | None:
        """404 for a POST elsewhere than the deliveries' path, 405 for another method."""
        path = scope["path"]
        method = scope["method"]
        if path != self.path:
            return _Refusal(404, "not_found", f"deliveries go to {self.path}, not {path}")
        if method != "POST":
            return _Refusal(
                405,
                "method_not_allowed",
                f"{method} is not allowed; deliveries are POSTed",
                extra=[(b"allow", b"POST")],
            )
        return None

    def _oversize(self, body: bytes, too_large: bool) -> _Refusal | None:
        """413 for a body over ``max_body_bytes`` (``body``: what was read of it)."""
        if not too_large:
            return None
        return _Refusal(
            413,
            "payload_too_large",
            f"body is larger than the limit of {self.max_body_bytes} bytes"
            f" (the log keeps its first {LOGGED_PREFIX_BYTES} bytes)",
            # The rest of the body is never read: the server closes the connection
            # after the answer instead of draining it for the next request.
            extra=[(b"connection", b"close")],
            unread=body,
        )

    def _unauthorised(self, head: _Head, body: bytes, entry: LogEntry) -> _Refusal | None:
        """401 unless the ``Authorization`` header matches a credential (whose use is
        counted)."""
        credential = self.auth.match(head.authorization)
        entry.auth_ok = credential is not None
        if credential is not None:
            self.credential_use.count(credential)
            return None
        # A stranger's body: only a prefix is kept (and the actionId it names).
        challenge = self.auth.challenge()
        reason = "missing credentials" if head.authorization is None else "wrong credentials"
        extra = [(b"www-authenticate", challenge)] if challenge else []
        return _Refusal(401, "unauthorized", reason, extra=extra, unread=body)

    async def _store(
        self, send: Send, entry: LogEntry, started: float, sightings: list[Sighting]
    ) -> None:
        """Store an accepted delivery with its log row, then answer 200 (503 when the
        store cannot take it); its values not seen before are noted once it is stored."""
        entry.status = 200
        try:
            new = await self.writer.write(WriteItem(entry, accept=True))
        except (StoreError, TimeoutError) as exc:
            await self._unavailable(send, entry, exc)
            return
        if sightings:
            self.first_seen.note(sightings)
        if new and self.processing is not None:
            self.processing.wake()
        action_id = entry.action_id or ""  # set by the payload's check
        body, headers = _ok_answer(new, action_id)
        headers.append((REQUEST_ID_HEADER, entry.request_id or b""))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        latency = time.perf_counter() - started
        self.metrics.answered(200, "stored" if new else "duplicate", latency)
        if self._log_accepted:
            # DEBUG only: a line per accepted delivery would cost the hot path dearly.
            logger.debug(
                "delivery %s",
                "stored" if new else "duplicate",
                extra={
                    "event": "delivery_stored" if new else "delivery_duplicate",
                    "request_id": entry.request_id,
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

    async def _refuse(self, send: Send, entry: LogEntry, refusal: _Refusal) -> None:
        """Answer the refusal, logging it within its budget. A body refused before it was
        authenticated or checked (``refusal.unread``) keeps only its prefix in the log
        row, and the actionId it names."""
        status, error, reason = refusal.status, refusal.error, refusal.reason
        if refusal.unread is not None:
            entry.body = body_prefix(refusal.unread)
            entry.action_id = action_id_in(refusal.unread)
        entry.status = status
        outcome = OUTCOMES.get(error, error)
        entry.error = f"{outcome}: {reason}"
        # A refusal before authentication or routing may come from anyone, at any rate:
        # its row is kept only within the reason's budget, the rest are counted.
        anonymous = status in spec.WEBHOOK_REFUSALS or error == spec.WEBHOOK_DUPLICATE_HEADER
        logged = not anonymous or self.refusals.admit(
            outcome, status, time.monotonic(), entry.received_at
        )
        if logged:
            try:
                await self.writer.write(WriteItem(entry))
            except (StoreError, TimeoutError) as exc:
                await self._unavailable(send, entry, exc)
                return
        document: dict[str, Any] = {"error": error, "reason": reason}
        if refusal.fields:
            document["fields"] = refusal.fields
        await _respond(send, status, document, extra=refusal.extra, request_id=entry.request_id)
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
                "request_id": entry.request_id,
                "status": status,
                # An invalid body's row names no action, its line does when it can.
                "actionId": entry.action_id
                or action_id_in(entry.body[:LOGGED_PREFIX_BYTES].encode()),
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
            request_id=entry.request_id,
        )
        latency = _since(entry)
        self.metrics.answered(503, "unavailable", latency)
        self.outage.refused(entry, exc, latency)
        logger.warning(
            "answering 503: %s",
            str(exc) or "the durable write did not finish in time",
            extra={
                "event": "store_unavailable",
                "request_id": entry.request_id,
                "status": 503,
                "actionId": entry.action_id,
                "latency_ms": round(latency * 1000, 3),
            },
        )


def _forward_only(event: object) -> None:
    """The processing queue's run when forwarding is all there is to do."""


def _repeated_header(head: _Head, body: bytes) -> _Refusal | None:
    """400 for a second ``Authorization`` or ``Content-Type``: which of the two would
    count is the parser's guess, so neither does."""
    if head.repeated is None:
        return None
    return _Refusal(
        400,
        spec.WEBHOOK_DUPLICATE_HEADER,
        f"more than one {head.repeated.decode()}",
        unread=body,
    )


def _unsupported_media(head: _Head, body: bytes) -> _Refusal | None:
    """415 unless the body is declared ``application/json`` (parameters aside)."""
    declared = head.content_type
    if declared == _JSON_MEDIA or (
        (declared or b"").split(b";", 1)[0].strip().lower() == _JSON_MEDIA
    ):
        return None
    shown = declared.decode("latin-1") if declared else "none"
    return _Refusal(
        415,
        "unsupported_media_type",
        f"content type must be {spec.WEBHOOK_CONTENT_TYPE}, got {shown}",
        unread=body,
    )


def _invalid_payload(body: bytes, entry: LogEntry) -> tuple[_Refusal | None, Any]:
    """400 or 422 unless the body is a valid notification, else None and the body's JSON
    object; its text and actionId go into ``entry`` either way (the fast check first,
    the model's full check to explain)."""
    entry.body = body.decode("utf-8", errors="replace")
    if exceeds_json_depth(body):
        # Before either parser below recurses into it (Python's json would raise
        # RecursionError some 1,000 levels down).
        return _Refusal(
            400,
            "invalid_payload",
            f"invalid JSON: nested deeper than {spec.JSON_MAX_DEPTH} levels",
        ), None
    checked = fast_check(body)
    if checked is None:
        event, status, reason, fields = parse(body)
        if event is None:
            return _Refusal(status, "invalid_payload", reason, fields=fields), None
        entry.action_id = str(event.action_id)
        # A body the model alone vouched for (rare): its keys as they came. Python's json
        # reads whatever the model's parsers read (pydantic's refuses an integer past
        # Python's 4,300 digits too: tests/webhooks/test_first_seen.py).
        return None, json.loads(body)
    entry.action_id, data = checked
    return None, data


async def _drill(fault: InjectedFault | None) -> _Refusal | None:
    """A fault drill's effect on a valid delivery: its delay, then its status (without
    storing) when it sets one."""
    if fault is None:
        return None
    if fault.delay:
        await asyncio.sleep(fault.delay.total_seconds())
    if fault.status is None:
        return None
    return _Refusal(fault.status, "injected_fault", "fault drill: answered without storing")


def _since(entry: LogEntry) -> float:
    """Seconds since the request arrived (its entry always has ``started`` here)."""
    return time.perf_counter() - (entry.started or time.perf_counter())


async def _respond(
    send: Send,
    status: int,
    document: dict[str, Any],
    *,
    extra: list[tuple[bytes, bytes]] | None = None,
    request_id: bytes | None = None,
) -> None:
    payload = json.dumps(document, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    if request_id is not None:
        headers.append((REQUEST_ID_HEADER, request_id))
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def _failed(scope: Scope, send: Send) -> None:
    """Log an exception nobody expected while answering a request, with the request's id,
    and answer 500 when no answer has begun (uvicorn closes the connection otherwise)."""
    incoming = next((v for n, v in scope.get("headers", ()) if n == REQUEST_ID_HEADER), None)
    rid = request_id(incoming)
    logger.exception(
        "unexpected error answering %s %s",
        scope.get("method"),
        scope.get("path"),
        extra={"event": "request_failed", "request_id": rid},
    )
    with contextlib.suppress(Exception):  # an answer had begun: nothing more can be sent
        await _respond(
            send, 500, {"error": "internal_error", "reason": "see the log"}, request_id=rid
        )
