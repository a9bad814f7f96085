"""gptools: a toolkit for integrators of the game provider's public API.

``__all__`` below is the one list of the public names; implementation modules may change.
See the README for the capabilities and :mod:`gptools.spec` for every published rule and
assumption.

Each name is written once, in ``__all__``. Type checkers and IDEs read where it comes from
through the star imports under ``TYPE_CHECKING`` (each module's own ``__all__``); at run
time :func:`__getattr__` finds the module whose ``__all__`` declares the name, read from its
source without importing it, and imports it on first use. So ``import gptools`` stays light
for a webhook worker or a CLI call that needs none of pandas, DuckDB or matplotlib: only the
errors and the models load at once, so that an ``except gptools.ApiError`` costs nothing.
``tests/test_public_api.py`` checks that every name is declared by exactly one of the modules.
"""

import ast as _ast
import functools as _functools
import typing as _typing
from importlib import import_module as _import_module
from pathlib import Path as _Path

from gptools import errors as _errors  # noqa: F401  (eager: see the docstring)
from gptools import models as _models  # noqa: F401

if _typing.TYPE_CHECKING:
    from gptools.campaigns import *  # noqa: F403
    from gptools.client import *  # noqa: F403
    from gptools.costs import *  # noqa: F403
    from gptools.deliverylog import *  # noqa: F403
    from gptools.errors import *  # noqa: F403
    from gptools.models import *  # noqa: F403
    from gptools.participants import *  # noqa: F403
    from gptools.sandbox import *  # noqa: F403
    from gptools.session import *  # noqa: F403
    from gptools.webhooks import *  # noqa: F403
    from gptools.widgets import *  # noqa: F403

__version__ = "0.1.0"

#: The modules the names of ``__all__`` come from (the same as the star imports above).
_SOURCES: tuple[str, ...] = (
    "gptools.errors",
    "gptools.models",
    "gptools.campaigns",
    "gptools.client",
    "gptools.costs",
    "gptools.participants",
    "gptools.sandbox",
    "gptools.session",
    "gptools.webhooks",
    "gptools.deliverylog",
    "gptools.widgets",
)


@_functools.cache
def _declared(module: str) -> tuple[str, ...]:
    """The ``__all__`` of ``module``, read from its source without importing it."""
    path = _Path(__file__).parent.joinpath(*module.split(".")[1:])
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    for node in _ast.parse(source.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, _ast.Assign) else []
        if isinstance(node, _ast.AnnAssign):
            targets = [node.target]
        value = getattr(node, "value", None)
        if value is not None and any(getattr(t, "id", "") == "__all__" for t in targets):
            return tuple(_ast.literal_eval(value))
    return ()


def _home(name: str) -> str | None:
    """The module whose ``__all__`` declares ``name`` (the first of :data:`_SOURCES`)."""
    for module in _SOURCES:
        if name in _declared(module):
            return module
    return None


def __getattr__(name: str) -> _typing.Any:
    module = _home(name) if name in __all__ else None
    if module is None:
        raise AttributeError(f"module 'gptools' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ApiError",
    "ApplyResult",
    "AsyncClient",
    "AwardedFeatureConfiguration",
    "AwardedFeatureConfigurations",
    "BadRequestError",
    "Brand",
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
    "JournalBusyError",
    "JournalMismatchError",
    "LoadInterrupted",
    "LoadStopped",
    "LoadSummary",
    "MissingExtraError",
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
    "RateLimitedError",
    "ReceiverAuth",
    "ResponseTooLargeError",
    "RunningSandbox",
    "SQLiteStore",
    "SandboxAccount",
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
    "WebhookSubscriptionInfo",
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
