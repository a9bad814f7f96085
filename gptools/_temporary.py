"""The one rule for which HTTP answers are temporary ("not now", not "never").

The client's retries (:func:`gptools.client._base.should_retry`) and the participant
loader's re-sends (:func:`gptools.participants._loader.verdict`) both ask it, so a status
the loader sends again is one the client retries too. It imports nothing of ours: the
client and the layers below it may all use it (docs/design.md, "Module map").
"""

from __future__ import annotations

from typing import Final

#: 4xx statuses that say "not now" rather than "never": the request timed out on its way
#: (408, often a proxy's) or came too early (425). Temporary like a 5xx.
TEMPORARY_4XX: Final = frozenset({408, 425})


def is_temporary_status(status: int) -> bool:
    """Whether an answer with ``status`` may succeed when the same request is sent again:
    a 5xx (the server failed, or a proxy in front of it), 408 or 425. The rate-limit
    answer is temporary too, but it is told by its code as well as its status
    (:func:`gptools.errors.is_rate_limited`), so callers check it apart."""
    return 500 <= status <= 599 or status in TEMPORARY_4XX
