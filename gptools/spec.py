"""Every published rule of the provider's API, and every assumption we make for its gaps.

This is the only module that writes these values down; everything else imports them.
Each constant carries its source: ``spec`` (the API document says so) or ``assumed``
(the document says "not shown"; we chose a value, give the reason, and make it
overridable). :data:`ASSUMPTIONS` lists the assumed ones; the README's table of
assumptions is checked against it by a test.

How an assumption is overridden is named in its ``override`` field: most are keyword
arguments of the class that uses them (the client, the loader, the sandbox), so a user who
learns the real value from the provider changes one argument, not our code.
"""

from __future__ import annotations

import decimal
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import Final, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


@dataclass(frozen=True, slots=True)
class Assumption:
    """A value the API document does not show, chosen by us.

    ``name`` is the constant's name in this module, ``value`` what we chose, ``reason``
    one line on why, and ``override`` where a user sets the real value instead.
    """

    name: str
    value: object
    reason: str
    override: str


# --------------------------------------------------------------------------------------
# Paths (spec: "Endpoints", "Versioning")
# --------------------------------------------------------------------------------------

API_PREFIX: Final = "/api/v1"  # spec: the version is part of the path
SELF_PATH: Final = "/api/v1/self"  # spec: no brandId, available to every account
#: spec: explicit form is /api/v1/brands/{brandId}/{endpoint}
BRAND_PREFIX_TEMPLATE: Final = "/api/v1/brands/{brand_id}"

ENDPOINT_AWARDED_FEATURE_CONFIGURATIONS: Final = "awarded-feature-configurations"  # spec
ENDPOINT_GAME: Final = "game"  # spec
ENDPOINT_CAMPAIGN: Final = "campaign"  # spec: the unified, recommended campaign form
ENDPOINT_LEGACY_CAMPAIGN: Final = "freeround/campaign"  # spec: legacy, still supported
#: spec: POST {campaign}/{campaignId}/participant with a body naming ``playerIds``
ENDPOINT_PARTICIPANT_TEMPLATE: Final = "{campaign}/{campaign_id}/participant"

QUERY_GAME_ID: Final = "gameId"  # spec
QUERY_CURRENCY_CODE: Final = "currencyCode"  # spec
FIELD_PLAYER_IDS: Final = "playerIds"  # spec: participant addition names players by id
FIELD_CAMPAIGN_ID: Final = "campaignId"  # spec: creation response identifier
FIELD_CONTENT: Final = "content"  # spec: awarded-feature-configurations response list

# --------------------------------------------------------------------------------------
# User types (spec: "Authentication"; the schema enum adds INTERNAL)
# --------------------------------------------------------------------------------------

PRINCIPAL_INDIVIDUAL: Final = "INDIVIDUAL"
PRINCIPAL_PARTNER: Final = "PARTNER"
PRINCIPAL_THIRD_PARTY: Final = "THIRD_PARTY"
PRINCIPAL_INTERNAL: Final = "INTERNAL"
#: spec: both the user-type description and the response enum are part of the interface
KNOWN_PRINCIPAL_TYPES: Final = frozenset(
    {PRINCIPAL_INDIVIDUAL, PRINCIPAL_PARTNER, PRINCIPAL_THIRD_PARTY, PRINCIPAL_INTERNAL}
)
#: spec: PARTNER and THIRD_PARTY use the explicit path form only
EXPLICIT_ONLY_PRINCIPALS: Final = frozenset({PRINCIPAL_PARTNER, PRINCIPAL_THIRD_PARTY})
#: spec: INDIVIDUAL may use both forms; the implicit one resolves the brand from credentials
IMPLICIT_ALLOWED_PRINCIPALS: Final = frozenset({PRINCIPAL_INDIVIDUAL})

# --------------------------------------------------------------------------------------
# Errors (spec: "Errors")
# --------------------------------------------------------------------------------------

CODE_BRAND_REQUIRED: Final = "BRAND_REQUIRED"
CODE_NOT_AUTHORIZED: Final = "NOT_AUTHORIZED"
CODE_BRAND_NOT_ALLOWED: Final = "BRAND_NOT_ALLOWED"
CODE_INVALID_REQUEST: Final = "INVALID_REQUEST"
CODE_UNKNOWN_ERROR: Final = "UNKNOWN_ERROR"
CODE_TIMEOUT: Final = "TIMEOUT"

#: spec: each documented error code and the HTTP status it comes with
ERROR_STATUS: Final[dict[str, int]] = {
    CODE_BRAND_REQUIRED: 400,
    CODE_NOT_AUTHORIZED: 401,
    CODE_BRAND_NOT_ALLOWED: 403,
    CODE_INVALID_REQUEST: 403,
    CODE_UNKNOWN_ERROR: 500,
    CODE_TIMEOUT: 504,
}

# --------------------------------------------------------------------------------------
# Campaigns (spec: "Campaign (request-side fields known)", "Campaign field limits")
# --------------------------------------------------------------------------------------

CAMPAIGN_TYPE_AWARDED_FEATURE: Final = "AWARDED_FEATURE"  # spec
NAME_MAX_LENGTH: Final = 255  # spec
EXTERNAL_CAMPAIGN_ID_MAX_LENGTH: Final = 512  # spec
REQUEST_ID_MAX_LENGTH: Final = 36  # spec
RULES_URL_MAX_LENGTH: Final = 2048  # spec
BET_NUMBER_MAX: Final = 1500  # spec: free rounds or features per player
#: spec: players per back-office CSV import; the loader's API path has no such limit
BACK_OFFICE_CSV_IMPORT_MAX_ROWS: Final = 50_000
#: spec: "campaigns shorter than 24 hours are not typical business scenarios"
TYPICAL_MIN_CAMPAIGN_DURATION: Final = timedelta(hours=24)

# --------------------------------------------------------------------------------------
# Rate limits (spec: "Rate limits"), requests per second
# --------------------------------------------------------------------------------------

TierScope = Literal["global", "per_user_endpoint", "per_endpoint"]


@dataclass(frozen=True, slots=True)
class RateTier:
    """One row of the document's rate-limit table.

    ``methods`` is the set of HTTP methods counted (``None``: all), ``endpoint`` the
    endpoint class counted (``None``: every endpoint; ``"other"``: every endpoint without
    a row of its own), ``per_second`` the limit and ``scope`` who shares it: ``global``
    (everyone), ``per_user_endpoint`` (one user on one endpoint class), ``per_endpoint``
    (everyone on one endpoint class). ``each_endpoint`` gives every endpoint of the class
    its own window ("Per endpoint per user | All other endpoints | 60": ``GET /game`` and
    ``GET /self`` do not share their 60 requests a second).
    """

    name: str
    scope: TierScope
    per_second: int
    methods: frozenset[str] | None
    endpoint: str | None
    each_endpoint: bool = False

    def window_key(self, endpoint: str) -> str:
        """The name of the window a request to ``endpoint`` (see :func:`endpoint_of`) counts
        in: the tier's name, or the name and the endpoint for an ``each_endpoint`` tier."""
        return f"{self.name} {endpoint}" if self.each_endpoint else self.name


#: Endpoint classes the rate table distinguishes.
ENDPOINT_CLASS_PARTICIPANT: Final = "POST /campaign/*/participant"
ENDPOINT_CLASS_CAMPAIGN_CREATE: Final = "POST /campaign"
ENDPOINT_CLASS_OTHER: Final = "other"

_ALL: Final = None
RATE_TIERS: Final[tuple[RateTier, ...]] = (
    RateTier("global_all", "global", 500, _ALL, None),
    RateTier("global_get", "global", 1000, frozenset({"GET"}), None),
    RateTier("user_participant", "per_user_endpoint", 130, _ALL, ENDPOINT_CLASS_PARTICIPANT),
    RateTier("user_campaign", "per_user_endpoint", 60, _ALL, ENDPOINT_CLASS_CAMPAIGN_CREATE),
    RateTier("user_other", "per_user_endpoint", 60, _ALL, ENDPOINT_CLASS_OTHER, each_endpoint=True),
    RateTier("endpoint_participant", "per_endpoint", 270, _ALL, ENDPOINT_CLASS_PARTICIPANT),
    RateTier("endpoint_campaign", "per_endpoint", 135, _ALL, ENDPOINT_CLASS_CAMPAIGN_CREATE),
)

