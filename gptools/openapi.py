"""OpenAPI 3.1 descriptions, generated from the code: the webhook receiver's endpoint and
the provider's API as gptools reads it.

Nothing here is written as JSON by hand. Paths, statuses, error codes and limits come from
:mod:`gptools.spec`; request and response bodies are pydantic's JSON schemas of
:mod:`gptools.models` (money as a JSON number, as :func:`gptools.models.dumps_wire` writes
it; no ``null`` in what gptools sends, which leaves ``None`` out). Every value the API
document does not show is marked ``x-gptools-assumed`` with the name of its
``spec.ASSUMPTIONS`` entry (one name, or a list of names).

:func:`provider_openapi` is what the sandbox serves at ``GET /openapi.json``;
:func:`receiver_openapi` is what the receiver serves there, on the listener that answers
``/metrics`` (the ``--metrics-port`` one when it is set). ``tests/contract/`` fuzzes both
servers against them with schemathesis and keeps them equal to the code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from gptools import spec
from gptools.models import (
    AwardedFeatureConfigurations,
    CampaignCreated,
    CampaignRequest,
    ErrorBody,
    Game,
    GameEventNotification,
    ParticipantsAdded,
    SelfInfo,
    WebhookSubscription,
    WebhookSubscriptionInfo,
)

#: Where the sandbox and the receiver serve their description.
OPENAPI_PATH: Final = "/openapi.json"
#: The extension that names the ``spec.ASSUMPTIONS`` entry behind a value.
ASSUMED: Final = "x-gptools-assumed"
OPENAPI_VERSION: Final = "3.1.0"
_REF: Final = "#/components/schemas/{model}"
_JSON: Final = spec.WEBHOOK_CONTENT_TYPE


def _assumed(node: dict[str, Any], *names: str) -> dict[str, Any]:
    """``node`` marked with the assumptions ``names`` (each must be in ``spec.ASSUMPTIONS``)."""
    for name in names:
        spec.assumption(name)  # KeyError for a name the tuple does not hold
    return {**node, ASSUMED: names[0] if len(names) == 1 else list(names)}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {_JSON: {"schema": schema}}


# --------------------------------------------------------------------------------------
# Schemas from the models
# --------------------------------------------------------------------------------------


class _WireJsonSchema(GenerateJsonSchema):
    """pydantic's JSON schema with money as a JSON number: a Decimal is written from its
    own digits (``models.dumps_wire``), never as a string."""

    def decimal_schema(self, schema: core_schema.DecimalSchema) -> dict[str, Any]:
        def bound(name: str) -> float | None:
            value = schema.get(name)
            return None if value is None else float(Decimal(str(value)))

        return self.float_schema(
            core_schema.float_schema(
                allow_inf_nan=False, le=bound("le"), ge=bound("ge"), lt=bound("lt"), gt=bound("gt")
            )
        )


def _model_schemas(models: Sequence[type[BaseModel]]) -> dict[str, dict[str, Any]]:
    """Each model's JSON schema (validation mode: what gptools accepts) by name, and the
    models they refer to, with references into ``components.schemas``."""
    pairs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(m, "validation") for m in models]
    _, top = models_json_schema(
        pairs, by_alias=True, ref_template=_REF, schema_generator=_WireJsonSchema
    )
    schemas: dict[str, dict[str, Any]] = top["$defs"]
    for schema in schemas.values():
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)  # pydantic's "Betnumber" says less than the name
    return schemas


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A request body's schema without ``null``: gptools leaves ``None`` out of what it
    sends (``exclude_none``), so an optional field is absent, never null."""
    for name, prop in schema.get("properties", {}).items():
        branches = prop.get("anyOf", [])
        if {"type": "null"} in branches:
            rest = [b for b in branches if b != {"type": "null"}]
            kept = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            schema["properties"][name] = (
                {**kept, **rest[0]}
                if len(rest) == 1
                else {
                    **kept,
                    "anyOf": rest,
                }
            )
    return schema


