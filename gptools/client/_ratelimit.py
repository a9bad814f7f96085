"""Client-side rate limiting as pure bookkeeping: no clock reads, no sleeping, no locks.

The question it answers is "may this request go now, and if not, how long must it wait for
every tier it counts against?". The sync and async clients ask it under their own lock and
do the waiting themselves, so one limiter logic serves threads and tasks alike.

Per tier it keeps a sliding window. A request occupies a place in a tier's window from the
moment it is sent until its answer has come back plus the window (1 s and a small margin).
The server counts the request at its arrival, which lies between those two instants, so a
window that is never over the limit on our side can never be over the limit on the server's
side, however the requests are delayed or reordered on the way.

AIMD: a rate-limit response means the real limit is tighter than the published one (the
document says it may be tightened), so every tier the request counted against drops to a
fraction of its current figure (multiplicative decrease, at most once per window) and pauses
for the server's ``Retry-After`` (capped by the client); each later success gives back a
little (additive increase) until the published figure is reached again.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from gptools import spec
from gptools.client import _constants as C


@dataclass(frozen=True, slots=True)
class Ticket:
    """Proof that a request was admitted; hand it back to :meth:`RateLimiter.release`."""

    tiers: tuple[str, ...]


class _Window:
    """One tier's sliding window and its current (AIMD-adjusted) figure."""

    __slots__ = ("allowed", "ends", "in_flight", "last_decrease", "limit", "paused_until")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.allowed = float(limit)
        self.ends: deque[float] = deque()  # answer times of finished requests, ascending
        self.in_flight = 0
        self.paused_until = -math.inf
        self.last_decrease = -math.inf

    def wait(self, now: float, span: float) -> float | None:
        """Seconds until one more request fits; 0 when it fits now; ``None`` when only
        requests still in flight are in the way (their answers will make room)."""
        if now < self.paused_until:
            return self.paused_until - now
        horizon = now - span
        ends = self.ends
        while ends and ends[0] <= horizon:
            ends.popleft()
        # How many places must free up before one more request fits the current figure.
        excess = len(ends) + self.in_flight - max(1, int(self.allowed)) + 1
        if excess <= 0:
            return 0.0
        if excess <= len(ends):
            return ends[excess - 1] + span - now
        return None


class RateLimiter:
    """Sliding-window limits for every tier of a rate table, with AIMD on rate-limit answers.

    ``tiers`` defaults to :data:`gptools.spec.RATE_TIERS`; an empty table turns limiting off.
    Not thread-safe by itself: callers serialise calls (the clients hold a lock around them).
    Times are seconds on any monotonic clock, passed in by the caller.
    """

    def __init__(
        self,
        tiers: Iterable[spec.RateTier] = spec.RATE_TIERS,
        *,
        window: float = spec.RATE_LIMIT_WINDOW.total_seconds(),
        margin: float = C.RATE_WINDOW_MARGIN,
        decrease_factor: float = C.RATE_DECREASE_FACTOR,
        increase_per_success: float = C.RATE_INCREASE_PER_SUCCESS,
    ) -> None:
        self.tiers: tuple[spec.RateTier, ...] = tuple(tiers)
        for tier in self.tiers:
            if tier.per_second < 1:
                raise ValueError(
                    f"rate tier {tier.name!r}: per_second must be at least 1, got {tier.per_second}"
                )
        if not 0 < decrease_factor < 1:
            raise ValueError(f"decrease_factor must be between 0 and 1, got {decrease_factor}")
        self.span = window + margin
        self._decrease = decrease_factor
        self._increase = increase_per_success
        self._windows = {t.name: _Window(t.per_second) for t in self.tiers if not t.each_endpoint}
        self._by_endpoint: dict[str, tuple[str, ...]] = {}

    def tiers_for(self, method: str, path: str) -> tuple[str, ...]:
        """Names of the windows a request counts against (:func:`gptools.spec.tiers_for`):
        a tier's name, or for an ``each_endpoint`` tier its name and the endpoint."""
        endpoint = spec.endpoint_of(method, path)
        names = self._by_endpoint.get(endpoint)
        if names is None:
            tiers = spec.tiers_for(method, path, self.tiers)
            names = tuple(t.window_key(endpoint) for t in tiers)
            for tier, name in zip(tiers, names, strict=True):
                if name not in self._windows:
                    self._windows[name] = _Window(tier.per_second)
            self._by_endpoint[endpoint] = names
        return names

    def try_acquire(self, tiers: tuple[str, ...], now: float) -> Ticket | float:
        """Admit a request counting against ``tiers`` (a :class:`Ticket`), or return how many
        seconds to wait before asking again."""
        longest = 0.0
        blocked_in_flight = False
        for name in tiers:
            wait = self._windows[name].wait(now, self.span)
            if wait is None:
                blocked_in_flight = True
            elif wait > longest:
                longest = wait
        if longest > 0:
            return longest
        if blocked_in_flight:
            return C.RATE_INFLIGHT_RECHECK
        for name in tiers:
            self._windows[name].in_flight += 1
        return Ticket(tiers)

    def release(
        self,
        ticket: Ticket,
        now: float,
        *,
        rate_limited: bool = False,
        retry_after: float | None = None,
    ) -> None:
        """Record that an admitted request has its answer (or failed) at ``now``.

        ``rate_limited`` marks the rate-limit response: the tiers slow down, and pause for
        ``retry_after`` seconds when the server gave one. The caller caps that pause (the
        clients at their ``retry_after_ceiling``); a pause that is not a finite number of
        seconds is refused, as it would block every later request for ever.
        """
        if retry_after is not None and not 0 <= retry_after < math.inf:
            raise ValueError(f"retry_after must be a finite number of seconds, got {retry_after}")
        for name in ticket.tiers:
            w = self._windows[name]
            w.in_flight -= 1
            # Keep the deque ascending: a late release counts as finishing with the latest.
            w.ends.append(max(now, w.ends[-1]) if w.ends else now)
            if rate_limited:
                if now - w.last_decrease >= self.span:
                    w.allowed = max(1.0, w.allowed * self._decrease)
                    w.last_decrease = now
                if retry_after is not None:
                    w.paused_until = max(w.paused_until, now + retry_after)
            elif w.allowed < w.limit:
                w.allowed = min(float(w.limit), w.allowed + self._increase)

    def allowed(self) -> dict[str, float]:
        """The current figure of every window in requests per second (AIMD-adjusted); an
        ``each_endpoint`` tier has one window per endpoint used so far."""
        return {name: w.allowed for name, w in self._windows.items()}