_API_PATH_RE: Final = re.compile(r"^/api/v1(?:/brands/[^/]+)?(?:/freeround(?=/campaign))?(/.*)?$")
_CAMPAIGN_ID_RE: Final = re.compile(r"^/campaign/[^/]+/")


def endpoint_of(method: str, path: str) -> str:
    """The endpoint a request calls, as the rate table counts endpoints: the method and
    the path without ``/api/v1``, the brand segment and the legacy ``freeround/``, with the
    campaign id as ``*`` (``POST /campaign/*/participant``, ``GET /game``).

    Both path forms and the legacy path are one endpoint (``ENDPOINT_IDENTITY``, assumed).
    """
    method = method.upper()
    match = _API_PATH_RE.match(path)
    rest = (match.group(1) or "/") if match else path
    if len(rest) > 1 and rest.endswith("/"):
        rest = rest[:-1]
    return f"{method} {_CAMPAIGN_ID_RE.sub('/campaign/*/', rest)}"


def endpoint_class(method: str, path: str) -> str:
    """Return the rate-table endpoint class of a request (both path forms, legacy too).

    The batch participant endpoint (``.../participant/batch``, assumed) counts as a
    participant addition (``BATCH_PARTICIPANT_RATE_CLASS``, assumed).
    """
    endpoint = endpoint_of(method, path)
    if endpoint.startswith(ENDPOINT_CLASS_PARTICIPANT) and (
        endpoint == ENDPOINT_CLASS_PARTICIPANT
        or endpoint.startswith(ENDPOINT_CLASS_PARTICIPANT + "/")
    ):
        return ENDPOINT_CLASS_PARTICIPANT
    if endpoint == ENDPOINT_CLASS_CAMPAIGN_CREATE:
        return ENDPOINT_CLASS_CAMPAIGN_CREATE
    return ENDPOINT_CLASS_OTHER


def tiers_for(
    method: str, path: str, tiers: Iterable[RateTier] | None = None
) -> tuple[RateTier, ...]:
    """Return every tier of ``tiers`` (default :data:`RATE_TIERS`) a request counts
    against (global, per endpoint, per user).

    A GET counts against both global tiers, the 500 of all methods and the 1000 of GETs
    (``GLOBAL_TIERS_COMBINED``, assumed).
    """
    cls = endpoint_class(method, path)
    method = method.upper()
    out = []
    for tier in RATE_TIERS if tiers is None else tiers:
        if tier.methods is not None and method not in tier.methods:
            continue
        if tier.endpoint is not None and tier.endpoint != cls:
            continue
        out.append(tier)
    return tuple(out)


# --------------------------------------------------------------------------------------
# Webhooks (spec: "Webhook receiver contract", "Acknowledgement and retries")
# --------------------------------------------------------------------------------------

DEFAULT_WEBHOOK_PATH: Final = "/v1/game-action-events"  # spec: {wallet_url}/v1/game-action-events
WEBHOOK_RETRY_WINDOW: Final = timedelta(days=7)  # spec: retried for up to 7 days
WEBHOOK_RESPONSE_BUDGET: Final = timedelta(seconds=1)  # spec: answer 200 in under 1 second
WEBHOOK_AUTH_TYPES: Final = ("BEARER", "BASIC", "NONE")  # spec
WEBHOOK_CONTENT_TYPE: Final = "application/json"  # spec
KNOWN_EVENT_TYPES: Final = frozenset({"COIN", "FEATURE"})  # spec: "values seen"
#: ours: dedupe keys outlive the provider's 7-day retry window by a day of margin
WEBHOOK_DEDUPE_RETENTION: Final = WEBHOOK_RETRY_WINDOW + timedelta(days=1)
#: ours: the receiver's delivery log is kept 90 days, long after the 7-day retry window, so
#: that a quarter's deliveries can be analysed (configurable per store)
WEBHOOK_LOG_RETENTION: Final = timedelta(days=90)
#: ours: the deepest JSON gptools parses, in a notification (from anyone who can reach the
#: receiver) or in an answer (from whatever server the client talks to). The notification
#: needs 2 levels and the API's answers 3; a deeper document is refused before it is
#: parsed, so no parser's recursion can fail (``gptools._json_depth``)
JSON_MAX_DEPTH: Final = 32

# issue 22: ours, the bounds the receiver's HTTP server holds against strangers (each a
# `webhooks serve` option). A delivery is a few hundred bytes with a few headers, sent
# within the sender's 10 s; the anchors: nginx (4 x 8 KB of headers, 60 s header and body
# time-outs), Go (MaxHeaderBytes, ReadHeaderTimeout), Kestrel (32 KB, 100 fields, 30 s).
#: request line plus header fields, in bytes; past it: 431 and the connection closed
RECEIVER_MAX_HEADER_BYTES: Final = 16 * 1024
#: header fields in one request; past it: 431 and the connection closed
RECEIVER_MAX_HEADER_FIELDS: Final = 100
#: to receive a request's headers, from the connection's opening (or the request's first
#: byte on a kept-alive connection); past it the connection closes with no answer (not
#: 408: the provider never retries a 4xx, and it retries a failed connection)
RECEIVER_HEADER_TIMEOUT: Final = timedelta(seconds=10)
#: to receive a request's body once its headers are in; past it the connection closes
RECEIVER_BODY_TIMEOUT: Final = timedelta(seconds=10)
#: how long a kept-alive connection may stay idle between requests
RECEIVER_KEEP_ALIVE_TIMEOUT: Final = timedelta(seconds=5)
#: the range each of the three time-outs above may be set to (both ends included): below
#: it no real sender gets its headers in; past it, or NaN, a slow stranger holds a
#: connection for good
RECEIVER_TIMEOUT_RANGE: Final = (timedelta(seconds=0.1), timedelta(days=1))
#: open connections per worker process; past it a new one replaces the oldest connection
#: with no request in progress, or is answered 503 when every one is busy
RECEIVER_MAX_CONNECTIONS: Final = 1000
#: connections a worker accepts past its limit only to answer them 503 (then: closed)
RECEIVER_CONNECTION_OVERFLOW: Final = 32
#: file descriptors a worker needs besides its connections: the overflow, and 64 for the
#: store's files, the listening socket, the event loop, the metrics files and the logs
RECEIVER_FD_OVERHEAD: Final = RECEIVER_CONNECTION_OVERFLOW + 64

#: assumed (WEBHOOK_ACKNOWLEDGED_STATUSES): every 2xx acknowledges a delivery, not only 200
WEBHOOK_ACK_STATUS_MIN: Final = 200
WEBHOOK_ACK_STATUS_MAX: Final = 299


def is_acknowledgement(status: int | None) -> bool:
    """Whether a receiver's answer acknowledges a delivery: any 2xx (assumed, see
    ``WEBHOOK_ACKNOWLEDGED_STATUSES``); the document names 200."""
    return status is not None and WEBHOOK_ACK_STATUS_MIN <= status <= WEBHOOK_ACK_STATUS_MAX


#: spec: ``actionId`` is a "string, format uuid": the canonical 8-4-4-4-12 hexadecimal form,
#: either case (``ACTION_ID_FORMAT``, assumed); braces, ``urn:uuid:`` and no dashes are not it.
ACTION_ID_PATTERN: Final = (
    r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
)
_ACTION_ID_RE: Final = re.compile(ACTION_ID_PATTERN)


def canonical_action_id(value: object) -> str:
    """The ``actionId`` in its stored form (lower case), or :class:`ValueError` when it is
    not the canonical 8-4-4-4-12 hexadecimal UUID text."""
    # fullmatch: with match, "$" would also take a trailing newline.
    if not isinstance(value, str) or not _ACTION_ID_RE.fullmatch(value):
        raise ValueError(
            f"actionId {value!r} is not a UUID in the canonical 8-4-4-4-12 hexadecimal form "
            "(e.g. 3f2b8c1e-4d5a-4e6f-9a7b-1c2d3e4f5a6b)"
        )
    return value.lower()


_LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})


