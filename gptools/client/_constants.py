"""Every tunable of the client in one place (timeouts, sizes, retries, backoff, rate limiting).

Each is the default of a :class:`~gptools.client.Client` keyword argument of the same
name in lower case, so a caller changes one argument, never this module.
"""

from __future__ import annotations

from typing import Final

#: Seconds to establish a connection. Short: a refused or unreachable host should fail fast.
DEFAULT_CONNECT_TIMEOUT: Final = 5.0
#: Seconds to wait for the answer (and to write the body, and for a pooled connection).
#: Long enough for a slow campaign creation, never unlimited.
DEFAULT_READ_TIMEOUT: Final = 30.0
#: The largest answer read, in bytes (after decompression): a larger one is refused while
#: it streams (:class:`~gptools.errors.ResponseTooLargeError`). The API's answers are a
#: few kilobytes; a configuration list of every game and currency stays far below.
DEFAULT_MAX_RESPONSE_BYTES: Final = 10 * 1024 * 1024
#: How much of an error answer (a non-2xx) is read and kept in ``ApiError.body``: the
#: documented error JSON is a few hundred bytes. Past it the connection is dropped, so a
#: huge 500 costs neither the memory nor the time of reading it, on any retry.
ERROR_BODY_BYTES: Final = 8 * 1024

#: How many times one call is retried after its first attempt.
DEFAULT_MAX_RETRIES: Final = 3
#: First backoff delay in seconds; it doubles on every retry up to the cap, less a random
#: jitter (the formula and its jitter: ``gptools._backoff``, shared with the loader).
BACKOFF_BASE: Final = 0.5
BACKOFF_CAP: Final = 8.0
#: The longest ``Retry-After`` the client sleeps through; a longer hint raises
#: :class:`~gptools.errors.RateLimitedError` at once (the caller decides what to do).
RETRY_AFTER_CEILING: Final = 30.0

#: Added to each tier's 1-second window. The limiter counts a request from the moment it is
#: sent until its answer has arrived plus the window, so the server's arrival time is always
#: inside what we counted; the margin absorbs clock granularity and rounding on its side.
RATE_WINDOW_MARGIN: Final = 0.02
#: After a rate-limit response every tier the request counted against runs at this fraction
#: of its limit (multiplicative decrease) ...
RATE_DECREASE_FACTOR: Final = 0.5
#: ... and each later success gives back this many requests per second (additive increase),
#: until the published figure is reached again.
RATE_INCREASE_PER_SUCCESS: Final = 1.0
#: How long a waiter blocked only by requests still in flight sleeps before looking again;
#: a finished request wakes it sooner.
RATE_INFLIGHT_RECHECK: Final = 0.05

#: Environment variables (and ``.env`` keys) read when an argument is not given.
ENV_BASE_URL: Final = "GP_BASE_URL"
ENV_USERNAME: Final = "GP_USERNAME"
ENV_PASSWORD: Final = "GP_PASSWORD"  # noqa: S105 (a variable name, not a password)
#: Retries after a call's first attempt (``max_retries``): a whole number, 0 or more.
ENV_MAX_RETRIES: Final = "GP_MAX_RETRIES"
#: The HTTP time-out (``timeout``): seconds for the whole call, or ``connect,read``.
ENV_TIMEOUT: Final = "GP_TIMEOUT"
#: The largest answer read (``max_response_bytes``): a whole number of bytes, 1 or more.
ENV_MAX_RESPONSE_BYTES: Final = "GP_MAX_RESPONSE_BYTES"

#: The logger every client message goes to. Headers are never logged.
LOGGER_NAME: Final = "gptools.client"
