"""``gptools webhooks serve|export|dead-letters``.

Secrets come from environment variables only (``GP_WEBHOOK_API_KEY``, or
``GP_WEBHOOK_USERNAME`` and ``GP_WEBHOOK_PASSWORD``, and ``GP_WEBHOOK_SSL_KEYFILE_PASSWORD``),
never from arguments: arguments show up in ``ps`` and in shell history. Paths (the TLS
certificate and key) come from arguments or their ``GP_WEBHOOK_SSL_*`` variables.
"""

from __future__ import annotations

import logging
import logging.config
import os
import signal
import ssl
from datetime import UTC, datetime
from pathlib import Path

import click

from gptools import spec
from gptools.cli._common import AUTH_CHOICE
from gptools.cli._main import emit, fail, listening_socket, say, webhooks
from gptools.cli._params import STORE_URL
from gptools.errors import MissingExtraError

_WORKER_HEALTHCHECK_S = 60
_PEM_FILE = click.Path(exists=True, dir_okay=False, readable=True)
ENV_SSL_KEY_PASSWORD = "GP_WEBHOOK_SSL_KEYFILE_PASSWORD"  # noqa: S105 (a variable name)
_STORE_HELP = "sqlite:///PATH (or a bare PATH) or postgresql://USER@HOST/DB[?schema=NAME]"
_SECONDS = click.FloatRange(min=0.1)


@webhooks.command("serve")
@click.option(
    "--auth",
    "auth_kind",
    type=AUTH_CHOICE,
    required=True,
    help="How deliveries authenticate; secrets from GP_WEBHOOK_API_KEY (bearer) "
    "or GP_WEBHOOK_USERNAME + GP_WEBHOOK_PASSWORD (basic).",
)
@click.option(
    "--store",
    "store_url",
    type=STORE_URL,
    default="sqlite:///webhooks.sqlite3",
    show_default=True,
    help=_STORE_HELP,
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker processes (uvicorn).",
)
@click.option(
    "--path",
    default=spec.DEFAULT_WEBHOOK_PATH,
    show_default=True,
    help="The POST path deliveries arrive on.",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(1),
    default=spec.WEBHOOK_MAX_BODY_BYTES,
    show_default=True,
    help="Bodies larger than this are answered 413.",
)
@click.option(
    "--refused-rows-per-second",
    type=click.IntRange(0),
    default=spec.WEBHOOK_REFUSED_ROWS_PER_SECOND,
    show_default=True,
    help="Log rows per second (per worker) for each reason of refusal before "
    "authentication or routing (401, 404, 413, ...); past it they are only counted, "
    "in a summary row every 10 s and the metric "
    "gptools_webhook_refusals_suppressed_total.",
)
@click.option(
    "--handler",
    default=None,
    metavar="MODULE:FUNCTION",
    help="Run this function for every new action, after the acknowledgement.",
)
@click.option(
    "--ssl-certfile",
    type=_PEM_FILE,
    default=None,
    envvar="GP_WEBHOOK_SSL_CERTFILE",
    help="Serve HTTPS with this PEM certificate (chain); with --ssl-keyfile. "
    "[env GP_WEBHOOK_SSL_CERTFILE]",
)
@click.option(
    "--ssl-keyfile",
    type=_PEM_FILE,
    default=None,
    envvar="GP_WEBHOOK_SSL_KEYFILE",
    help="The certificate's PEM private key; an encrypted key's password from "
    f"{ENV_SSL_KEY_PASSWORD}. [env GP_WEBHOOK_SSL_KEYFILE]",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics at /metrics (and the OpenAPI description at "
    "/openapi.json) on this port (same host) instead of on the delivery listener.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one JSON object a line (time, level, event, status, actionId, "
    "latency_ms); never a secret or a header.",
)
@click.option(
    "--max-header-bytes",
    type=click.IntRange(1024),
    default=spec.RECEIVER_MAX_HEADER_BYTES,
    show_default=True,
    help="Request line and headers larger than this are answered 431 (connection closed).",
)
@click.option(
    "--max-header-fields",
    type=click.IntRange(8),
    default=spec.RECEIVER_MAX_HEADER_FIELDS,
    show_default=True,
    help="Requests with more header fields are answered 431 (connection closed).",
)
@click.option(
    "--header-timeout",
    type=_SECONDS,
    default=spec.RECEIVER_HEADER_TIMEOUT.total_seconds(),
    show_default=True,
    help="Seconds to receive a request's headers; then the connection is closed.",
)
@click.option(
    "--body-timeout",
    type=_SECONDS,
    default=spec.RECEIVER_BODY_TIMEOUT.total_seconds(),
    show_default=True,
    help="Seconds to receive a request's body after its headers; then it is closed.",
)
@click.option(
    "--keep-alive-timeout",
    type=_SECONDS,
    default=spec.RECEIVER_KEEP_ALIVE_TIMEOUT.total_seconds(),
    show_default=True,
    help="Seconds an idle kept-alive connection stays open.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1),
    default=spec.RECEIVER_MAX_CONNECTIONS,
    show_default=True,
    help="Open connections per worker; past it a new one replaces the oldest idle one, "
    "or is answered 503. Each worker needs this many file descriptors plus "
    f"{spec.RECEIVER_FD_OVERHEAD} (ulimit -n, LimitNOFILE); it is lowered to fit.",
)
def serve(
    auth_kind: str,
    store_url: str,
    host: str,
    port: int,
    workers: int,
    path: str,
    max_body_bytes: int,
    refused_rows_per_second: int,
    handler: str | None,
    ssl_certfile: str | None,
    ssl_keyfile: str | None,
    metrics_port: int | None,
    log_format: str,
    max_header_bytes: int,
    max_header_fields: int,
    header_timeout: float,
    body_timeout: float,
    keep_alive_timeout: float,
    max_connections: int,
) -> None:
    """Receive game-event webhooks until Ctrl-C/SIGTERM (in-flight requests are drained)."""
    import shutil
    import tempfile

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from gptools.webhooks import (
        ENV_MULTIPROC_DIR,
        METRICS_PATH,
        AuthConfigError,
        ReceiverAuth,
        ServerLimits,
        StoreError,
        descriptors_needed,
        fit_to_descriptor_limit,
        load_handler,
        log_config,
        open_store,
        receiver_environment,
        serve_metrics,
        uvicorn_settings,
    )

    try:
        ReceiverAuth.from_env(auth_kind)
        store = open_store(store_url)
        if handler:
            load_handler(handler)
    except MissingExtraError as exc:  # an ImportError too, but not the user's input
        fail(str(exc))
    except (AuthConfigError, ValueError, ImportError) as exc:
        fail(str(exc), bad_input=True)
    if not path.startswith("/"):
        fail(f"--path must start with '/', got {path!r}", bad_input=True)
    key_password = os.environ.get(ENV_SSL_KEY_PASSWORD)
    if (ssl_certfile is None) != (ssl_keyfile is None):
        fail("--ssl-certfile and --ssl-keyfile go together (HTTPS needs both)", bad_input=True)
    if ssl_certfile is not None:
        try:
            # Loaded once here, so a wrong file or password is one line, not a traceback
            # from every worker.
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                ssl_certfile, ssl_keyfile, key_password
            )
        except (ssl.SSLError, OSError) as exc:
            fail(
                f"cannot use the TLS certificate {ssl_certfile} with key {ssl_keyfile}: {exc}",
                bad_input=True,
            )
    scheme = "https" if ssl_certfile else "http"
    fitted, descriptors = fit_to_descriptor_limit(max_connections)
    if fitted < 1:
        fail(
            f"the file-descriptor limit ({descriptors}) leaves no room for connections: "
            f"raise it (ulimit -n, LimitNOFILE) to at least {descriptors_needed(max_connections)}"
        )
    limits = ServerLimits(
        max_header_bytes=max_header_bytes,
        max_header_fields=max_header_fields,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        keep_alive_timeout_s=keep_alive_timeout,
        max_connections=fitted,
    )
    try:
        # Create the tables once here, so the workers do not race to create them.
        store.connect().close()
    except StoreError as exc:
        fail(str(exc))
    os.environ.update(
        receiver_environment(
            store_url,
            auth_kind,
            path=path,
            max_body_bytes=max_body_bytes,
            refused_rows_per_second=refused_rows_per_second,
            handler=handler,
            metrics_public=metrics_port is None,
        )
        | limits.environment()
    )
    # Bind once before the start-up line, so it never announces an address that is taken
    # (exit 3 instead); uvicorn binds again right after, with SO_REUSEADDR as here.
    with listening_socket(host, port) as probe:
        port = probe.getsockname()[1]
    # Every process (this one too, with one worker) counts into this directory, a fresh
    # one per run, so that a scrape sums all workers and never last run's counts. Set
    # before anything imports prometheus_client, which reads it at import.
    metrics_dir = tempfile.mkdtemp(prefix="gptools-metrics-")
    previous_dir = os.environ.get(ENV_MULTIPROC_DIR)
    os.environ[ENV_MULTIPROC_DIR] = metrics_dir
    try:
        metrics_line = ""
        if metrics_port is not None:
            with listening_socket(host, metrics_port) as probe:
                metrics_port = probe.getsockname()[1]
            from gptools.openapi import receiver_openapi, to_json

            contract = receiver_openapi(
                path=path, auth_kind=auth_kind, max_body_bytes=max_body_bytes
            )
            metrics_server = serve_metrics(host, metrics_port, store, openapi=to_json(contract))
            metrics_line = f"; metrics: http://{host}:{metrics_port}{METRICS_PATH}"
        base = f"{scheme}://{host}:{port}"
        listening = (
            f"receiving webhooks on {base}{path} (auth {auth_kind.upper()}, "
            f"store {store.url}, {workers} worker{'s' if workers > 1 else ''}); "
            f"health: {base}/healthz, readiness: {base}/readyz"
            + (metrics_line or f"; metrics: {base}{METRICS_PATH}")
            + (
                f"; at most {fitted} connections per worker (file-descriptor limit "
                f"{descriptors}, below the {max_connections} asked)"
                if fitted < max_connections
                else ""
            )
        )
        logging_config = log_config(log_format)
        if logging_config is not None:
            # Every line JSON, the start-up line too.
            logging.config.dictConfig(logging_config)
            logging.getLogger("gptools.webhooks").info(listening, extra={"event": "listening"})
        else:
            say(listening)
        # With one worker, uvicorn ends a SIGTERM (systemd's stop) by raising the signal again
        # under the handler it found, the default one, which kills the process before the
        # clean-up below. This handler turns it into an exception instead; the process still
        # ends by SIGTERM afterwards, as a service manager expects.
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            uvicorn.run(
                "gptools.webhooks:receiver_from_env",
                factory=True,
                host=host,
                port=port,
                workers=workers,
                lifespan="on",
                access_log=False,
                log_level="info",
                timeout_graceful_shutdown=10,
                # uvicorn kills a worker that does not answer its health ping within 5 s; a worker
                # still importing on a busy machine takes longer, and was killed over and over.
                timeout_worker_healthcheck=_WORKER_HEALTHCHECK_S,
                ssl_certfile=ssl_certfile,
                ssl_keyfile=ssl_keyfile,
                ssl_keyfile_password=key_password,
                log_config=logging_config if logging_config is not None else LOGGING_CONFIG,
                **uvicorn_settings(limits),
            )
        except _Terminated:
            stopped_by_sigterm = True
        else:
            stopped_by_sigterm = False
        finally:
            signal.signal(signal.SIGTERM, previous)
            if metrics_port is not None:
                metrics_server.shutdown()
    finally:
        # This process may go on (a test, a Python caller): it must not keep pointing
        # prometheus_client at a directory that no longer exists.
        shutil.rmtree(metrics_dir, ignore_errors=True)
        if previous_dir is None:
            os.environ.pop(ENV_MULTIPROC_DIR, None)
        else:
            os.environ[ENV_MULTIPROC_DIR] = previous_dir
    if stopped_by_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)


class _Terminated(BaseException):
    """SIGTERM reached the main process (see ``serve``)."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated


@webhooks.command("export")
@click.option("--store", "store_url", type=STORE_URL, required=True, help=_STORE_HELP)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet"]), required=True)
@click.argument("out", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.option(
    "--target",
    default=None,
    metavar="NAME",
    help="Incremental: only the rows this target has not exported yet; the store's "
    "log purge keeps rows its export_target has not exported.",
)
@click.option("--force", is_flag=True, help="Overwrite OUT, or write it whatever its suffix.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def export(
    store_url: str, fmt: str, out: Path, target: str | None, force: bool, as_json: bool
) -> None:
    """Write the store's delivery log to OUT as JSONL or Parquet (OUT must not exist and
    must end in .jsonl or .parquet as --format says, unless --force)."""
    from gptools.webhooks import StoreError, export_log, open_store

    try:
        store = open_store(store_url)
    except ValueError as exc:
        fail(str(exc), bad_input=True)
    if not force:
        if out.exists():
            fail(f"{out} exists; --force overwrites it", bad_input=True)
        if out.suffix.lower() != f".{fmt}":
            fail(
                f"{out} does not end in .{fmt}, which --format {fmt} writes; "
                "rename it or pass --force",
                bad_input=True,
            )
    try:
        result = export_log(
            store, out, format="jsonl" if fmt == "jsonl" else "parquet", target=target
        )
    except (StoreError, OSError) as exc:
        fail(f"export failed: {exc}")
    emit(
        {"path": str(result.path), "format": result.format, "records": result.records},
        as_json=as_json,
        human=lambda: f"wrote {result.records} delivery records to {result.path} ({fmt})",
    )


@webhooks.command("dead-letters")
@click.option("--store", "store_url", type=STORE_URL, required=True, help=_STORE_HELP)
@click.option(
    "--retry",
    is_flag=True,
    help="Put every dead-lettered action back in the processing queue, due now.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def dead_letters(store_url: str, retry: bool, as_json: bool) -> None:
    """List the actions whose handler runs gave up (with their last error); --retry
    queues them again with their attempts counted from zero."""
    from gptools.webhooks import StoreError, format_utc, open_store

    try:
        store = open_store(store_url)
    except ValueError as exc:
        fail(str(exc), bad_input=True)
    try:
        conn = store.connect()
        try:
            letters = conn.dead_letters()
            retried = conn.retry_dead(datetime.now(UTC)) if retry else 0
        finally:
            conn.close()
    except StoreError as exc:
        fail(str(exc))
    listed = [
        {
            "action_id": d.action_id,
            "first_received_at": format_utc(d.first_received_at),
            "attempts": d.attempts,
            "last_error": d.last_error,
        }
        for d in letters
    ]

    def human() -> str:
        lines = [
            f"{d['action_id']}  {d['first_received_at']}  {d['attempts']} attempts  "
            f"{d['last_error']}"
            for d in listed
        ]
        lines.append(
            f"{len(listed)} dead-lettered action{'s' if len(listed) != 1 else ''}"
            + (f"; {retried} queued again" if retry else "")
        )
        return "\n".join(lines)

    emit({"dead_letters": listed, "retried": retried}, as_json=as_json, human=human)