#: What each ``strftime`` directive of a date-time writes, as a regular expression that
#: keeps the field in its range (the day of the month goes to 31 whatever the month).
_DIRECTIVES: Final = {
    "%Y": "[0-9]{4}",
    "%m": "(0[1-9]|1[0-2])",
    "%d": "(0[1-9]|[12][0-9]|3[01])",
    "%H": "([01][0-9]|2[0-3])",
    "%M": "[0-5][0-9]",
    "%S": "[0-5][0-9]",
}


def _strftime_pattern(fmt: str, tail: str = "") -> str:
    """A regular expression for the texts ``strftime(fmt)`` writes, then ``tail``."""
    parts = re.split(r"(%[A-Za-z])", fmt)
    # Only the metacharacters escaped: ECMA 262 (JSON Schema's dialect) refuses "\-".
    literal = [re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", p) for p in parts]
    return (
        "^"
        + "".join(_DIRECTIVES.get(p) or q for p, q in zip(parts, literal, strict=True))
        + tail
        + "$"
    )


#: The notification's ``timestamp`` as :func:`gptools.models.parse_event_timestamp` takes
#: it: naive UTC, fractional seconds optional (``spec.TIMESTAMP_FRACTION_OPTIONAL``), up to
#: nine digits, each field in its range: the declared pattern (``spec.GAME_EVENT_FIELDS``).
TIMESTAMP_PATTERN: Final = spec.EVENT_TIMESTAMP_PATTERN


def _id_text(description: str) -> dict[str, Any]:
    return _assumed(
        {"type": ["string", "integer"], "description": description}, "CAMPAIGN_ID_JSON_TYPE"
    )


def _provider_schemas() -> dict[str, dict[str, Any]]:
    schemas = _model_schemas(
        [
            SelfInfo,
            ErrorBody,
            Game,
            AwardedFeatureConfigurations,
            CampaignRequest,
            CampaignCreated,
            ParticipantsAdded,
            WebhookSubscription,
            WebhookSubscriptionInfo,
        ]
    )
    principal = schemas["SelfInfo"]["properties"]["principalType"]
    principal["examples"] = sorted(spec.KNOWN_PRINCIPAL_TYPES)
    principal["description"] = "any string is kept; the document names these four"

    campaign = _without_null(schemas["CampaignRequest"])
    props = campaign["properties"]
    fields = "CAMPAIGN_START_FIELD / CAMPAIGN_END_FIELD / CAMPAIGN_TIME_ZONE_FIELD"
    date = {"type": "string", "pattern": _strftime_pattern(spec.CAMPAIGN_DATE_FORMAT)}
    for name in (spec.CAMPAIGN_START_FIELD, spec.CAMPAIGN_END_FIELD):
        props[name] = _assumed(
            {**date, "description": "wall-clock time in timeZone, no offset"},
            fields,
            "CAMPAIGN_DATE_FORMAT",
        )
    props[spec.CAMPAIGN_TIME_ZONE_FIELD] = _assumed(
        {**props[spec.CAMPAIGN_TIME_ZONE_FIELD], "examples": ["Europe/Malta"]},
        fields,
        "TIME_ZONE_FORMAT",
    )
    props["type"]["examples"] = [spec.CAMPAIGN_TYPE_AWARDED_FEATURE, spec.FREE_ROUNDS_CAMPAIGN_TYPE]
    props["type"] = _assumed(props["type"], "FREE_ROUNDS_CAMPAIGN_TYPE")
    props["betNumber"] = _assumed(props["betNumber"], "BET_NUMBER_MIN")
    minima = "NAME_MIN_LENGTH / GAME_IDS_MIN / BET_EXCLUSIVE_MIN"
    props["name"] = _assumed(props["name"], minima)
    props["gameIds"] = _assumed(props["gameIds"], minima)
    props["bet"] = _assumed(props["bet"], minima, "BET_MAX_DECIMALS")
    props[spec.CAMPAIGN_PLAYERS_FIELD] = _assumed(
        props[spec.CAMPAIGN_PLAYERS_FIELD], "CAMPAIGN_PLAYERS_FIELD", "CAMPAIGN_PLAYERS_MAX_IDS"
    )
    campaign[ASSUMED] = "CAMPAIGN_REQUIRED_FIELDS"

    schemas["CampaignCreated"]["properties"][spec.FIELD_CAMPAIGN_ID] = _id_text(
        "the created campaign's id (an integer is read as its text)"
    )
    schemas["ParticipantsAdded"]["properties"][spec.FIELD_CAMPAIGN_ID] = _id_text(
        "the campaign's id, when the server names it"
    )

    subscription = _without_null(schemas["WebhookSubscription"])
    subscription[ASSUMED] = "ENDPOINT_WEBHOOK_SUBSCRIPTION"
    subscription["properties"]["authenticationType"] = _assumed(
        subscription["properties"]["authenticationType"], "WEBHOOK_AUTH_TYPE_REQUIRED"
    )
    # What the model keeps of an answer's secrets is a flag; on the wire they are masks.
    info = schemas["WebhookSubscriptionInfo"]["properties"]
    for secret in ("apiKey", "password"):
        info.pop(f"{secret}Set", None)
        info[secret] = {"type": "string", "description": "masked (e.g. '****'); never kept"}
    return schemas


def _participant_ids(max_ids: int, assumption: str) -> dict[str, Any]:
    player_id = _assumed(
        {"type": "string", "minLength": 1, "maxLength": spec.PLAYER_ID_MAX_LENGTH},
        "PLAYER_ID_MAX_LENGTH",
        "PLAYER_ID_FORBIDDEN",
    )
    return {
        "type": "object",
        "required": [spec.FIELD_PLAYER_IDS],
        "properties": {
            spec.FIELD_PLAYER_IDS: _assumed(
                {"type": "array", "items": player_id, "minItems": 1, "maxItems": max_ids},
                assumption,
            )
        },
    }


# --------------------------------------------------------------------------------------
# The provider's API
# --------------------------------------------------------------------------------------


def _error(description: str, *assumptions: str, headers: dict[str, Any] | None = None) -> Any:
    answer: dict[str, Any] = {
        "description": description,
        "content": _json_content(_ref("ErrorBody")),
    }
    if headers:
        answer["headers"] = headers
    return _assumed(answer, *assumptions) if assumptions else answer


def _retry_after(description: str) -> dict[str, Any]:
    return {"Retry-After": {"description": description, "schema": {"type": "string"}}}


def _provider_responses() -> dict[str, dict[str, Any]]:
    """The error answers every operation may get, as ``components.responses``."""
    codes = {status: [c for c, s in spec.ERROR_STATUS.items() if s == status] for status in (500,)}
    return {
        "BadRequest": _error(
            f"{spec.CODE_BRAND_REQUIRED}: a PARTNER or THIRD_PARTY request without brandId; "
            f"{spec.VALIDATION_ERROR_CODE}: a body that breaks a rule (every problem named)",
            "VALIDATION_ERROR_STATUS / VALIDATION_ERROR_CODE",
        ),
        "Unauthorized": _error(f"{spec.CODE_NOT_AUTHORIZED}: authentication failed"),
        "Forbidden": _error(
            f"{spec.CODE_BRAND_NOT_ALLOWED}: the brand is not covered by the account, or the "
            f"brandId segment is no int32; {spec.CODE_INVALID_REQUEST}: an invalid or unknown "
            "campaign id",
            "BRAND_ID_NOT_INT32",
        ),
        "NotFound": _error(
            f"{spec.NOT_FOUND_CODE}: no such endpoint or resource",
            "NOT_FOUND_STATUS / NOT_FOUND_CODE",
        ),
        "TooManyRequests": _error(
            f"{spec.RATE_LIMIT_CODE}: a rate tier is exhausted; wait Retry-After seconds",
            "RATE_LIMIT_STATUS / RATE_LIMIT_CODE",
            "RATE_LIMIT_WINDOW",
            "GLOBAL_TIERS_COMBINED",
            "ENDPOINT_IDENTITY",
            headers=_retry_after("seconds to wait"),
        ),
        "ServerError": _error(f"{' / '.join(codes[500])}: unexpected failure"),
        "Timeout": _error(f"{spec.CODE_TIMEOUT}: the server did not respond in time"),
    }


_COMMON: Final = {
    str(spec.ERROR_STATUS[spec.CODE_BRAND_REQUIRED]): "BadRequest",
    str(spec.ERROR_STATUS[spec.CODE_NOT_AUTHORIZED]): "Unauthorized",
    str(spec.ERROR_STATUS[spec.CODE_BRAND_NOT_ALLOWED]): "Forbidden",
    str(spec.NOT_FOUND_STATUS): "NotFound",
    str(spec.RATE_LIMIT_STATUS): "TooManyRequests",
    str(spec.ERROR_STATUS[spec.CODE_UNKNOWN_ERROR]): "ServerError",
    str(spec.ERROR_STATUS[spec.CODE_TIMEOUT]): "Timeout",
}


def _operation(
    operation_id: str,
    summary: str,
    answers: dict[str, dict[str, Any]],
    *,
    parameters: Sequence[dict[str, Any]] = (),
    body: dict[str, Any] | None = None,
    assumed: Sequence[str] = (),
) -> dict[str, Any]:
    responses: dict[str, Any] = {
        s: {"$ref": f"#/components/responses/{n}"} for s, n in _COMMON.items()
    }
    responses.update(answers)
    op: dict[str, Any] = {"operationId": operation_id, "summary": summary}
    if parameters:
        op["parameters"] = list(parameters)
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json_content(body)}
    op["responses"] = dict(sorted(responses.items()))
    return _assumed(op, *assumed) if assumed else op


