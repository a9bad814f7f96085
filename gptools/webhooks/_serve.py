"""Serving the receiver: :func:`serve` checks the settings once, hands them to uvicorn's
worker processes and runs until Ctrl-C or SIGTERM (``gptools webhooks serve`` is a thin
front end over it).

What it does before uvicorn starts, so that a mistake is one clear error here and not a
traceback from every worker: the auth secrets, the store URL and the handler are checked,
the TLS certificate and key are loaded once, the file-descriptor limit is raised (or the
connection limit lowered) to fit, and the store is opened once: a store that does not
exist yet is created (so the workers do not race to create it), one at a schema version
this gptools does not run on is refused, and one that cannot be reached (a database
outage) does not stop the start: each worker checks the store's version when it
connects, and answers 503 until then. The settings reach each worker as one
:class:`~gptools.webhooks.ReceiverConfig`, JSON in one variable (``_config.py``); every
process counts its metrics into a fresh ``PROMETHEUS_MULTIPROC_DIR``, removed (and the
variable restored) when it returns. A pid file, when asked for, is written and locked
while it runs, and SIGHUP reloads the credentials file and the TLS certificate in every
worker (``_reload.py``).
"""

from __future__ import annotations

import contextlib
import logging
import logging.config
import os
import shutil
import signal
import socket
import ssl
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from gptools._private_files import create_private, make_private_dir
from gptools.errors import ConfigurationError, GptoolsError, MissingExtraError
from gptools.webhooks._auth import ReceiverAuth
from gptools.webhooks._config import ReceiverConfig
from gptools.webhooks._constants import GRACEFUL_SHUTDOWN_S, WORKER_HEALTHCHECK_S
from gptools.webhooks._environment import load_handler
from gptools.webhooks._forward import require_clients
from gptools.webhooks._forward_destinations import parse_destinations
from gptools.webhooks._logs import log_config
from gptools.webhooks._metrics import ENV_MULTIPROC_DIR, METRICS_PATH, serve_metrics
from gptools.webhooks._records import StoreUnreachableError
from gptools.webhooks._reload import ReloadControl, live_ssl_context, reload_control
from gptools.webhooks._server_limits import (
    ServerLimits,
    descriptors_needed,
    fit_to_descriptor_limit,
    uvicorn_settings,
)
from gptools.webhooks._spool import default_spool_root, spool_directory
from gptools.webhooks._store import Store, open_store

logger = logging.getLogger("gptools.webhooks")

#: Where an encrypted TLS key's password is read from (never an argument: arguments show
#: up in ``ps`` and in shell history).
ENV_SSL_KEY_PASSWORD = "GP_WEBHOOK_SSL_KEYFILE_PASSWORD"  # noqa: S105 (a variable name)
#: What uvicorn imports in each worker to build its receiver.
RECEIVER_FACTORY = "gptools.webhooks._environment:receiver_from_env"


class ServeError(GptoolsError):
    """The receiver cannot start on this machine (the file-descriptor limit leaves no room
    for connections); its settings themselves are fine."""


class ListenError(ServeError):
    """The receiver cannot listen on ``host:port`` (taken, or not this machine's);
    ``reason`` is the system's word for it."""

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(
            f"cannot listen on {host}:{port}: {reason}; choose another port (0 picks a free one)"
        )
        self.host = host
        self.port = port
        self.reason = reason


