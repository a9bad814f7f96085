"""Everything the sync and async clients share that does no I/O.

Settings, the options a view changes (:meth:`BaseClient.with_options`, :meth:`BaseClient.brand`),
the choice of path by principal type (and the local brand checks), request building, the
call's deadline and each attempt's share of it, what is kept of an answer while it streams
(:class:`BodyReader`: the size limit), the retry decision and its delays, error mapping,
response parsing and the counters.
:class:`~gptools.client.Client` and :class:`~gptools.client.AsyncClient` add only how a
request is sent and how a wait is waited.
"""

from __future__ import annotations

import copy
import errno
import logging
import math
import random
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Generic, Self, TypeVar
from urllib.parse import quote

import httpx
from pydantic import SecretStr, ValidationError

from gptools import spec
from gptools._backoff import backoff_delay
from gptools._json_depth import exceeds_json_depth
from gptools._secrets import blank_credentials, credential_forms
from gptools._temporary import is_temporary_status
from gptools.client import _constants as C
from gptools.client._ratelimit import RateLimiter
from gptools.client._settings import (
    ClientSettings,
    TimeoutTypes,
    as_timeout,
    call_deadline,
    checked_max_response_bytes,
    normalised_url,
    safe_url,
)
from gptools.errors import (
    ApiError,
    BrandNotAllowedError,
    BrandRequiredError,
    GptoolsError,
    ResponseTooLargeError,
    TransportError,
    is_rate_limited,
)
from gptools.models import (
    ApiModel,
    AwardedFeatureConfigurations,
    CampaignCreated,
    CampaignRequest,
    ErrorBody,
    Game,
    ParticipantsAdded,
    SelfInfo,
    WebhookSubscription,
    WebhookSubscriptionInfo,
    dumps_wire,
    loads_wire,
)

log = logging.getLogger(C.LOGGER_NAME)

M = TypeVar("M", bound=ApiModel)

#: Transport errors raised before the request could reach the server.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

_JSON_HEADERS: Mapping[str, str] = {"Content-Type": "application/json"}
#: Sent with every request.
DEFAULT_HEADERS: Mapping[str, str] = {"Accept": "application/json", "User-Agent": "gptools-client"}


class NotGiven:
    """The type of :data:`NOT_GIVEN`: "use the client's default", distinct from ``None``."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"


#: Marks an argument the caller did not give (``None`` may mean something else).
NOT_GIVEN = NotGiven()


@dataclass(frozen=True, slots=True)
class ClientStats:
    """A snapshot of a client's counters.

    ``requests``: attempts sent (retries included); ``retries``: attempts that repeated an
    earlier one; ``rate_limited``: rate-limit responses received; ``transport_errors``:
    attempts that got no HTTP answer; ``wait_seconds``: time requests spent waiting for the
    rate limiter; ``backoff_seconds``: time spent sleeping between retries.
    """

    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    transport_errors: int = 0
    wait_seconds: float = 0.0
    backoff_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Call(Generic[M]):
    """One API operation, ready to send: what, where, with which body, parsed into what."""

    method: str
    path: str
    model: type[M]
    params: Mapping[str, str] | None = None
    body: bytes | None = None
    tiers: tuple[str, ...] = ()
    #: False when doing the request twice could do it twice (see :func:`should_retry`).
    idempotent: bool = True


@dataclass(frozen=True, slots=True)
class Retry:
    """The decision to try again after ``delay`` seconds."""

    delay: float


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer as both the retry decision and the rate limiter read it (read once).

    ``error`` is the error it maps to (``None`` for a 2xx), ``rate_limited`` whether it is
    the rate-limit answer (:func:`~gptools.errors.is_rate_limited`), ``retry_after`` the
    server's hint in seconds (any status; ``None``: none, unreadable or not finite) and
    ``pause`` how long the request's rate tiers pause: the hint of a rate-limit answer,
    capped at the client's ``retry_after_ceiling`` so that no hint can freeze the client.
    """

    error: ApiError | None = None
    rate_limited: bool = False
    retry_after: float | None = None
    pause: float | None = None


#: What the rate limiter is told about an attempt that got no usable answer.
NO_ANSWER = Answer()


@dataclass(frozen=True, slots=True)
class Deadline:
    """A call's time budget: ``seconds`` in all, ending at ``at`` (:func:`time.monotonic`)."""

    seconds: float
    at: float

    @classmethod
    def start(cls, seconds: float) -> Deadline:
        """The budget of a call that starts now."""
        return cls(seconds, time.monotonic() + seconds)

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - time.monotonic()

    def passed(self) -> bool:
        """Whether the budget is spent (within a clock tick: a read time-out capped at the
        remaining time ends at the deadline, not measurably after it)."""
        return self.remaining() <= _CLOCK_SLACK

    def phases(self, timeout: httpx.Timeout) -> httpx.Timeout:
        """``timeout`` with every phase cut to the time left, for one attempt."""
        left = max(self.remaining(), _CLOCK_SLACK)

        def cut(seconds: float | None) -> float:
            return left if seconds is None else min(seconds, left)

        return httpx.Timeout(
            connect=cut(timeout.connect),
            read=cut(timeout.read),
            write=cut(timeout.write),
            pool=cut(timeout.pool),
        )

    def check(self) -> None:
        """Raise the read time-out of a spent budget (between two chunks of an answer)."""
        if self.passed():
            raise httpx.ReadTimeout(f"the call's deadline of {self.seconds:g} s passed")