def _ok(schema: dict[str, Any], description: str = "success") -> dict[str, Any]:
    return {"description": description, "content": _json_content(schema)}


_BRAND_ID: Final = {
    "name": "brandId",
    "in": "path",
    "required": True,
    "description": "an id from GET /api/v1/self's allowedBrands",
    "schema": {
        "type": "integer",
        "format": "int32",
        "minimum": spec.BRAND_ID_MIN,
        "maximum": spec.BRAND_ID_MAX,
    },
}
_CAMPAIGN_ID: Final = _assumed(
    {"name": "campaignId", "in": "path", "required": True, "schema": {"type": "string"}},
    "CAMPAIGN_ID_JSON_TYPE",
)


def _query(name: str) -> dict[str, Any]:
    return _assumed(
        {"name": name, "in": "query", "required": False, "schema": {"type": "string"}},
        "CONFIGURATION_FILTERS_OPTIONAL",
    )


def _brand_forms(
    endpoint: str, methods: dict[str, dict[str, Any]]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``endpoint``'s operations under both path forms: implicit (``/api/v1/...``, the
    brand from the credentials) and explicit (``/api/v1/brands/{brandId}/...``)."""
    implicit = f"{spec.API_PREFIX}/{endpoint}"
    yield (
        implicit,
        {
            method: _assumed(
                {**op, "operationId": f"{op['operationId']}Implicit"},
                *_names(op),
                "IMPLICIT_ALLOWED_PRINCIPALS",
            )
            for method, op in methods.items()
        },
    )
    explicit = spec.BRAND_PREFIX_TEMPLATE.format(brand_id="{brandId}") + f"/{endpoint}"
    yield (
        explicit,
        {
            method: {
                **op,
                "operationId": f"{op['operationId']}Explicit",
                "parameters": [_BRAND_ID, *op.get("parameters", [])],
            }
            for method, op in methods.items()
        },
    )


def _names(node: dict[str, Any]) -> list[str]:
    value = node.get(ASSUMED)
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _provider_paths() -> dict[str, dict[str, Any]]:
    paths: dict[str, dict[str, Any]] = {
        spec.SELF_PATH: {
            "get": _operation(
                "getSelf",
                "the account's principal type and the brands it may act on",
                {"200": _ok(_ref("SelfInfo"))},
            )
        }
    }
    game_not_found = _error(
        f"{spec.GAME_NOT_FOUND_CODE}: no game with this gameId",
        "GAME_NOT_FOUND_STATUS / GAME_NOT_FOUND_CODE",
    )
    every_game = {
        "type": "object",
        "required": [spec.FIELD_CONTENT],
        "properties": {spec.FIELD_CONTENT: {"type": "array", "items": _ref("Game")}},
    }
    created = _ok(_ref("CampaignCreated"), "a new campaign")
    replay = _ok(_ref("CampaignCreated"), "a replay of a requestId with the same body")
    conflict = _error(
        f"{spec.IDEMPOTENCY_CONFLICT_CODE}: the requestId was used with another body",
        "IDEMPOTENCY_CONFLICT_STATUS / IDEMPOTENCY_CONFLICT_CODE",
        "REQUEST_ID_SCOPE",
    )
    campaign_answers = {
        str(spec.CAMPAIGN_CREATED_STATUS): _assumed(
            created, "CAMPAIGN_CREATED_STATUS / CAMPAIGN_REPLAY_STATUS"
        ),
        str(spec.CAMPAIGN_REPLAY_STATUS): _assumed(
            replay, "CAMPAIGN_CREATED_STATUS / CAMPAIGN_REPLAY_STATUS"
        ),
        str(spec.IDEMPOTENCY_CONFLICT_STATUS): conflict,
    }
    endpoints: dict[str, dict[str, dict[str, Any]]] = {
        spec.ENDPOINT_AWARDED_FEATURE_CONFIGURATIONS: {
            "get": _operation(
                "getAwardedFeatureConfigurations",
                "the feature costs (base bet x price multiplier) per game and currency",
                {
                    "200": _ok(_ref("AwardedFeatureConfigurations")),
                    str(spec.GAME_NOT_FOUND_STATUS): game_not_found,
                },
                parameters=[_query(spec.QUERY_GAME_ID), _query(spec.QUERY_CURRENCY_CODE)],
            )
        },
        spec.ENDPOINT_GAME: {
            "get": _operation(
                "getGame",
                "a game's buy features and bet sizes (every game without gameId)",
                {
                    "200": _ok({"anyOf": [_ref("Game"), every_game]}),
                    str(spec.GAME_NOT_FOUND_STATUS): game_not_found,
                },
                parameters=[_query(spec.QUERY_GAME_ID)],
            )
        },
        spec.ENDPOINT_CAMPAIGN: {
            "post": _operation(
                "createCampaign",
                "create a campaign (requestId: the idempotency key)",
                campaign_answers,
                body=_ref("CampaignRequest"),
            )
        },
        spec.ENDPOINT_LEGACY_CAMPAIGN: {
            "post": _operation(
                "createLegacyCampaign",
                "create a free-round campaign on the legacy path",
                campaign_answers,
                body=_ref("CampaignRequest"),
                assumed=["LEGACY_CAMPAIGN_TYPES"],
            )
        },
        spec.ENDPOINT_WEBHOOK_SUBSCRIPTION: {
            "get": _operation(
                "getWebhookSubscription",
                "the brand's webhook subscription (secrets masked)",
                {"200": _ok(_ref("WebhookSubscriptionInfo"))},
                assumed=["ENDPOINT_WEBHOOK_SUBSCRIPTION"],
            ),
            "post": _operation(
                "createWebhookSubscription",
                "subscribe the brand to game event notifications",
                {
                    "2XX": _ok(_ref("WebhookSubscriptionInfo")),
                    str(spec.SUBSCRIPTION_EXISTS_STATUS): _error(
                        f"{spec.SUBSCRIPTION_EXISTS_CODE}: the brand has one; update it (PUT)",
                        "SUBSCRIPTION_EXISTS_STATUS / SUBSCRIPTION_EXISTS_CODE",
                    ),
                },
                body=_ref("WebhookSubscription"),
                assumed=["ENDPOINT_WEBHOOK_SUBSCRIPTION"],
            ),
            "put": _operation(
                "updateWebhookSubscription",
                "replace the brand's webhook subscription",
                {"2XX": _ok(_ref("WebhookSubscriptionInfo"))},
                body=_ref("WebhookSubscription"),
                assumed=["ENDPOINT_WEBHOOK_SUBSCRIPTION"],
            ),
        },
    }
    exists = _error(
        f"{spec.PARTICIPANT_EXISTS_CODE}: a server that refuses to re-add a participant",
        "PARTICIPANT_EXISTS_STATUS / PARTICIPANT_EXISTS_CODE",
    )
    for campaign in (spec.ENDPOINT_CAMPAIGN, spec.ENDPOINT_LEGACY_CAMPAIGN):
        legacy = "Legacy" if campaign == spec.ENDPOINT_LEGACY_CAMPAIGN else ""
        for template, batch in (
            (spec.ENDPOINT_PARTICIPANT_TEMPLATE, False),
            (spec.ENDPOINT_BATCH_PARTICIPANT_TEMPLATE, True),
        ):
            endpoint = template.format(campaign=campaign, campaign_id="{campaignId}")
            limit = "BATCH_PARTICIPANT_MAX_IDS" if batch else "PARTICIPANT_MAX_IDS"
            max_ids = spec.BATCH_PARTICIPANT_MAX_IDS if batch else spec.PARTICIPANT_MAX_IDS
            assumed = ["PARTICIPANT_ADDITION_IDEMPOTENT", "PARTICIPANT_ID_REFUSALS"]
            if batch:
                assumed += ["ENDPOINT_BATCH_PARTICIPANT_TEMPLATE", "BATCH_PARTICIPANT_RATE_CLASS"]
            endpoints[endpoint] = {
                "post": _operation(
                    f"add{legacy}Participants{'Batch' if batch else ''}",
                    "add players to a campaign" + (" (batch)" if batch else ""),
                    {
                        "2XX": _ok(_ref("ParticipantsAdded")),
                        str(spec.PARTICIPANT_EXISTS_STATUS): exists,
                    },
                    parameters=[_CAMPAIGN_ID],
                    body=_participant_ids(max_ids, limit),
                    assumed=assumed,
                )
            }
    for endpoint, methods in endpoints.items():
        paths.update(_brand_forms(endpoint, methods))
    return paths


def provider_openapi() -> dict[str, Any]:
    """The provider's API as gptools reads it (OpenAPI 3.1): every path of
    :mod:`gptools.spec` in both path forms, HTTP Basic auth, bodies from
    :mod:`gptools.models`, the documented error body on every error, 429 included."""
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Game provider public API (as gptools reads it)",
            "version": spec.API_PREFIX.rsplit("/", 1)[-1],
            "description": (
                "Generated by gptools.openapi from gptools.spec and gptools.models. Values "
                f"the provider's document does not show carry {ASSUMED}, naming their "
                "spec.ASSUMPTIONS entry."
            ),
        },
        "security": [{"basicAuth": []}],
        "paths": _provider_paths(),
        "components": {
            "securitySchemes": {"basicAuth": {"type": "http", "scheme": "basic"}},
            "schemas": _provider_schemas(),
            "responses": _provider_responses(),
        },
    }


# --------------------------------------------------------------------------------------
# The webhook receiver
# --------------------------------------------------------------------------------------


class Acknowledgement(BaseModel):
    """The receiver's 200: the delivery is stored (``accepted``) or was already
    (``duplicate``); ``actionId`` in its stored, lower-case form."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["accepted", "duplicate"]
    action_id: str = Field(alias="actionId", pattern=spec.ACTION_ID_PATTERN.replace("A-F", ""))