def callback_url_problem(url: object, *, allow_insecure_loopback: bool = False) -> str | None:
    """What is wrong with a webhook callback URL ("Any HTTPS URL"), or ``None``.

    An HTTPS URL with a host; ``allow_insecure_loopback`` also accepts ``http://`` on a
    loopback host (the sandbox's offline demos only).
    """
    if not isinstance(url, str):
        return f"callbackUrl must be an HTTPS URL string, got {type(url).__name__}"
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is not None and host and url == url.strip():
        scheme = parts.scheme.lower()
        if scheme == "https" or (
            allow_insecure_loopback and scheme == "http" and host in _LOOPBACK_HOSTS
        ):
            return None
    extra = " (or http:// on a loopback host)" if allow_insecure_loopback else ""
    return f"callbackUrl must be an HTTPS URL with a host{extra}, got {url!r}"


# --------------------------------------------------------------------------------------
# Brands (spec: "Brand | id | integer, int32")
# --------------------------------------------------------------------------------------

BRAND_ID_MIN: Final = -(2**31)  # spec: int32
BRAND_ID_MAX: Final = 2**31 - 1  # spec: int32


def is_brand_id(value: object) -> bool:
    """Whether ``value`` is a brand id as the document types it: an integer within int32."""
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and BRAND_ID_MIN <= value <= BRAND_ID_MAX
    )


def time_zone_problem(name: object) -> str | None:
    """What is wrong with a campaign time zone (an IANA name, ``TIME_ZONE_FORMAT``,
    assumed), or ``None``."""
    if isinstance(name, str) and name:
        try:
            ZoneInfo(name)
            return None
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return f"{name!r} is not an IANA time zone (e.g. 'Europe/Malta')"


def participant_chunk_size(endpoint: str, chunk_size: int | None = None) -> int:
    """Ids per participant request through ``endpoint`` (one of
    :data:`PARTICIPANT_ENDPOINTS`): ``chunk_size`` when given, else the endpoint's default
    (:data:`PARTICIPANT_CHUNK_SIZES`). A ``ValueError`` names an unknown endpoint or a size
    below 1."""
    if endpoint not in PARTICIPANT_ENDPOINTS:
        raise ValueError(
            f"endpoint must be one of {', '.join(PARTICIPANT_ENDPOINTS)}, got {endpoint!r}"
        )
    size = PARTICIPANT_CHUNK_SIZES[endpoint] if chunk_size is None else chunk_size
    if size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {size}")
    return size


def currency_decimals(currency: str) -> int | None:
    """The minor-unit digits of an ISO 4217 ``currency`` (JPY 0, EUR 2, KWD 3), or ``None``
    for a code it does not know (a crypto or house currency: the caller decides).

    Taken from Babel (CLDR), a maintained source, never from a hand-written table; Babel
    answers 2 for a code it does not know, so unknown codes are told apart here. (The
    sandbox keeps its own reading, as the provider's stand-in.)
    """
    from babel.numbers import get_currency_precision

    if currency not in _iso_currencies():
        return None
    return int(get_currency_precision(currency))


@functools.cache
def _iso_currencies() -> frozenset[str]:
    from babel.numbers import list_currencies

    return frozenset(list_currencies())


# ======================================================================================
# Assumptions: each gap the document marks "not shown" that the project needs
# ======================================================================================

FREE_ROUNDS_CAMPAIGN_TYPE: Final = "FREE_ROUNDS"
CAMPAIGN_START_FIELD: Final = "startDate"
CAMPAIGN_END_FIELD: Final = "endDate"
CAMPAIGN_TIME_ZONE_FIELD: Final = "timeZone"
CAMPAIGN_DATE_FORMAT: Final = "%Y-%m-%dT%H:%M:%S"
CAMPAIGN_PLAYERS_FIELD: Final = "players"
BET_NUMBER_MIN: Final = 1
RATE_LIMIT_STATUS: Final = 429
RATE_LIMIT_CODE: Final = "TOO_MANY_REQUESTS"
RATE_LIMIT_WINDOW: Final = timedelta(seconds=1)
VALIDATION_ERROR_STATUS: Final = 400
VALIDATION_ERROR_CODE: Final = "VALIDATION_ERROR"
PARTICIPANT_ID_REFUSALS: Final = frozenset({(VALIDATION_ERROR_STATUS, VALIDATION_ERROR_CODE)})
IDEMPOTENCY_CONFLICT_STATUS: Final = 409
IDEMPOTENCY_CONFLICT_CODE: Final = "IDEMPOTENCY_CONFLICT"
GAME_NOT_FOUND_STATUS: Final = 404
GAME_NOT_FOUND_CODE: Final = "GAME_NOT_FOUND"
ENDPOINT_BATCH_PARTICIPANT_TEMPLATE: Final = "{campaign}/{campaign_id}/participant/batch"
BATCH_PARTICIPANT_MAX_IDS: Final = 10_000
PARTICIPANT_MAX_IDS: Final = 1_000
#: The participant endpoints a caller chooses between: ``single`` (the documented one)
#: and ``batch`` (recommended for large lists; its path is assumed, so ``single`` is the
#: default everywhere).
PARTICIPANT_ENDPOINTS: Final = ("single", "batch")
#: Ids per participant request by default, per endpoint (both sizes assumed).
PARTICIPANT_CHUNK_SIZES: Final = MappingProxyType(
    {"single": PARTICIPANT_MAX_IDS, "batch": BATCH_PARTICIPANT_MAX_IDS}
)
PLAYER_ID_MAX_LENGTH: Final = 128
ENDPOINT_WEBHOOK_SUBSCRIPTION: Final = "webhook-subscription"
CAMPAIGN_ID_JSON_TYPE: Final = "string"
WEBHOOK_RETRY_FIRST_DELAY: Final = timedelta(seconds=30)
WEBHOOK_RETRY_FACTOR: Final = 2.0
WEBHOOK_RETRY_MAX_DELAY: Final = timedelta(hours=6)
WEBHOOK_SENDER_TIMEOUT: Final = timedelta(seconds=10)
WEBHOOK_OTHER_STATUS_RETRIED: Final = True
ENDPOINTS_BY_PRINCIPAL: Final = "all"
CONFIGURATION_FILTERS_OPTIONAL: Final = True
WEBHOOK_MAX_BODY_BYTES: Final = 64 * 1024
# issue 22: the receiver's own bounds against strangers (not the provider's rules).
#: Refusals the receiver makes before it authenticates or routes a request, by status:
#: one name per reason, the one taxonomy of the delivery log's ``error`` column (its
#: prefix), the metrics' ``outcome`` label and the analyser's invalid reasons.
WEBHOOK_REFUSALS: Final = MappingProxyType(
    {
        401: "unauthorized",
        403: "forbidden",
        404: "not_found",
        405: "method_not_allowed",
        413: "too_large",
        415: "unsupported_media_type",
        431: "headers_too_large",
    }
)
#: The refusal of a request with two ``Authorization`` or two ``Content-Type`` headers
#: (which one counts would be a parser's guess): 400, before authentication, so within the
#: same row budget and body prefix as :data:`WEBHOOK_REFUSALS`. Not in that mapping: 400
#: also answers an unreadable body after authentication, and the analyser reads a 400 row
#: by its body.
WEBHOOK_DUPLICATE_HEADER: Final = "duplicate_header"
#: How much of a refused request's body its log row keeps.
WEBHOOK_REFUSED_BODY_PREFIX_BYTES: Final = 1024
#: Log rows per second and per refusal reason (per worker) by default; past it refusals
#: are only counted, and a summary row per interval carries the count.
WEBHOOK_REFUSED_ROWS_PER_SECOND: Final = 20
#: The ``status`` of a summary row: not an answer (no HTTP status is 0) but a count of
#: refusals the receiver answered without a row of their own.
WEBHOOK_SUMMARY_STATUS: Final = 0
#: A ``bet``: at most this many digits before the decimal point and after it (ISO 4217's
#: largest exponent is 4; 18 integer digits is far beyond any real stake), never -0.
BET_MAX_INTEGER_DIGITS: Final = 18
BET_MAX_FRACTION_DIGITS: Final = 8
#: A body whose ``bet`` is a negative zero (``-0``, ``-0.0``, ``-0e3``): JSON parsers keep
#: no sign on zero, so the analyser finds it in the body's text (and an export keeps such
#: a body as text).
BET_NEGATIVE_ZERO_PATTERN: Final = (
    r'"bet"[ \t\r\n]*:[ \t\r\n]*-0(\.0*)?([eE][-+]?[0-9]+)?[ \t\r\n]*[,}]'
)
FEATURE_COST_ROUNDING: Final = decimal.ROUND_HALF_UP
NOT_FOUND_STATUS: Final = 404
NOT_FOUND_CODE: Final = "NOT_FOUND"
METHOD_NOT_ALLOWED_STATUS: Final = 405
METHOD_NOT_ALLOWED_CODE: Final = "METHOD_NOT_ALLOWED"
SUBSCRIPTION_EXISTS_STATUS: Final = 409
SUBSCRIPTION_EXISTS_CODE: Final = "SUBSCRIPTION_EXISTS"

