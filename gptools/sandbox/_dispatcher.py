"""The provider's webhook side: deliver game events to a receiver, the document's way.

Semantics (API document, "Acknowledgement and retries", with the assumed values of
:mod:`gptools.spec`):

- 2xx: delivered, done (the document names 200; every 2xx by assumption,
  ``spec.WEBHOOK_ACKNOWLEDGED_STATUSES``).
- 4xx: permanent failure, never retried (the action is "refused").
- 5xx, a time-out (no answer within ``timeout``), a connection failure and, by
  assumption, any other status (1xx, 3xx): retried after ``first_delay`` × ``factor`` ** (n − 1),
  capped at ``max_delay``, until ``retry_window`` (7 days) after the first attempt; a
  retry that would fall later is not made (the action "expired").
- A receiver that answers after the time-out has processed the delivery but gets it again:
  the realistic cause of duplicates.
- Without a callback URL (or without a subscription) deliveries go to
  ``{wallet_url}/v1/game-action-events`` "using the authentication credentials already
  configured for the account's wallet" (:class:`WalletCredentials`), never the
  subscription's own authentication type.

Time is simulated. With :class:`VirtualClock` the dispatcher jumps from one due time to
the next (7 days of retries take no real time); with :class:`ScaledClock` simulated time
runs ``scale`` times faster than real time. Each request carries its simulated send time in
the ``X-Sandbox-Simulated-Time`` header (a sandbox-only header; the provider sends none)
so a receiver in a demo can log simulated times.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import json
import os
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

import httpx

from gptools import spec
from gptools.models import GameEventNotification

#: The header carrying the simulated send time (ISO 8601 UTC with ``Z``).
SIMULATED_TIME_HEADER = "X-Sandbox-Simulated-Time"

Outcome = Literal["delivered", "refused", "expired"]


class SimClock(Protocol):
    """The dispatcher's simulated clock."""

    def now(self) -> datetime:
        """The current simulated time (aware UTC)."""
        ...

    def wait_until(self, moment: datetime) -> None:
        """Return once simulated time has reached ``moment``."""
        ...

    def sent_at(self, due: datetime) -> datetime:
        """The simulated time an attempt due at ``due`` is sent (called after waiting)."""
        ...

    def answered_at(self, sent: datetime, elapsed: float) -> datetime:
        """The simulated time an answer that took ``elapsed`` real seconds arrives."""
        ...


class VirtualClock:
    """Simulated time that jumps: waiting takes no real time, and a real second spent on
    an HTTP exchange counts as one simulated second. Thread-safe."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The latest simulated time reached."""
        with self._lock:
            return self._now

    def wait_until(self, moment: datetime) -> None:
        """Jump to ``moment`` (never backwards)."""
        with self._lock:
            self._now = max(self._now, moment)

    def sent_at(self, due: datetime) -> datetime:
        """Exactly when it was due."""
        return due

    def answered_at(self, sent: datetime, elapsed: float) -> datetime:
        """``sent`` plus the real time the exchange took."""
        return sent + timedelta(seconds=elapsed)


class ScaledClock:
    """Simulated time running ``scale`` times faster than real time from ``start``
    (``scale=100_800`` makes 7 days pass in 6 real seconds)."""

    def __init__(self, start: datetime, scale: float) -> None:
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        if scale <= 0:
            raise ValueError(f"scale must be positive, got {scale}")
        self.start = start.astimezone(UTC)
        self.scale = scale
        self._t0 = time.monotonic()

    def now(self) -> datetime:
        """``start`` plus the scaled real time since the clock was made."""
        return self.start + timedelta(seconds=(time.monotonic() - self._t0) * self.scale)

    def wait_until(self, moment: datetime) -> None:
        """Sleep the real time it takes simulated time to reach ``moment``."""
        ahead = (moment - self.now()).total_seconds()
        if ahead > 0:
            time.sleep(ahead / self.scale)

    def sent_at(self, due: datetime) -> datetime:
        """Now (the due time has passed)."""
        return self.now()

    def answered_at(self, sent: datetime, elapsed: float) -> datetime:
        """Now."""
        return self.now()


