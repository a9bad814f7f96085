"""The clients' transports: aiohttp under httpx for the async client, with httpx's own
errors; httpx's own for the sync client, with every socket wait cut to the call's deadline.

httpx's own async connection pool slows down as concurrency grows (issue 13 measured 350
req/s with 32 requests in flight); aiohttp's pool does not (about 1,600). The
``httpx-aiohttp`` package carries httpx requests over aiohttp; this module adds what the
client's rules need on top of it:

- every aiohttp failure becomes the httpx exception that httpx's own transport raises for
  the same event, so the retry decision, ``sent=False`` and the messages do not depend on
  the transport. ``httpx-aiohttp`` maps by the nearest base class, which turns a dropped
  connection (``ServerDisconnectedError``) or a read time-out into ``ConnectTimeout``: a
  request that reached the server would then count as never sent;
- no cookie jar: httpx keeps cookies itself, a second jar in aiohttp would resend them;
- no hidden re-send of a request whose reused connection dropped (aiohttp's default for
  idempotent methods): every attempt is one the client counted and decided on.

Timeouts: httpx's ``connect`` is aiohttp's ``sock_connect``, ``read`` is ``sock_read``,
``pool`` bounds waiting for a connection plus connecting (aiohttp's ``connect``); aiohttp
has no write time-out. The async client bounds a whole call with :func:`asyncio.timeout`,
whatever the transport.

The sync client cannot cancel a blocked read, and httpx's time-outs are per socket
operation: a server that sends one byte per read time-out holds a request for ever (the
headers included, which httpx reads before any body chunk).
:func:`~gptools._bounded_transport.bounded_sync_transport` gives httpx's transport a
network backend whose every connect, read and write waits at most until
:data:`~gptools._bounded_transport.CALL_DEADLINE`, which the client sets around each
attempt (the sandbox probe of :mod:`gptools.session` uses the same).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

#: aiohttp's failures and httpx's name for each, most specific first. Only the first two
#: say "the request never left": the connection (or a place in the pool) was never had.
_AIOHTTP_TO_HTTPX: tuple[tuple[type[BaseException], type[httpx.TransportError]], ...] = (
    (aiohttp.ClientProxyConnectionError, httpx.ProxyError),
    (aiohttp.ConnectionTimeoutError, httpx.ConnectTimeout),
    (aiohttp.ClientConnectorError, httpx.ConnectError),
    (aiohttp.SocketTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerTimeoutError, httpx.ReadTimeout),
    (aiohttp.ServerDisconnectedError, httpx.RemoteProtocolError),
    (aiohttp.ClientPayloadError, httpx.RemoteProtocolError),
    (aiohttp.ClientConnectionError, httpx.ReadError),
    (TimeoutError, httpx.ReadTimeout),
)


def _as_httpx(exc: BaseException) -> httpx.TransportError | None:
    """The httpx error for ``exc`` (an aiohttp error, or httpx-aiohttp's mapping of one)."""
    cause = exc.__cause__ if isinstance(exc, httpx.TransportError) else exc
    if cause is None:
        return None
    for source, target in _AIOHTTP_TO_HTTPX:
        if isinstance(cause, source):
            mapped = target(str(cause) or type(cause).__name__)
            mapped.__cause__ = cause
            return mapped
    return None


class _Body(httpx.AsyncByteStream):
    """A response body whose read errors are mapped like the request's."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except (httpx.TransportError, aiohttp.ClientError, TimeoutError) as exc:
            mapped = _as_httpx(exc)
            if mapped is None:
                raise
            raise mapped from mapped.__cause__

    async def aclose(self) -> None:
        await self._inner.aclose()


class AioTransport(AiohttpTransport):
    """:class:`httpx_aiohttp.AiohttpTransport` that raises what ``httpx.AsyncHTTPTransport``
    raises for the same failure, and keeps no cookies of its own."""

    def get_client(self) -> aiohttp.ClientSession:
        """One aiohttp session for the transport's life (created in the running loop)."""
        connector = aiohttp.TCPConnector(
            limit=self.limits.max_connections or 0,
            keepalive_timeout=self.limits.keepalive_expiry,
            ssl=self.ssl_context,
        )
        session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())
        # aiohttp silently sends a GET or PUT again when a reused connection drops. The
        # server then counts two requests where the rate limiter counted one, and the
        # client's retry budget is not the one the caller set; the client retries itself.
        # No public switch: aiohttp's own test client turns it off the same way, and
        # tests/client/test_retries.py (dropped connections) fails if it comes back.
        session._retry_connection = False
        return session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` over aiohttp; failures raised as httpx's own exceptions."""
        try:
            response = await super().handle_async_request(request)
        except (httpx.TransportError, aiohttp.ClientError, TimeoutError) as exc:
            mapped = _as_httpx(exc)
            if mapped is None:
                raise
            raise mapped from mapped.__cause__
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Body(response.stream)
        return response


def default_async_transport() -> httpx.AsyncBaseTransport:
    """The transport an :class:`~gptools.client.AsyncClient` gets when none is given."""
    return AioTransport()
