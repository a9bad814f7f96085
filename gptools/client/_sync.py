"""The synchronous client: :class:`Client` (its views, ``client.brand(ID)`` and
``client.with_options(...)``, are clients of the same class; see the shared base).

It waits with threads' tools only (``time.sleep``, a :class:`threading.Condition`), never
``asyncio.run``, so it works inside a running Jupyter kernel; one client may be shared by
the threads of a pool, and its rate limits hold for all of them together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from types import TracebackType

import httpx

from gptools import spec
from gptools._bounded_transport import CALL_DEADLINE, bounded_sync_transport
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


class Client(BaseClient):
    __doc__ = "A synchronous client of the provider's API (or of the sandbox).\n\n" + CLIENT_DOC

    _http: httpx.Client

    def _setup(self, transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None) -> None:
        if transport is not None and not isinstance(transport, httpx.BaseTransport):
            raise TypeError("Client needs a sync httpx.BaseTransport; use AsyncClient for async")
        self._http = httpx.Client(
            base_url=self.settings.base_url,
            auth=self._auth(),
            timeout=self.timeout,
            headers=dict(DEFAULT_HEADERS),
            transport=bounded_sync_transport(transport),
        )
        self._cond = threading.Condition()
        self._self_lock = threading.Lock()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ----------------------------------------------------------------------------------
    # Operations
    # ----------------------------------------------------------------------------------

    def self(
        self, *, refresh: bool = False, timeout: TimeoutTypes | NotGiven = NOT_GIVEN
    ) -> SelfInfo:
        """``GET /self``: the principal type and allowed brands (cached; ``refresh`` re-reads)."""
        info = self._self_info
        if info is None or refresh:
            # One fetch even when many threads start at once: they would all count
            # against the same rate tier.
            seen = self._shared.self_fetches
            with self._self_lock:
                if self._must_fetch_self(seen, refresh):
                    self._shared.self_error = None
                    try:
                        self._self_info = self._request(self._build_self(), timeout)
                    except GptoolsError as exc:
                        self._shared.self_error = exc
                        raise
                    finally:
                        self._shared.self_fetches += 1
                info = self._self_info
                assert info is not None  # fetched, or shared from a fetch that succeeded
        return info

    def awarded_feature_configurations(
        self,
        game_id: str | None,
        currency_code: str | None,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> AwardedFeatureConfigurations:
        """The pre-calculated feature costs (``bet``) of a game in a currency."""
        call = self._build_configurations(game_id, currency_code, brand, self.self())
        return self._request(call, timeout)

    def game(
        self,
        game_id: str,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> Game:
        """A game's configuration: buy features (price multipliers) and bet sizes."""
        return self._request(self._build_game(game_id, brand, self.self()), timeout)

    def create_campaign(
        self,
        request: CampaignRequest,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> CampaignCreated:
        """Create a campaign. A ``requestId`` is generated when the request has none, and
        the same one is sent on every retry, so the campaign is created at most once."""
        call = self._build_create_campaign(request, brand, self.self())
        return self._request(call, timeout)

    def add_participants(
        self,
        campaign_id: str,
        player_ids: Sequence[str],
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> ParticipantsAdded:
        """Add players (external ids) to a campaign. Safe to retry: adding twice is a no-op."""
        call = self._build_add_participants(campaign_id, player_ids, brand, self.self())
        return self._request(call, timeout)

    def add_participants_batch(
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
            campaign_id, player_ids, brand, self.self(), max_ids
        )
        return self._request(call, timeout)

    def get_webhook_subscription(
        self, *, brand: int | None = None, timeout: TimeoutTypes | NotGiven = NOT_GIVEN
    ) -> WebhookSubscriptionInfo:
        """The brand's webhook subscription (assumed endpoint, see ``spec``)."""
        call = self._build_subscription("GET", None, brand, self.self())
        return self._request(call, timeout)

    def create_webhook_subscription(
        self,
        subscription: WebhookSubscription,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> WebhookSubscriptionInfo:
        """Create the brand's webhook subscription (``POST``, assumed endpoint)."""
        call = self._build_subscription("POST", subscription, brand, self.self())
        return self._request(call, timeout)

    def update_webhook_subscription(
        self,
        subscription: WebhookSubscription,
        *,
        brand: int | None = None,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
    ) -> WebhookSubscriptionInfo:
        """Replace the brand's webhook subscription (``PUT``, assumed endpoint)."""
        call = self._build_subscription("PUT", subscription, brand, self.self())
        return self._request(call, timeout)

    # ----------------------------------------------------------------------------------
    # Sending and waiting: the only part that differs from AsyncClient
    # ----------------------------------------------------------------------------------

    def _request(self, call: Call[M], timeout: TimeoutTypes | NotGiven) -> M:
        phases, deadline = self._timeout_for(timeout)
        attempt = 0
        while True:
            ticket = self._acquire(call.tiers)
            self._count("requests")
            answer = NO_ANSWER
            step: M | Retry
            try:
                response = self._send(call, phases, deadline, attempt)
            except httpx.TransportError as exc:
                step = self._after_transport_error(call, exc, attempt, deadline)
            else:
                answer = self._read_answer(call, response, attempt)
                step = self._after_response(call, response, attempt, answer, deadline)
            finally:
                self._release(ticket, answer)
            if not isinstance(step, Retry):
                return step
            time.sleep(step.delay)
            self._count("backoff_seconds", step.delay)
            attempt += 1

    def _send(
        self, call: Call[M], phases: httpx.Timeout, deadline: Deadline, attempt: int
    ) -> Received:
        """One attempt: the answer as far as :class:`BodyReader` keeps it, every socket wait
        ending by the deadline (:func:`~gptools._bounded_transport.bounded_sync_transport`)."""
        request = self._build_request(self._http, call, phases, deadline)
        token = CALL_DEADLINE.set(deadline.at)
        try:
            response = self._http.send(request, stream=True)
            try:
                reader = BodyReader(self, call, response, attempt)
                for chunk in response.iter_bytes():
                    if reader.feed(chunk):
                        break
                    deadline.check()
            finally:
                response.close()
        finally:
            CALL_DEADLINE.reset(token)
        return reader.received()

    def _acquire(self, tiers: tuple[str, ...]) -> Ticket | None:
        if not tiers:
            return None
        waited = 0.0
        with self._cond:
            while True:
                now = time.monotonic()
                admitted = self.limiter.try_acquire(tiers, now)
                if isinstance(admitted, Ticket):
                    break
                # Woken early when a request finishes and frees a place.
                self._cond.wait(admitted)
                waited += time.monotonic() - now
        if waited:
            self._count("wait_seconds", waited)
        return admitted

    def _release(self, ticket: Ticket | None, answer: Answer) -> None:
        if ticket is None:
            return
        with self._cond:
            self.limiter.release(
                ticket, time.monotonic(), rate_limited=answer.rate_limited, retry_after=answer.pause
            )
            self._cond.notify_all()
