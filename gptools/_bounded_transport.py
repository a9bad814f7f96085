"""httpx's sync transport with every socket wait cut to a deadline for the whole call.

httpx's time-outs are per socket operation and a sync read cannot be cancelled: a server
that sends one byte per read time-out holds a request for ever (the headers included,
which httpx reads before any body chunk). :func:`bounded_sync_transport` gives httpx's
transport a network backend whose every connect, read and write waits at most until
:data:`CALL_DEADLINE`, which the caller sets around each request. The client's sync
transport is built on it, and so is the sandbox probe (``sandbox/_remote.py``), which
must end within its deadline whatever answers on a loopback port; neither imports the
other, so the mechanism lives here and imports nothing of ours.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

#: The :func:`time.monotonic` instant the current call must end by (``None``: no call).
#: Per thread (a context variable), so the threads sharing one client each have their own.
CALL_DEADLINE: ContextVar[float | None] = ContextVar("gptools_call_deadline", default=None)


def _cut(timeout: float | None, error: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` cut to the time left before :data:`CALL_DEADLINE`; ``error`` once none is."""
    deadline = CALL_DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _BoundedStream(httpcore.NetworkStream):
    """A network stream whose every wait ends by the call's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _cut(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _cut(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, _cut(timeout, httpcore.ConnectTimeout)
        )
        return _BoundedStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _BoundedBackend(httpcore.NetworkBackend):
    """httpcore's network backend with :class:`_BoundedStream` connections."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, _cut(timeout, httpcore.ConnectTimeout), local_address, socket_options
        )
        return _BoundedStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(
            path, _cut(timeout, httpcore.ConnectTimeout), socket_options
        )
        return _BoundedStream(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def bounded_sync_transport(transport: httpx.BaseTransport | None) -> httpx.BaseTransport:
    """``transport`` (httpx's own by default) with its socket waits bounded by
    :data:`CALL_DEADLINE`. Another kind of transport is returned as it is: the client still
    checks the deadline between the chunks of an answer."""
    transport = httpx.HTTPTransport() if transport is None else transport
    pool = getattr(transport, "_pool", None)
    # httpx exposes no network backend; its pool keeps one (tests/hostile checks it works).
    if isinstance(transport, httpx.HTTPTransport) and isinstance(pool, httpcore.ConnectionPool):
        backend = pool._network_backend
        if not isinstance(backend, _BoundedBackend):
            pool._network_backend = _BoundedBackend(backend)
    return transport
