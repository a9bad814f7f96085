"""The exception tree of gptools: every exception class the package defines with a public
name, drawn once, here.

::

    GptoolsError
    ├── ConfigurationError              bad or missing settings (no base URL, no password)
    │   ├── AuthConfigError                 webhooks: the receiver's credentials (a ValueError)
    │   └── SettingError                    webhooks: a receiver setting that cannot work
    ├── MissingExtraError               a capability whose optional extra is not installed
    ├── TransportError                  no HTTP answer: connection refused/dropped, time-out
    ├── ResponseTooLargeError           an answer larger than the client reads (refused mid-stream)
    ├── ApiError                        the server answered with an error status
    │   ├── BadRequestError             400
    │   │   ├── BrandRequiredError          BRAND_REQUIRED (also raised locally, unsent)
    │   │   └── CampaignValidationError     VALIDATION_ERROR (assumed code)
    │   ├── NotAuthorizedError          401 NOT_AUTHORIZED
    │   ├── ForbiddenError              403
    │   │   ├── BrandNotAllowedError        BRAND_NOT_ALLOWED (also raised locally, unsent)
    │   │   └── InvalidRequestError         INVALID_REQUEST (unknown campaign id)
    │   ├── NotFoundError               404
    │   │   └── GameNotFoundError           GAME_NOT_FOUND (assumed code)
    │   ├── ConflictError               409
    │   │   └── IdempotencyConflictError    IDEMPOTENCY_CONFLICT (assumed code)
    │   ├── RateLimitedError            the rate-limit answer (see is_rate_limited)
    │   └── ServerError                 5xx
    │       ├── UnknownServerError          500 UNKNOWN_ERROR
    │       └── GatewayTimeoutError         504 TIMEOUT
    ├── UnknownCurrencyError            costs: a currency code ISO 4217 does not know (a ValueError)
    ├── StoredTableError                costs: a malformed stored cost file (a ValueError)
    ├── PlanFileError                   campaigns: a plan file that cannot be read (a ValueError)
    ├── PlanInvalidError                campaigns: applying a plan with errors (a ValueError)
    ├── RegisterError                   campaigns: the register cannot answer (a LookupError)
    │   └── NotRecordedError                done at the server, but the register could not record it
    ├── GroupIncompleteError            campaigns: a multi-brand group left incomplete
    ├── PlayerListError                 participants: an unreadable player list (a ValueError)
    │   ├── JournalMismatchError            the journal belongs to another load
    │   └── JournalBusyError                another run of the same load holds the journal
    ├── LoadStopped                     participants: the server refused the load itself
    ├── StoreError                      webhooks: the store cannot be opened, read or written
    │   ├── StoreUnreachableError           no connection could be opened (an outage)
    │   ├── StoreNotFoundError              the store does not exist, and may not be created
    │   ├── SchemaVersionError              the store is at a schema version this code cannot run on
    │   ├── CommitUncertain                 the connection broke during COMMIT (stays inside)
    │   ├── NotDurable                      committed, not synced: answered 503 (stays inside)
    │   └── SpoolMoved                      another process replayed the spool first (stays inside)
    ├── HandlerTimeout                  webhooks: a handler run past the queue's time-out
    ├── ServeError                      webhooks: the receiver cannot start on this machine
    │   └── ListenError                     it cannot listen on host:port (taken, not ours)
    ├── ReloadError                     webhooks: no running receiver answered a reload
    ├── OutputRefusedError              an output path refused: a link, a folder (an OSError)
    ├── DeliveryLogError                delivery-log analyser: an unreadable log (a ValueError)
    ├── LedgerError                     wallet: an unreadable wallet ledger (a ValueError)
    ├── SandboxStateError               sandbox: an unreadable state file (a ValueError)
    ├── CampaignNotPlayableError        sandbox: a campaign it cannot play (a ValueError)
    ├── Refusal                         sandbox: a documented error answer (stays inside)
    ├── WidgetManagerUnavailable        notebook_html: no widget manager bundle (a RuntimeError)
    ├── BadInput                        cli: exit code 2 (a ClickException, as the 3 below)
    ├── Failure                         cli: exit code 1
    ├── AddressInUse                    cli: exit code 3
    ├── NotRecorded                     cli: exit code 4
    └── Interrupted                     cli: exit code 130

    KeyboardInterrupt
    └── LoadInterrupted                 participants: Ctrl-C stopped a load; ``summary`` says where

``except GptoolsError`` catches whatever the package raises on purpose; classes that were a
``ValueError`` (or ``LookupError``, ``RuntimeError``, ``ImportError``) remain one as well.
The one exception is ``participants.LoadInterrupted``: it is a ``KeyboardInterrupt``, and
deriving it from ``Exception`` would let an ``except Exception`` swallow a Ctrl-C. Each
package exports the classes its public functions raise (``gptools.participants.LoadStopped``);
the commonest are exported by ``gptools`` too. Private control-flow exceptions (underscore
names) never reach a caller and are not drawn.

Every class drawn is here: defined in this module (the client's and the settings'), or
defined beside the code that raises it and reached as ``gptools.errors.<Name>`` all the
same, its module imported on first use (``_ELSEWHERE`` below says which module holds each;
a type checker sees those as exception classes, the owning package's export as the class
itself). ``tests/test_errors_root.py`` imports every module of the package and checks all
of this, the drawing included.

:func:`error_class` picks the class: the rate-limit answer first (:func:`is_rate_limited`,
the one definition the client's retries and rate limiter use too), then the documented code,
then the status. An undocumented code falls back to its status class (or :class:`ApiError`)
and keeps the code.
Messages never contain credentials: the URL is kept without user info.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gptools import spec
from gptools.models import ErrorBody


class GptoolsError(Exception):
    """Base of every exception gptools raises on purpose."""


class ConfigurationError(GptoolsError):
    """Settings are missing or invalid (for example no base URL or no password)."""


#: The optional extras (pyproject.toml) and the top-level modules each one installs that
#: gptools imports. The base install has none of them.
EXTRAS: dict[str, tuple[str, ...]] = {
    "postgres": ("psycopg",),
    "analysis": ("duckdb", "ibis", "pyarrow"),
    "excel": ("openpyxl",),
    "notebooks": ("matplotlib", "ipywidgets", "nbformat", "nbclient", "nbconvert"),
    "spark": ("pyspark",),
    "forward": ("pika", "nats"),
}


class MissingExtraError(GptoolsError, ImportError):
    """A capability needs an optional extra that is not installed. The message is one line
    naming it (``pip install 'gptools[analysis]'``); it is also an :class:`ImportError`, so
    code that guards optional imports the usual way keeps working."""

    def __init__(self, extra: str, capability: str, missing: str) -> None:
        super().__init__(
            f"{capability} needs the optional extra [{extra}] ({missing} is not "
            f"installed): pip install 'gptools[{extra}]'"
        )
        self.extra = extra
        self.capability = capability
        self.missing = missing


def import_extra(module: str, extra: str, capability: str) -> ModuleType:
    """Import ``module`` from the optional ``extra``, or raise :class:`MissingExtraError`
    saying which extra ``capability`` needs."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = (exc.name or module).partition(".")[0]
        if top not in EXTRAS[extra]:
            raise  # a broken install of something else: not ours to rename
        raise MissingExtraError(extra, capability, top) from None


