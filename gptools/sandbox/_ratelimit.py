"""Sliding-window rate limiting over every tier of the rate table.

Each (tier, user) or (tier,) key holds a deque of the monotonic times of the requests it
admitted in the last window. A request is admitted only when every tier it counts against
has room; a refused request is not counted anywhere, so a client that backs off regains
its full rate after one window.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

from gptools import spec


class RateLimiter:
    """The rate table of one sandbox. Not thread-safe: the server's loop is its only user."""

    def __init__(self, tiers: Iterable[spec.RateTier], window_s: float) -> None:
        self._tiers = tuple(tiers)
        self._window = window_s
        self._windows: dict[tuple[str, ...], deque[float]] = {}
        self._applicable: dict[tuple[str, str], tuple[spec.RateTier, ...]] = {}

    def _tiers_for(self, method: str, endpoint_class: str) -> tuple[spec.RateTier, ...]:
        key = (method, endpoint_class)
        found = self._applicable.get(key)
        if found is None:
            found = tuple(
                t
                for t in self._tiers
                if (t.methods is None or method in t.methods)
                and (t.endpoint is None or t.endpoint == endpoint_class)
            )
            self._applicable[key] = found
        return found

    def admit(
        self, method: str, endpoint: str, endpoint_class: str, user: str, now: float
    ) -> tuple[int, spec.RateTier] | None:
        """Count the request and return ``None``; or, when some tier is full, return the
        Retry-After seconds (>= 1) and the tier that refused (the request is not counted).

        ``endpoint`` is :func:`gptools.spec.endpoint_of` of the request: an
        ``each_endpoint`` tier keeps one window per endpoint."""
        horizon = now - self._window
        windows: list[deque[float]] = []
        wait = 0.0
        refused: spec.RateTier | None = None
        for tier in self._tiers_for(method, endpoint_class):
            name = tier.window_key(endpoint)
            key = (name, user) if tier.scope == "per_user_endpoint" else (name,)
            window = self._windows.get(key)
            if window is None:
                window = self._windows[key] = deque()
            while window and window[0] <= horizon:
                window.popleft()
            if len(window) >= tier.per_second:
                # A slot frees when the oldest admitted request leaves the window.
                frees_in = window[0] - horizon if window else self._window
                if refused is None or frees_in > wait:
                    wait, refused = frees_in, tier
            windows.append(window)
        if refused is not None:
            return max(1, math.ceil(wait)), refused
        for window in windows:
            window.append(now)
        return None

    def clear(self) -> None:
        """Forget every window."""
        self._windows.clear()
