"""The client against hostile servers on 127.0.0.1 (issue 22): a server that drips its
answer one byte every half second cannot hold a call past its deadline plus one second; a
1 GiB answer is refused while it streams with a typed error and bounded memory; a 1 GiB
chunked 500 costs a few kilobytes per retry and leaves a bounded ``body``; JSON nested
deeper than ``spec.JSON_MAX_DEPTH`` is an ``ApiError``, never a ``RecursionError``.

Each case runs with the sync :class:`Client` and with :class:`AsyncClient` on both of its
transports (aiohttp, its default, and httpx's own). The servers are raw asyncio servers
on a thread of their own; every loop they run is bounded and ends by itself.
"""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from gptools import errors, spec
from gptools.client import AsyncClient, Client
from gptools.client import _constants as C
from tests.hostile.raw_server import RawServer

GIB = 1024**3
#: The drip: one byte every half second, for at most this long per connection.
DRIP_EVERY_S = 0.5
DRIP_FOR_S = 20.0
CHUNK = b"x" * 65536
SELF_JSON = b'{"principalType": "PARTNER", "allowedBrands": []}'

KINDS = ("sync", "async-aiohttp", "async-httpx")


@dataclass
class HostileServer(RawServer):
    """A raw HTTP/1.1 server on 127.0.0.1 whose answers do what ``mode`` says:

    - ``drip-head``: the status line and headers one byte every :data:`DRIP_EVERY_S`;
    - ``drip-body``: headers at once, then a body one byte at a time;
    - ``huge-200``: status 200 and 1 GiB of body (no length, ends with the connection);
    - ``huge-500``: status 500 and 1 GiB of chunked body;
    - ``deep-200``/``deep-500``: a small body nested 100,000 levels deep;
    - ``self-length``/``self-close``: status 200 and :data:`SELF_JSON`, with its
      ``Content-Length``, or without one (the body ends with the connection).
    """

    mode: str
    connections: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read the request's head, then answer as :attr:`mode` says."""
        self.connections += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            await self._answer(writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client hung up: what it was meant to do
        finally:
            writer.close()
            await asyncio.gather(writer.wait_closed(), return_exceptions=True)

    async def _answer(self, writer: asyncio.StreamWriter) -> None:
        if self.mode.startswith("drip"):
            head = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
            dripped = head if self.mode == "drip-head" else b"x" * 100_000
            if self.mode == "drip-body":
                writer.write(head)
            end = time.monotonic() + DRIP_FOR_S
            for byte in dripped:
                if time.monotonic() > end:
                    return
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(DRIP_EVERY_S)
            return
        if self.mode.startswith("self"):
            length = b"Content-Length: %d\r\n" % len(SELF_JSON)
            framing = length if self.mode == "self-length" else b"Connection: close\r\n"
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + framing
                + b"\r\n"
                + SELF_JSON
            )
            await writer.drain()
            return
        if self.mode.startswith("deep"):
            status = b"200 OK" if self.mode == "deep-200" else b"500 Internal Server Error"
            body = b"[" * 100_000 + b"]" * 100_000
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            await writer.drain()
            return
        chunked = self.mode == "huge-500"
        writer.write(
            b"HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n"
            if chunked
            else b"HTTP/1.1 200 OK\r\nConnection: close\r\n"
        )
        writer.write(b"Content-Type: application/json\r\n\r\n")
        frame = b"%x\r\n" % len(CHUNK) + CHUNK + b"\r\n" if chunked else CHUNK
        sent = 0
        while sent < GIB:
            writer.write(frame)
            await writer.drain()
            sent += len(CHUNK)
        if chunked:
            writer.write(b"0\r\n\r\n")


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[HostileServer]:
    with HostileServer(request.param) as running:
        yield running


def call_self(kind: str, url: str, **options: Any) -> tuple[BaseException | None, float]:
    """``client.self()`` with a fresh client of ``kind``: the exception raised (``None``:
    none) and the seconds the call took."""
    settings: dict[str, Any] = {
        "base_url": url,
        "username": "u",
        "password": "p",
        "env_file": None,
        "rate_tiers": (),
        **options,
    }
    start = time.monotonic()
    try:
        if kind == "sync":
            with Client(**settings) as client:
                client.self()
        else:
            transport = httpx.AsyncHTTPTransport() if kind == "async-httpx" else None

            async def run() -> None:
                async with AsyncClient(transport=transport, **settings) as client:
                    await client.self()

            asyncio.run(run())
    except Exception as exc:  # the test inspects whatever was raised
        return exc, time.monotonic() - start
    return None, time.monotonic() - start