def require_extra(extra: str, capability: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` imports."""
    for module in EXTRAS[extra]:
        import_extra(module, extra, capability)


class TransportError(GptoolsError):
    """No HTTP answer came: the connection failed or dropped, or a time-out passed.

    ``retries`` is how many times the request was retried before giving up; ``sent`` is
    False when no attempt reached the server (the connection could not be had: refused,
    connect time-out), and the message then names the address
    (``cannot connect to http://127.0.0.1:1: connection refused``).
    """

    def __init__(
        self, message: str, *, method: str, url: str, retries: int = 0, sent: bool = True
    ) -> None:
        super().__init__(message)
        self.message = message
        self.method = method
        self.url = url
        self.retries = retries
        self.sent = sent

    def __str__(self) -> str:
        return f"{self.args[0]} ({self.method} {self.url}; {self.retries} retries)"


class ResponseTooLargeError(GptoolsError):
    """An answer was larger than the client reads (``max_response_bytes``, 10 MB by
    default): reading stopped at the limit, while the answer streamed, and the connection
    was dropped. Not retried: the same request would get the same answer.

    Carries the ``status``, the ``limit`` in bytes, the request's ``method`` and ``url``
    (no credentials), ``body`` (the first few kilobytes, as text), ``retries`` taken and
    ``sent`` (always True: the server answered).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        limit: int,
        method: str,
        url: str,
        body: str | None = None,
        retries: int = 0,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.limit = limit
        self.method = method
        self.url = url
        self.body = body
        self.retries = retries
        self.sent = True

    def __str__(self) -> str:
        tail = f"; {self.retries} retries" if self.retries else ""
        return f"HTTP {self.status}: {self.message} ({self.method} {self.url}{tail})"


class ApiError(GptoolsError):
    """The server answered with an error status.

    Carries the HTTP ``status`` (``None`` when raised locally, before sending), the error
    ``code``, ``message``, the server's ``server_timestamp`` and ``path`` from the error body,
    the request's ``method`` and ``url`` (no credentials), the raw ``body`` text when it was
    not the documented JSON, ``retries`` taken and ``sent`` (False for a local refusal).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        server_timestamp: str | None = None,
        path: str | None = None,
        method: str = "",
        url: str = "",
        body: str | None = None,
        retries: int = 0,
        retry_after: float | None = None,
        sent: bool = True,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.server_timestamp = server_timestamp
        self.path = path
        self.method = method
        self.url = url
        self.body = body
        self.retries = retries
        self.retry_after = retry_after
        self.sent = sent

    def __str__(self) -> str:
        where = f"{self.method} {self.url}".strip()
        status = "not sent" if not self.sent else f"HTTP {self.status}"
        code = f" {self.code}" if self.code else ""
        tail = f"; {self.retries} retries" if self.retries else ""
        return f"{status}{code}: {self.message} ({where}{tail})"

    @classmethod
    def from_body(
        cls,
        status: int,
        body: ErrorBody | None,
        *,
        raw: str | None,
        method: str,
        url: str,
        retries: int = 0,
        retry_after: float | None = None,
        rate_limit_status: int = spec.RATE_LIMIT_STATUS,
    ) -> ApiError:
        """Build the right subclass for a status and (possibly missing) error body;
        ``rate_limit_status`` is the status of the rate-limit answer (see
        :func:`is_rate_limited`)."""
        code = body.code if body else None
        message = (body.message if body and body.message else None) or (
            (raw or "").strip()[:500] or f"HTTP {status} with an empty body"
        )
        klass = error_class(status, code, rate_limit_status=rate_limit_status)
        return klass(
            message,
            status=status,
            code=code,
            server_timestamp=body.timestamp if body else None,
            path=body.path if body else None,
            method=method,
            url=url,
            body=None if body and body.code else raw,
            retries=retries,
            retry_after=retry_after,
        )


class BadRequestError(ApiError):
    """400: the request was refused as malformed."""


class BrandRequiredError(BadRequestError):
    """BRAND_REQUIRED: a PARTNER or THIRD_PARTY request without a brand. Name a brand,
    for example ``client.brand(7)``; ``client.self()`` lists the allowed ones."""


class CampaignValidationError(BadRequestError):
    """VALIDATION_ERROR (assumed code): a campaign field was refused; the message names it."""


class NotAuthorizedError(ApiError):
    """401 NOT_AUTHORIZED: the credentials were refused. Check GP_USERNAME/GP_PASSWORD."""


class ForbiddenError(ApiError):
    """403: the account may not do this."""


class BrandNotAllowedError(ForbiddenError):
    """BRAND_NOT_ALLOWED: the brand is not among the account's ``allowedBrands``."""


class InvalidRequestError(ForbiddenError):
    """INVALID_REQUEST: seen for an invalid or non-existent campaign id."""


class NotFoundError(ApiError):
    """404: the resource does not exist."""


class GameNotFoundError(NotFoundError):
    """GAME_NOT_FOUND (assumed code): no game with that gameId."""


class ConflictError(ApiError):
    """409: the request conflicts with an earlier one."""


class IdempotencyConflictError(ConflictError):
    """IDEMPOTENCY_CONFLICT (assumed code): the requestId was used with another body.
    Use a new requestId for a different campaign."""


class RateLimitedError(ApiError):
    """The rate-limit answer (:func:`is_rate_limited`: assumed 429, or the code
    TOO_MANY_REQUESTS on any status); ``retry_after`` is the server's hint in seconds."""


class ServerError(ApiError):
    """5xx: a temporary failure on the server side; retried by the client."""


class UnknownServerError(ServerError):
    """500 UNKNOWN_ERROR: unexpected failure on the server."""


class GatewayTimeoutError(ServerError):
    """504 TIMEOUT: the server did not respond in time. A campaign may still have been
    created: retry with the same requestId, never with a new one."""


_BY_CODE: dict[str, type[ApiError]] = {
    spec.CODE_BRAND_REQUIRED: BrandRequiredError,
    spec.CODE_NOT_AUTHORIZED: NotAuthorizedError,
    spec.CODE_BRAND_NOT_ALLOWED: BrandNotAllowedError,
    spec.CODE_INVALID_REQUEST: InvalidRequestError,
    spec.CODE_UNKNOWN_ERROR: UnknownServerError,
    spec.CODE_TIMEOUT: GatewayTimeoutError,
    spec.VALIDATION_ERROR_CODE: CampaignValidationError,
    spec.GAME_NOT_FOUND_CODE: GameNotFoundError,
    spec.IDEMPOTENCY_CONFLICT_CODE: IdempotencyConflictError,
}

_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: NotAuthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
}


def is_rate_limited(
    status: int | None, code: str | None, *, rate_limit_status: int = spec.RATE_LIMIT_STATUS
) -> bool:
    """Whether an answer is the rate-limit answer: the (assumed, overridable) rate-limit
    status, or the rate-limit code on any status (a gateway's 503 TOO_MANY_REQUESTS).

    The one definition of "rate limited": the client's retry decision, its rate limiter's
    slow-down and :func:`error_class` (so :class:`RateLimitedError`, which the participant
    loader watches) all ask it, so none of them can disagree with another.
    """
    return status == rate_limit_status or code == spec.RATE_LIMIT_CODE


def error_class(
    status: int | None, code: str | None, *, rate_limit_status: int = spec.RATE_LIMIT_STATUS
) -> type[ApiError]:
    """The exception class for a status and code: :class:`RateLimitedError` for the
    rate-limit answer, else the code's own class, else the status's."""
    if is_rate_limited(status, code, rate_limit_status=rate_limit_status):
        return RateLimitedError
    if code in _BY_CODE:
        return _BY_CODE[code]
    if status is None:
        return ApiError
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if 500 <= status <= 599:
        return ServerError
    return ApiError


#: Where each class of the drawing that is not defined above lives: beside the code that
#: raises it, in the package that exports it. ``gptools.errors.StoreError`` imports that
#: module on first use (:func:`__getattr__`), so every class of the tree is reached from
#: here, while ``import gptools.errors`` still imports spec and models only: those modules
#: import errors (for the root class), errors never imports them while it loads, and the
#: one-way imports of docs/design.md hold. In the drawing's order.
_ELSEWHERE: dict[str, str] = {
    "AuthConfigError": "gptools.webhooks._credentials",
    "SettingError": "gptools.webhooks._config",
    "UnknownCurrencyError": "gptools.costs._money",
    "StoredTableError": "gptools.costs._tables",
    "PlanFileError": "gptools.campaigns._plan",
    "PlanInvalidError": "gptools.campaigns._validate",
    "RegisterError": "gptools._register_file",
    "NotRecordedError": "gptools.campaigns._register",
    "GroupIncompleteError": "gptools.campaigns._group",
    "PlayerListError": "gptools.participants._sources",
    "JournalMismatchError": "gptools.participants._journal",
    "JournalBusyError": "gptools.participants._journal",
    "LoadStopped": "gptools.participants._loader",
    "StoreError": "gptools.webhooks._records",
    "StoreUnreachableError": "gptools.webhooks._records",
    "StoreNotFoundError": "gptools.webhooks._records",
    "SchemaVersionError": "gptools.webhooks._records",
    "CommitUncertain": "gptools.webhooks._records",
    "NotDurable": "gptools.webhooks._records",
    "SpoolMoved": "gptools.webhooks._outage_store",
    "HandlerTimeout": "gptools.webhooks._queue",
    "ServeError": "gptools.webhooks._serve",
    "ListenError": "gptools.webhooks._serve",
    "ReloadError": "gptools.webhooks._reload",
    "OutputRefusedError": "gptools._private_files",
    "DeliveryLogError": "gptools.deliverylog._contract",
    "LedgerError": "gptools.deliverylog._ledger",
    "SandboxStateError": "gptools.sandbox._persist",
    "CampaignNotPlayableError": "gptools.sandbox._players",
    "Refusal": "gptools.sandbox._refusal",
    "WidgetManagerUnavailable": "gptools.notebook_html",
    "BadInput": "gptools.cli._main",
    "Failure": "gptools.cli._main",
    "AddressInUse": "gptools.cli._main",
    "NotRecorded": "gptools.cli._main",
    "Interrupted": "gptools.cli._main",
    "LoadInterrupted": "gptools.participants._loader",
}


def __getattr__(name: str) -> type[BaseException]:
    """A class of the drawing defined in another module (:data:`_ELSEWHERE`), imported on
    first use."""
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    klass: type[BaseException] = getattr(importlib.import_module(module), name)
    globals()[name] = klass
    return klass


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ELSEWHERE))


__all__ = [
    "EXTRAS",
    "ApiError",
    "BadRequestError",
    "BrandNotAllowedError",
    "BrandRequiredError",
    "CampaignValidationError",
    "ConfigurationError",
    "ConflictError",
    "ForbiddenError",
    "GameNotFoundError",
    "GatewayTimeoutError",
    "GptoolsError",
    "IdempotencyConflictError",
    "InvalidRequestError",
    "MissingExtraError",
    "NotAuthorizedError",
    "NotFoundError",
    "RateLimitedError",
    "ResponseTooLargeError",
    "ServerError",
    "TransportError",
    "UnknownServerError",
    "error_class",
    "import_extra",
    "is_rate_limited",
    "require_extra",
]