class FieldProblem(BaseModel):
    """One field of a refused notification and what is wrong with it."""

    model_config = ConfigDict(extra="forbid")

    field: str
    reason: str


class ReceiverError(BaseModel):
    """Every refusal of the receiver: a stable ``error`` code, a ``reason`` for people and,
    for an invalid notification, one entry per bad field."""

    model_config = ConfigDict(extra="forbid")

    error: str = Field(pattern=r"^[a-z][a-z_]*$")
    reason: str
    fields: list[FieldProblem] = Field(default_factory=list)


class Health(BaseModel):
    """The answer of ``/healthz`` and ``/readyz``."""

    status: Literal["ok", "failing"]
    live: bool
    ready: bool
    store: str = Field(description="'ok', or 'unreachable: ' and the reason")
    loops: dict[str, Any]


#: The error codes each receiver refusal carries, where the code is fixed (the others
#: name their codes in ``examples``).
_RECEIVER_ERRORS: Final[dict[int, tuple[str, str]]] = {
    400: (
        "",
        "the body is not UTF-8 JSON, is empty, nests deeper than the limit, or its "
        "actionId is not the canonical 8-4-4-4-12 form",
    ),
    401: ("unauthorized", "missing or wrong credentials"),
    404: ("not_found", "nothing is served at this path"),
    405: ("method_not_allowed", "deliveries are POSTed"),
    413: ("payload_too_large", "the body is larger than the limit"),
    415: ("unsupported_media_type", f"the content type is not {_JSON}"),
    422: ("invalid_payload", "not a valid game event notification (one entry per bad field)"),
    431: ("", "the request's headers are larger than the limit"),
    503: (
        "",
        "the delivery could not be stored, or the receiver is at its concurrency "
        "limit; retry later",
    ),
}


