"""The receiver's HTTP server: uvicorn with httptools, behind a guard that holds the
bounds of ``_server_limits`` (issue 22).

Why a guard in front of httptools rather than another server: httptools has no limit on
header size (a 16 MB header was answered 200; ten unfinished 64 MB headers took a worker
to 771 MB) and no read time-outs, but it is the fast parser the receiver's throughput
rests on. uvicorn's h11 protocol bounds the headers (``h11_max_incomplete_event_size``)
but leaves Nagle on, so with 2 workers every kept-alive request after the first waited
about 44 ms (docs/performance.md). The guard is a subclass of uvicorn's httptools protocol
that counts a request's head before the parser sees it, counts its header fields, runs one
timer per connection (headers, then body), and caps the connections per worker.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

import httptools
from uvicorn.config import Config
from uvicorn.protocols.http.flow_control import service_unavailable
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from gptools import spec
from gptools.errors import GptoolsError
from gptools.webhooks._config import ReceiverConfig
from gptools.webhooks._constants import CONNECTION_LOG_EVERY_S
from gptools.webhooks._metric_families import counter
from gptools.webhooks._server_limits import ServerLimits

_logger = logging.getLogger("gptools.webhooks")

_HEAD = "head"
_BODY = "body"

#: Why the guard refused or closed a connection: the ``reason`` label of the counter.
REASONS = (
    "header_too_large",
    "too_many_header_fields",
    "header_timeout",
    "body_timeout",
    "over_capacity",
    "evicted",
)


class _TooManyFields(GptoolsError):
    """Raised inside the parser's callback to stop parsing a request."""


_REFUSALS = counter(
    "gptools_webhook_connections_refused_total",
    "Connections the server refused or closed before the receiver saw a request, by reason.",
    "reason",
)


class _Tally:
    """Counts the guard's refusals in one worker: a Prometheus counter each, and at most
    one log line per reason every ``CONNECTION_LOG_EVERY_S`` (a flood must not flood the log)."""

    def __init__(self) -> None:
        self._pending = dict.fromkeys(REASONS, 0)
        self._logged_at = dict.fromkeys(REASONS, float("-inf"))

    def count(self, reason: str, detail: str) -> None:
        _REFUSALS.made().labels(reason=reason).inc()
        self._pending[reason] += 1
        now = time.monotonic()
        if now - self._logged_at[reason] >= CONNECTION_LOG_EVERY_S:
            n = self._pending[reason]
            self._pending[reason] = 0
            self._logged_at[reason] = now
            _logger.warning(
                "connection %s: %s (%d since the last such line)",
                reason.replace("_", " "),
                detail,
                n,
                extra={"event": "connection_refused", "reason": reason, "count": n},
            )


@functools.cache
def _tally() -> _Tally:
    return _Tally()


@functools.cache
def _limits() -> ServerLimits:
    """The bounds ``serve`` handed to this worker in its configuration."""
    return ReceiverConfig.from_environment().limits


