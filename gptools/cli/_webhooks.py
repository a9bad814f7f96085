"""``gptools webhooks serve|reload|migrate|export|dead-letters``.

Every command but ``serve`` and ``migrate`` opens a store that exists, at a schema version
this gptools runs on, and refuses any other with one line and exit 2, leaving nothing
behind (a mistyped URL never makes an empty store).

Secrets come from environment variables (``GP_WEBHOOK_API_KEY``, or
``GP_WEBHOOK_USERNAME`` and ``GP_WEBHOOK_PASSWORD``, and ``GP_WEBHOOK_SSL_KEYFILE_PASSWORD``)
or an owner-only credentials file, never from arguments: arguments show up in ``ps`` and in
shell history. Paths (the TLS certificate and key, the credentials and pid files) come from
arguments or their ``GP_WEBHOOK_*`` variables.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gptools import spec
from gptools.cli._common import AUTH_CHOICE
from gptools.cli._main import AddressInUse, emit, fail, say, webhooks
from gptools.cli._outputs import check_output_option
from gptools.cli._params import STORE_URL, PositiveFinite
from gptools.errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    from gptools.webhooks import Store

_PEM_FILE = click.Path(exists=True, dir_okay=False, readable=True)
ENV_SSL_KEY_PASSWORD = "GP_WEBHOOK_SSL_KEYFILE_PASSWORD"  # noqa: S105 (a variable name)
ENV_CREDENTIALS_FILE = "GP_WEBHOOK_CREDENTIALS_FILE"
ENV_PID_FILE = "GP_WEBHOOK_PID_FILE"
_STORE_HELP = "sqlite:///PATH (or a bare PATH) or postgresql://USER@HOST/DB[?schema=NAME]"
_SECONDS = click.FloatRange(min=0.1)


def _failure_as_json_line(command: Callable[..., None]) -> Callable[..., None]:
    """With ``--log-format json``, the command's failure is one JSON line of the log
    (event ``serve_failed``; serve configured the log first), so that every line on
    stderr is JSON; the exit code stays the contract's."""

    @functools.wraps(command)
    def run(**options: Any) -> None:
        try:
            command(**options)
        except click.ClickException as exc:
            if options.get("log_format") != "json":
                raise
            logging.getLogger("gptools.webhooks").error(
                exc.format_message(), extra={"event": "serve_failed"}
            )
            raise click.exceptions.Exit(exc.exit_code) from None  # said: no more text

    return run


@webhooks.command("serve")
@click.option(
    "--auth",
    "auth_kind",
    type=AUTH_CHOICE,
    required=True,
    help="How deliveries authenticate; secrets from GP_WEBHOOK_API_KEY (bearer) "
    "or GP_WEBHOOK_USERNAME + GP_WEBHOOK_PASSWORD (basic), and --credentials-file.",
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
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on (0: a free one).",
)
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
    "--quiet-alert-after",
    type=PositiveFinite(spec.WEBHOOK_RETRY_WINDOW.total_seconds()),
    default=None,
    # The default is serve()'s (DEFAULT_QUIET_ALERT_AFTER), not repeated here.
    help="Seconds without an acknowledged delivery (while the receiver is up) after which "
    "the shipped quiet alert fires; exported as gptools_webhook_quiet_threshold_seconds. "
    "At most the provider's 7-day retry window. [default: 1800, 30 minutes]",
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
@click.option(
    "--credentials-file",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    envvar=ENV_CREDENTIALS_FILE,
    help="Credentials valid at once, one 'ID SECRET' a line (ID USERNAME:PASSWORD for "
    "basic), read again on SIGHUP or `webhooks reload`; owner-only (chmod 600). The ID "
    f"names the credential in metrics and logs. [env {ENV_CREDENTIALS_FILE}]",
)
@click.option(
    "--pid-file",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    envvar=ENV_PID_FILE,
    help="Write the serve process's id here (locked while it runs), for `webhooks reload`. "
    f"[env {ENV_PID_FILE}]",
)
@click.option(
    "--spool-dir",
    type=click.Path(file_okay=False),
    default=None,
    envvar="GP_WEBHOOK_SPOOL_DIR",
    help="Where each worker keeps the log rows of the 503s it answers while the store is "
    "down, until the store is back (a folder per store inside). Default: "
    "$STATE_DIRECTORY (systemd's StateDirectory=), else the SQLite store's folder, else "
    "~/.local/state/gptools; then /webhook-spool. [env GP_WEBHOOK_SPOOL_DIR]",
)
@click.option(
    "--spool-max-rows",
    type=click.IntRange(0),
    default=None,
    help="Rows the outage spool keeps per worker (default 100,000); past it they are "
    "only counted (gptools_webhook_spool_dropped_total).",
)
@click.option(
    "--spool-max-bytes",
    type=click.IntRange(0),
    default=None,
    help="Bytes the outage spool keeps per worker (default 128 MiB); past it rows are "
    "only counted.",
)
@_failure_as_json_line
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
    quiet_alert_after: float | None,
    log_format: str,
    max_header_bytes: int,
    max_header_fields: int,
    header_timeout: float,
    body_timeout: float,
    keep_alive_timeout: float,
    max_connections: int,
    credentials_file: str | None,
    pid_file: str | None,
    spool_dir: str | None,
    spool_max_rows: int | None,
    spool_max_bytes: int | None,
) -> None:
    """Receive game-event webhooks until Ctrl-C/SIGTERM (in-flight requests are drained);
    SIGHUP reads the credentials file and the TLS certificate and key again.

    A store that does not exist yet is created; one at another schema version is refused
    (`gptools webhooks migrate` brings an older one up to date); one that cannot be
    reached does not stop the start (503 and not ready until it can)."""
    from gptools.webhooks import (
        ListenError,
        SchemaVersionError,
        ServeError,
        ServerLimits,
        StoreError,
        serve,
    )

    limits = ServerLimits(
        max_header_bytes=max_header_bytes,
        max_header_fields=max_header_fields,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        keep_alive_timeout_s=keep_alive_timeout,
        max_connections=max_connections,
    )
    # Unset: serve's own defaults (gptools.webhooks is not imported before here).
    unset_are_defaults: dict[str, Any] = {
        name: value
        for name, value in (
            ("spool_max_rows", spool_max_rows),
            ("spool_max_bytes", spool_max_bytes),
            (
                "quiet_alert_after",
                None if quiet_alert_after is None else timedelta(seconds=quiet_alert_after),
            ),
        )
        if value is not None
    }
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
            credentials_file=credentials_file,
            pid_file=pid_file,
            spool_dir=spool_dir,
            **unset_are_defaults,
        )
    except MissingExtraError as exc:
        fail(str(exc))
    except (ConfigurationError, SchemaVersionError) as exc:
        fail(str(exc), bad_input=True)
    except ListenError as exc:
        raise AddressInUse(
            f"cannot listen on {exc.host}:{exc.port}: {exc.reason}; choose "
            "another --port (0 picks a free one)"
        ) from None
    except (ServeError, StoreError) as exc:
        fail(str(exc))


