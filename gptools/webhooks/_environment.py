"""The receiver's configuration from the environment: one receiver per uvicorn worker
process, built from the ``GP_WEBHOOK_*`` variables that :func:`~gptools.webhooks.serve`
sets (secrets are read by each worker from its own environment, never passed)."""

from __future__ import annotations

import importlib
import os
from datetime import timedelta

from gptools import spec
from gptools.webhooks._app import WebhookReceiver
from gptools.webhooks._auth import ENV_CREDENTIALS_FILE, ReceiverAuth
from gptools.webhooks._constants import (
    DEFAULT_QUIET_ALERT_AFTER,
    DEFAULT_SPOOL_MAX_BYTES,
    DEFAULT_SPOOL_MAX_ROWS,
    DEFAULT_STORE_URL,
)
from gptools.webhooks._queue import Handler
from gptools.webhooks._reload import install

ENV_STORE = "GP_WEBHOOK_STORE"
ENV_AUTH = "GP_WEBHOOK_AUTH"
ENV_PATH = "GP_WEBHOOK_PATH"
ENV_MAX_BODY = "GP_WEBHOOK_MAX_BODY_BYTES"
ENV_HANDLER = "GP_WEBHOOK_HANDLER"
ENV_METRICS_PUBLIC = "GP_WEBHOOK_METRICS_PUBLIC"
ENV_REFUSED_ROWS = "GP_WEBHOOK_REFUSED_ROWS_PER_SECOND"
ENV_QUIET_ALERT_AFTER = "GP_WEBHOOK_QUIET_ALERT_AFTER_SECONDS"
ENV_SPOOL_DIR = "GP_WEBHOOK_SPOOL_DIR"
ENV_SPOOL_MAX_ROWS = "GP_WEBHOOK_SPOOL_MAX_ROWS"
ENV_SPOOL_MAX_BYTES = "GP_WEBHOOK_SPOOL_MAX_BYTES"


def load_handler(spec_text: str) -> Handler:
    """Import ``module:function`` and return the function (the user's handler)."""
    module_name, sep, attr = spec_text.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"handler {spec_text!r} must look like package.module:function")
    function = getattr(importlib.import_module(module_name), attr, None)
    if not callable(function):
        raise ValueError(f"handler {spec_text!r}: {attr} is not a callable in {module_name}")
    handler: Handler = function
    return handler


def receiver_environment(
    store_url: str,
    auth_kind: str,
    *,
    path: str = spec.DEFAULT_WEBHOOK_PATH,
    max_body_bytes: int = spec.WEBHOOK_MAX_BODY_BYTES,
    handler: str | None = None,
    metrics_public: bool = True,
    refused_rows_per_second: int = spec.WEBHOOK_REFUSED_ROWS_PER_SECOND,
    quiet_alert_after: timedelta = DEFAULT_QUIET_ALERT_AFTER,
    credentials_file: str | None = None,
    spool_dir: str | None = None,
    spool_max_rows: int = DEFAULT_SPOOL_MAX_ROWS,
    spool_max_bytes: int = DEFAULT_SPOOL_MAX_BYTES,
) -> dict[str, str]:
    """The ``GP_WEBHOOK_*`` variables :func:`receiver_from_env` reads, for these settings
    (secrets are not among them: each worker reads those from its own environment, and
    the credentials file itself); ``metrics_public`` false keeps ``/metrics`` off the
    delivery listener."""
    env = {
        ENV_STORE: store_url,
        ENV_AUTH: auth_kind,
        ENV_PATH: path,
        ENV_MAX_BODY: str(max_body_bytes),
        ENV_METRICS_PUBLIC: "1" if metrics_public else "0",
        ENV_REFUSED_ROWS: str(refused_rows_per_second),
        ENV_QUIET_ALERT_AFTER: repr(quiet_alert_after.total_seconds()),
        ENV_SPOOL_MAX_ROWS: str(spool_max_rows),
        ENV_SPOOL_MAX_BYTES: str(spool_max_bytes),
    }
    if handler:
        env[ENV_HANDLER] = handler
    if credentials_file:
        env[ENV_CREDENTIALS_FILE] = credentials_file
    if spool_dir:
        env[ENV_SPOOL_DIR] = spool_dir
    return env


def receiver_from_env() -> WebhookReceiver:
    """Build a receiver from ``GP_WEBHOOK_*`` variables (what ``gptools webhooks serve``
    sets for each worker): store URL, auth kind and secrets (and the credentials file),
    path, body limit, handler, refused rows per second, the quiet alert's threshold, the
    outage spool's folder and bounds. SIGHUP then reloads its credentials and TLS
    certificate (``_reload.py``)."""
    env = os.environ
    handler_text = env.get(ENV_HANDLER)

    def load_auth() -> ReceiverAuth:
        return ReceiverAuth.from_env(
            env.get(ENV_AUTH, "bearer"), credentials_file=env.get(ENV_CREDENTIALS_FILE)
        )

    receiver = WebhookReceiver(
        env.get(ENV_STORE, DEFAULT_STORE_URL),
        auth=load_auth(),
        path=env.get(ENV_PATH, spec.DEFAULT_WEBHOOK_PATH),
        max_body_bytes=int(env.get(ENV_MAX_BODY, str(spec.WEBHOOK_MAX_BODY_BYTES))),
        handler=load_handler(handler_text) if handler_text else None,
        metrics_public=env.get(ENV_METRICS_PUBLIC, "1") != "0",
        refused_rows_per_second=int(
            env.get(ENV_REFUSED_ROWS, str(spec.WEBHOOK_REFUSED_ROWS_PER_SECOND))
        ),
        quiet_alert_after=timedelta(
            seconds=float(
                env.get(ENV_QUIET_ALERT_AFTER, str(DEFAULT_QUIET_ALERT_AFTER.total_seconds()))
            )
        ),
        spool_dir=env.get(ENV_SPOOL_DIR) or None,
        spool_max_rows=int(env.get(ENV_SPOOL_MAX_ROWS, str(DEFAULT_SPOOL_MAX_ROWS))),
        spool_max_bytes=int(env.get(ENV_SPOOL_MAX_BYTES, str(DEFAULT_SPOOL_MAX_BYTES))),
    )
    install(receiver, load_auth)
    return receiver
