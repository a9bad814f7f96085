"""Receive the provider's game-event webhooks durably, and keep a log of every delivery.

- :class:`WebhookReceiver`: the ASGI receiver (auth, validation, durable dedupe, 200 only
  after the commit, 503 when the store cannot write).
- :func:`open_store`: the SQLite (WAL) or PostgreSQL store of dedupe keys, processing
  queue and ``delivery_log``.
- :class:`ProcessingQueue`: runs a user handler after the acknowledgement, at least once,
  one lease per run, with a time-out and dead letters.
- :class:`Maintenance`: purges old dedupe keys and log rows, in small steps.
- :func:`export_log`: the delivery log as JSONL or Parquet.
- :func:`serve_metrics`, :func:`log_config`: Prometheus metrics on a port of their own,
  and one JSON object a log line.
- :func:`open_private`: how every file of the delivery log is created (owner-only), for
  the files a caller writes from it (the CLI's lost-actions list).

The log analyser lives in :mod:`gptools.deliverylog`.
"""

from gptools._private_files import open_private
from gptools.webhooks._app import (
    InjectedFault,
    WebhookReceiver,
    load_handler,
    receiver_environment,
    receiver_from_env,
)
from gptools.webhooks._auth import AuthConfigError, ReceiverAuth
from gptools.webhooks._export import ExportResult, export_log, log_record
from gptools.webhooks._logs import log_config
from gptools.webhooks._metrics import ALERT_RULES, ENV_MULTIPROC_DIR, METRICS_PATH, serve_metrics
from gptools.webhooks._queue import GroupCommitWriter, Maintenance, ProcessingQueue
from gptools.webhooks._server_limits import (
    ServerLimits,
    descriptors_needed,
    fit_to_descriptor_limit,
    uvicorn_settings,
)
from gptools.webhooks._store import (
    LOG_COLUMNS,
    DeadLetter,
    LogEntry,
    PostgresStore,
    PurgeResult,
    QueueCounts,
    SQLiteStore,
    Store,
    StoreConnection,
    StoreError,
    format_utc,
    open_store,
)

__all__ = [
    "ALERT_RULES",
    "ENV_MULTIPROC_DIR",
    "LOG_COLUMNS",
    "METRICS_PATH",
    "AuthConfigError",
    "DeadLetter",
    "ExportResult",
    "GroupCommitWriter",
    "InjectedFault",
    "LogEntry",
    "Maintenance",
    "PostgresStore",
    "ProcessingQueue",
    "PurgeResult",
    "QueueCounts",
    "ReceiverAuth",
    "SQLiteStore",
    "ServerLimits",
    "Store",
    "StoreConnection",
    "StoreError",
    "WebhookReceiver",
    "descriptors_needed",
    "export_log",
    "fit_to_descriptor_limit",
    "format_utc",
    "load_handler",
    "log_config",
    "log_record",
    "open_private",
    "open_store",
    "receiver_environment",
    "receiver_from_env",
    "serve_metrics",
    "uvicorn_settings",
]
