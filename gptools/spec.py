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
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Literal

# --------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------

Source = Literal["spec", "assumed"]


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
    source: Source = "assumed"


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
BACK_OFFICE_CSV_IMPORT_MAX_ROWS: Final = 50_000  # spec: players per back-office CSV import
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
    (everyone on one endpoint class).
    """

    name: str
    scope: TierScope
    per_second: int
    methods: frozenset[str] | None
    endpoint: str | None


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
    RateTier("user_other", "per_user_endpoint", 60, _ALL, ENDPOINT_CLASS_OTHER),
    RateTier("endpoint_participant", "per_endpoint", 270, _ALL, ENDPOINT_CLASS_PARTICIPANT),
    RateTier("endpoint_campaign", "per_endpoint", 135, _ALL, ENDPOINT_CLASS_CAMPAIGN_CREATE),
)

_PARTICIPANT_RE: Final = re.compile(
    r"^/api/v1(?:/brands/[^/]+)?/(?:freeround/)?campaign/[^/]+/participant(?:/.*)?$"
)
_CAMPAIGN_RE: Final = re.compile(r"^/api/v1(?:/brands/[^/]+)?/(?:freeround/)?campaign/?$")


def endpoint_class(method: str, path: str) -> str:
    """Return the rate-table endpoint class of a request (both path forms, legacy too)."""
    method = method.upper()
    if method == "POST" and _PARTICIPANT_RE.match(path):
        return ENDPOINT_CLASS_PARTICIPANT
    if method == "POST" and _CAMPAIGN_RE.match(path):
        return ENDPOINT_CLASS_CAMPAIGN_CREATE
    return ENDPOINT_CLASS_OTHER


def tiers_for(method: str, path: str) -> tuple[RateTier, ...]:
    """Return every tier a request counts against (global, per endpoint, per user)."""
    cls = endpoint_class(method, path)
    method = method.upper()
    out = []
    for tier in RATE_TIERS:
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
#: assumed: every 2xx acknowledges a delivery (the document names 200 and calls only codes
#: outside 2xx/4xx/5xx unknown); the analyser reads it through one predicate
WEBHOOK_ACK_STATUSES: Final = range(200, 300)
WEBHOOK_AUTH_TYPES: Final = ("BEARER", "BASIC", "NONE")  # spec
WEBHOOK_CONTENT_TYPE: Final = "application/json"  # spec
KNOWN_EVENT_TYPES: Final = frozenset({"COIN", "FEATURE"})  # spec: "values seen"
#: ours: dedupe keys outlive the provider's 7-day retry window by a day of margin
WEBHOOK_DEDUPE_RETENTION: Final = WEBHOOK_RETRY_WINDOW + timedelta(days=1)

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
IDEMPOTENCY_CONFLICT_STATUS: Final = 409
IDEMPOTENCY_CONFLICT_CODE: Final = "IDEMPOTENCY_CONFLICT"
GAME_NOT_FOUND_STATUS: Final = 404
GAME_NOT_FOUND_CODE: Final = "GAME_NOT_FOUND"
ENDPOINT_BATCH_PARTICIPANT_TEMPLATE: Final = "{campaign}/{campaign_id}/participant/batch"
BATCH_PARTICIPANT_MAX_IDS: Final = 10_000
PARTICIPANT_MAX_IDS: Final = 1_000
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
FEATURE_COST_ROUNDING: Final = decimal.ROUND_HALF_UP
NOT_FOUND_STATUS: Final = 404
NOT_FOUND_CODE: Final = "NOT_FOUND"
METHOD_NOT_ALLOWED_STATUS: Final = 405
METHOD_NOT_ALLOWED_CODE: Final = "METHOD_NOT_ALLOWED"
SUBSCRIPTION_EXISTS_STATUS: Final = 409
SUBSCRIPTION_EXISTS_CODE: Final = "SUBSCRIPTION_EXISTS"

PARTICIPANT_ADDITION_IDEMPOTENT: Final = True

ASSUMPTIONS: Final[tuple[Assumption, ...]] = (
    Assumption(
        "IMPLICIT_ALLOWED_PRINCIPALS", "INDIVIDUAL only (INTERNAL: explicit form)",
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
        "FREE_ROUNDS_CAMPAIGN_TYPE", FREE_ROUNDS_CAMPAIGN_TYPE,
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
        "CAMPAIGN_DATE_FORMAT", CAMPAIGN_DATE_FORMAT,
        "dates are wall-clock times in the campaign's zone, so no offset is sent",
        "spec.CAMPAIGN_DATE_FORMAT (the model and the sandbox both read it)",
    ),
    Assumption(
        "CAMPAIGN_PLAYERS_FIELD", "players: array of player-id strings",
        "the shape is shown only for participant addition, which names players by id",
        "Client(campaign_field_names={'players': ...}), or add participants instead",
    ),
    Assumption(
        "BET_NUMBER_MIN", BET_NUMBER_MIN,
        "only the maximum 1500 is published; a campaign of zero rounds awards nothing",
        "spec.BET_NUMBER_MIN",
    ),
    Assumption(
        "RATE_LIMIT_STATUS / RATE_LIMIT_CODE", (RATE_LIMIT_STATUS, RATE_LIMIT_CODE),
        "the rate-limit response is not shown; 429 with Retry-After (seconds) is HTTP's norm",
        "Client(rate_limit_status=...), Sandbox(rate_limit_status=...)",
    ),
    Assumption(
        "RATE_LIMIT_WINDOW", "1 s sliding window per tier",
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
        "IDEMPOTENCY_CONFLICT_STATUS / IDEMPOTENCY_CONFLICT_CODE",
        (IDEMPOTENCY_CONFLICT_STATUS, IDEMPOTENCY_CONFLICT_CODE),
        "reusing a requestId with another body must be refused; the answer is not shown",
        "unknown codes still map to errors.ApiError with the code kept",
    ),
    Assumption(
        "GAME_NOT_FOUND_STATUS / GAME_NOT_FOUND_CODE", (GAME_NOT_FOUND_STATUS, GAME_NOT_FOUND_CODE),
        "the answer for an unknown gameId is not shown",
        "unknown codes still map to errors.ApiError with the code kept",
    ),
    Assumption(
        "ENDPOINT_BATCH_PARTICIPANT_TEMPLATE", ENDPOINT_BATCH_PARTICIPANT_TEMPLATE,
        "the batch endpoint is recommended but its path and payload are not shown; body "
        "{'playerIds': [...]} like the single endpoint",
        "Client(batch_participant_path=...)",
    ),
    Assumption(
        "BATCH_PARTICIPANT_MAX_IDS", BATCH_PARTICIPANT_MAX_IDS,
        "the batch size limit is not shown; a fifth of the 50,000-row back-office import",
        "Client.add_participants_batch(max_ids=...)",
    ),
    Assumption(
        "PARTICIPANT_MAX_IDS", PARTICIPANT_MAX_IDS,
        "the largest playerIds list in one participant request is not shown",
        "load_participants(chunk_size=...), Sandbox(participant_max_ids=...)",
    ),
    Assumption(
        "PLAYER_ID_MAX_LENGTH", PLAYER_ID_MAX_LENGTH,
        "the external player id's length limit is not shown",
        "load_participants(max_id_length=...), Sandbox(player_id_max_length=...)",
    ),
    Assumption(
        "ENDPOINT_WEBHOOK_SUBSCRIPTION", ENDPOINT_WEBHOOK_SUBSCRIPTION,
        "subscription create/update paths are not shown; GET reads, POST creates, PUT updates, "
        "both path forms, fields callbackUrl/authenticationType/apiKey/username/password",
        "Client(webhook_subscription_path=...)",
    ),
    Assumption(
        "CAMPAIGN_ID_JSON_TYPE", CAMPAIGN_ID_JSON_TYPE,
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
        "WEBHOOK_ACK_STATUSES", "200-299",
        "the document names 200 as the acknowledgement and calls only codes outside "
        "2xx/4xx/5xx unknown; every 2xx is taken to acknowledge, never retried",
        "gptools.spec.WEBHOOK_ACK_STATUSES (the analyser's acknowledges() reads it)",
    ),
    Assumption(
        "WEBHOOK_SENDER_TIMEOUT", WEBHOOK_SENDER_TIMEOUT,
        "the provider's time-out on a receiver is not shown; a time-out is retried like a 5xx",
        "Sandbox webhook dispatcher(timeout=...)",
    ),
    Assumption(
        "WEBHOOK_OTHER_STATUS_RETRIED", WEBHOOK_OTHER_STATUS_RETRIED,
        "behaviour on codes that are not 200/4xx/5xx is not shown; treated as temporary",
        "Sandbox webhook dispatcher(retry_other_status=...)",
    ),
    Assumption(
        "ENDPOINTS_BY_PRINCIPAL", ENDPOINTS_BY_PRINCIPAL,
        "which endpoints each user type may call is not shown; all types may call all",
        "the server decides; the client never refuses an endpoint by type",
    ),
    Assumption(
        "CONFIGURATION_FILTERS_OPTIONAL", CONFIGURATION_FILTERS_OPTIONAL,
        "whether gameId/currencyCode are optional is not shown; omitted means no filter "
        "(every configuration; for the game endpoint every game as {'content': [...]})",
        "pass both to be safe against a server that requires them",
    ),
    Assumption(
        "WEBHOOK_MAX_BODY_BYTES", WEBHOOK_MAX_BODY_BYTES,
        "the largest notification body is not shown; the eight documented fields fit in "
        "well under 1 KiB, so 64 KiB leaves room for fields the provider may add",
        "WebhookReceiver(max_body_bytes=...), gptools webhooks serve --max-body-bytes",
    ),
    Assumption(
        "FEATURE_COST_ROUNDING", FEATURE_COST_ROUNDING,
        "the document gives Feature Cost = Base Bet × Price Multiplier without a rounding "
        "rule; a product finer than the currency's minor unit is rounded half up",
        "costs.feature_cost(rounding=...) with any decimal rounding mode",
    ),
    Assumption(
        "NOT_FOUND_STATUS / NOT_FOUND_CODE", (NOT_FOUND_STATUS, NOT_FOUND_CODE),
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
        "PARTICIPANT_ADDITION_IDEMPOTENT", PARTICIPANT_ADDITION_IDEMPOTENT,
        "whether adding a player who is already a participant is harmless is not shown; the "
        "client repeats participant additions after a lost answer or a 5xx",
        "Client(max_retries=0) never repeats a request",
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
    rows = ["| assumption | value | why (the document does not show it) | override |",
            "| --- | --- | --- | --- |"]
    for a in ASSUMPTIONS:
        value = str(a.value).replace("|", "\\|")
        rows.append(f"| `{a.name}` | `{value}` | {a.reason} | {a.override} |")
    return "\n".join(rows)
