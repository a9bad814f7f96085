"""Receive the provider's game-event webhooks durably, and keep a log of every delivery.

- :class:`WebhookReceiver`: the ASGI receiver (auth, validation, durable dedupe, 200 only
  after the commit, 503 when the store cannot write), with :class:`ReceiverAuth`.
- :func:`open_store`: the SQLite (WAL) or PostgreSQL store of dedupe keys, processing
  queue and ``delivery_log`` (:data:`LOG_COLUMNS`); :func:`migrate` brings a store to
  this gptools' schema version (:class:`MigrationResult`), which every connection checks
  (:class:`SchemaVersionError`).
- :class:`ProcessingQueue`: runs a user handler after the acknowledgement, at least once,
  one lease per run, with a time-out and dead letters.
- :class:`Maintenance`: purges old dedupe keys and log rows, in small steps.
- :func:`export_log`: the delivery log as JSONL or Parquet.
- :func:`find_actions`: the actions a :class:`FindFilter` matches, each with its
  deliveries and outcome (:class:`FindResult`, frames with ``frames()``);
  :func:`plan_replay` and :func:`replay` run the handler again for stored actions
  through the processing queue, resumable and idempotent per replay id.
- :func:`serve`: the receiver served by uvicorn, workers and all (what ``gptools webhooks
  serve`` runs), with one :class:`ReceiverConfig` (every setting, checked once:
  :class:`SettingError`), within :class:`ServerLimits`; :func:`reload_receiver` makes a running one
  read its credentials file and TLS certificate again (:class:`ReloadResult`).
- :func:`serve_metrics`: Prometheus metrics on a port of their own; :data:`ALERT_RULES`,
  the alerting rules that go with them, and :data:`GRAFANA_DASHBOARD`, their dashboard.
- :func:`open_output` and :func:`check_output` (:class:`OutputRefusedError`): the rule for
  a file the user names (an existing one only when forced, never through a symbolic
  link), for the files a caller writes from it (the CLI's lost-actions list, its other
  outputs).

The log analyser lives in :mod:`gptools.deliverylog`.
"""

from gptools._private_files import OutputRefusedError, check_output, open_output
from gptools.webhooks._app import InjectedFault, WebhookReceiver
from gptools.webhooks._auth import ReceiverAuth
from gptools.webhooks._config import ReceiverConfig, SettingError
from gptools.webhooks._credentials import AuthConfigError
from gptools.webhooks._environment import load_handler
from gptools.webhooks._export import ExportResult, export_log
from gptools.webhooks._find import FindFilter, FindResult, FoundAction, FoundDelivery, find_actions
from gptools.webhooks._find_log import find_in_log
from gptools.webhooks._forward_destinations import DESTINATION_NAME
from gptools.webhooks._maintenance import Maintenance
from gptools.webhooks._metrics import ALERT_RULES, GRAFANA_DASHBOARD, serve_metrics
from gptools.webhooks._migrations import MigrationResult
from gptools.webhooks._queue import ProcessingQueue
from gptools.webhooks._records import (
    SchemaVersionError,
    StoreError,
    StoreNotFoundError,
    StoreUnreachableError,
)
from gptools.webhooks._reload import ReloadError, ReloadResult, reload_receiver
from gptools.webhooks._replay import (
    ReplayPlan,
    ReplayResult,
    forward_target,
    plan_replay,
    post_handler,
    replay,
)
from gptools.webhooks._schema import LOG_COLUMNS
from gptools.webhooks._serve import ListenError, ServeError, serve
from gptools.webhooks._server_limits import ServerLimits
from gptools.webhooks._store import PostgresStore, SQLiteStore, Store, migrate, open_store

__all__ = [
    "ALERT_RULES",
    "DESTINATION_NAME",
    "GRAFANA_DASHBOARD",
    "LOG_COLUMNS",
    "AuthConfigError",
    "ExportResult",
    "FindFilter",
    "FindResult",
    "FoundAction",
    "FoundDelivery",
    "InjectedFault",
    "ListenError",
    "Maintenance",
    "MigrationResult",
    "OutputRefusedError",
    "PostgresStore",
    "ProcessingQueue",
    "ReceiverAuth",
    "ReceiverConfig",
    "ReloadError",
    "ReloadResult",
    "ReplayPlan",
    "ReplayResult",
    "SQLiteStore",
    "SchemaVersionError",
    "ServeError",
    "ServerLimits",
    "SettingError",
    "Store",
    "StoreError",
    "StoreNotFoundError",
    "StoreUnreachableError",
    "WebhookReceiver",
    "check_output",
    "export_log",
    "find_actions",
    "find_in_log",
    "forward_target",
    "load_handler",
    "migrate",
    "open_output",
    "open_store",
    "plan_replay",
    "post_handler",
    "reload_receiver",
    "replay",
    "serve",
    "serve_metrics",
]
