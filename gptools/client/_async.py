"""The asynchronous client: :class:`AsyncClient` (its views, ``client.brand(ID)`` and
``client.with_options(...)``, are clients of the same class; see the shared base).

Every operation is a coroutine; it works with top-level ``await`` in Jupyter. The rate
limits hold for all tasks of one client together. The client belongs to the event loop
it is first used in (as an :class:`httpx.AsyncClient` does).
"""

# ``timeout=`` here is the client's time-out (the call's deadline and its per-phase values),
# the same keyword as on the sync client and on httpx.
# ruff: noqa: ASYNC109

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from types import TracebackType

import httpx

from gptools import spec
from gptools.client._base import (
    CLIENT_DOC,
    DEFAULT_HEADERS,
    NO_ANSWER,
    NOT_GIVEN,
    Answer,
    BaseClient,
    BodyReader,
    Call,
    Deadline,
    M,
    NotGiven,
    Received,
    Retry,
)
from gptools.client._ratelimit import Ticket
from gptools.client._settings import TimeoutTypes
from gptools.client._transport import default_async_transport
from gptools.errors import GptoolsError
from gptools.models import (
    AwardedFeatureConfigurations,
    CampaignCreated,
    CampaignRequest,
    Game,
    ParticipantsAdded,
    SelfInfo,
    WebhookSubscription,
    WebhookSubscriptionInfo,
)