@webhooks.command("reload")
@click.option(
    "--pid-file",
    type=click.Path(dir_okay=False, path_type=str),
    required=True,
    envvar=ENV_PID_FILE,
    help=f"The pid file `webhooks serve --pid-file` writes. [env {ENV_PID_FILE}]",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def reload(pid_file: str, as_json: bool) -> None:
    """Make a running `webhooks serve` read its credentials file and TLS certificate and key
    again (as SIGHUP does) and wait for its answer: exit 0 once every worker uses them, 1
    when it refused them (it keeps the ones in use) or did not answer."""
    from gptools.webhooks import ReloadError, reload_receiver

    try:
        result = reload_receiver(pid_file)
    except ConfigurationError as exc:
        fail(str(exc), bad_input=True)
    except ReloadError as exc:
        fail(str(exc))

    def human() -> str:
        if not result.ok:
            return f"reload failed, the receiver keeps the settings in use: {result.detail}"
        return (
            f"reloaded {result.workers} worker{'s' if result.workers != 1 else ''} of pid "
            f"{result.pid}: credentials {', '.join(result.credentials) or '(none)'}"
            + (" and the TLS certificate" if result.tls else "")
        )

    emit(result.to_dict(), as_json=as_json, human=human)
    if not result.ok:
        fail("reload failed", code="reload_failed")


@webhooks.command("migrate")
@click.option("--store", "store_url", type=STORE_URL, required=True, help=_STORE_HELP)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Change nothing (create no file or schema); say which migrations would run, "
    "with their statements.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def migrate_command(store_url: str, dry_run: bool, as_json: bool) -> None:
    """Bring a store to this gptools' schema version (create it if it does not exist).

    Run it with a role allowed to create and change tables, before the first `webhooks
    serve` of a new gptools; serve then needs data rights only. Says from which version
    to which; running it again does nothing. Safe while receivers serve: receivers of the
    previous version keep working on the migrated store (see the operations guide)."""
    from gptools.webhooks import SchemaVersionError, StoreError, migrate, open_store

    try:
        store = open_store(store_url)
    except ValueError as exc:
        fail(str(exc), bad_input=True)
    try:
        result = migrate(store, dry_run=dry_run)
    except SchemaVersionError as exc:
        fail(str(exc), bad_input=True)
    except StoreError as exc:
        fail(f"migration failed: {exc}")
    emit(result.to_dict(), as_json=as_json, human=lambda: str(result))


def _existing_store(store_url: str) -> Store:
    """The store ``store_url`` names, opened so that it is never created."""
    from gptools.webhooks import open_store

    try:
        return open_store(store_url, create=False)
    except ValueError as exc:
        fail(str(exc), bad_input=True)


@webhooks.command("export")
@click.option("--store", "store_url", type=STORE_URL, required=True, help=_STORE_HELP)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "parquet"]),
    required=True,
    help="The file's format: JSONL (one delivery a line) or Parquet.",
)
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
    from gptools.webhooks import SchemaVersionError, StoreError, StoreNotFoundError, export_log

    store = _existing_store(store_url)
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
    except (StoreNotFoundError, SchemaVersionError) as exc:
        fail(str(exc), bad_input=True)
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
    from gptools.webhooks import SchemaVersionError, StoreError, StoreNotFoundError

    store = _existing_store(store_url)
    try:
        conn = store.connect()
        try:
            letters = conn.dead_letters()
            retried = conn.retry_dead(datetime.now(UTC)) if retry else 0
        finally:
            conn.close()
    except (StoreNotFoundError, SchemaVersionError) as exc:
        fail(str(exc), bad_input=True)
    except StoreError as exc:
        fail(str(exc))
    listed = [d.to_dict() for d in letters]

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