def peak_memory(run: Callable[[], Any]) -> tuple[Any, int]:
    """``run()``'s result and the peak of Python memory allocated while it ran."""
    tracemalloc.start()
    try:
        result = run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("server", "timeout", "deadline"),
    [("drip-head", 3, 3.0), ("drip-body", 3, 3.0), ("drip-head", (2, 1), 3.0)],
    indirect=["server"],
    ids=["head-3s", "body-3s", "head-pair-2,1"],
)
def test_a_drip_server_cannot_hold_a_call_past_its_deadline(
    kind: str, server: HostileServer, timeout: Any, deadline: float
) -> None:
    exc, took = call_self(kind, server.url, timeout=timeout, max_retries=2)
    assert isinstance(exc, errors.TransportError), exc
    assert "deadline" in str(exc) and exc.sent is True
    assert took < deadline + 1.0, f"{kind}: {took:.1f} s for a {deadline} s deadline"
    # The retries were inside the deadline, not after it.
    assert server.connections <= 3


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("server", ["huge-200"], indirect=True)
def test_a_huge_answer_is_refused_while_it_streams(kind: str, server: HostileServer) -> None:
    (exc, took), peak = peak_memory(lambda: call_self(kind, server.url, timeout=30))
    assert isinstance(exc, errors.ResponseTooLargeError), exc
    assert isinstance(exc, errors.GptoolsError)
    assert exc.status == 200 and exc.limit == C.DEFAULT_MAX_RESPONSE_BYTES
    assert exc.body is not None and 0 < len(exc.body) <= C.ERROR_BODY_BYTES
    assert str(C.DEFAULT_MAX_RESPONSE_BYTES) in str(exc)
    assert server.connections == 1  # not retried: the same request gets the same answer
    # Read up to the limit, not the GiB: memory and time bounded.
    assert peak < 3 * C.DEFAULT_MAX_RESPONSE_BYTES, f"peak {peak / 2**20:.0f} MiB"
    assert took < 20


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("server", ["huge-200"], indirect=True)
def test_the_size_limit_is_configurable(kind: str, server: HostileServer) -> None:
    exc, _ = call_self(kind, server.url, timeout=30, max_response_bytes=100_000)
    assert isinstance(exc, errors.ResponseTooLargeError) and exc.limit == 100_000


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("server", ["self-length", "self-close"], indirect=True)
def test_an_answer_of_exactly_the_size_limit_is_read(kind: str, server: HostileServer) -> None:
    # The limit is the largest answer read: at it the answer is whole, one byte under it
    # is refused, whether the size is declared or only found while reading.
    exc, _ = call_self(kind, server.url, timeout=30, max_response_bytes=len(SELF_JSON))
    assert exc is None
    exc, _ = call_self(kind, server.url, timeout=30, max_response_bytes=len(SELF_JSON) - 1)
    assert isinstance(exc, errors.ResponseTooLargeError), exc
    assert (exc.status, exc.limit, exc.retries) == (200, len(SELF_JSON) - 1, 0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("server", ["huge-500"], indirect=True)
def test_a_huge_error_answer_costs_a_few_kilobytes_per_retry(
    kind: str, server: HostileServer
) -> None:
    run: Callable[[], tuple[BaseException | None, float]] = lambda: call_self(  # noqa: E731
        kind, server.url, timeout=30, max_retries=2, backoff_base=0.01, backoff_cap=0.05
    )
    (exc, took), peak = peak_memory(run)
    assert isinstance(exc, errors.ServerError), exc
    assert exc.status == 500 and exc.retries == 2
    assert exc.body is not None and len(exc.body.encode()) <= C.ERROR_BODY_BYTES
    assert server.connections == 3
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert took < 10


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("server", ["deep-200", "deep-500"], indirect=True)
def test_deep_json_is_an_api_error_not_a_recursion_error(kind: str, server: HostileServer) -> None:
    exc, _ = call_self(kind, server.url, timeout=30, max_retries=0)
    assert isinstance(exc, errors.ApiError), repr(exc)
    if server.mode == "deep-200":
        assert f"nested deeper than {spec.JSON_MAX_DEPTH} levels" in str(exc)
    else:
        assert isinstance(exc, errors.ServerError) and exc.code is None
    assert exc.body is not None and len(exc.body.encode()) <= C.ERROR_BODY_BYTES


def test_the_sync_transport_is_bounded_by_the_deadline() -> None:
    """The sync client's bound rests on httpx's pool keeping a replaceable network
    backend: if an httpx upgrade moves it, this fails rather than the bound silently."""
    from gptools._bounded_transport import _BoundedBackend

    with Client(base_url="http://127.0.0.1:1", username="u", password="p", env_file=None) as c:
        transport = c._http._transport
        assert isinstance(transport, httpx.HTTPTransport)
        assert isinstance(transport._pool._network_backend, _BoundedBackend)