_CLOCK_SLACK = 0.005


@dataclass(frozen=True, slots=True)
class Received:
    """An answer as far as the client read it: ``content`` is the whole body of a 2xx and
    at most :data:`~gptools.client._constants.ERROR_BODY_BYTES` of any other
    (``truncated`` when there was more)."""

    status: int
    headers: httpx.Headers
    content: bytes
    truncated: bool = False

    @property
    def text(self) -> str:
        """The body as text (JSON is UTF-8; a byte that is not becomes U+FFFD)."""
        return self.content.decode("utf-8", "replace")


class BodyReader:
    """What the client keeps of one answer while it streams, fed chunk by chunk by the
    sync or async client: a 2xx whole, up to the client's ``max_response_bytes`` (past
    it :class:`~gptools.errors.ResponseTooLargeError`, raised before the rest is read);
    any other answer up to ``ERROR_BODY_BYTES``, then reading stops (an error's body is
    for its message; a huge 500 would otherwise be read again on every retry)."""

    def __init__(
        self, client: BaseClient, call: Call[M], response: httpx.Response, attempt: int
    ) -> None:
        self._client, self._call, self._attempt = client, call, attempt
        self.status = response.status_code
        self.headers = response.headers
        self._ok = 200 <= self.status <= 299
        self.limit = client.max_response_bytes if self._ok else C.ERROR_BODY_BYTES
        self._chunks: list[bytes] = []
        self._size = 0
        self._truncated = False
        declared = response.headers.get("Content-Length", "")
        if self._ok and declared.isdigit() and int(declared) > self.limit:
            self._too_large()

    def feed(self, chunk: bytes) -> bool:
        """Keep ``chunk``; True when reading should stop here."""
        room = self.limit - self._size
        if len(chunk) > room:
            self._chunks.append(chunk[:room])
            self._size = self.limit
            if self._ok:
                self._too_large()
            self._truncated = True
            return True
        self._chunks.append(chunk)
        self._size += len(chunk)
        return False

    def received(self) -> Received:
        """The answer as read."""
        return Received(self.status, self.headers, b"".join(self._chunks), self._truncated)

    def _too_large(self) -> None:
        call = self._call
        prefix = b"".join(self._chunks)[: C.ERROR_BODY_BYTES]
        raise ResponseTooLargeError(
            f"the answer is larger than {self.limit} bytes (max_response_bytes); "
            "reading stopped there",
            status=self.status,
            limit=self.limit,
            method=call.method,
            url=self._client.url_of(call.path, call.params),
            body=self._client._blank(prefix.decode("utf-8", "replace")) or None,
            retries=self._attempt,
        )


def loads_answer(content: bytes) -> object:
    """An answer's JSON (exact decimals), refused with a :class:`ValueError` when it nests
    deeper than ``spec.JSON_MAX_DEPTH`` before the parser's recursion could fail."""
    if exceeds_json_depth(content):
        raise ValueError(f"nested deeper than {spec.JSON_MAX_DEPTH} levels")
    return loads_wire(content)


@dataclass(slots=True)
class _Shared:
    """The state a client shares with every view made from it that is replaced rather
    than changed in place: the counters (one immutable snapshot, replaced under ``lock``
    at each count, so :attr:`BaseClient.stats` hands it out without copying) and the
    cached ``GET /self`` answer. Everything else a view shares (the HTTP pool, the rate
    limiter, the wait primitives, the jitter's RNG) it holds by reference."""

    stats: ClientStats = ClientStats()
    self_info: SelfInfo | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: ``GET /self`` fetches finished so far and the error of the last one: callers that
    #: waited for a fetch share its outcome, so eight threads starting together against a
    #: dead address fail once (one retry budget), not eight times in a row.
    self_fetches: int = 0
    self_error: GptoolsError | None = None


# --------------------------------------------------------------------------------------
# The retry decision and its delays
# --------------------------------------------------------------------------------------


