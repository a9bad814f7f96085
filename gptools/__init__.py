"""gptools: a toolkit for integrators of the game provider's public API.

The public names are re-exported here; implementation modules may change. See the README
for the capabilities and :mod:`gptools.spec` for every published rule and assumption.

Errors and models are imported at once; the capabilities (client, costs, campaigns,
participants, webhooks, sandbox, widgets) load on first use, so ``import gptools`` stays
light for a webhook worker or a CLI call that needs none of pandas, DuckDB or matplotlib.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from gptools.errors import (
    ApiError,
    BadRequestError,
    BrandNotAllowedError,
    BrandRequiredError,
    CampaignValidationError,
    ConfigurationError,
    ConflictError,
    ForbiddenError,
    GameNotFoundError,
    GatewayTimeoutError,
    GptoolsError,
    IdempotencyConflictError,
    InvalidRequestError,
    NotAuthorizedError,
    NotFoundError,
    RateLimitedError,
    ServerError,
    TransportError,
    UnknownServerError,
)
from gptools.models import (
    AwardedFeatureConfiguration,
    AwardedFeatureConfigurations,
    Brand,
    BuyFeature,
    CampaignCreated,
    CampaignRequest,
    DisplayOptions,
    ErrorBody,
    Game,
    GameEventNotification,
    ParticipantsAdded,
    PrincipalType,
    SelfInfo,
    WebhookSubscription,
)

if TYPE_CHECKING:
    from gptools.campaigns import (
        ApplyResult,
        Budget,
        CurrencyLine,
        Plan,
        PlanFileError,
        PlanInvalidError,
        Problem,
        Validation,
        apply_plan,
        budget,
        campaign_requests,
        load_plan,
        review,
        validate_plan,
    )
    from gptools.client import (
        AsyncBrandClient,
        AsyncClient,
        BrandClient,
        Client,
        ClientStats,
    )
    from gptools.costs import (
        CostBook,
        CrossCheck,
        StoredTableError,
        UnknownCurrencyError,
        cost_chart,
        cross_check,
        currency_exponent,
        feature_cost,
        preview,
        read_stored_table,
        table_from_configurations,
        table_from_game,
        write_stored_table,
    )
    from gptools.participants import (
        JournalMismatchError,
        LoadInterrupted,
        LoadSummary,
        PlayerListError,
        load_participants,
    )
    from gptools.sandbox import (
        FaultRule,
        SandboxConfig,
        run_sandbox,
    )
    from gptools.session import (
        connect,
        connect_async,
    )
    from gptools.webhooks import (
        ExportResult,
        PostgresStore,
        ProcessingQueue,
        ReceiverAuth,
        SQLiteStore,
        StoreError,
        WebhookReceiver,
        export_log,
        open_store,
    )
    from gptools.webhooks.analysis import (
        ColumnMapping,
        DeliveryAnalysis,
        DeliveryLog,
        DeliveryLogError,
        DeliveryReport,
        analyze,
        read_delivery_log,
    )
    from gptools.widgets import (
        build_ui,
    )

__version__ = "0.1.0"

# name -> module that defines it, imported on first attribute access
_LAZY: dict[str, str] = {
    "AsyncBrandClient": "gptools.client",
    "AsyncClient": "gptools.client",
    "BrandClient": "gptools.client",
    "Client": "gptools.client",
    "ClientStats": "gptools.client",
    "connect": "gptools.session",
    "connect_async": "gptools.session",
    "CostBook": "gptools.costs",
    "CrossCheck": "gptools.costs",
    "StoredTableError": "gptools.costs",
    "UnknownCurrencyError": "gptools.costs",
    "cost_chart": "gptools.costs",
    "cross_check": "gptools.costs",
    "currency_exponent": "gptools.costs",
    "feature_cost": "gptools.costs",
    "preview": "gptools.costs",
    "read_stored_table": "gptools.costs",
    "table_from_configurations": "gptools.costs",
    "table_from_game": "gptools.costs",
    "write_stored_table": "gptools.costs",
    "ApplyResult": "gptools.campaigns",
    "Budget": "gptools.campaigns",
    "CurrencyLine": "gptools.campaigns",
    "Plan": "gptools.campaigns",
    "PlanFileError": "gptools.campaigns",
    "PlanInvalidError": "gptools.campaigns",
    "Problem": "gptools.campaigns",
    "Validation": "gptools.campaigns",
    "apply_plan": "gptools.campaigns",
    "budget": "gptools.campaigns",
    "campaign_requests": "gptools.campaigns",
    "load_plan": "gptools.campaigns",
    "review": "gptools.campaigns",
    "validate_plan": "gptools.campaigns",
    "JournalMismatchError": "gptools.participants",
    "LoadInterrupted": "gptools.participants",
    "LoadSummary": "gptools.participants",
    "PlayerListError": "gptools.participants",
    "load_participants": "gptools.participants",
    "ExportResult": "gptools.webhooks",
    "PostgresStore": "gptools.webhooks",
    "ProcessingQueue": "gptools.webhooks",
    "ReceiverAuth": "gptools.webhooks",
    "SQLiteStore": "gptools.webhooks",
    "StoreError": "gptools.webhooks",
    "WebhookReceiver": "gptools.webhooks",
    "export_log": "gptools.webhooks",
    "open_store": "gptools.webhooks",
    "ColumnMapping": "gptools.webhooks.analysis",
    "DeliveryAnalysis": "gptools.webhooks.analysis",
    "DeliveryLog": "gptools.webhooks.analysis",
    "DeliveryLogError": "gptools.webhooks.analysis",
    "DeliveryReport": "gptools.webhooks.analysis",
    "analyze": "gptools.webhooks.analysis",
    "read_delivery_log": "gptools.webhooks.analysis",
    "FaultRule": "gptools.sandbox",
    "SandboxConfig": "gptools.sandbox",
    "run_sandbox": "gptools.sandbox",
    "build_ui": "gptools.widgets",
}



def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gptools' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ApiError",
    "ApplyResult",
    "AsyncBrandClient",
    "AsyncClient",
    "AwardedFeatureConfiguration",
    "AwardedFeatureConfigurations",
    "BadRequestError",
    "Brand",
    "BrandClient",
    "BrandNotAllowedError",
    "BrandRequiredError",
    "Budget",
    "BuyFeature",
    "CampaignCreated",
    "CampaignRequest",
    "CampaignValidationError",
    "Client",
    "ClientStats",
    "ColumnMapping",
    "ConfigurationError",
    "ConflictError",
    "CostBook",
    "CrossCheck",
    "CurrencyLine",
    "DeliveryAnalysis",
    "DeliveryLog",
    "DeliveryLogError",
    "DeliveryReport",
    "DisplayOptions",
    "ErrorBody",
    "ExportResult",
    "FaultRule",
    "ForbiddenError",
    "Game",
    "GameEventNotification",
    "GameNotFoundError",
    "GatewayTimeoutError",
    "GptoolsError",
    "IdempotencyConflictError",
    "InvalidRequestError",
    "JournalMismatchError",
    "LoadInterrupted",
    "LoadSummary",
    "NotAuthorizedError",
    "NotFoundError",
    "ParticipantsAdded",
    "Plan",
    "PlanFileError",
    "PlanInvalidError",
    "PlayerListError",
    "PostgresStore",
    "PrincipalType",
    "Problem",
    "ProcessingQueue",
    "RateLimitedError",
    "ReceiverAuth",
    "SQLiteStore",
    "SandboxConfig",
    "SelfInfo",
    "ServerError",
    "StoreError",
    "StoredTableError",
    "TransportError",
    "UnknownCurrencyError",
    "UnknownServerError",
    "Validation",
    "WebhookReceiver",
    "WebhookSubscription",
    "analyze",
    "apply_plan",
    "budget",
    "build_ui",
    "campaign_requests",
    "connect",
    "connect_async",
    "cost_chart",
    "cross_check",
    "currency_exponent",
    "export_log",
    "feature_cost",
    "load_participants",
    "load_plan",
    "open_store",
    "preview",
    "read_delivery_log",
    "read_stored_table",
    "review",
    "run_sandbox",
    "table_from_configurations",
    "table_from_game",
    "validate_plan",
    "write_stored_table",
]