def _receiver_error(status: int, max_body_bytes: int) -> dict[str, Any]:
    code, description = _RECEIVER_ERRORS[status]
    schema: dict[str, Any] = _ref("ReceiverError")
    if code:
        schema = {"allOf": [schema], "properties": {"error": {"const": code}}}
    answer: dict[str, Any] = {"description": description, "content": _json_content(schema)}
    if status == 400:
        answer["content"][_JSON]["examples"] = {
            "json": {
                "value": {
                    "error": "invalid_payload",
                    "reason": "invalid JSON: Expecting value at line 1",
                }
            }
        }
    if status == 401:
        answer["headers"] = {
            "WWW-Authenticate": {"description": "the scheme to use", "schema": {"type": "string"}}
        }
    elif status == 405:
        answer["headers"] = {"Allow": {"required": True, "schema": {"const": "POST"}}}
    elif status == 413:
        answer["description"] += f" ({max_body_bytes} bytes)"
        answer = _assumed(answer, "WEBHOOK_MAX_BODY_BYTES")
    elif status == 503:
        answer["headers"] = _retry_after("seconds to wait before retrying")
    return answer


_SCHEMES: Final = {
    "BEARER": ("bearerAuth", {"type": "http", "scheme": "bearer"}),
    "BASIC": ("basicAuth", {"type": "http", "scheme": "basic"}),
}