def should_retry(
    status: int | None, *, rate_limited: bool, idempotent: bool, reached: bool = True
) -> bool:
    """Whether an attempt that ended with ``status`` (``None``: no HTTP answer) is retried.

    ``idempotent`` says whether doing the request twice does no harm: true for GETs, for a
    campaign creation with its ``requestId`` (the client always sends one), participant
    additions (adding a player twice is a no-op on the server, by assumption:
    ``spec.PARTICIPANT_ADDITION_IDEMPOTENT``; ``Client(participant_retries=False)``
    otherwise) and subscription updates;
    false for a subscription creation (a second one is refused) and for a campaign
    creation without ``requestId``. ``reached`` is false when the request provably never
    got to the server (connection refused, connect time-out).
    """
    # No answer: the server restarted, the network dropped, or it is too slow. An
    # idempotent request is simply repeated; any other only if it never left us.
    if status is None:
        return idempotent or not reached
    # The rate-limit response: the server did nothing; the same request is fine later.
    if rate_limited:
        return True
    # 5xx (500 UNKNOWN_ERROR, 504 TIMEOUT, a proxy's 502/503), 408 and 425 are temporary
    # (the one rule the loader shares), but the server may have acted before failing: only
    # an idempotent request is repeated. Any other 4xx is the caller's mistake; repeating
    # it cannot help.
    return idempotent and is_temporary_status(status)


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """The ``Retry-After`` header in seconds (delta-seconds or an HTTP date), or ``None``.

    An HTTP date is measured from ``now``: pass the server's ``Date`` (see
    :func:`server_date`), so that a skewed local clock cannot turn a short pause into a
    long one or none; the local clock is used when ``now`` is ``None``. A value that is not
    a finite number of seconds (``inf``, ``1e400``, ``nan``) is refused as unreadable:
    ``None``, as if the server had given no hint.
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = (_aware(when) - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def server_date(response: httpx.Response | Received) -> datetime | None:
    """The server's clock from a response's ``Date`` header, or ``None`` (absent, bad)."""
    value = response.headers.get("Date")
    if value is None:
        return None
    try:
        return _aware(parsedate_to_datetime(value))
    except (TypeError, ValueError):
        return None


def _aware(when: datetime) -> datetime:
    # An HTTP date is GMT by definition; parsedate_to_datetime leaves "-0000" naive.
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


# --------------------------------------------------------------------------------------
# The base client
# --------------------------------------------------------------------------------------


#: The keyword options and behaviour shared by :class:`Client` and :class:`AsyncClient`;
#: each appends it to its own first line, so the two docstrings cannot drift apart.
CLIENT_DOC = """\
``base_url``, ``username``, ``password``, ``max_retries``, ``timeout`` and
``max_response_bytes`` default to ``GP_BASE_URL``, ``GP_USERNAME``, ``GP_PASSWORD``,
``GP_MAX_RETRIES``, ``GP_TIMEOUT`` (seconds, or ``connect,read``) and
``GP_MAX_RESPONSE_BYTES`` from the environment, else from ``env_file`` (``.env``; ``None``
skips it), else (the last three) the defaults. The password is kept as a
:class:`~pydantic.SecretStr`.

Keyword options: ``timeout`` (seconds for the whole call, retries and waits included; or
per-phase values, a ``(connect, read)`` pair or an :class:`httpx.Timeout`, and the call
then ends within connect + read; never ``None``), ``max_retries``, ``max_response_bytes``
(the largest answer read; past it :class:`~gptools.errors.ResponseTooLargeError`, while
it streams), ``legacy_campaign_path``
(use ``/freeround/campaign``), ``rate_tiers`` (the rate table to respect; ``()`` turns
client-side limiting off), ``rate_limit_status``, ``retry_after_ceiling``,
``backoff_base``/``backoff_cap``, ``rng`` (a seeded :class:`random.Random` for
reproducible jitter), ``batch_participant_path``, ``webhook_subscription_path``,
``campaign_field_names`` (renames assumed campaign JSON fields, e.g.
``{"startDate": "validFrom"}``), ``participant_retries`` (repeat a participant addition
after a lost answer or a 5xx; default ``spec.PARTICIPANT_ADDITION_IDEMPOTENT``, assumed:
re-adding is harmless) and
``transport`` (an :class:`httpx.BaseTransport`; for :class:`AsyncClient` an
:class:`httpx.AsyncBaseTransport`, aiohttp's by default, ``httpx.AsyncHTTPTransport()`` for
httpx's own), ``brand`` (the brand every call acts on, as :meth:`brand` gives). Defaults
live in :mod:`gptools.client._constants` and :mod:`gptools.spec`.
``server_identity`` names the server for the participant loader's journals (see
:attr:`~BaseClient.server_identity`; default: the normalised base URL).