@dataclass(frozen=True, slots=True)
class WalletCredentials:
    """The authentication already configured for the account's wallet, which deliveries to
    the default endpoint ``{wallet_url}/v1/game-action-events`` use (their kind is an
    assumption, ``spec.WALLET_CREDENTIALS``: BEARER, BASIC or NONE like a subscription).

    ``authorization`` is the ``Authorization`` header value; it is kept out of the repr.
    """

    authentication_type: str = "NONE"
    authorization: str | None = field(default=None, repr=False)

    @classmethod
    def bearer(cls, api_key: str) -> WalletCredentials:
        """The wallet's API key, sent as a Bearer token."""
        return cls("BEARER", f"Bearer {api_key}")

    @classmethod
    def basic(cls, username: str, password: str) -> WalletCredentials:
        """The wallet's HTTP Basic username and password."""
        return cls("BASIC", _basic(username, password))


@dataclass(frozen=True, slots=True)
class DeliveryTarget:
    """Where and how deliveries go: the URL and the ``Authorization`` value (or none).

    ``authorization`` is kept out of the repr: it is a secret.
    """

    url: str
    authentication_type: str = "NONE"
    authorization: str | None = field(default=None, repr=False)

    @classmethod
    def from_subscription(
        cls,
        subscription: Mapping[str, Any],
        wallet_url: str | None = None,
        wallet_credentials: WalletCredentials | None = None,
    ) -> DeliveryTarget:
        """A target from a subscription body (camelCase wire fields, secrets in clear).

        Without ``callbackUrl`` (or without a subscription: ``{}``) the deliveries go to
        ``{wallet_url}/v1/game-action-events`` "using the authentication credentials already
        configured for the account's wallet": ``wallet_credentials``, whatever the
        subscription's own type says."""
        url = subscription.get("callbackUrl")
        if not url:
            wallet = wallet_credentials or WalletCredentials()
            return cls(_default_url(wallet_url), wallet.authentication_type, wallet.authorization)
        kind = str(subscription.get("authenticationType") or "NONE").upper()
        if kind == "BEARER":
            return cls(url, kind, f"Bearer {_secret(subscription.get('apiKey'))}")
        if kind == "BASIC":
            return cls(
                url,
                kind,
                _basic(
                    str(subscription.get("username", "")), _secret(subscription.get("password"))
                ),
            )
        return cls(url, "NONE")


def _basic(username: str, password: str) -> str:
    pair = f"{username}:{password}"
    return "Basic " + base64.b64encode(pair.encode()).decode("ascii")


def _secret(value: object) -> str:
    reveal = getattr(value, "get_secret_value", None)
    return str(reveal() if callable(reveal) else (value or ""))


def _default_url(wallet_url: str | None) -> str:
    if not wallet_url:
        raise ValueError(
            "no callback URL in the subscription and no wallet_url configured: nowhere to deliver"
        )
    return wallet_url.rstrip("/") + spec.DEFAULT_WEBHOOK_PATH


@dataclass(frozen=True, slots=True)
class Attempt:
    """One delivery attempt: the action, its attempt number (1-based), target URL,
    simulated send time, the status answered (``None`` for a time-out or connection
    failure, then ``error`` says which) and the real seconds it took."""

    action_id: str
    number: int
    url: str
    sent_at: datetime
    status: int | None
    error: str | None
    elapsed: float
    #: The receiver acknowledged it as a repeat of an action it had already stored (a
    #: gptools receiver says so in its answer, ``{"status": "duplicate", ...}``).
    duplicate: bool = False


@dataclass(slots=True)
class _Pending:
    event: GameEventNotification
    body: bytes
    target: DeliveryTarget
    first_due: datetime
    attempts: int = 0