PARTICIPANT_ADDITION_IDEMPOTENT: Final = True
PARTICIPANT_EXISTS_STATUS: Final = 409
PARTICIPANT_EXISTS_CODE: Final = "PARTICIPANT_EXISTS"
CAMPAIGN_PLAYERS_MAX_IDS: Final = 10_000
#: Campaign body fields without which creation is refused (the rest are optional).
CAMPAIGN_REQUIRED_FIELDS: Final = (
    "type",
    "name",
    "betNumber",
    "gameIds",
    "bet",
    "currencyCode",
    CAMPAIGN_START_FIELD,
    CAMPAIGN_END_FIELD,
    CAMPAIGN_TIME_ZONE_FIELD,
)
NAME_MIN_LENGTH: Final = 1
GAME_IDS_MIN: Final = 1
#: The bet must be greater than this (exclusive minimum).
BET_EXCLUSIVE_MIN: Final = 0
WEBHOOK_AUTH_TYPE_REQUIRED: Final = True
#: Campaign types the legacy ``freeround/campaign`` path serves.
LEGACY_CAMPAIGN_TYPES: Final = (FREE_ROUNDS_CAMPAIGN_TYPE,)
FREE_ROUNDS_BET_IS_BASE_BET: Final = True
BET_MAX_DECIMALS: Final = "the currency's minor units"
PLAYER_ID_FORBIDDEN: Final = "blank, or any control character (C0, DEL, C1)"
#: The control characters of PLAYER_ID_FORBIDDEN, as a regular expression character class.
PLAYER_ID_CONTROL_PATTERN: Final = r"[\x00-\x1f\x7f-\x9f]"
REQUEST_ID_SCOPE: Final = "brand"
CAMPAIGN_CREATED_STATUS: Final = 201
CAMPAIGN_REPLAY_STATUS: Final = 200
CAMPAIGN_START_IN_FUTURE: Final = True
WALLET_CREDENTIALS: Final = "BEARER, BASIC or NONE, like a subscription"
WEBHOOK_ACKNOWLEDGED_STATUSES: Final = range(WEBHOOK_ACK_STATUS_MIN, WEBHOOK_ACK_STATUS_MAX + 1)
ACTION_ID_FORMAT: Final = "8-4-4-4-12 hexadecimal, either case, stored lower-case"
TIMESTAMP_FRACTION_OPTIONAL: Final = True
BRAND_ID_NOT_INT32: Final = (403, CODE_BRAND_NOT_ALLOWED)
GLOBAL_TIERS_COMBINED: Final = "a GET counts against both 500 and 1000"
ENDPOINT_IDENTITY: Final = "method + path, brand prefix, 'freeround/' and campaign id out"
BATCH_PARTICIPANT_RATE_CLASS: Final = ENDPOINT_CLASS_PARTICIPANT
TIME_ZONE_FORMAT: Final = "IANA name (e.g. Europe/Malta)"
# issue 24
#: How a game event is attributed to a campaign (events carry no campaign id): all of
#: these match, and the event's timestamp lies in ``[start, end)`` of the campaign's window.
CAMPAIGN_ATTRIBUTION: Final = (
    "player among its participants, game among its games, its currency, its bet "
    "(AWARDED_FEATURE: the feature cost, with FEATURE in events), timestamp in [start, end)"
)
#: The event name an awarded feature's use carries in ``events``.
FEATURE_EVENT: Final = "FEATURE"
# issue 37
#: The operator wallet's ledger as gptools reads it by default (the wallet interface "is
#: described elsewhere"): one row per wallet transaction, these columns in this order.
WALLET_LEDGER_COLUMNS: Final = (
    "transaction_id", "round_id", "player_id", "game_id", "currency", "amount", "type",
    "free_round", "timestamp",
)  # fmt: skip
#: The ``type`` values of the ledger's transactions: a debit (the bet taken), a credit (the
#: winnings paid), a rollback (the debit given back); compared without regard to case.
WALLET_LEDGER_TYPES: Final = ("debit", "credit", "rollback")
#: How the ledger writes the free-round flag (``freeRounds=true`` on the wallet request),
#: without regard to case; the flag is on every transaction of a free round.
WALLET_FREE_ROUND_VALUES: Final = MappingProxyType(
    {"true": True, "1": True, "t": True, "yes": True, "false": False, "0": False, "f": False,
     "no": False}
)  # fmt: skip

# ======================================================================================
# The game event notification's validity (spec: "Game event notification (webhook
# payload)": "All fields are required", and the table's types), declared once
# ======================================================================================

#: The checks a field of the notification fails with, each the first half of a refusal
#: reason (``CHECK:FIELD``, e.g. ``out_of_range:bet``): the model, the receiver, the
#: analyser's checks (DuckDB and Spark) all name a refusal by these.
CHECK_MISSING: Final = "missing"  # absent, or JSON null
CHECK_WRONG_TYPE: Final = "wrong_type"  # not the JSON type of the document's table
CHECK_EMPTY: Final = "empty"  # a string shorter than its minimum length
CHECK_NOT_A_UUID: Final = "not_a_uuid"  # not the pattern of a uuid (ACTION_ID_PATTERN)
CHECK_HAS_ZONE: Final = "has_zone"  # a timestamp that names a zone: the document has none
CHECK_BAD_FORMAT: Final = "bad_format"  # not the pattern, or no real date
CHECK_OUT_OF_RANGE: Final = "out_of_range"  # a number outside its bounds

#: spec: "date-time with fractional seconds", "in UTC, without a zone offset": each field
#: in its range, up to nine fractional digits, the fraction optional
#: (``TIMESTAMP_FRACTION_OPTIONAL``, assumed); the date must also exist (no 30 February,
#: no year 0). Written for RE2 and Python alike ([0-9], not \d).
EVENT_TIMESTAMP_PATTERN: Final = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?$"
)
#: A timestamp that does not fit :data:`EVENT_TIMESTAMP_PATTERN` and ends like a zone
#: (``Z``, ``+02``, ``-05:30``) is refused as ``has_zone``, any other as ``bad_format``.
EVENT_TIMESTAMP_ZONE_PATTERN: Final = r"(Z|z|[+-][0-9]{2}(:?[0-9]{2})?)$"

#: The non-finite literals a body may hold where a number stands: RFC 8259 has none, but
#: the receiver's parser (Python's ``json``) reads these three, and only these, as numbers
#: (ours: the receiver answers as it parses). A body holding one is JSON; a number field
#: holding one fails its range (``out_of_range:bet``), on every implementation (the model,
#: the receiver, the analyser on DuckDB and on Spark).
JSON_NON_FINITE_LITERALS: Final = ("NaN", "Infinity", "-Infinity")

JsonType = Literal["string", "number", "array of string"]