def _answer(status: int, reason: bytes) -> bytes:
    return b"".join(
        [
            STATUS_LINE[status],
            b"content-type: text/plain; charset=utf-8\r\n",
            b"content-length: " + str(len(reason)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
            reason,
        ]
    )


_TOO_LARGE = _answer(431, b"Request Header Fields Too Large")
_UNAVAILABLE = _answer(503, b"Service Unavailable")


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds of :class:`ServerLimits`:

    - a request's head (request line and header fields) is fed to the parser only up to
      ``max_header_bytes``; past it, or past ``max_header_fields`` fields, the answer is
      431 and the connection closes, and nothing more is read or kept;
    - one timer per connection: the head must arrive within ``header_timeout_s`` of the
      connection's opening (or of its first byte on a kept-alive connection), the body
      within ``body_timeout_s`` of the head; past either, the connection closes with no
      answer (a request whose answer is being worked on is never cut). Not 408: the
      provider never retries a 4xx, and it retries a failed connection, so a real
      delivery slowed by the network is delayed, not lost;
    - past ``max_connections`` open connections in the worker, a new one takes the place
      of the longest-open connection with no request in progress (idle, or still
      sending its head); when all are busy with requests, it is answered 503, and past
      ``spec.RECEIVER_CONNECTION_OVERFLOW`` more it is closed at once."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = _limits()
        self._in_head = True
        self._head_bytes = 0
        self._max_head = self.limits.max_header_bytes
        self._body_pending = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_kind: str | None = None
        #: When this connection opened (the eviction order).
        self._opened_at = 0.0

    # -- connections ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        limit = self.limits.max_connections
        crowded = len(self.connections) >= limit and not self._evict_one()
        super().connection_made(transport)
        self._opened_at = self.loop.time()
        if crowded:
            if len(self.connections) > limit + spec.RECEIVER_CONNECTION_OVERFLOW:
                _tally().count("over_capacity", f"more than {limit} connections busy")
                self._close_with(_UNAVAILABLE)
                return
            # Read its request head, then answer 503 (a clean answer the sender retries).
            self.app = service_unavailable
            _tally().count("over_capacity", f"all {limit} connections busy; answered 503")
        self._arm(_HEAD, self.limits.header_timeout_s)

    def _evict_one(self) -> bool:
        """Close the oldest connection that has no request in progress; False if every
        connection has one."""
        oldest: GuardedHttpToolsProtocol | None = None
        for other in self.connections:
            if (
                isinstance(other, GuardedHttpToolsProtocol)
                and other._waiting()
                and (oldest is None or other._opened_at < oldest._opened_at)
            ):
                oldest = other
        if oldest is None:
            return False
        _tally().count(
            "evicted",
            f"{self.limits.max_connections} connections open; closed the longest idle",
        )
        self.connections.discard(oldest)
        oldest._cancel_timer()
        oldest.transport.close()
        return True

    def _waiting(self) -> bool:
        """No request in progress: idle, or still sending its head."""
        return (
            self._in_head
            and not self.pipeline
            and (self.cycle is None or self.cycle.response_complete)
            and not self.transport.is_closing()
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        super().connection_lost(exc)

    def _close_with(self, answer: bytes) -> None:
        self._cancel_timer()
        if not self.transport.is_closing():
            self.transport.write(answer)
            self.transport.close()

    # -- reading ----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if not self._in_head or len(data) <= self._max_head - self._head_bytes:
            # The usual case: all of it may go to the parser.
            if self._in_head:
                self._head_bytes += len(data)
            if self._feed(data) and not self.transport.is_closing():
                self._follow_phase()
            return
        limit = self._max_head
        while data:
            if self._in_head:
                room = limit - self._head_bytes
                if room <= 0:
                    self._refuse_head("header_too_large", f"head over {limit} bytes")
                    return
                if len(data) > room:
                    part, data = data[:room], data[room:]
                else:
                    part, data = data, b""
                self._head_bytes += len(part)
            else:
                part, data = data, b""
            if not self._feed(part) or self.transport.is_closing():
                return
        self._follow_phase()

    def _feed(self, data: bytes) -> bool:
        """Parse ``data``; False when the request was refused (the connection closes)."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _TooManyFields):
                self._refuse_head(
                    "too_many_header_fields", f"over {self.limits.max_header_fields} fields"
                )
                return False
            return self._invalid()
        except httptools.HttpParserError:
            return self._invalid()
        except httptools.HttpParserUpgrade:
            # The receiver serves no WebSocket; uvicorn's answer to an upgrade request.
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        return True

    def _invalid(self) -> bool:
        self._cancel_timer()
        msg = "Invalid HTTP request received."
        self.logger.warning(msg, extra={"event": "invalid_http_request"})
        self.send_400_response(msg)
        return False

    def _refuse_head(self, reason: str, detail: str) -> None:
        _tally().count(reason, detail + "; answered 431")
        self._close_with(_TOO_LARGE)

    def _follow_phase(self) -> None:
        """Arm the timer the request's phase calls for, after what was just parsed."""
        if self._in_head:
            if self._head_bytes and self._timer_kind != _HEAD:
                self._arm(_HEAD, self.limits.header_timeout_s)
            elif not self._head_bytes and self._timer_kind == _BODY:
                self._cancel_timer()
        elif self._body_pending:
            if self._timer_kind != _BODY:
                self._arm(_BODY, self.limits.body_timeout_s)
        elif self._timer_kind is not None:
            self._cancel_timer()

    # -- parser callbacks -------------------------------------------------------------

    def on_headers_complete(self) -> None:
        # Counted here, not per field: the head's byte limit already bounds what the
        # fields hold, and a check per field costs every request.
        if len(self.headers) > self.limits.max_header_fields:
            raise _TooManyFields
        if self._timer_kind == _HEAD:
            self._cancel_timer()
        self._in_head = False
        self._head_bytes = 0
        self._body_pending = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        self._body_pending = False
        super().on_message_complete()

    # -- timers -----------------------------------------------------------------------

    def _arm(self, kind: str, seconds: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(seconds, self._timed_out)
        self._timer_kind = kind

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_kind = None

    def _timed_out(self) -> None:
        kind = self._timer_kind
        self._timer = None
        self._timer_kind = None
        if self.transport.is_closing():
            return
        busy = self.cycle is not None and not self.cycle.response_complete
        if kind == _HEAD:
            if busy:
                # A pipelined head behind a request still being answered: wait for it.
                self._arm(_HEAD, self.limits.header_timeout_s)
                return
            _tally().count(
                "header_timeout", f"head not received in {self.limits.header_timeout_s:g} s"
            )
            self.transport.close()
        elif kind == _BODY and self._body_pending:
            # The application sees a disconnect.
            _tally().count("body_timeout", f"body not received in {self.limits.body_timeout_s:g} s")
            self.transport.close()