@dataclass(frozen=True, slots=True)
class DispatchReport:
    """What a :meth:`WebhookDispatcher.run` did: outcomes by action and attempt counts."""

    outcomes: Mapping[str, Outcome]
    attempts: int
    statuses: Mapping[str, int]
    #: Acknowledgements the receiver gave as duplicates (see :attr:`Attempt.duplicate`).
    duplicates: int = 0

    @property
    def counts(self) -> dict[str, int]:
        """How many actions ended delivered, refused and expired."""
        counter = Counter(self.outcomes.values())
        return {k: counter.get(k, 0) for k in ("delivered", "refused", "expired")}

    def to_dict(self) -> dict[str, Any]:
        """The counts, JSON-ready: ``attempts``, ``statuses`` (answer -> attempts), each
        outcome of :attr:`counts`, ``duplicates`` (what ``gptools sandbox deliver --json``
        and ``play --json`` print)."""
        return {
            "attempts": self.attempts,
            "statuses": dict(self.statuses),
            **self.counts,
            "duplicates": self.duplicates,
        }

    def failure(self, url: str, expected: int, first_error: str) -> str | None:
        """Why this delivery to ``url`` failed as a whole, in one line, or ``None``: no
        attempt got an answer (``first_error`` names the first one's error), or none of
        the ``expected`` events was acknowledged (with :meth:`refusal_hint`)."""
        if self.attempts and set(self.statuses) == {"no answer"}:
            return (
                f"no answer from {url} on any of {self.attempts} attempts (first: "
                f"{first_error}); is the receiver running there?"
            )
        if expected and self.counts["delivered"] == 0:
            answers = ", ".join(f"{k}×{v}" for k, v in sorted(self.statuses.items()))
            return (
                f"the receiver at {url} acknowledged none of {expected} events (answers "
                f"{answers}); {self.refusal_hint()}"
            )
        return None

    def refusal_hint(self) -> str:
        """What the answers of a delivery that nothing acknowledged suggest to check
        (the options named are ``gptools webhooks serve``'s and ``sandbox deliver``'s)."""
        codes = {int(k) for k in self.statuses if k.isdigit()}
        hints = []
        if codes & {401, 403}:
            hints.append(
                "wrong key or credentials? --auth and GP_WEBHOOK_* must match the receiver's"
            )
        if codes & {404, 405}:
            hints.append("wrong path? --url must end with the receiver's --path")
        if 413 in codes:
            hints.append("the receiver's --max-body-bytes is below an event's size")
        if codes & {400, 415, 422}:
            hints.append("the receiver refuses the events' content; is it a gptools receiver?")
        if any(c >= 500 for c in codes):
            hints.append("the receiver is failing; see its log")
        return "; ".join(hints) or "see the receiver's log"

    def summary(self) -> str:
        """The counts in one line, the answers sorted (``3 attempts: delivered 2, refused
        0, expired 0, duplicates 1; answers 200×2, 503×1``)."""
        answers = ", ".join(f"{k}×{v}" for k, v in sorted(self.statuses.items()))
        outcomes = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        return (
            f"{self.attempts} attempts: {outcomes}, duplicates {self.duplicates}; answers {answers}"
        )