@dataclass(frozen=True, slots=True)
class EventField:
    """One field of the game event notification as every check reads it.

    ``name`` is the wire name, ``json_type`` the document's type (a ``number`` is a JSON
    number, never a string of digits, nor ``true``); ``required``: absent and JSON null
    are refused. ``min_length`` bounds a string, ``pattern`` (RE2 and Python syntax, whole
    text) constrains it, refused with ``pattern_check``; ``zone_pattern`` tells a refused
    timestamp that names a zone. A number lies in ``[minimum, 10**max_integer_digits)``,
    not ``-0``, with at most ``max_fraction_digits`` decimals (trailing zeros apart).
    """

    name: str
    json_type: JsonType
    required: bool = True
    min_length: int | None = None
    pattern: str | None = None
    pattern_check: str | None = None
    zone_pattern: str | None = None
    minimum: int | None = None
    max_integer_digits: int | None = None
    max_fraction_digits: int | None = None

    @property
    def checks(self) -> tuple[str, ...]:
        """The checks of this field, in the order they are tried (the first failing one
        is the refusal's reason)."""
        out = [CHECK_MISSING] if self.required else []
        out.append(CHECK_WRONG_TYPE)
        if self.min_length is not None:
            out.append(CHECK_EMPTY)
        if self.zone_pattern is not None:
            out.append(CHECK_HAS_ZONE)
        if self.pattern_check is not None:
            out.append(self.pattern_check)
        if self.minimum is not None or self.max_integer_digits is not None:
            out.append(CHECK_OUT_OF_RANGE)
        return tuple(out)

    def reason(self, check: str) -> str:
        """The refusal reason of ``check`` on this field (``out_of_range:bet``)."""
        return f"{check}:{self.name}"


#: spec: the notification's eight fields, every one required, in the order their checks
#: run (the actionId first: an invalid body that still names its action is an attempt of
#: it). Bounds the document leaves out are the assumptions named beside them.
GAME_EVENT_FIELDS: Final[tuple[EventField, ...]] = (
    # "string, format uuid": the canonical form only (ACTION_ID_FORMAT, assumed)
    EventField("actionId", "string", pattern=ACTION_ID_PATTERN, pattern_check=CHECK_NOT_A_UUID),
    # ids and the currency: strings; an empty one names nothing (ours)
    EventField("roundId", "string", min_length=1),
    EventField("gameId", "string", min_length=1),
    EventField("playerId", "string", min_length=1),
    EventField(
        "timestamp",
        "string",
        pattern=EVENT_TIMESTAMP_PATTERN,
        pattern_check=CHECK_BAD_FORMAT,
        zone_pattern=EVENT_TIMESTAMP_ZONE_PATTERN,
    ),
    # "Bet amount ... in major currency units": a sane amount of money (ours)
    EventField(
        "bet",
        "number",
        minimum=0,
        max_integer_digits=BET_MAX_INTEGER_DIGITS,
        max_fraction_digits=BET_MAX_FRACTION_DIGITS,
    ),
    EventField("currencyCode", "string", min_length=1),
    # "Values seen: COIN, FEATURE": any string is kept (KNOWN_EVENT_TYPES)
    EventField("events", "array of string"),
)
#: The fields of :data:`GAME_EVENT_FIELDS` by wire name.
GAME_EVENT_FIELD: Final = MappingProxyType({f.name: f for f in GAME_EVENT_FIELDS})
#: Every reason a game event notification is refused for, in the order checks run.
GAME_EVENT_REASONS: Final = tuple(f.reason(c) for f in GAME_EVENT_FIELDS for c in f.checks)

#: ours: the kinds of value whose set the document leaves open ("values seen", "the full
#: list is not shown"), which the receiver's contract watcher and the analyser's "new in
#: this log" section look for values not seen before in: the event types, the top-level
#: field names, the currencies and the game ids.
OPEN_VALUE_KINDS: Final = ("event_type", "field", "currency", "game")
#: The wire field that holds each kind's values (``field``: the body's own keys).
OPEN_VALUE_FIELDS: Final = MappingProxyType(
    {"event_type": "events", "currency": "currencyCode", "game": "gameId"}
)
#: spec: what the document shows of each kind (the event types seen, the eight fields; it
#: names no currency or game), the values that are never news.
KNOWN_OPEN_VALUES: Final[MappingProxyType[str, frozenset[str]]] = MappingProxyType(
    {
        "event_type": KNOWN_EVENT_TYPES,
        "field": frozenset(GAME_EVENT_FIELD),
        "currency": frozenset(),
        "game": frozenset(),
    }
)