def serve(
    store: str | None = None,
    *,
    auth: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    metrics_port: int | None = None,
    log_format: Literal["text", "json"] = "text",
    announce: Callable[[str], object] | None = None,
    pid_file: str | None = None,
    config: ReceiverConfig | None = None,
    **settings: Any,
) -> None:
    """Receive game-event webhooks until Ctrl-C or SIGTERM (in-flight requests are drained).

    Each worker's receiver runs with ``config`` (a :class:`~gptools.webhooks.ReceiverConfig`,
    where every setting is documented with its default), changed by ``store`` (a store
    URL, :func:`~gptools.webhooks.open_store`), ``auth`` (``bearer``, ``basic`` or
    ``none``) and ``settings`` (its fields by name: ``path=...``, ``ack_timeout=...``,
    ``limits=ServerLimits(...)``...). The auth secrets each worker reads from
    ``GP_WEBHOOK_API_KEY`` or ``GP_WEBHOOK_USERNAME`` and ``GP_WEBHOOK_PASSWORD``, and
    from the ``credentials_file`` setting (one ``ID SECRET`` a line, owner-only: several
    credentials valid at once, read again on SIGHUP with the TLS certificate and key;
    ``pid_file`` lets :func:`~gptools.webhooks.reload_receiver` ask for that and wait for
    the answer). The configuration reaches the workers whole, as JSON in one environment
    variable (readable by this user only, as the process's environment is); it holds no
    secret.

    ``ssl_certfile`` with ``ssl_keyfile`` serve HTTPS (an encrypted key's password from
    ``GP_WEBHOOK_SSL_KEYFILE_PASSWORD``). ``metrics_port`` serves ``/metrics`` and
    ``/openapi.json`` on a port of their own instead of on the delivery listener;
    ``log_format`` ``json`` writes one JSON object a line. The ``spool_dir`` setting
    (default ``$STATE_DIRECTORY``, else the SQLite file's folder, else
    ``~/.local/state/gptools``, then ``/webhook-spool``) is checked once here, and the
    ``limits`` setting's ``max_connections`` lowered to fit the file-descriptor limit.
    ``announce`` gets the start-up line (with ``log_format`` ``text``; default: the log).

    A store that does not exist yet is created at the current schema version; a store
    that cannot be reached does not stop the start (the workers answer 503 and report not
    ready until it can, and check its schema version then).

    Raises :class:`~gptools.webhooks.SettingError` (a
    :class:`~gptools.errors.ConfigurationError`) for a setting that cannot work, naming
    it, and :class:`~gptools.errors.ConfigurationError` for auth secrets, a handler or
    TLS files that cannot be used, :class:`ListenError` when an address is not free,
    :class:`ServeError` when no connection fits the descriptor limit,
    :class:`~gptools.webhooks.SchemaVersionError` for a store at a schema version this
    gptools does not run on (``gptools webhooks migrate`` brings an older one up to date),
    :class:`~gptools.webhooks.StoreError` when the store cannot be opened or created and
    :class:`~gptools.errors.MissingExtraError` for a store whose extra is missing. When
    SIGTERM stopped it, the process ends by SIGTERM once everything is cleaned up, as a
    service manager expects.
    """
    logging_config = log_config(log_format)
    if logging_config is not None:
        # Every line JSON from here on: a failure to start, the start-up line, uvicorn's.
        logging.config.dictConfig(logging_config)
    named = {k: v for k, v in (("store", store), ("auth", auth)) if v is not None}
    config = (config or ReceiverConfig()).replaced(
        **named, **settings, metrics_public=metrics_port is None
    )
    try:
        ReceiverAuth.from_env(config.auth, credentials_file=config.credentials_file)
        opened = open_store(config.store)
        if config.handler:
            load_handler(config.handler)
        # A broker's client missing: one line now, not a worker failing to start.
        require_clients(parse_destinations(config.forward))
    except MissingExtraError:  # an ImportError too, but not the caller's settings
        raise
    except (ValueError, ImportError) as exc:  # AuthConfigError is a ValueError too
        raise ConfigurationError(str(exc)) from exc
    spool_root = _spool_root(opened, config.spool_dir)
    key_password = os.environ.get(ENV_SSL_KEY_PASSWORD)
    _check_tls(ssl_certfile, ssl_keyfile, key_password)
    asked = config.limits.max_connections
    fitted, descriptors = fit_to_descriptor_limit(asked)
    if fitted < 1:
        raise ServeError(
            f"the file-descriptor limit ({descriptors}) leaves no room for connections: "
            "raise it (ulimit -n, LimitNOFILE) to at least "
            f"{descriptors_needed(asked)}"
        )
    # Every worker agrees on the spool's folder and holds the connections that fit.
    config = config.replaced(
        spool_dir=str(spool_root), limits=replace(config.limits, max_connections=fitted)
    )
    # Create a new store once here, so the workers do not race to create it; refuse one
    # at another schema version. An outage is no reason not to start: the workers
    # connect when the store is back (and check its version then).
    store_down: str | None = None
    try:
        opened.connect().close()
    except StoreUnreachableError as exc:
        store_down = (
            f"{exc}; starting all the same: deliveries are answered 503 and /readyz fails "
            "until each worker connects (and checks the store's schema version)"
        )
    # Bind once before the start-up line, so it never announces an address that is taken;
    # uvicorn binds again right after, with SO_REUSEADDR as here.
    port = _free_port(host, port)
    with (
        reload_control(pid_file, workers) as control,
        _environment(config.environment() | control.environment()),
        _metrics_directory(),
    ):
        metrics_server = None
        metrics_line = f"; metrics: {'https' if ssl_certfile else 'http'}://{host}:{port}"
        metrics_line += METRICS_PATH
        if metrics_port is not None:
            from gptools.openapi import receiver_openapi, to_json

            metrics_port = _free_port(host, metrics_port)
            contract = receiver_openapi(
                path=config.path, auth_kind=config.auth, max_body_bytes=config.max_body_bytes
            )
            metrics_server = serve_metrics(host, metrics_port, openapi=to_json(contract))
            metrics_line = f"; metrics: http://{host}:{metrics_port}{METRICS_PATH}"
        base = f"{'https' if ssl_certfile else 'http'}://{host}:{port}"
        listening = (
            f"receiving webhooks on {base}{config.path} (auth {config.auth.upper()}, "
            f"store {opened.url}, {workers} worker{'s' if workers > 1 else ''}); "
            f"health: {base}/healthz, readiness: {base}/readyz"
            + metrics_line
            + (
                f"; at most {fitted} connections per worker (file-descriptor limit "
                f"{descriptors}, below the {asked} asked)"
                if fitted < asked
                else ""
            )
        )
        if logging_config is not None:
            logger.info(listening, extra={"event": "listening"})
        elif announce is not None:
            announce(listening)
        else:
            logger.info(listening, extra={"event": "listening"})
        if store_down is not None:
            logger.warning(store_down, extra={"event": "store_unreachable_at_start"})
        try:
            stopped_by_sigterm = _run_uvicorn(
                host=host,
                port=port,
                workers=workers,
                ssl_certfile=ssl_certfile,
                ssl_keyfile=ssl_keyfile,
                ssl_keyfile_password=key_password,
                logging_config=logging_config,
                limits=config.limits,
                control=control,
            )
        finally:
            if metrics_server is not None:
                metrics_server.shutdown()
    if stopped_by_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)


