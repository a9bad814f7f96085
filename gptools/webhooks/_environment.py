"""One receiver per uvicorn worker process, built from the :class:`ReceiverConfig` that
:func:`~gptools.webhooks.serve` hands over whole in one environment variable
(``GP_WEBHOOK_CONFIG``); secrets are read by each worker from its own environment and
the credentials file, never passed."""

from __future__ import annotations

import importlib

from gptools.webhooks._app import WebhookReceiver
from gptools.webhooks._auth import ReceiverAuth
from gptools.webhooks._config import ReceiverConfig
from gptools.webhooks._queue import Handler
from gptools.webhooks._reload import install


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


def receiver_from_env() -> WebhookReceiver:
    """Build a receiver from the configuration ``gptools webhooks serve`` handed to this
    worker (:meth:`ReceiverConfig.from_environment`): its store, auth kind and secrets
    (and the credentials file), handler and every other setting. SIGHUP then reloads its
    credentials and TLS certificate (``_reload.py``)."""
    config = ReceiverConfig.from_environment()

    def load_auth() -> ReceiverAuth:
        return ReceiverAuth.from_env(config.auth, credentials_file=config.credentials_file)

    receiver = WebhookReceiver(
        config.store,
        auth=load_auth(),
        handler=load_handler(config.handler) if config.handler else None,
        config=config,
    )
    install(receiver, load_auth)
    return receiver