ASSUMPTIONS: Final[tuple[Assumption, ...]] = (
    Assumption(
        "IMPLICIT_ALLOWED_PRINCIPALS",
        "INDIVIDUAL only (INTERNAL: explicit form)",
        "INTERNAL appears only in the response enum; its path form is not shown, so it names "
        "its brand like PARTNER",
        "the client sends INTERNAL requests as asked and lets the server decide",
    ),
    Assumption(
        "METHOD_NOT_ALLOWED_STATUS / METHOD_NOT_ALLOWED_CODE",
        (405, "METHOD_NOT_ALLOWED"),
        "the answer to a wrong HTTP method is not shown; 405 is HTTP's norm",
        "unknown codes still map to errors.ApiError with the code kept",
    ),
    Assumption(
        "FREE_ROUNDS_CAMPAIGN_TYPE",
        FREE_ROUNDS_CAMPAIGN_TYPE,
        "only AWARDED_FEATURE is named; the legacy path 'freeround/campaign' suggests this name",
        "CampaignRequest(type=...) accepts any string; Plan(free_rounds_type=...)",
    ),
    Assumption(
        "CAMPAIGN_START_FIELD / CAMPAIGN_END_FIELD / CAMPAIGN_TIME_ZONE_FIELD",
        (CAMPAIGN_START_FIELD, CAMPAIGN_END_FIELD, CAMPAIGN_TIME_ZONE_FIELD),
        "the document says 'start and end dates based on a time zone' without JSON names",
        "Client(campaign_field_names={'startDate': ...}); the sandbox reads these constants",
    ),
    Assumption(
        "CAMPAIGN_DATE_FORMAT",
        CAMPAIGN_DATE_FORMAT,
        "dates are wall-clock times in the campaign's zone, so no offset is sent",
        "spec.CAMPAIGN_DATE_FORMAT (the model and the sandbox both read it)",
    ),
    Assumption(
        "CAMPAIGN_PLAYERS_FIELD",
        "players: array of player-id strings",
        "the shape is shown only for participant addition, which names players by id",
        "Client(campaign_field_names={'players': ...}), or add participants instead",
    ),
    Assumption(
        "BET_NUMBER_MIN",
        BET_NUMBER_MIN,
        "only the maximum 1500 is published; a campaign of zero rounds awards nothing",
        "spec.BET_NUMBER_MIN",
    ),
    Assumption(
        "RATE_LIMIT_STATUS / RATE_LIMIT_CODE",
        (RATE_LIMIT_STATUS, RATE_LIMIT_CODE),
        "the rate-limit response is not shown; 429 with Retry-After (seconds) is HTTP's norm",
        "Client(rate_limit_status=...), Sandbox(rate_limit_status=...)",
    ),
    Assumption(
        "RATE_LIMIT_WINDOW",
        "1 s sliding window per tier",
        "limits are 'requests per second' without a window definition",
        "Client(rate_tiers=...), Sandbox(rate_tiers=...)",
    ),
    Assumption(
        "VALIDATION_ERROR_STATUS / VALIDATION_ERROR_CODE",
        (VALIDATION_ERROR_STATUS, VALIDATION_ERROR_CODE),
        "campaign validation failure codes are not shown; 400 is HTTP's norm for bad input",
        "unknown codes still map to errors.ApiError with the code kept",
    ),
    Assumption(
        "PARTICIPANT_ID_REFUSALS",
        "(400, 'VALIDATION_ERROR') only",
        "which answer refuses some player ids (not the request as a whole) is not shown; "
        "only the validation refusal is split down to the ids, any other 4xx stops the load",
        "load_participants(id_refusals={(status, code), ...})",
    ),
    Assumption(
        "IDEMPOTENCY_CONFLICT_STATUS / IDEMPOTENCY_CONFLICT_CODE",
        (IDEMPOTENCY_CONFLICT_STATUS, IDEMPOTENCY_CONFLICT_CODE),
        "reusing a requestId with another body must be refused; the answer is not shown",
        "unknown codes still map to errors.ApiError with the code kept",
    ),
    Assumption(
        "GAME_NOT_FOUND_STATUS / GAME_NOT_FOUND_CODE",
        (GAME_NOT_FOUND_STATUS, GAME_NOT_FOUND_CODE),
        "the answer for an unknown gameId is not shown",
        "unknown codes still map to errors.ApiError with the code kept",
    ),
    Assumption(
        "ENDPOINT_BATCH_PARTICIPANT_TEMPLATE",
        ENDPOINT_BATCH_PARTICIPANT_TEMPLATE,
        "the batch endpoint is recommended but its path and payload are not shown; body "
        "{'playerIds': [...]} like the single endpoint",
        "Client(batch_participant_path=...)",
    ),
    Assumption(
        "BATCH_PARTICIPANT_MAX_IDS",
        BATCH_PARTICIPANT_MAX_IDS,
        "the batch size limit is not shown; a fifth of the 50,000-row back-office import",
        "Client.add_participants_batch(max_ids=...)",
    ),
    Assumption(
        "PARTICIPANT_MAX_IDS",
        PARTICIPANT_MAX_IDS,
        "the largest playerIds list in one participant request is not shown",
        "load_participants(chunk_size=...), Sandbox(participant_max_ids=...)",
    ),
    Assumption(
        "PLAYER_ID_MAX_LENGTH",
        PLAYER_ID_MAX_LENGTH,
        "the external player id's length limit is not shown",
        "load_participants(max_id_length=...), Sandbox(player_id_max_length=...)",
    ),
    Assumption(
        "ENDPOINT_WEBHOOK_SUBSCRIPTION",
        ENDPOINT_WEBHOOK_SUBSCRIPTION,
        "subscription create/update paths are not shown; GET reads, POST creates, PUT updates, "
        "both path forms, fields callbackUrl/authenticationType/apiKey/username/password",
        "Client(webhook_subscription_path=...)",
    ),
    Assumption(
        "CAMPAIGN_ID_JSON_TYPE",
        CAMPAIGN_ID_JSON_TYPE,
        "the type of campaignId is not shown; a string holds integers too",
        "models.CampaignCreated coerces an integer id to its string",
    ),
    Assumption(
        "WEBHOOK_RETRY_FIRST_DELAY / WEBHOOK_RETRY_FACTOR / WEBHOOK_RETRY_MAX_DELAY",
        (WEBHOOK_RETRY_FIRST_DELAY, WEBHOOK_RETRY_FACTOR, WEBHOOK_RETRY_MAX_DELAY),
        "retry interval values are not shown, only 'exponential backoff' for up to 7 days",
        "Sandbox webhook dispatcher(first_delay=, factor=, max_delay=)",
    ),
    Assumption(
        "WEBHOOK_SENDER_TIMEOUT",
        WEBHOOK_SENDER_TIMEOUT,
        "the provider's time-out on a receiver is not shown; a time-out is retried like a 5xx",
        "Sandbox webhook dispatcher(timeout=...)",
    ),
    Assumption(
        "WEBHOOK_OTHER_STATUS_RETRIED",
        WEBHOOK_OTHER_STATUS_RETRIED,
        "'the behaviour on ... non-2xx/4xx/5xx codes: not shown' (1xx, 3xx); treated as temporary",
        "Sandbox webhook dispatcher(retry_other_status=...)",
    ),
    Assumption(
        "ENDPOINTS_BY_PRINCIPAL",
        ENDPOINTS_BY_PRINCIPAL,
        "which endpoints each user type may call is not shown; all types may call all",
        "the server decides; the client never refuses an endpoint by type",
    ),
    Assumption(
        "CONFIGURATION_FILTERS_OPTIONAL",
        CONFIGURATION_FILTERS_OPTIONAL,
        "whether gameId/currencyCode are optional is not shown; omitted means no filter "
        "(every configuration; for the game endpoint every game as {'content': [...]})",
        "pass both to be safe against a server that requires them",
    ),
    Assumption(
        "WEBHOOK_MAX_BODY_BYTES",
        WEBHOOK_MAX_BODY_BYTES,
        "the largest notification body is not shown; the eight documented fields fit in "
        "well under 1 KiB, so 64 KiB leaves room for fields the provider may add",
        "WebhookReceiver(max_body_bytes=...), gptools webhooks serve --max-body-bytes",
    ),
    Assumption(
        "FEATURE_COST_ROUNDING",
        FEATURE_COST_ROUNDING,
        "the document gives Feature Cost = Base Bet × Price Multiplier without a rounding "
        "rule; a product finer than the currency's minor unit is rounded half up",
        "costs.feature_cost(rounding=...) with any decimal rounding mode",
    ),
    Assumption(
        "NOT_FOUND_STATUS / NOT_FOUND_CODE",
        (NOT_FOUND_STATUS, NOT_FOUND_CODE),
        "the answer for an unknown path, or for reading/updating a webhook subscription "
        "that was never created, is not shown; 404 is HTTP's norm",
        "unknown codes still map to errors.ApiError (404: errors.NotFoundError)",
    ),
    Assumption(
        "SUBSCRIPTION_EXISTS_STATUS / SUBSCRIPTION_EXISTS_CODE",
        (SUBSCRIPTION_EXISTS_STATUS, SUBSCRIPTION_EXISTS_CODE),
        "creating a webhook subscription for a brand that has one is not shown; refused "
        "so that an update is explicit (PUT)",
        "unknown codes still map to errors.ApiError (409: errors.ConflictError)",
    ),
    Assumption(
        "PARTICIPANT_ADDITION_IDEMPOTENT",
        PARTICIPANT_ADDITION_IDEMPOTENT,
        "whether adding a player who is already a participant is harmless is not shown; we "
        "hold it is (a no-op), so the client repeats an addition after a lost answer or a "
        "5xx, the loader re-sends unknown chunks and apply_plan re-adds on a re-run",
        "Client(participant_retries=False); Sandbox(readd_participants_refused=True) "
        "simulates a server that refuses re-adds",
    ),
    Assumption(
        "PARTICIPANT_EXISTS_STATUS / PARTICIPANT_EXISTS_CODE",
        (PARTICIPANT_EXISTS_STATUS, PARTICIPANT_EXISTS_CODE),
        "the answer of a server that refuses to add an existing participant is not shown; "
        "used only by the sandbox's switch that simulates such a server",
        "Sandbox(readd_participants_refused=True); unknown codes still map to errors.ApiError",
    ),
    Assumption(
        "CAMPAIGN_PLAYERS_MAX_IDS",
        CAMPAIGN_PLAYERS_MAX_IDS,
        "the largest 'players' list of a campaign body is not shown; the batch limit, so a "
        "list that fits one batch fits the body",
        "CampaignRequest checks it; Sandbox(campaign_players_max_ids=...)",
    ),
    Assumption(
        "CAMPAIGN_REQUIRED_FIELDS",
        " ".join(CAMPAIGN_REQUIRED_FIELDS),
        "'Required/optional status and types of the campaign body fields: not shown'; these "
        "are required, the rest optional; strings are strings, betNumber an integer, bet a "
        "JSON number, gameIds a list of strings",
        "CampaignRequest and the sandbox both read spec.CAMPAIGN_REQUIRED_FIELDS",
    ),
    Assumption(
        "NAME_MIN_LENGTH / GAME_IDS_MIN / BET_EXCLUSIVE_MIN",
        (NAME_MIN_LENGTH, GAME_IDS_MIN, BET_EXCLUSIVE_MIN),
        "only maxima are published ('name ... max 255 characters'); an empty name, no game "
        "or a bet of zero cannot make a campaign",
        "CampaignRequest and the sandbox both read these constants",
    ),
    Assumption(
        "WEBHOOK_AUTH_TYPE_REQUIRED",
        WEBHOOK_AUTH_TYPE_REQUIRED,
        "the subscription table marks the callback URL 'Optional' but not 'authentication "
        "type', and calls NONE 'not recommended for production': so no default, NONE only "
        "when asked",
        "WebhookSubscription(authentication_type='NONE') states it explicitly",
    ),
    Assumption(
        "WEBHOOK_ACKNOWLEDGED_STATUSES",
        f"{WEBHOOK_ACK_STATUS_MIN}..{WEBHOOK_ACK_STATUS_MAX}",
        "the document lists '200 | Processed successfully; acknowledged' and leaves only "
        "'non-2xx/4xx/5xx codes' not shown, so every 2xx acknowledges like 200",
        "spec.is_acknowledgement (the sandbox dispatcher and the analyser both use it)",
    ),
    Assumption(
        "ACTION_ID_FORMAT",
        ACTION_ID_FORMAT,
        "the payload says 'string, format uuid' without naming a textual variant; the "
        "canonical form is the only one; braces, 'urn:uuid:' and no dashes are refused",
        "spec.canonical_action_id (models, receiver and analyser)",
    ),
    Assumption(
        "TIMESTAMP_FRACTION_OPTIONAL",
        TIMESTAMP_FRACTION_OPTIONAL,
        "the timestamp is 'date-time with fractional seconds'; a value without a fraction "
        "is accepted as .000000, since refusing it (4xx) would lose the action for good",
        "models.parse_event_timestamp",
    ),
    Assumption(
        "BRAND_ID_NOT_INT32",
        BRAND_ID_NOT_INT32,
        "brandId is 'integer, an id from allowedBrands' (Brand id 'integer, int32'); a "
        "path segment that is not such an integer names no brand the account covers",
        "the client refuses it locally (TypeError/ValueError); models.Brand checks int32",
    ),
    Assumption(
        "GLOBAL_TIERS_COMBINED",
        GLOBAL_TIERS_COMBINED,
        "the table has 'All methods (GET, POST, ...) 500' and 'GET methods only 1000' without "
        "saying how they combine; counting a GET in both never exceeds either figure",
        "Client(rate_tiers=...), Sandbox(rate_tiers=...)",
    ),
    Assumption(
        "ENDPOINT_IDENTITY",
        ENDPOINT_IDENTITY,
        "'Per endpoint per user | All other endpoints | 60' does not define an endpoint; "
        "each method and path template gets its own 60/s, both path forms are one endpoint",
        "spec.endpoint_of; RateTier(each_endpoint=...)",
    ),
    Assumption(
        "BATCH_PARTICIPANT_RATE_CLASS",
        BATCH_PARTICIPANT_RATE_CLASS,
        "the batch endpoint's path is not shown; under the assumed '.../participant/batch' "
        "it counts in the participant tiers (130 per user, 270 per endpoint)",
        "Client(rate_tiers=...), Sandbox(rate_tiers=...)",
    ),
    Assumption(
        "LEGACY_CAMPAIGN_TYPES",
        LEGACY_CAMPAIGN_TYPES,
        "'/api/v1/freeround/campaign/...' is named for free rounds and kept 'for backward "
        "compatibility'; awarded features use the unified form; both path forms are served",
        "Sandbox(legacy_campaign_types=...); the client refuses AWARDED_FEATURE locally",
    ),
    Assumption(
        "TIME_ZONE_FORMAT",
        TIME_ZONE_FORMAT,
        "dates are 'based on a time zone' without a value format; an IANA name carries DST",
        "spec.time_zone_problem (the model and the sandbox both use it)",
    ),
    Assumption(
        "FREE_ROUNDS_BET_IS_BASE_BET",
        FREE_ROUNDS_BET_IS_BASE_BET,
        "the bet rule is given only 'For a campaign of type AWARDED_FEATURE'; a free round "
        "plays one base bet, so it must be one of the game's betSizes in the currency",
        "Sandbox(free_rounds_bet_is_base_bet=False) accepts any positive bet",
    ),
    Assumption(
        "BET_MAX_DECIMALS",
        BET_MAX_DECIMALS,
        "'Bet value in major currency units' without a precision; more decimals than the "
        "currency's minor unit (ISO 4217: JPY 0, EUR 2, KWD 3) cannot be paid",
        "costs.feature_cost(exponents=...) for unknown currencies; the sandbox refuses more",
    ),
    Assumption(
        "PLAYER_ID_FORBIDDEN",
        PLAYER_ID_FORBIDDEN,
        "the external player id's format is not shown beyond 'string'; a blank id or a "
        "control character cannot be a real player",
        "load_participants rejects them before sending; the sandbox refuses them",
    ),
    Assumption(
        "REQUEST_ID_SCOPE",
        REQUEST_ID_SCOPE,
        "'requestId ... is the idempotency key of campaign creation' without a scope; every "
        "request acts on one brand, so keys are per brand",
        "the sandbox keys replays by (brand, requestId)",
    ),
    Assumption(
        "CAMPAIGN_CREATED_STATUS / CAMPAIGN_REPLAY_STATUS",
        (CAMPAIGN_CREATED_STATUS, CAMPAIGN_REPLAY_STATUS),
        "'Created campaign, identified by campaignId' without a status; 201 for a new "
        "campaign, 200 for a replay of a requestId with the same body",
        "the client accepts any 2xx",
    ),
    Assumption(
        "CAMPAIGN_START_IN_FUTURE",
        CAMPAIGN_START_IN_FUTURE,
        "whether a campaign may start in the past is not shown; the planner refuses it, as "
        "rounds already missed cannot be played (the sandbox does not check it)",
        "validate_plan(now=...) judges 'the future' at another time",
    ),
    Assumption(
        "WALLET_CREDENTIALS",
        WALLET_CREDENTIALS,
        "default-endpoint deliveries use 'the authentication credentials already configured "
        "for the account's wallet'; the wallet interface 'is described elsewhere', so their "
        "kind is not shown",
        "SandboxConfig(wallet_credentials=WalletCredentials.bearer(...)/.basic(...))",
    ),
    # issue 24
    Assumption(
        "CAMPAIGN_ATTRIBUTION / FEATURE_EVENT",
        CAMPAIGN_ATTRIBUTION,
        "game events carry no campaign id; an event that matches every term of a campaign "
        "is that campaign's (two campaigns: ambiguous, never counted twice)",
        "campaign_results(feature_event=None) drops the events term; CampaignTerms set the "
        "rest; a log with a campaign id column replaces the rule (ColumnMapping(campaign_id=...))",
    ),
    # issue 37
    Assumption(
        "WALLET_LEDGER_COLUMNS / WALLET_LEDGER_TYPES / WALLET_FREE_ROUND_VALUES",
        "transaction_id, round_id, player_id, game_id, currency, amount, type "
        "(debit|credit|rollback), free_round, timestamp (with a zone)",
        "the wallet interface is 'described elsewhere'; these are the fields every wallet "
        "request names, and a round's wallet round id is taken to be the event's roundId",
        "reconcile(mapping=LedgerMapping(...)) / --ledger-column FIELD=NAME names other "
        "columns and type values",
    ),
)