def receiver_openapi(
    *,
    path: str = spec.DEFAULT_WEBHOOK_PATH,
    auth_kind: str | None = None,
    max_body_bytes: int = spec.WEBHOOK_MAX_BODY_BYTES,
) -> dict[str, Any]:
    """The webhook receiver's endpoint (OpenAPI 3.1): ``POST path`` with a game event
    notification, every answer with its body, and the health checks.

    ``auth_kind`` (``BEARER``, ``BASIC`` or ``NONE``) is the scheme the receiver checks;
    ``None`` describes all three as alternatives. ``path`` and ``max_body_bytes`` are the
    receiver's settings.
    """
    kinds = spec.WEBHOOK_AUTH_TYPES if auth_kind is None else (auth_kind.upper(),)
    unknown = [k for k in kinds if k not in spec.WEBHOOK_AUTH_TYPES]
    if unknown:
        raise ValueError(f"auth_kind must be one of {', '.join(spec.WEBHOOK_AUTH_TYPES)}")
    security: list[dict[str, list[str]]] = [
        {_SCHEMES[k][0]: []} if k in _SCHEMES else {} for k in kinds
    ]
    schemas = _model_schemas([GameEventNotification, Acknowledgement, ReceiverError, Health])
    event = schemas["GameEventNotification"]["properties"]
    event["timestamp"] = _assumed(
        {"type": "string", "pattern": TIMESTAMP_PATTERN, "description": "naive UTC"},
        "TIMESTAMP_FRACTION_OPTIONAL",
    )
    event["actionId"] = _assumed(
        {"type": "string", "pattern": spec.ACTION_ID_PATTERN}, "ACTION_ID_FORMAT"
    )
    event["events"]["examples"] = [sorted(spec.KNOWN_EVENT_TYPES)]
    refusals = {str(s): _receiver_error(s, max_body_bytes) for s in _RECEIVER_ERRORS}
    unavailable = refusals["503"]
    delivery_answers = {
        "200": _assumed(
            _ok(_ref("Acknowledgement"), "stored (or a duplicate): acknowledged"),
            "WEBHOOK_ACKNOWLEDGED_STATUSES",
        ),
        **{s: refusals[s] for s in ("400", "401", "413", "415", "422", "431", "503")},
    }
    refused_method = {
        "summary": "not a delivery: refused, and logged",
        "security": [{}],
        "responses": {s: refusals[s] for s in ("405", "431", "503")},
    }
    health = {
        "200": _ok(_ref("Health")),
        "503": {"description": "not live (or not ready)", "content": _json_content(_ref("Health"))},
    }
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "gptools webhook receiver",
            "version": "1",
            "description": (
                "Generated by gptools.openapi. The provider POSTs one game event "
                "notification per request; 2xx acknowledges it, 4xx is never retried, 5xx "
                f"is retried. Every answer has a delivery_log row. {ASSUMED} names the "
                "spec.ASSUMPTIONS entry behind a value the provider's document does not show."
            ),
        },
        "paths": {
            path: {
                "post": {
                    "operationId": "deliverGameEvent",
                    "summary": "a game event notification",
                    "security": security,
                    "requestBody": {
                        "required": True,
                        "content": _json_content(_ref("GameEventNotification")),
                    },
                    "responses": delivery_answers,
                },
                **{
                    m: {**refused_method, "operationId": f"{m}Refused"}
                    for m in ("get", "put", "patch", "delete")
                },
            },
            "/healthz": {"get": {"operationId": "liveness", "security": [{}], "responses": health}},
            "/readyz": {"get": {"operationId": "readiness", "security": [{}], "responses": health}},
        },
        "components": {
            "securitySchemes": dict(_SCHEMES.values()),
            "schemas": schemas,
            "responses": {"NotFound": refusals["404"], "ServiceUnavailable": unavailable},
        },
    }


def to_json(document: dict[str, Any]) -> bytes:
    """A description as the UTF-8 JSON the servers answer."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


__all__ = [
    "ASSUMED",
    "OPENAPI_PATH",
    "OPENAPI_VERSION",
    "TIMESTAMP_PATTERN",
    "Acknowledgement",
    "FieldProblem",
    "Health",
    "ReceiverError",
    "provider_openapi",
    "receiver_openapi",
    "to_json",
]