class AsyncClient(BaseClient):
    __doc__ = "An asynchronous client of the provider's API (or of the sandbox).\n\n" + CLIENT_DOC

    _http: httpx.AsyncClient

    def _setup(self, transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None) -> None:
        if transport is not None and not isinstance(transport, httpx.AsyncBaseTransport):
            raise TypeError("AsyncClient needs an httpx.AsyncBaseTransport; use Client for sync")
        # aiohttp by default (issue 13): httpx's own async pool slows down as concurrency
        # grows; httpx.AsyncHTTPTransport() is one argument away.
        self._http = httpx.AsyncClient(
            base_url=self.settings.base_url,
            auth=self._auth(),
            timeout=self.timeout,
            headers=dict(DEFAULT_HEADERS),
            transport=transport or default_async_transport(),
        )
        # Pulsed whenever a request finishes, to wake the tasks waiting for a
        # place in a rate window. All bookkeeping runs on the loop's thread between awaits,
        # so it needs no lock.
        self._freed = asyncio.Event()
        self._self_lock = asyncio.Lock()

    async def close(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # ----------------------------------------------------------------------------------
    # Operations
    # ----------------------------------------------------------------------------------

    async def self(
        self, *, refresh: bool = False, timeout: TimeoutTypes | NotGiven = NOT_GIVEN
    ) -> SelfInfo:
        """``GET /self``: the principal type and allowed brands (cached; ``refresh`` re-reads)."""
        info = self._self_info
        if info is None or refresh:
            # One fetch even when many tasks start at once: they would all count
            # against the same rate tier.
            seen = self._shared.self_fetches
            async with self._self_lock:
                if self._must_fetch_self(seen, refresh):
                    self._shared.self_error = None
                    try:
                        self._self_info = await self._request(self._build_self(), timeout)
                    except GptoolsError as exc:
                        self._shared.self_error = exc
                        raise
                    finally:
                        self._shared.self_fetches += 1
                info = self._self_info
                assert info is not None  # fetched, or shared from a fetch that succeeded
        return info

    async def awarded_feature_configurations(
        self,
        game_id: str | None,
        currency_code: str | None,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> AwardedFeatureConfigurations:
        """The pre-calculated feature costs (``bet``) of a game in a currency."""
        call = self._build_configurations(game_id, currency_code, brand, await self.self())
        return await self._request(call, timeout)

    async def game(
        self,
        game_id: str,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> Game:
        """A game's configuration: buy features (price multipliers) and bet sizes."""
        return await self._request(self._build_game(game_id, brand, await self.self()), timeout)

    async def create_campaign(
        self,
        request: CampaignRequest,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> CampaignCreated:
        """Create a campaign. A ``requestId`` is generated when the request has none, and
        the same one is sent on every retry, so the campaign is created at most once."""
        call = self._build_create_campaign(request, brand, await self.self())
        return await self._request(call, timeout)

    async def add_participants(
        self,
        campaign_id: str,
        player_ids: Sequence[str],
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> ParticipantsAdded:
        """Add players (external ids) to a campaign. Safe to retry: adding twice is a no-op."""
        call = self._build_add_participants(campaign_id, player_ids, brand, await self.self())
        return await self._request(call, timeout)

    async def add_participants_batch(
        self,
        campaign_id: str,
        player_ids: Sequence[str],
        *,
        brand: int | None = None,
        max_ids: int = spec.BATCH_PARTICIPANT_MAX_IDS,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> ParticipantsAdded:
        """Add a large list of players through the batch endpoint (assumed path and limit,
        see ``spec.ENDPOINT_BATCH_PARTICIPANT_TEMPLATE``); more than ``max_ids`` is refused
        locally."""
        call = self._build_add_participants_batch(
            campaign_id, player_ids, brand, await self.self(), max_ids
        )
        return await self._request(call, timeout)

    async def get_webhook_subscription(
        self, *, brand: int | None = None, timeout: TimeoutTypes | NotGiven = NOT_GIVEN
    ) -> WebhookSubscriptionInfo:
        """The brand's webhook subscription (assumed endpoint, see ``spec``)."""
        call = self._build_subscription("GET", None, brand, await self.self())
        return await self._request(call, timeout)

    async def create_webhook_subscription(
        self,
        subscription: WebhookSubscription,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> WebhookSubscriptionInfo:
        """Create the brand's webhook subscription (``POST``, assumed endpoint)."""
        call = self._build_subscription("POST", subscription, brand, await self.self())
        return await self._request(call, timeout)

    async def update_webhook_subscription(
        self,
        subscription: WebhookSubscription,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> WebhookSubscriptionInfo:
        """Replace the brand's webhook subscription (``PUT``, assumed endpoint)."""
        call = self._build_subscription("PUT", subscription, brand, await self.self())
        return await self._request(call, timeout)

    # ----------------------------------------------------------------------------------
    # Sending and waiting: the only part that differs from AsyncClient
    # ----------------------------------------------------------------------------------

    async def _request(self, call: Call[M], timeout: TimeoutTypes | NotGiven) -> M:
        phases, deadline = self._timeout_for(timeout)
        attempt = 0
        while True:
            ticket = await self._acquire(call.tiers)
            self._count("requests")
            answer = NO_ANSWER
            step: M | Retry
            try:
                response = await self._send(call, phases, deadline, attempt)
            except httpx.TransportError as exc:
                step = self._after_transport_error(call, exc, attempt, deadline)
            else:
                answer = self._read_answer(call, response, attempt)
                step = self._after_response(call, response, attempt, answer, deadline)
            finally:
                self._release(ticket, answer)
            if not isinstance(step, Retry):
                return step
            await asyncio.sleep(step.delay)
            self._count("backoff_seconds", step.delay)
            attempt += 1

    async def _send(
        self, call: Call[M], phases: httpx.Timeout, deadline: Deadline, attempt: int
    ) -> Received:
        """One attempt: the answer as far as :class:`BodyReader` keeps it, cancelled at the
        deadline (on any transport)."""
        request = self._build_request(self._http, call, phases, deadline)
        try:
            async with asyncio.timeout(deadline.remaining()):
                response = await self._http.send(request, stream=True)
                try:
                    reader = BodyReader(self, call, response, attempt)
                    async for chunk in response.aiter_bytes():
                        if reader.feed(chunk):
                            break
                finally:
                    await response.aclose()
        except TimeoutError:
            raise httpx.ReadTimeout(
                f"the call's deadline of {deadline.seconds:g} s passed"
            ) from None
        return reader.received()

    async def _acquire(self, tiers: tuple[str, ...]) -> Ticket | None:
        if not tiers:
            return None
        waited = 0.0
        while True:
            now = time.monotonic()
            admitted = self.limiter.try_acquire(tiers, now)
            if isinstance(admitted, Ticket):
                break
            freed = self._freed
            try:
                # Woken early when a request finishes and frees a place.
                async with asyncio.timeout(admitted):
                    await freed.wait()
            except TimeoutError:
                pass
            waited += time.monotonic() - now
        if waited:
            self._count("wait_seconds", waited)
        return admitted

    def _release(self, ticket: Ticket | None, answer: Answer) -> None:
        if ticket is None:
            return
        self.limiter.release(
            ticket, time.monotonic(), rate_limited=answer.rate_limited, retry_after=answer.pause
        )
        # A pulse: set() wakes every task waiting now, clear() re-arms the event for the
        # next ones. Never replaced, as the client's views hold the same event.
        self._freed.set()
        self._freed.clear()