def assumption(name: str) -> Assumption:
    """Return the :class:`Assumption` recorded under ``name``."""
    for a in ASSUMPTIONS:
        if a.name == name:
            return a
    raise KeyError(f"no assumption named {name!r}; known: {[a.name for a in ASSUMPTIONS]}")


def assumptions_markdown() -> str:
    """The README's table of assumptions, rendered from :data:`ASSUMPTIONS`."""
    rows = [
        "| assumption | value | why (the document does not show it) | override |",
        "| --- | --- | --- | --- |",
    ]
    for a in ASSUMPTIONS:
        value = str(a.value).replace("|", "\\|")
        rows.append(f"| `{a.name}` | `{value}` | {a.reason} | {a.override} |")
    return "\n".join(rows)


__all__ = [
    "ACTION_ID_FORMAT",
    "ACTION_ID_PATTERN",
    "API_PREFIX",
    "ASSUMPTIONS",
    "BACK_OFFICE_CSV_IMPORT_MAX_ROWS",
    "BATCH_PARTICIPANT_MAX_IDS",
    "BATCH_PARTICIPANT_RATE_CLASS",
    "BET_EXCLUSIVE_MIN",
    "BET_MAX_DECIMALS",
    "BET_MAX_FRACTION_DIGITS",
    "BET_MAX_INTEGER_DIGITS",
    "BET_NEGATIVE_ZERO_PATTERN",
    "BET_NUMBER_MAX",
    "BET_NUMBER_MIN",
    "BRAND_ID_MAX",
    "BRAND_ID_MIN",
    "BRAND_ID_NOT_INT32",
    "BRAND_PREFIX_TEMPLATE",
    "CAMPAIGN_ATTRIBUTION",
    "CAMPAIGN_CREATED_STATUS",
    "CAMPAIGN_DATE_FORMAT",
    "CAMPAIGN_END_FIELD",
    "CAMPAIGN_ID_JSON_TYPE",
    "CAMPAIGN_PLAYERS_FIELD",
    "CAMPAIGN_PLAYERS_MAX_IDS",
    "CAMPAIGN_REPLAY_STATUS",
    "CAMPAIGN_REQUIRED_FIELDS",
    "CAMPAIGN_START_FIELD",
    "CAMPAIGN_START_IN_FUTURE",
    "CAMPAIGN_TIME_ZONE_FIELD",
    "CAMPAIGN_TYPE_AWARDED_FEATURE",
    "CHECK_BAD_FORMAT",
    "CHECK_EMPTY",
    "CHECK_HAS_ZONE",
    "CHECK_MISSING",
    "CHECK_NOT_A_UUID",
    "CHECK_OUT_OF_RANGE",
    "CHECK_WRONG_TYPE",
    "CODE_BRAND_NOT_ALLOWED",
    "CODE_BRAND_REQUIRED",
    "CODE_INVALID_REQUEST",
    "CODE_NOT_AUTHORIZED",
    "CODE_TIMEOUT",
    "CODE_UNKNOWN_ERROR",
    "CONFIGURATION_FILTERS_OPTIONAL",
    "DEFAULT_WEBHOOK_PATH",
    "ENDPOINTS_BY_PRINCIPAL",
    "ENDPOINT_AWARDED_FEATURE_CONFIGURATIONS",
    "ENDPOINT_BATCH_PARTICIPANT_TEMPLATE",
    "ENDPOINT_CAMPAIGN",
    "ENDPOINT_CLASS_CAMPAIGN_CREATE",
    "ENDPOINT_CLASS_OTHER",
    "ENDPOINT_CLASS_PARTICIPANT",
    "ENDPOINT_GAME",
    "ENDPOINT_IDENTITY",
    "ENDPOINT_LEGACY_CAMPAIGN",
    "ENDPOINT_PARTICIPANT_TEMPLATE",
    "ENDPOINT_WEBHOOK_SUBSCRIPTION",
    "ERROR_STATUS",
    "EVENT_TIMESTAMP_PATTERN",
    "EVENT_TIMESTAMP_ZONE_PATTERN",
    "EXPLICIT_ONLY_PRINCIPALS",
    "EXTERNAL_CAMPAIGN_ID_MAX_LENGTH",
    "FEATURE_COST_ROUNDING",
    "FEATURE_EVENT",
    "FIELD_CAMPAIGN_ID",
    "FIELD_CONTENT",
    "FIELD_PLAYER_IDS",
    "FREE_ROUNDS_BET_IS_BASE_BET",
    "FREE_ROUNDS_CAMPAIGN_TYPE",
    "GAME_EVENT_FIELD",
    "GAME_EVENT_FIELDS",
    "GAME_EVENT_REASONS",
    "GAME_IDS_MIN",
    "GAME_NOT_FOUND_CODE",
    "GAME_NOT_FOUND_STATUS",
    "GLOBAL_TIERS_COMBINED",
    "IDEMPOTENCY_CONFLICT_CODE",
    "IDEMPOTENCY_CONFLICT_STATUS",
    "IMPLICIT_ALLOWED_PRINCIPALS",
    "JSON_MAX_DEPTH",
    "JSON_NON_FINITE_LITERALS",
    "KNOWN_EVENT_TYPES",
    "KNOWN_OPEN_VALUES",
    "KNOWN_PRINCIPAL_TYPES",
    "LEGACY_CAMPAIGN_TYPES",
    "METHOD_NOT_ALLOWED_CODE",
    "METHOD_NOT_ALLOWED_STATUS",
    "NAME_MAX_LENGTH",
    "NAME_MIN_LENGTH",
    "NOT_FOUND_CODE",
    "NOT_FOUND_STATUS",
    "OPEN_VALUE_FIELDS",
    "OPEN_VALUE_KINDS",
    "PARTICIPANT_ADDITION_IDEMPOTENT",
    "PARTICIPANT_CHUNK_SIZES",
    "PARTICIPANT_ENDPOINTS",
    "PARTICIPANT_EXISTS_CODE",
    "PARTICIPANT_EXISTS_STATUS",
    "PARTICIPANT_ID_REFUSALS",
    "PARTICIPANT_MAX_IDS",
    "PLAYER_ID_CONTROL_PATTERN",
    "PLAYER_ID_FORBIDDEN",
    "PLAYER_ID_MAX_LENGTH",
    "PRINCIPAL_INDIVIDUAL",
    "PRINCIPAL_INTERNAL",
    "PRINCIPAL_PARTNER",
    "PRINCIPAL_THIRD_PARTY",
    "QUERY_CURRENCY_CODE",
    "QUERY_GAME_ID",
    "RATE_LIMIT_CODE",
    "RATE_LIMIT_STATUS",
    "RATE_LIMIT_WINDOW",
    "RATE_TIERS",
    "RECEIVER_BODY_TIMEOUT",
    "RECEIVER_CONNECTION_OVERFLOW",
    "RECEIVER_FD_OVERHEAD",
    "RECEIVER_HEADER_TIMEOUT",
    "RECEIVER_KEEP_ALIVE_TIMEOUT",
    "RECEIVER_MAX_CONNECTIONS",
    "RECEIVER_MAX_HEADER_BYTES",
    "RECEIVER_MAX_HEADER_FIELDS",
    "RECEIVER_TIMEOUT_RANGE",
    "REQUEST_ID_MAX_LENGTH",
    "REQUEST_ID_SCOPE",
    "RULES_URL_MAX_LENGTH",
    "SELF_PATH",
    "SUBSCRIPTION_EXISTS_CODE",
    "SUBSCRIPTION_EXISTS_STATUS",
    "TIMESTAMP_FRACTION_OPTIONAL",
    "TIME_ZONE_FORMAT",
    "TYPICAL_MIN_CAMPAIGN_DURATION",
    "VALIDATION_ERROR_CODE",
    "VALIDATION_ERROR_STATUS",
    "WALLET_CREDENTIALS",
    "WALLET_FREE_ROUND_VALUES",
    "WALLET_LEDGER_COLUMNS",
    "WALLET_LEDGER_TYPES",
    "WEBHOOK_ACKNOWLEDGED_STATUSES",
    "WEBHOOK_ACK_STATUS_MAX",
    "WEBHOOK_ACK_STATUS_MIN",
    "WEBHOOK_AUTH_TYPES",
    "WEBHOOK_AUTH_TYPE_REQUIRED",
    "WEBHOOK_CONTENT_TYPE",
    "WEBHOOK_DEDUPE_RETENTION",
    "WEBHOOK_DUPLICATE_HEADER",
    "WEBHOOK_LOG_RETENTION",
    "WEBHOOK_MAX_BODY_BYTES",
    "WEBHOOK_OTHER_STATUS_RETRIED",
    "WEBHOOK_REFUSALS",
    "WEBHOOK_REFUSED_BODY_PREFIX_BYTES",
    "WEBHOOK_REFUSED_ROWS_PER_SECOND",
    "WEBHOOK_RESPONSE_BUDGET",
    "WEBHOOK_RETRY_FACTOR",
    "WEBHOOK_RETRY_FIRST_DELAY",
    "WEBHOOK_RETRY_MAX_DELAY",
    "WEBHOOK_RETRY_WINDOW",
    "WEBHOOK_SENDER_TIMEOUT",
    "WEBHOOK_SUMMARY_STATUS",
    "Assumption",
    "EventField",
    "JsonType",
    "RateTier",
    "TierScope",
    "assumption",
    "assumptions_markdown",
    "callback_url_problem",
    "canonical_action_id",
    "currency_decimals",
    "endpoint_class",
    "endpoint_of",
    "is_acknowledgement",
    "is_brand_id",
    "participant_chunk_size",
    "tiers_for",
    "time_zone_problem",
]
