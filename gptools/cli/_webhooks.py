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

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gptools import spec
from gptools.cli._common import AUTH_CHOICE
from gptools.cli._main import AddressInUse, emit, fail, say, webhooks
from gptools.cli._outputs import check_output_option
from gptools.cli._params import FINITE, SECONDS, STORE_URL, Between
from gptools.errors import ConfigurationError, MissingExtraError

if TYPE_CHECKING:
    from gptools.webhooks import Store

_PEM_FILE = click.Path(exists=True, dir_okay=False, readable=True)
ENV_SSL_KEY_PASSWORD = "GP_WEBHOOK_SSL_KEYFILE_PASSWORD"  # noqa: S105 (a variable name)
ENV_CREDENTIALS_FILE = "GP_WEBHOOK_CREDENTIALS_FILE"
ENV_PID_FILE = "GP_WEBHOOK_PID_FILE"
_STORE_HELP = "sqlite:///PATH (or a bare PATH) or postgresql://USER@HOST/DB[?schema=NAME]"
#: The connection time-outs' range; the receiver's configuration refuses any other too.
_TIMEOUT = Between(*(bound.total_seconds() for bound in spec.RECEIVER_TIMEOUT_RANGE))
#: The most dead-lettered forwards ``dead-letters --forward`` lists (all are counted and
#: retried); the store's own bound, here so that gptools.webhooks is not imported for --help.
DEAD_FORWARDS_SHOWN = 1000


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


class SettingOption(click.Option):
    """An option of a :class:`~gptools.webhooks.ReceiverConfig` setting: unset (None), the
    setting keeps the configuration's default; its help is the setting's documentation
    (or the option's own) with that default, made when first read (``gptools.webhooks``
    is not imported before a command runs)."""

    def __init__(self, param_decls: Sequence[str], *, setting: str, **kwargs: Any) -> None:
        self.setting = setting
        self._own_help: str | None = None
        self._help: str | None = None
        super().__init__(param_decls, default=None, **kwargs)

    @property
    def help(self) -> str:
        """The setting's documentation (unless the option has its own) and default."""
        if self._help is None:
            from gptools.webhooks import ReceiverConfig

            doc, default = ReceiverConfig.documentation(self.setting)
            shown = f"{default:g}" if isinstance(default, float) else default
            self._help = "  ".join(
                part
                for part in (
                    self._own_help or doc,
                    f"[default: {shown}]" if default is not None else "",
                    f"[env {self.envvar}]" if isinstance(self.envvar, str) else "",
                )
                if part
            )
        return self._help

    @help.setter
    def help(self, text: str | None) -> None:
        self._own_help = text
        self._help = None


def setting_option(setting: str, *decls: str, **kwargs: Any) -> Callable[[Any], Any]:
    """Declare the option ``decls`` of the receiver setting ``setting``."""
    return click.option(*decls, setting, cls=SettingOption, setting=setting, **kwargs)


def _option_of(ctx: click.Context, setting: str) -> click.Parameter | None:
    """The option of ``setting`` in this command, if it has one."""
    return next((p for p in ctx.command.params if getattr(p, "setting", None) == setting), None)