class WebhookDispatcher:
    """Delivers queued events with the provider's retry semantics on a simulated clock.

    ``target`` fixes one destination; otherwise each brand's is read from
    ``subscriptions`` (brand id -> subscription body, read when an event is queued, e.g. the
    sandbox's live ``state.subscriptions``) with ``wallet_url`` for the default endpoint.
    ``concurrency`` attempts run at once, taken from those due within ``round_window`` of
    the earliest one. ``transport`` is for an in-process receiver (an ASGI transport).
    ``ca_bundle`` (a PEM file) is the certificate authority an HTTPS receiver's certificate
    is verified against, instead of the system's (e.g. a private CA).
    """

    def __init__(
        self,
        *,
        clock: SimClock,
        target: DeliveryTarget | None = None,
        subscriptions: Mapping[int, Mapping[str, Any]] | None = None,
        wallet_url: str | None = None,
        wallet_credentials: WalletCredentials | None = None,
        first_delay: timedelta = spec.WEBHOOK_RETRY_FIRST_DELAY,
        factor: float = spec.WEBHOOK_RETRY_FACTOR,
        max_delay: timedelta = spec.WEBHOOK_RETRY_MAX_DELAY,
        retry_window: timedelta = spec.WEBHOOK_RETRY_WINDOW,
        timeout: timedelta = spec.WEBHOOK_SENDER_TIMEOUT,
        retry_other_status: bool = spec.WEBHOOK_OTHER_STATUS_RETRIED,
        concurrency: int = 8,
        round_window: timedelta = timedelta(0),
        transport: httpx.BaseTransport | None = None,
        on_attempt: Callable[[Attempt], None] | None = None,
        ca_bundle: str | os.PathLike[str] | None = None,
    ) -> None:
        if factor < 1:
            raise ValueError(f"factor must be at least 1 (exponential backoff), got {factor}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.clock = clock
        self.target = target
        self.subscriptions = subscriptions if subscriptions is not None else {}
        self.wallet_url = wallet_url
        self.wallet_credentials = wallet_credentials
        self.first_delay = first_delay
        self.factor = factor
        self.max_delay = max_delay
        self.retry_window = retry_window
        self.timeout = timeout
        self.retry_other_status = retry_other_status
        self.concurrency = concurrency
        self.round_window = round_window
        self.on_attempt = on_attempt
        self.attempts: list[Attempt] = []
        self.outcomes: dict[str, Outcome] = {}
        self._heap: list[tuple[datetime, int, _Pending]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._http = httpx.Client(
            timeout=timeout.total_seconds(),
            transport=transport,
            # Always verified: against the given CA bundle, else the system's store.
            verify=ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def __enter__(self) -> WebhookDispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schedule ---------------------------------------------------------------------

    def delay_after(self, attempt: int) -> timedelta:
        """The wait after failed attempt number ``attempt`` (1-based) before the next."""
        seconds = self.first_delay.total_seconds() * self.factor ** (attempt - 1)
        return min(timedelta(seconds=seconds), self.max_delay)

    def target_for(self, brand_id: int | None) -> DeliveryTarget:
        """The destination of a brand's deliveries (its subscription, or the default)."""
        if self.target is not None:
            return self.target
        subscription = self.subscriptions.get(brand_id, {}) if brand_id is not None else {}
        return DeliveryTarget.from_subscription(
            subscription, self.wallet_url, self.wallet_credentials
        )

    def enqueue(
        self,
        event: GameEventNotification,
        *,
        brand_id: int | None = None,
        at: datetime | None = None,
    ) -> None:
        """Queue ``event`` for delivery at ``at`` (default: its own timestamp)."""
        due = at or event.timestamp
        pending = _Pending(event, event.to_wire(), self.target_for(brand_id), due)
        with self._lock:
            heapq.heappush(self._heap, (due, next(self._seq), pending))

    @property
    def pending(self) -> int:
        """How many deliveries wait for an attempt."""
        with self._lock:
            return len(self._heap)

    # -- delivery ---------------------------------------------------------------------

    def run(self, *, until: datetime | None = None) -> DispatchReport:
        """Deliver until nothing is left to try (or simulated time passes ``until``)."""
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="webhook-dispatch") as pool:
            while True:
                with self._lock:
                    if not self._heap or (until is not None and self._heap[0][0] > until):
                        break
                    first_due = self._heap[0][0]
                self.clock.wait_until(first_due)
                horizon = max(self.clock.now(), first_due) + self.round_window
                with self._lock:
                    batch: list[tuple[datetime, _Pending]] = []
                    while (
                        self._heap and len(batch) < self.concurrency and self._heap[0][0] <= horizon
                    ):
                        due, _, item = heapq.heappop(self._heap)
                        batch.append((due, item))
                results = list(pool.map(lambda pair: self._attempt(*pair), batch))
                for (_, item), attempt in zip(batch, results, strict=True):
                    self._settle(item, attempt)
        statuses = Counter(
            str(a.status) if a.status is not None else "no answer" for a in self.attempts
        )
        return DispatchReport(
            dict(self.outcomes),
            len(self.attempts),
            dict(statuses),
            sum(a.duplicate for a in self.attempts),
        )

    def _attempt(self, due: datetime, item: _Pending) -> Attempt:
        item.attempts += 1
        sent = self.clock.sent_at(due)
        headers = {
            "Content-Type": spec.WEBHOOK_CONTENT_TYPE,
            SIMULATED_TIME_HEADER: sent.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        if item.target.authorization is not None:
            headers["Authorization"] = item.target.authorization
        started = time.perf_counter()
        status: int | None = None
        error: str | None = None
        duplicate = False
        try:
            answer = self._http.post(item.target.url, content=item.body, headers=headers)
            status = answer.status_code
            duplicate = spec.is_acknowledgement(status) and _says_duplicate(answer.content)
        except httpx.TimeoutException:
            error = "timeout"
        except httpx.TransportError as exc:
            # The reason (refused, a certificate that fails verification...) is what the
            # person running a delivery needs; httpx's text carries no header or body.
            reason = next(iter(str(exc).splitlines()), "")
            error = f"connection failed: {type(exc).__name__}" + (f": {reason}" if reason else "")
        return Attempt(
            str(item.event.action_id),
            item.attempts,
            item.target.url,
            sent,
            status,
            error,
            time.perf_counter() - started,
            duplicate,
        )

    def _settle(self, item: _Pending, attempt: Attempt) -> None:
        self.attempts.append(attempt)
        if self.on_attempt is not None:
            self.on_attempt(attempt)
        status = attempt.status
        if spec.is_acknowledgement(status):
            self.outcomes[attempt.action_id] = "delivered"
            return
        if status is not None and 400 <= status < 500:
            self.outcomes[attempt.action_id] = "refused"
            return
        if status is not None and status < 500 and not self.retry_other_status:
            self.outcomes[attempt.action_id] = "refused"
            return
        answered = self.clock.answered_at(attempt.sent_at, attempt.elapsed)
        next_due = answered + self.delay_after(item.attempts)
        if next_due - item.first_due > self.retry_window:
            self.outcomes[attempt.action_id] = "expired"
            return
        with self._lock:
            heapq.heappush(self._heap, (next_due, next(self._seq), item))


#: The longest answer body read for its duplicate mark (a receiver's answer is short).
_ANSWER_READ_BYTES = 4096


def _says_duplicate(body: bytes) -> bool:
    """Whether an acknowledgement's body is a JSON object whose ``status`` is
    ``"duplicate"`` (what a gptools receiver answers to a repeat)."""
    if len(body) > _ANSWER_READ_BYTES:
        return False
    try:
        answer = json.loads(body)
    except ValueError:
        return False
    return isinstance(answer, dict) and answer.get("status") == "duplicate"


def attach_dispatcher(sandbox: Any, **options: Any) -> WebhookDispatcher:
    """Make a dispatcher for a running sandbox and set it as ``sandbox.dispatcher``.

    Deliveries follow the sandbox's live subscriptions (``sandbox.state.subscriptions``),
    its ``wallet_url`` and its ``wallet_credentials``; ``options`` go to
    :class:`WebhookDispatcher` (``clock`` is required).
    """
    state = sandbox.state
    wallet_url = getattr(state, "wallet_url", None) or sandbox.config.wallet_url
    options.setdefault("wallet_credentials", sandbox.config.wallet_credentials)
    dispatcher = WebhookDispatcher(
        subscriptions=state.subscriptions, wallet_url=wallet_url, **options
    )
    sandbox.dispatcher = dispatcher
    return dispatcher
