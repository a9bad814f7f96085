"""The one backoff formula of the package: how long to wait before trying again.

The API client (between its retries), the participant loader (between re-sends of a chunk)
and the webhook processing queue (between runs of a failed handler) all use it. It
imports nothing of ours, so that ``webhooks``, which must never import ``gptools.client``,
can use it too; the client publishes it as :func:`gptools.client.backoff_delay`. The
sandbox keeps its own webhook backoff on purpose, as the provider's stand-in
(``docs/design.md``).
"""

from __future__ import annotations

import random
from typing import Final

#: Each delay is shortened by up to this fraction at random, so that many clients that
#: failed together do not come back together.
BACKOFF_JITTER: Final = 0.25


def backoff_delay(
    attempt: int,
    rng: random.Random | None = None,
    *,
    base: float,
    cap: float,
    factor: float = 2.0,
    jitter: float = BACKOFF_JITTER,
) -> float:
    """Seconds before retry number ``attempt + 1`` (``attempt`` counts from 0).

    ``base × factor ** attempt``, capped at ``cap``; with ``rng`` (a seeded
    :class:`random.Random` for reproducible runs) it is then shortened by up to ``jitter``
    of itself at random, without one it is exact.
    """
    if attempt < 0:
        raise ValueError(f"attempt counts from 0, got {attempt}")
    try:
        delay = min(cap, base * factor**attempt)
    except OverflowError:  # a very late attempt waits the cap rather than crashing
        delay = cap
    if rng is None:
        return delay
    return delay * (1.0 - jitter * rng.random())