The account's principal type is learned from ``GET /self`` on first use and cached; it
decides the path form and the local brand checks. Every method takes ``brand=`` and
``timeout=``. ``client.brand(ID)`` and ``client.with_options(brand=..., timeout=...,
max_retries=...)`` return a client of the same class that shares this one's connection
pool, rate limiter, counters and ``GET /self`` answer.
"""


class BaseClient:
    """Settings and every non-I/O step of a request; see :class:`~gptools.client.Client`."""

    def __init__(
        self,
        base_url: str | None = None,
        username: str | None = None,
        password: str | SecretStr | None = None,
        *,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
        max_retries: int | NotGiven = NOT_GIVEN,
        max_response_bytes: int | NotGiven = NOT_GIVEN,
        legacy_campaign_path: bool = False,
        rate_tiers: Sequence[spec.RateTier] = spec.RATE_TIERS,
        rate_limit_status: int = spec.RATE_LIMIT_STATUS,
        retry_after_ceiling: float = C.RETRY_AFTER_CEILING,
        backoff_base: float = C.BACKOFF_BASE,
        backoff_cap: float = C.BACKOFF_CAP,
        rng: random.Random | None = None,
        batch_participant_path: str = spec.ENDPOINT_BATCH_PARTICIPANT_TEMPLATE,
        webhook_subscription_path: str = spec.ENDPOINT_WEBHOOK_SUBSCRIPTION,
        campaign_field_names: Mapping[str, str] | None = None,
        participant_retries: bool = spec.PARTICIPANT_ADDITION_IDEMPOTENT,
        env_file: str | Path | None = ".env",
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
        brand: int | None = None,
        server_identity: str | None = None,
    ) -> None:
        if timeout is None:
            as_timeout(timeout)  # refused with its message: None is not "not given" here
        self.settings = ClientSettings.resolve(
            base_url,
            username,
            password,
            env_file=env_file,
            max_retries=(
                None if isinstance(max_retries, NotGiven) else _checked_max_retries(max_retries)
            ),
            timeout=None if isinstance(timeout, NotGiven) else timeout,
            max_response_bytes=(
                None
                if isinstance(max_response_bytes, NotGiven)
                else checked_max_response_bytes(max_response_bytes)
            ),
        )
        self.timeout = self.settings.timeout
        #: Seconds a whole call may take, retries and waits included (see ``timeout``).
        self.deadline = self.settings.deadline
        self.max_retries = self.settings.max_retries
        #: The largest answer read, in bytes.
        self.max_response_bytes = self.settings.max_response_bytes
        #: The brand every call acts on (``None``: each call's ``brand=``, see :meth:`brand`).
        self.brand_id = None if brand is None else _checked_brand(brand)
        self._server_identity = _checked_identity(server_identity, self.settings.base_url)
        self.legacy_campaign_path = legacy_campaign_path
        self.rate_limit_status = rate_limit_status
        if not 0 <= retry_after_ceiling < math.inf:
            raise ValueError(
                f"retry_after_ceiling must be a finite number of seconds, got {retry_after_ceiling}"
            )
        self.retry_after_ceiling = retry_after_ceiling
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.batch_participant_path = batch_participant_path
        self.webhook_subscription_path = webhook_subscription_path
        # The campaign body's date/zone/players names are assumptions; a user who learns the
        # real ones renames them here instead of patching the model.
        self.campaign_field_names = dict(campaign_field_names or {})
        # Whether re-adding a participant is harmless is not shown: by assumption it is, so
        # an addition whose answer was lost is repeated; False for a server that refuses it.
        self.participant_retries = participant_retries
        self.limiter = RateLimiter(rate_tiers)
        # Seeded by the caller for reproducible jitter; a fresh one otherwise.
        self._rng = rng if rng is not None else random.Random()
        self._shared = _Shared()
        self._setup(transport)

    def _setup(self, transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None) -> None:
        """Create the HTTP client and the wait primitives (sync or async)."""
        raise NotImplementedError

    def _must_fetch_self(self, seen: int, refresh: bool) -> bool:
        """Under the ``GET /self`` lock: whether this caller fetches. ``seen`` is the fetch
        count before it waited; a fetch that finished meanwhile is shared (its error is
        raised again, its answer used, even for ``refresh``)."""
        shared = self._shared
        if shared.self_fetches != seen:
            if shared.self_error is not None:
                raise shared.self_error
            return shared.self_info is None
        return shared.self_info is None or refresh

    def __repr__(self) -> str:
        brand = "" if self.brand_id is None else f", brand={self.brand_id}"
        return (
            f"{type(self).__name__}(base_url={self.settings.base_url!r}, "
            f"username={self.settings.username!r}{brand})"
        )

    # ----------------------------------------------------------------------------------
    # Views: the same client with other options
    # ----------------------------------------------------------------------------------

    def with_options(
        self,
        *,
        brand: int | NotGiven | None = NOT_GIVEN,
        timeout: TimeoutTypes | NotGiven = NOT_GIVEN,
        max_retries: int | NotGiven = NOT_GIVEN,
        server_identity: str | NotGiven = NOT_GIVEN,
    ) -> Self:
        """A client of the same class with the options given changed, the rest kept.

        ``brand`` binds every call to one brand (``None`` unbinds it); ``timeout``,
        ``max_retries`` and ``server_identity`` are those of the constructor. The new
        client shares this one's connection pool, rate limiter, counters (:attr:`stats`
        counts the requests of both) and ``GET /self`` answer, so the two act as one towards
        the server: their requests together stay within the rate tiers. Closing either
        closes the pool of both; make views freely, close the client once.
        """
        # A shallow copy: the pool, the limiter and the wait primitives are the same
        # objects, and what a client replaces rather than changes lives in ``_shared``.
        view = copy.copy(self)
        if not isinstance(brand, NotGiven):
            view.brand_id = None if brand is None else _checked_brand(brand)
        if not isinstance(timeout, NotGiven):
            view.timeout, view.deadline = as_timeout(timeout), call_deadline(timeout)
        if not isinstance(max_retries, NotGiven):
            view.max_retries = _checked_max_retries(max_retries)
        if not isinstance(server_identity, NotGiven):
            view._server_identity = _checked_identity(server_identity, self.settings.base_url)
        return view

    def brand(self, brand_id: int) -> Self:
        """This client acting on brand ``brand_id`` in every call: ``with_options(brand=)``."""
        return self.with_options(brand=brand_id)

    def effective_brand(self, brand: int | None = None) -> int | None:
        """The brand a call given ``brand=`` acts on: ``brand``, else this client's own
        (:attr:`brand_id`, ``None`` when unbound). A brand that differs from the client's
        own raises :class:`ValueError`: use ``with_options(brand=...)`` to change it."""
        if brand is None:
            return self.brand_id
        brand = _checked_brand(brand)
        if self.brand_id is not None and brand != self.brand_id:
            raise ValueError(
                f"brand={brand} conflicts with the client's brand {self.brand_id}; "
                f"use client.with_options(brand={brand}) to act on another brand"
            )
        return brand

    @property
    def base_url(self) -> str:
        """The API's base address (no credentials)."""
        return self.settings.base_url

    @property
    def server_identity(self) -> str:
        """What names the server this client talks to, whatever port it listens on: the
        ``server_identity=`` given at construction (:func:`gptools.session.connect` gives
        a sandbox's state identity, which a reset replaces), else the normalised base URL.
        The participant loader trusts a journal only for the same identity."""
        return self._server_identity

    @property
    def stats(self) -> ClientStats:
        """A snapshot of the counters: requests, retries, rate_limited, wait_seconds, ...
        (one set for a client and all its views)."""
        return self._shared.stats

    def _count(self, name: str, amount: float = 1) -> None:
        shared = self._shared
        with shared.lock:
            shared.stats = replace(shared.stats, **{name: getattr(shared.stats, name) + amount})

    @property
    def _self_info(self) -> SelfInfo | None:
        # The cached GET /self answer, one for a client and its views.
        return self._shared.self_info

    @_self_info.setter
    def _self_info(self, info: SelfInfo | None) -> None:
        self._shared.self_info = info

    def _auth(self) -> httpx.BasicAuth:
        return httpx.BasicAuth(self.settings.username, self.settings.password.get_secret_value())

    def _timeout_for(self, timeout: TimeoutTypes | NotGiven) -> tuple[httpx.Timeout, Deadline]:
        """A call's per-phase time-outs and its deadline, which starts now."""
        if isinstance(timeout, NotGiven):
            return self.timeout, Deadline.start(self.deadline)
        return as_timeout(timeout), Deadline.start(call_deadline(timeout))

    # ----------------------------------------------------------------------------------
    # Paths
    # ----------------------------------------------------------------------------------

    def url_of(self, path: str, params: Mapping[str, str] | None = None) -> str:
        """The full URL of an API path, as shown in errors and logs (no credentials)."""
        return safe_url(httpx.URL(self.settings.base_url + path, params=params))

    def _campaign_endpoint(self) -> str:
        if self.legacy_campaign_path:
            return spec.ENDPOINT_LEGACY_CAMPAIGN
        return spec.ENDPOINT_CAMPAIGN

    def _brand_path(self, method: str, endpoint: str, brand: int | None, info: SelfInfo) -> str:
        """The path of ``endpoint`` in the form the account's principal type calls for.

        Raises BRAND_REQUIRED / BRAND_NOT_ALLOWED locally (``sent=False``) where the
        document says the server would refuse; INTERNAL and unknown types are left to the
        server.
        """
        brand = self.effective_brand(brand)
        principal = info.principal_type
        checked = principal in spec.KNOWN_PRINCIPAL_TYPES and principal != spec.PRINCIPAL_INTERNAL
        if brand is None:
            path = f"{spec.API_PREFIX}/{endpoint}"
            if principal in spec.EXPLICIT_ONLY_PRINCIPALS:
                raise BrandRequiredError(
                    f"{principal} accounts must name a brand; allowed: {_brand_list(info)}. "
                    "Pass brand=ID or use client.brand(ID)",
                    code=spec.CODE_BRAND_REQUIRED,
                    method=method,
                    url=self.url_of(path),
                    sent=False,
                )
            return path
        path = spec.BRAND_PREFIX_TEMPLATE.format(brand_id=brand) + f"/{endpoint}"
        if checked and brand not in info.brand_ids:
            raise BrandNotAllowedError(
                f"brand {brand} is not among this account's allowed brands: {_brand_list(info)}",
                code=spec.CODE_BRAND_NOT_ALLOWED,
                method=method,
                url=self.url_of(path),
                sent=False,
            )
        return path

    def _call(
        self,
        method: str,
        path: str,
        model: type[M],
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        idempotent: bool = True,
    ) -> Call[M]:
        return Call(
            method, path, model, params, body, self.limiter.tiers_for(method, path), idempotent
        )

    # ----------------------------------------------------------------------------------
    # Operations (request building only)
    # ----------------------------------------------------------------------------------

    def _build_self(self) -> Call[SelfInfo]:
        return self._call("GET", spec.SELF_PATH, SelfInfo)

    def _build_configurations(
        self, game_id: str | None, currency_code: str | None, brand: int | None, info: SelfInfo
    ) -> Call[AwardedFeatureConfigurations]:
        params = {
            k: v
            for k, v in ((spec.QUERY_GAME_ID, game_id), (spec.QUERY_CURRENCY_CODE, currency_code))
            if v is not None
        }
        path = self._brand_path("GET", spec.ENDPOINT_AWARDED_FEATURE_CONFIGURATIONS, brand, info)
        return self._call("GET", path, AwardedFeatureConfigurations, params=params)

    def _build_game(self, game_id: str, brand: int | None, info: SelfInfo) -> Call[Game]:
        path = self._brand_path("GET", spec.ENDPOINT_GAME, brand, info)
        return self._call("GET", path, Game, params={spec.QUERY_GAME_ID: game_id})

    def _build_create_campaign(
        self, request: CampaignRequest, brand: int | None, info: SelfInfo
    ) -> Call[CampaignCreated]:
        if not isinstance(request, CampaignRequest):
            raise TypeError(f"create_campaign needs a models.CampaignRequest, got {request!r}")
        if self.legacy_campaign_path and request.type not in spec.LEGACY_CAMPAIGN_TYPES:
            raise ValueError(
                f"the legacy {spec.ENDPOINT_LEGACY_CAMPAIGN} path serves "
                f"{', '.join(spec.LEGACY_CAMPAIGN_TYPES)} campaigns (spec.LEGACY_CAMPAIGN_TYPES, "
                f"assumed); create {request.type} on the unified path "
                "(Client(legacy_campaign_path=False))"
            )
        if request.request_id is None:
            # The idempotency key makes the creation safe to retry: every attempt sends the
            # same one, so the server creates the campaign at most once.
            request = request.model_copy(update={"request_id": str(uuid.uuid4())})
        path = self._brand_path("POST", self._campaign_endpoint(), brand, info)
        body = request.to_wire(rename=self.campaign_field_names)
        return self._call(
            "POST", path, CampaignCreated, body=body, idempotent=request.request_id is not None
        )

    def _build_participants(
        self,
        template: str,
        campaign_id: str,
        player_ids: Sequence[str],
        brand: int | None,
        info: SelfInfo,
        *,
        max_ids: int | None = None,
    ) -> Call[ParticipantsAdded]:
        if not isinstance(campaign_id, str) or not campaign_id:
            raise ValueError(f"campaign_id must be a non-empty string, got {campaign_id!r}")
        if isinstance(player_ids, str):
            raise TypeError("player_ids must be a sequence of player ids, not a single string")
        ids = list(player_ids)
        if not ids:
            raise ValueError("player_ids is empty: name at least one player to add")
        bad = next((i for i, p in enumerate(ids) if not isinstance(p, str) or not p), None)
        if bad is not None:
            raise ValueError(f"player_ids[{bad}] must be a non-empty string, got {ids[bad]!r}")
        if max_ids is not None and len(ids) > max_ids:
            raise ValueError(
                f"{len(ids)} player ids in one batch; the limit is {max_ids} "
                "(spec.BATCH_PARTICIPANT_MAX_IDS, assumed; override with max_ids=)"
            )
        endpoint = template.format(
            campaign=self._campaign_endpoint(), campaign_id=quote(campaign_id, safe="")
        )
        path = self._brand_path("POST", endpoint, brand, info)
        return self._call(
            "POST",
            path,
            ParticipantsAdded,
            body=dumps_wire({spec.FIELD_PLAYER_IDS: ids}),
            idempotent=self.participant_retries,
        )

    def _build_add_participants(
        self, campaign_id: str, player_ids: Sequence[str], brand: int | None, info: SelfInfo
    ) -> Call[ParticipantsAdded]:
        return self._build_participants(
            spec.ENDPOINT_PARTICIPANT_TEMPLATE, campaign_id, player_ids, brand, info
        )

    def _build_add_participants_batch(
        self,
        campaign_id: str,
        player_ids: Sequence[str],
        brand: int | None,
        info: SelfInfo,
        max_ids: int,
    ) -> Call[ParticipantsAdded]:
        return self._build_participants(
            self.batch_participant_path, campaign_id, player_ids, brand, info, max_ids=max_ids
        )

    def _build_subscription(
        self,
        method: str,
        subscription: WebhookSubscription | None,
        brand: int | None,
        info: SelfInfo,
    ) -> Call[WebhookSubscriptionInfo]:
        if method != "GET" and not isinstance(subscription, WebhookSubscription):
            # An answer (WebhookSubscriptionInfo) carries no secrets, at most their masks:
            # sending it back would replace the real key with "****".
            raise TypeError(
                f"{method} needs a models.WebhookSubscription with the real secrets, got "
                f"{type(subscription).__name__} (WebhookSubscriptionInfo.to_subscription("
                "api_key=...) builds one from an answer)"
            )
        path = self._brand_path(method, self.webhook_subscription_path, brand, info)
        body = subscription.to_wire() if subscription is not None else None
        # A second creation is refused once the first got through, so only GET and PUT
        # are repeated after an ambiguous failure.
        return self._call(
            method, path, WebhookSubscriptionInfo, body=body, idempotent=method != "POST"
        )

    # ----------------------------------------------------------------------------------
    # After an attempt: parse, map the error, decide on a retry
    # ----------------------------------------------------------------------------------

    def _headers(self, call: Call[M]) -> Mapping[str, str] | None:
        return _JSON_HEADERS if call.body is not None else None

    def _build_request(
        self,
        http: httpx.Client | httpx.AsyncClient,
        call: Call[M],
        phases: httpx.Timeout,
        deadline: Deadline,
    ) -> httpx.Request:
        """One attempt's request, its time-outs cut to what is left of the call's deadline
        (the same for both clients; only sending it differs)."""
        return http.build_request(
            call.method,
            call.path,
            params=call.params,
            content=call.body,
            headers=self._headers(call),
            timeout=deadline.phases(phases),
        )

    def _read_answer(self, call: Call[M], response: Received, attempt: int) -> Answer:
        """Read an answer once, for the retry decision and for the rate limiter alike."""
        status = response.status
        if 200 <= status <= 299:
            return NO_ANSWER
        retry_after = parse_retry_after(
            response.headers.get("Retry-After"), now=server_date(response)
        )
        error = self._error(call, response, attempt, retry_after)
        rate_limited = is_rate_limited(status, error.code, rate_limit_status=self.rate_limit_status)
        if not rate_limited:
            return Answer(error, retry_after=retry_after)
        self._count("rate_limited")
        pause = None if retry_after is None else min(retry_after, self.retry_after_ceiling)
        return Answer(error, True, retry_after, pause)

    def _after_response(
        self,
        call: Call[M],
        response: Received,
        attempt: int,
        answer: Answer,
        deadline: Deadline,
    ) -> M | Retry:
        """The parsed result of a 2xx, or a :class:`Retry`; raises the final error.
        ``answer`` is :meth:`_read_answer` of the same response."""
        status = response.status
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s %s -> %d", call.method, self.url_of(call.path, call.params), status)
        error = answer.error
        if error is None:
            return self._parse(call, response, attempt)
        if not should_retry(status, rate_limited=answer.rate_limited, idempotent=call.idempotent):
            raise error
        if attempt >= self.max_retries:
            raise error
        retry_after = answer.retry_after
        if retry_after is not None and retry_after > self.retry_after_ceiling:
            # Sleeping that long would look like a hang; the caller decides instead.
            raise error
        delay = retry_after if retry_after is not None else self._backoff(attempt)
        if delay >= deadline.remaining():
            raise error  # the retry could not be answered within the call's deadline
        self._log_retry(
            call, f"HTTP {status}" + (f" {error.code}" if error.code else ""), attempt, delay
        )
        return Retry(delay)

    def _after_transport_error(
        self, call: Call[M], exc: httpx.TransportError, attempt: int, deadline: Deadline
    ) -> Retry:
        """A :class:`Retry` after a connection error or time-out; raises the final error."""
        self._count("transport_errors")
        reached = not isinstance(exc, _NOT_SENT)
        if isinstance(exc, httpx.TimeoutException) and deadline.passed():
            reason = f"no complete answer within the call's deadline of {deadline.seconds:g} s"
        elif reached:
            reason = self._blank(_describe(exc))  # a parser's complaint may quote the answer
        else:
            reason = f"cannot connect to {self.settings.base_url}: {connect_failure(exc)}"
        final = attempt >= self.max_retries or not should_retry(
            None, rate_limited=False, idempotent=call.idempotent, reached=reached
        )
        delay = 0.0 if final else self._backoff(attempt)
        if final or delay >= deadline.remaining():
            raise TransportError(
                reason,
                method=call.method,
                url=self.url_of(call.path, call.params),
                retries=attempt,
                sent=reached,
            ) from exc
        self._log_retry(call, reason, attempt, delay)
        return Retry(delay)

    def _backoff(self, attempt: int) -> float:
        return backoff_delay(attempt, self._rng, base=self.backoff_base, cap=self.backoff_cap)

    def _log_retry(self, call: Call[M], reason: str, attempt: int, delay: float) -> None:
        self._count("retries")
        log.info(
            "retry %d of %d for %s %s after %s, in %.2f s",
            attempt + 1,
            self.max_retries,
            call.method,
            self.url_of(call.path, call.params),
            reason,
            delay,
        )

    def _parse(self, call: Call[M], response: Received, retries: int) -> M:
        content = response.content
        try:
            data = loads_answer(content) if content.strip() else {}
            result = call.model.model_validate(data)
        except ValueError as exc:  # bad JSON or a shape the model refuses
            expected = call.model.EXPECTED or f"a valid {call.model.__name__}"
            raise ApiError(
                f"unexpected answer from {call.method} {call.path}: expected {expected}; "
                f"{self._blank(_problems(exc))}",
                status=response.status,
                method=call.method,
                url=self.url_of(call.path, call.params),
                body=self._blank(response.text[:2000]),
                retries=retries,
            ) from exc
        result._retries = retries
        return result

    def _blank(self, text: str) -> str:
        """``text``, which a server wrote, with credentials blanked: a server may echo the
        request's ``Authorization`` header, or a password it was given, in its answer."""
        forms = credential_forms(self.settings.username, self.settings.password.get_secret_value())
        return blank_credentials(text, forms)

    def _error(
        self, call: Call[M], response: Received, retries: int, retry_after: float | None
    ) -> ApiError:
        raw = self._blank(response.text)
        body: ErrorBody | None = None
        try:
            # A cut body is not the documented JSON, whatever its first bytes say.
            data = None if response.truncated else loads_answer(response.content)
            if isinstance(data, dict):
                fields = ErrorBody.model_validate(data)
                body = fields.model_copy(
                    update={
                        name: self._blank(value)
                        for name, value in fields.model_dump().items()
                        if isinstance(value, str)
                    }
                )
        except ValueError:
            body = None  # not the documented JSON: from_body keeps the raw text instead
        return ApiError.from_body(
            response.status,
            body,
            raw=raw,
            method=call.method,
            url=self.url_of(call.path, call.params),
            retries=retries,
            retry_after=retry_after,
            rate_limit_status=self.rate_limit_status,
        )


