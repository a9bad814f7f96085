"""Every tunable of the participant loader in one place (concurrency, attempts, backoff).

``DEFAULT_CONCURRENCY`` and ``DEFAULT_MAX_ATTEMPTS`` are the defaults of
:func:`~gptools.participants.load_participants`'s ``concurrency`` and ``max_attempts``;
the others are fixed. Which answers are temporary is the one rule shared with the client
(``gptools._temporary``).
"""

from __future__ import annotations

from typing import Final

#: Chunks in flight at once. The client's rate limiter decides when each may go; this only
#: bounds how many wait for an answer (about 130 requests a second need ~13 in flight at a
#: 100 ms round trip).
DEFAULT_CONCURRENCY: Final = 16
#: How many times one chunk is sent before the loader gives up on it for this run (each
#: send is itself retried by the client: ``Client(max_retries=...)``).
DEFAULT_MAX_ATTEMPTS: Final = 8
#: Backoff between the loader's own re-sends of a chunk: base, doubling, capped (seconds;
#: the client's formula, :func:`gptools.client.backoff_delay`).
RESEND_BASE: Final = 0.5
RESEND_CAP: Final = 15.0
#: The longest ``Retry-After`` the loader waits before sending a rate-limited chunk again;
#: a longer hint is cut to this (the chunk is then refused again or goes through).
RESEND_RETRY_AFTER_CAP: Final = 60.0
#: The longest the sender waits for an answer before it looks at its queue again (seconds).
POLL_SECONDS: Final = 0.5
#: Environment variable naming the directory of default journals.
ENV_JOURNAL_DIR: Final = "GPTOOLS_JOURNAL_DIR"