@webhooks.command("serve")
@click.option(
    "--auth",
    "auth_kind",
    type=AUTH_CHOICE,
    required=True,
    help="How deliveries authenticate; secrets from GP_WEBHOOK_API_KEY (bearer) "
    "or GP_WEBHOOK_USERNAME + GP_WEBHOOK_PASSWORD (basic), and --credentials-file.",
)
@setting_option("store", "--store", type=STORE_URL, help=_STORE_HELP)
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
@setting_option("path", "--path")
@setting_option("max_body_bytes", "--max-body-bytes", type=click.INT)
@setting_option("refused_rows_per_second", "--refused-rows-per-second", type=click.INT)
@setting_option("refusal_summary_every", "--refusal-summary-every", type=SECONDS)
@setting_option("handler", "--handler", metavar="MODULE:FUNCTION")
@setting_option("ack_timeout", "--ack-timeout", type=SECONDS)
@setting_option("max_batch", "--batch-size", type=click.INT)
@setting_option("purge_every", "--purge-interval", type=SECONDS)
@setting_option("quiet_alert_after", "--quiet-alert-after", type=SECONDS)
@setting_option("queue_max_attempts", "--queue-max-attempts", type=click.INT)
@setting_option("queue_first_delay", "--queue-first-delay", type=SECONDS)
@setting_option("queue_factor", "--queue-factor", type=FINITE)
@setting_option("queue_max_delay", "--queue-max-delay", type=SECONDS)
@setting_option("queue_lease", "--queue-lease", type=SECONDS)
@setting_option("queue_handler_timeout", "--queue-handler-timeout", type=SECONDS)
@setting_option("queue_max_hung", "--queue-max-hung", type=click.INT)
@setting_option("queue_batch", "--queue-batch", type=click.INT)
@setting_option("queue_idle_wait", "--queue-idle-wait", type=SECONDS)
@setting_option(
    "spool_dir",
    "--spool-dir",
    type=click.Path(file_okay=False),
    envvar="GP_WEBHOOK_SPOOL_DIR",
)
@setting_option("spool_max_rows", "--spool-max-rows", type=click.INT)
@setting_option("spool_max_bytes", "--spool-max-bytes", type=click.INT)
@setting_option("outage_replay_every", "--outage-replay-every", type=SECONDS)
@setting_option("outage_refresh_every", "--outage-refresh-every", type=SECONDS)
@setting_option("first_seen_refuse", "--first-seen-refuse", metavar="KIND[,KIND...]")
@setting_option("first_seen_max_values", "--first-seen-max-values", type=click.INT)
@setting_option(
    "forward",
    "--forward",
    metavar="NAME=URL",
    multiple=True,
    help="Forward every new action, after the acknowledgement, to this destination "
    "(repeat for several): amqp://USER:PASSWORD@HOST/VHOST?queue=Q (RabbitMQ, extra "
    "forward), nats://HOST:4222?subject=S (NATS JetStream, extra forward) or an https:// "
    "URL; once per destination, the actionId as message id. The password is never shown.",
)
@setting_option("forward_max_attempts", "--forward-max-attempts", type=click.INT)
@setting_option("forward_first_delay", "--forward-first-delay", type=SECONDS)
@setting_option("forward_max_delay", "--forward-max-delay", type=SECONDS)
@setting_option("forward_lease", "--forward-lease", type=SECONDS)
@setting_option("forward_timeout", "--forward-timeout", type=SECONDS)
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
    type=_TIMEOUT,
    default=spec.RECEIVER_HEADER_TIMEOUT.total_seconds(),
    show_default=True,
    help="Seconds to receive a request's headers; then the connection is closed.",
)
@click.option(
    "--body-timeout",
    type=_TIMEOUT,
    default=spec.RECEIVER_BODY_TIMEOUT.total_seconds(),
    show_default=True,
    help="Seconds to receive a request's body after its headers; then it is closed.",
)
@click.option(
    "--keep-alive-timeout",
    type=_TIMEOUT,
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
@_failure_as_json_line
def serve(
    auth_kind: str,
    host: str,
    port: int,
    workers: int,
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
    credentials_file: str | None,
    pid_file: str | None,
    **settings: Any,
) -> None:
    """Receive game-event webhooks until Ctrl-C/SIGTERM (in-flight requests are drained);
    SIGHUP reads the credentials file and the TLS certificate and key again.

    A store that does not exist yet is created; one at another schema version is refused
    (`gptools webhooks migrate` brings an older one up to date); one that cannot be
    reached does not stop the start (503 and not ready until it can)."""
    from gptools.webhooks import (
        ListenError,
        ReceiverConfig,
        SchemaVersionError,
        ServeError,
        ServerLimits,
        SettingError,
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
    # Several --forward options are one setting, its destinations separated by spaces.
    settings["forward"] = " ".join(settings.get("forward") or ()) or None
    # Unset: the configuration's own defaults.
    chosen = {name: value for name, value in settings.items() if value is not None}
    try:
        config = ReceiverConfig(
            auth=auth_kind, credentials_file=credentials_file, limits=limits, **chosen
        )
    except SettingError as exc:
        # One line naming the option, as every other bad value of a store URL or setting
        # is refused (no usage block: the option is named, the rest of the line is right).
        ctx = click.get_current_context()
        option = _option_of(ctx, exc.setting)
        named = f"Invalid value for {option.get_error_hint(ctx)}: " if option else ""
        fail(f"{named}{exc}", bad_input=True)
    try:
        serve(
            host=host,
            port=port,
            workers=workers,
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
            metrics_port=metrics_port,
            log_format="json" if log_format == "json" else "text",
            announce=say,
            pid_file=pid_file,
            config=config,
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


@contextlib.contextmanager
def _connected(store_url: str) -> Iterator[Any]:
    """A connection to the existing store ``store_url``, closed after use: a missing
    store or another schema version is bad input (exit 2), any other store error exit 1."""
    from gptools.webhooks import SchemaVersionError, StoreError, StoreNotFoundError

    store = _existing_store(store_url)
    try:
        conn = store.connect()
        try:
            yield conn
        finally:
            conn.close()
    except (StoreNotFoundError, SchemaVersionError) as exc:
        fail(str(exc), bad_input=True)
    except StoreError as exc:
        fail(str(exc))


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
    help="Put every dead-lettered action back in the processing queue, due now (with "
    "--forward: every dead-lettered forward to those destinations back in their queues).",
)
@click.option(
    "--forward",
    "forward",
    multiple=True,
    metavar="NAME",
    help="The forwards to this destination of the forwarding stage (the NAME of serve's "
    "--forward NAME=URL; repeat for several) that gave up, instead of the handler's dead "
    f"letters: the oldest {DEAD_FORWARDS_SHOWN} listed, all counted. A name the store "
    "has no forward to is refused.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def dead_letters(store_url: str, retry: bool, forward: tuple[str, ...], as_json: bool) -> None:
    """List the actions whose handler runs gave up (with their last error); --retry
    queues them again with their attempts counted from zero. With --forward, the same for
    the forwards to those destinations that gave up."""

    if forward:
        _dead_forwards(store_url, tuple(dict.fromkeys(forward)), retry=retry, as_json=as_json)
        return
    with _connected(store_url) as conn:
        letters = conn.dead_letters()
        retried = conn.retry_dead(datetime.now(UTC)) if retry else 0
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


def _dead_forwards(store_url: str, names: tuple[str, ...], *, retry: bool, as_json: bool) -> None:
    """``dead-letters --forward NAME...``: list (and with ``retry`` queue again) the
    dead-lettered forwards to ``names``. A name the store holds no forward to at all is
    refused before anything is retried: a typo would otherwise read as "no dead letters"."""
    from gptools.webhooks import DESTINATION_NAME

    bad = [n for n in names if not DESTINATION_NAME.fullmatch(n)]
    if bad:
        fail(
            f"--forward {bad[0]!r}: a destination's name is 1-64 letters, digits, '_', '.' or "
            "'-' (the NAME of serve's --forward NAME=URL)",
            bad_input=True,
        )
    with _connected(store_url) as conn:
        dead = conn.dead_forwards(names, limit=DEAD_FORWARDS_SHOWN)
        # Only a name without dead letters needs the look-up (a table read for a name
        # the store never saw): one with some is known.
        unknown = [n for n in names if not dead.totals[n] and not conn.has_forwards(n)]
        if unknown:
            having = sorted(conn.dead_forwards(None, limit=1).totals)
            fail(
                f"the store has no forward to destination {unknown[0]!r}; destinations "
                "with dead-lettered forwards: " + (", ".join(having) or "none"),
                bad_input=True,
            )
        retried = (
            conn.requeue_forwards(None, datetime.now(UTC), destinations=names,
                                  states=("dead",))
            if retry else 0
        )  # fmt: skip
    listed = [d.to_dict() for d in dead.listed]

    def human() -> str:
        lines = [
            f"{d['action_id']}  {d['destination']}  {d['first_received_at']}  "
            f"{d['attempts']} attempts  {d['last_error']}"
            for d in listed
        ]
        per = ", ".join(f"{name} {n}" for name, n in dead.totals.items())
        lines.append(
            f"{dead.total} dead-lettered forward{'s' if dead.total != 1 else ''} ({per})"
            + (f", the oldest {len(listed)} listed" if len(listed) < dead.total else "")
            + (f"; {retried} queued again" if retry else "")
        )
        return "\n".join(lines)

    emit(
        {
            "dead_forwards": listed,
            "totals": dead.totals,
            "total": dead.total,
            "retried": retried,
        },
        as_json=as_json,
        human=human,
    )


@webhooks.command("first-seen")
@click.option("--store", "store_url", type=STORE_URL, required=True, help=_STORE_HELP)
@click.option(
    "--kind",
    type=click.Choice(["event_type", "field", "currency", "game"]),
    default=None,
    help="Only the values of this kind.",
)
@click.option(
    "--accept",
    metavar="KIND=VALUE",
    default=None,
    help="Accept a value a kind set to refuse (--first-seen-refuse) refused: receivers "
    "started from now on let it in.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def first_seen(store_url: str, kind: str | None, accept: str | None, as_json: bool) -> None:
    """List the values the receiver saw for the first time in the fields the provider's
    document leaves open (event types, top-level fields, currencies, game ids): each
    with when and in which action it first came, and whether it was refused."""

    accepted: bool | None = None
    if accept is not None:
        accept_kind, sep, accept_value = accept.partition("=")
        if not sep or not accept_value:
            fail(f"--accept takes KIND=VALUE, got {accept!r}", bad_input=True)
    with _connected(store_url) as conn:
        if accept is not None:
            accepted = conn.accept_first_seen(accept_kind, accept_value)
        rows = conn.first_seen(kind)
    listed = [
        {
            "kind": r.kind,
            "value": r.value,
            "first_seen_at": r.seen_at.isoformat(),
            "first_action_id": r.action_id,
            "refused": r.refused,
        }
        for r in rows
    ]

    def human() -> str:
        lines = [
            f"{r['kind']:<10}  {r['value']}  {r['first_seen_at']}  {r['first_action_id']}"
            + ("  (refused)" if r["refused"] else "")
            for r in listed
        ]
        lines.append(f"{len(listed)} value{'s' if len(listed) != 1 else ''} first seen")
        if accepted is not None:
            lines.append(f"{accept}: {'accepted' if accepted else 'was not refused'}")
        return "\n".join(lines)

    document: dict[str, Any] = {"first_seen": listed}
    if accepted is not None:
        document["accepted"] = accepted
    emit(document, as_json=as_json, human=human)