def _spool_root(store: Store, spool_dir: str | None) -> Path:
    """The outage spools' folder (absolute, so every worker agrees), once checked: its
    folder for ``store`` can be created and written. The check leaves behind nothing it
    made (a worker makes the folder only when it first spools a row)."""
    root = (Path(spool_dir) if spool_dir else default_spool_root(store)).absolute()
    folder = spool_directory(store, root)
    missing = [p for p in (folder, *folder.parents) if not p.exists()]  # innermost first
    try:
        make_private_dir(folder)
        probe = folder / f".probe-{os.getpid()}"
        create_private(probe).unlink()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot keep the outage spool in {folder}: {exc.strerror or exc}; "
            "choose a writable folder with --spool-dir"
        ) from exc
    finally:
        for made in missing:
            with contextlib.suppress(OSError):
                made.rmdir()
    return root


def _check_tls(certfile: str | None, keyfile: str | None, password: str | None) -> None:
    """Load the certificate and key once, so a wrong file or password is one error here,
    not a traceback from every worker."""
    if (certfile is None) != (keyfile is None):
        raise ConfigurationError("ssl_certfile and ssl_keyfile go together (HTTPS needs both)")
    if certfile is None:
        return
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            certfile, keyfile, password
        )
    except (ssl.SSLError, OSError) as exc:
        raise ConfigurationError(
            f"cannot use the TLS certificate {certfile} with key {keyfile}: {exc}"
        ) from exc