def _problems(exc: ValueError) -> str:
    """A one-line account of why an answer did not parse."""
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the answer'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
    return f"not JSON ({exc})"


def _checked_brand(brand: object) -> int:
    """``brand`` if it is a brand id; a one-line TypeError/ValueError otherwise."""
    if isinstance(brand, bool) or not isinstance(brand, int):
        raise TypeError(f"brand must be an integer brand id, got {brand!r}")
    if not spec.is_brand_id(brand):
        raise ValueError(f"brand {brand} is outside int32, the type of a brand id")
    return brand


#: The longest ``server_identity`` accepted (it is written into every journal).
_MAX_IDENTITY_LENGTH = 512


def _checked_identity(identity: str | None, base_url: str) -> str:
    """``identity`` if it is a usable server identity; the normalised ``base_url`` for
    ``None``; a one-line TypeError/ValueError otherwise."""
    if identity is None:
        return normalised_url(base_url)
    if not isinstance(identity, str):
        raise TypeError(f"server_identity must be a string, got {type(identity).__name__}")
    if not identity.strip() or len(identity) > _MAX_IDENTITY_LENGTH or not identity.isprintable():
        raise ValueError(
            f"server_identity must be 1 to {_MAX_IDENTITY_LENGTH} printable characters, "
            f"got {identity!r:.80}"
        )
    return identity


def _checked_max_retries(max_retries: int) -> int:
    if max_retries < 0:
        raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
    return max_retries


def _brand_list(info: SelfInfo) -> str:
    if not info.allowed_brands:
        return "none"
    return ", ".join(f"{b.id} ({b.name})" for b in info.allowed_brands)


def connect_failure(exc: BaseException) -> str:
    """Why a connection could not be had, in a few words ("connection refused"), the same
    on every transport: read from the operating system's error under ``exc``."""
    if isinstance(exc, httpx.PoolTimeout):
        return "no free connection in time (pool time-out)"
    if isinstance(exc, httpx.ConnectTimeout):
        return "no connection in time (connect time-out)"
    seen: set[int] = set()
    cause: BaseException | None = exc
    os_error: OSError | None = None
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError) or (
            isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED
        ):
            return "connection refused"
        if isinstance(cause, OSError) and cause.strerror:
            os_error = cause
        cause = cause.__cause__ or cause.__context__
    if os_error is not None and os_error.strerror:
        return os_error.strerror[:1].lower() + os_error.strerror[1:]
    return _describe(exc) if isinstance(exc, httpx.TransportError) else str(exc)


def _describe(exc: httpx.TransportError) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
