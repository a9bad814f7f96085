"""``gptools webhooks serve|export|dead-letters``.

Secrets come from environment variables only (``GP_WEBHOOK_API_KEY``, or
``GP_WEBHOOK_USERNAME`` and ``GP_WEBHOOK_PASSWORD``, and ``GP_WEBHOOK_SSL_KEYFILE_PASSWORD``),
never from arguments: arguments show up in ``ps`` and in shell history. Paths (the TLS
certificate and key) come from arguments or their ``GP_WEBHOOK_SSL_*`` variables.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from gptools import spec
from gptools.cli._common import AUTH_CHOICE
from gptools.cli._main import AddressInUse, emit, fail, say, webhooks
from gptools.cli._outputs import check_output_option
from gptools.cli._params import STORE_URL
from gptools.errors import ConfigurationError, MissingExtraError

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
    from gptools.webhooks import ListenError, ServeError, ServerLimits, StoreError, serve

    limits = ServerLimits(
        max_header_bytes=max_header_bytes,
        max_header_fields=max_header_fields,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        keep_alive_timeout_s=keep_alive_timeout,
        max_connections=max_connections,
    )
    try:
        serve(
            store_url,
            auth=auth_kind,
            host=host,
            port=port,
            workers=workers,
            path=path,
            max_body_bytes=max_body_bytes,
            refused_rows_per_second=refused_rows_per_second,
            handler=handler,
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
            metrics_port=metrics_port,
            log_format="json" if log_format == "json" else "text",
            limits=limits,
            announce=say,
        )
    except MissingExtraError as exc:
        fail(str(exc))
    except ConfigurationError as exc:
        fail(str(exc), bad_input=True)
    except ListenError as exc:
        raise AddressInUse(
            f"cannot listen on {exc.host}:{exc.port}: {exc.reason}; choose "
            "another --port (0 picks a free one)"
        ) from None
    except (ServeError, StoreError) as exc:
        fail(str(exc))


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
@click.option(
    "--force",
    is_flag=True,
    help="Overwrite OUT (never through a symbolic link), or write it whatever its suffix.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def export(
    store_url: str, fmt: str, out: Path, target: str | None, force: bool, as_json: bool
) -> None:
    """Write the store's delivery log to OUT as JSONL or Parquet (OUT must not exist and
    must end in .jsonl or .parquet as --format says, unless --force; never a symbolic
    link)."""
    from gptools.webhooks import StoreError, export_log, open_store

    try:
        store = open_store(store_url)
    except ValueError as exc:
        fail(str(exc), bad_input=True)
    check_output_option("OUT", out, force=force)
    if not force and out.suffix.lower() != f".{fmt}":
        fail(
            f"{out} does not end in .{fmt}, which --format {fmt} writes; rename it or pass --force",
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