def _free_port(host: str, port: int) -> int:
    """Bind ``host:port`` once (port 0: a free one) and return the port bound."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        bound: int = sock.getsockname()[1]
    except (UnicodeError, TypeError):  # a host name IDNA cannot encode
        raise ConfigurationError(f"host {host!r} is not a host name or address") from None
    except OSError as exc:
        raise ListenError(host, port, exc.strerror or str(exc)) from None
    finally:
        sock.close()
    return bound


@contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """Set ``variables`` for the workers (they inherit this process's environment; with
    one worker, uvicorn builds the receiver in this process), and restore the caller's
    values afterwards: a Python caller goes on with the environment it had."""
    previous = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _metrics_directory() -> Iterator[str]:
    """A fresh ``PROMETHEUS_MULTIPROC_DIR`` for this run: every process (this one too,
    with one worker) counts into it, so that a scrape sums all workers and never last
    run's counts. Set before anything imports prometheus_client, which reads it at import;
    removed afterwards, and the variable restored: this process may go on (a test, a
    Python caller) and must not keep pointing at a directory that no longer exists."""
    directory = tempfile.mkdtemp(prefix="gptools-metrics-")
    previous = os.environ.get(ENV_MULTIPROC_DIR)
    os.environ[ENV_MULTIPROC_DIR] = directory
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        if previous is None:
            os.environ.pop(ENV_MULTIPROC_DIR, None)
        else:
            os.environ[ENV_MULTIPROC_DIR] = previous


def _run_uvicorn(
    *,
    host: str,
    port: int,
    workers: int,
    ssl_certfile: str | None,
    ssl_keyfile: str | None,
    ssl_keyfile_password: str | None,
    logging_config: dict[str, Any] | None,
    limits: ServerLimits,
    control: ReloadControl,
) -> bool:
    """Run uvicorn until it stops; True when SIGTERM stopped it. With TLS, uvicorn's context
    is kept so that a reload can load a new certificate into it; several workers run under
    a supervisor whose SIGHUP reloads them in place (``_reload.py``).

    With one worker, uvicorn ends a SIGTERM (systemd's stop) by raising the signal again
    under the handler it found, the default one, which kills the process before the
    clean-up. This handler turns it into an exception instead; :func:`serve` raises the
    signal again once it has cleaned up."""
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    options: dict[str, Any] = {
        "factory": True,
        "host": host,
        "port": port,
        "workers": workers,
        "lifespan": "on",
        "access_log": False,
        "log_level": "info",
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
        "timeout_worker_healthcheck": WORKER_HEALTHCHECK_S,
        "ssl_certfile": ssl_certfile,
        "ssl_keyfile": ssl_keyfile,
        "ssl_keyfile_password": ssl_keyfile_password,
        "log_config": logging_config if logging_config is not None else LOGGING_CONFIG,
        **uvicorn_settings(limits),
    }
    if ssl_certfile is not None:
        options["ssl_context_factory"] = live_ssl_context
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        if workers > 1:
            from gptools.webhooks._reload_workers import run_workers

            run_workers(RECEIVER_FACTORY, options, control)
        else:
            uvicorn.run(RECEIVER_FACTORY, **options)
    except _Terminated:
        return True
    finally:
        signal.signal(signal.SIGTERM, previous)
    return False


class _Terminated(BaseException):
    """SIGTERM reached the main process (see :func:`_run_uvicorn`)."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated
