"""Fixtures of the client tests: a real sandbox on loopback and sync/async client twins.

Every case runs three times: with :class:`Client`, and with :class:`AsyncClient` on each
transport (its default, aiohttp, and httpx's own ``httpx.AsyncHTTPTransport``), so every
rule of the client is checked on both transports. The async twin runs each coroutine on
one private event loop (the client belongs to the loop it first ran on), so a test body
reads the same for all.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import httpx
import pytest

from gptools import spec
from gptools.client import AsyncClient, Client
from gptools.sandbox import RunningSandbox

#: Fast, still exponential backoff: tests check that retries happen, not how long they take.
FAST_BACKOFF = {"backoff_base": 0.01, "backoff_cap": 0.05}


class AsyncTwin:
    """Wraps an :class:`AsyncClient`: coroutine methods run to completion on ``loop``; its
    views (``brand``, ``with_options``) come wrapped too; everything else passes through."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.target = target
        self.loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.target, name)
        if name in ("brand", "with_options"):
            return lambda *a, **k: AsyncTwin(attr(*a, **k), self.loop)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self.loop.run_until_complete(attr(*a, **k))
        return attr

    def __repr__(self) -> str:
        return repr(self.target)


@pytest.fixture
def sb(fresh_sandbox: RunningSandbox) -> RunningSandbox:
    """The session's sandbox (documented limits), reset: requests, campaigns, faults and
    rate windows forgotten. A short name, as every client test uses it."""
    return fresh_sandbox


#: The async kinds: AsyncClient on its default transport (aiohttp) and on httpx's own.
ASYNC_KINDS = ("async-aiohttp", "async-httpx")


@pytest.fixture(params=["sync", *ASYNC_KINDS])
def kind(request: pytest.FixtureRequest) -> str:
    """Which client the test runs with (and, for AsyncClient, on which transport)."""
    return str(request.param)


def async_options(kind: str) -> dict[str, Any]:
    """The AsyncClient keyword arguments of an async ``kind``: no transport (the default,
    aiohttp) or httpx's own."""
    if kind == "async-httpx":
        return {"transport": httpx.AsyncHTTPTransport()}
    return {}


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """The private event loop of the async twin."""
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


MakeClient = Callable[..., Any]


@pytest.fixture
def make(kind: str, sb: RunningSandbox, loop: asyncio.AbstractEventLoop) -> Iterator[MakeClient]:
    """``make(account="partner", sandbox=None, **options)``: a client (sync, or the async
    twin) logged in to the sandbox as a demo account; closed after the test."""
    made: list[Any] = []

    def factory(
        account: str = "partner", sandbox: RunningSandbox | None = None, **options: Any
    ) -> Any:
        server = sandbox or sb
        acct = server.accounts[account]
        kwargs: dict[str, Any] = {
            "base_url": server.base_url,
            "username": acct.username,
            "password": acct.password,
            "env_file": None,
            **FAST_BACKOFF,
        }
        kwargs.update(options)
        if kind == "sync":
            client: Any = Client(**kwargs)
        else:
            client = AsyncTwin(AsyncClient(**{**async_options(kind), **kwargs}), loop)
        made.append(client)
        return client

    yield factory
    for client in made:
        client.close()


def run_concurrently(
    client: Any, jobs: Sequence[tuple[str, tuple[Any, ...], dict[str, Any]]], *, workers: int = 8
) -> list[Any]:
    """Run ``(method, args, kwargs)`` jobs on ``client`` concurrently: a thread pool for the
    sync client, tasks on its loop for the async twin. Returns results or exceptions."""
    return run_on_clients([(client, *job) for job in jobs], workers=workers)


def run_on_clients(
    jobs: Sequence[tuple[Any, str, tuple[Any, ...], dict[str, Any]]], *, workers: int = 8
) -> list[Any]:
    """Run ``(client, method, args, kwargs)`` jobs concurrently, each on its own client (a
    client and its views; all sync, or all async twins on one loop). Returns results or
    exceptions, in the order of ``jobs``."""
    if jobs and isinstance(jobs[0][0], AsyncTwin):
        loop = jobs[0][0].loop

        async def main() -> list[Any]:
            gate = asyncio.Semaphore(workers * 2)

            async def one(
                twin: AsyncTwin, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> Any:
                async with gate:
                    return await getattr(twin.target, name)(*args, **kwargs)

            return await asyncio.gather(*(one(*job) for job in jobs), return_exceptions=True)

        return loop.run_until_complete(main())

    def call(job: tuple[Any, str, tuple[Any, ...], dict[str, Any]]) -> Any:
        client, name, args, kwargs = job
        try:
            return getattr(client, name)(*args, **kwargs)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(call, jobs))


def busiest_window(times: Sequence[float], window: timedelta = spec.RATE_LIMIT_WINDOW) -> int:
    """The largest number of ``times`` (seconds on the sandbox's monotonic clock) inside
    any ``window``, as the server's limiter sees it: the oldest one leaves once it is
    ``window`` old."""
    window_s = window.total_seconds()
    ordered = sorted(times)
    best = lo = 0
    for hi, t in enumerate(ordered):
        while t - ordered[lo] >= window_s:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def tier_times(sb: RunningSandbox, tier: spec.RateTier) -> list[float]:
    """When the recorded requests that count against ``tier`` arrived, on the clock the
    sandbox's rate limiter counts them by (:attr:`RecordedRequest.monotonic`)."""
    out = []
    for r in sb.state.requests:
        cls = spec.endpoint_class(r.method, r.path)
        if tier.methods is not None and r.method not in tier.methods:
            continue
        if tier.endpoint is not None and tier.endpoint != cls:
            continue
        out.append(r.monotonic)
    return out
