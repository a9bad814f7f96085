"""``gptools webhooks serve|export|dead-letters`` and ``gptools sandbox deliver``.

Secrets come from environment variables only (``GP_WEBHOOK_API_KEY``, or
``GP_WEBHOOK_USERNAME`` and ``GP_WEBHOOK_PASSWORD``), never from arguments: arguments show
up in ``ps`` and in shell history.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from gptools import spec
from gptools.cli._main import emit, fail, listening_socket, sandbox, say, webhooks
from gptools.errors import MissingExtraError

_AUTH_CHOICE = click.Choice(["bearer", "basic", "none"], case_sensitive=False)
_WORKER_HEALTHCHECK_S = 60
_STORE_HELP = "sqlite:///PATH (default sqlite:///webhooks.sqlite3) or postgresql://USER@HOST/DB"


@webhooks.command("serve")
@click.option("--auth", "auth_kind", type=_AUTH_CHOICE, required=True,
              help="How deliveries authenticate; secrets from GP_WEBHOOK_API_KEY (bearer) "
                   "or GP_WEBHOOK_USERNAME + GP_WEBHOOK_PASSWORD (basic).")
@click.option("--store", "store_url", default="sqlite:///webhooks.sqlite3", show_default=True,
              help=_STORE_HELP)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes (uvicorn).")
@click.option("--path", default=spec.DEFAULT_WEBHOOK_PATH, show_default=True,
              help="The POST path deliveries arrive on.")
@click.option("--max-body-bytes", type=click.IntRange(1), default=spec.WEBHOOK_MAX_BODY_BYTES,
              show_default=True, help="Bodies larger than this are answered 413.")
@click.option("--handler", default=None, metavar="MODULE:FUNCTION",
              help="Run this function for every new action, after the acknowledgement.")
def serve(auth_kind: str, store_url: str, host: str, port: int, workers: int, path: str,
          max_body_bytes: int, handler: str | None) -> None:
    """Receive game-event webhooks until Ctrl-C/SIGTERM (in-flight requests are drained)."""
    import uvicorn

    from gptools.webhooks._app import (
        ENV_AUTH,
        ENV_HANDLER,
        ENV_MAX_BODY,
        ENV_PATH,
        ENV_STORE,
        load_handler,
    )
    from gptools.webhooks._auth import AuthConfigError, ReceiverAuth
    from gptools.webhooks._store import StoreError, open_store

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
    try:
        # Create the tables once here, so the workers do not race to create them.
        store.connect().close()
    except StoreError as exc:
        fail(str(exc))
    os.environ.update({ENV_STORE: store_url, ENV_AUTH: auth_kind, ENV_PATH: path,
                       ENV_MAX_BODY: str(max_body_bytes)})
    if handler:
        os.environ[ENV_HANDLER] = handler
    # Bind once before the start-up line, so it never announces an address that is taken
    # (exit 3 instead); uvicorn binds again right after, with SO_REUSEADDR as here.
    with listening_socket(host, port) as probe:
        port = probe.getsockname()[1]
    say(f"receiving webhooks on http://{host}:{port}{path} (auth {auth_kind.upper()}, "
        f"store {store.url}, {workers} worker{'s' if workers > 1 else ''}); "
        f"health: http://{host}:{port}/healthz, readiness: http://{host}:{port}/readyz")
    uvicorn.run(
        "gptools.webhooks._app:receiver_from_env", factory=True, host=host, port=port,
        workers=workers, http="httptools", loop="uvloop", lifespan="on", access_log=False,
        log_level="info", timeout_graceful_shutdown=10,
        # uvicorn kills a worker that does not answer its health ping within 5 s; a worker
        # still importing on a busy machine takes longer, and was killed over and over.
        timeout_worker_healthcheck=_WORKER_HEALTHCHECK_S,
    )


@webhooks.command("export")
@click.option("--store", "store_url", required=True, help=_STORE_HELP)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet"]), required=True)
@click.argument("out", type=click.Path(dir_okay=False, writable=True, path_type=Path))
@click.option("--target", default=None, metavar="NAME",
              help="Incremental: only the rows this target has not exported yet; the store's "
                   "log purge keeps rows its export_target has not exported.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def export(store_url: str, fmt: str, out: Path, target: str | None, as_json: bool) -> None:
    """Write the store's delivery log to OUT as JSONL or Parquet."""
    from gptools.webhooks._export import export_log
    from gptools.webhooks._store import StoreError, open_store

    try:
        store = open_store(store_url)
    except ValueError as exc:
        fail(str(exc), bad_input=True)
    try:
        result = export_log(store, out, format="jsonl" if fmt == "jsonl" else "parquet",
                            target=target)
    except (StoreError, OSError) as exc:
        fail(f"export failed: {exc}")
    emit({"path": str(result.path), "format": result.format, "records": result.records},
         as_json=as_json,
         human=lambda: f"wrote {result.records} delivery records to {result.path} ({fmt})")


@webhooks.command("dead-letters")
@click.option("--store", "store_url", required=True, help=_STORE_HELP)
@click.option("--retry", is_flag=True,
              help="Put every dead-lettered action back in the processing queue, due now.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def dead_letters(store_url: str, retry: bool, as_json: bool) -> None:
    """List the actions whose handler runs gave up (with their last error); --retry
    queues them again with their attempts counted from zero."""
    from gptools.webhooks._store import StoreError, format_utc, open_store

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
    listed = [{"action_id": d.action_id, "first_received_at": format_utc(d.first_received_at),
               "attempts": d.attempts, "last_error": d.last_error} for d in letters]

    def human() -> str:
        lines = [f"{d['action_id']}  {d['first_received_at']}  {d['attempts']} attempts  "
                 f"{d['last_error']}" for d in listed]
        lines.append(f"{len(listed)} dead-lettered action{'s' if len(listed) != 1 else ''}"
                     + (f"; {retried} queued again" if retry else ""))
        return "\n".join(lines)

    emit({"dead_letters": listed, "retried": retried}, as_json=as_json, human=human)


@sandbox.command("deliver")
@click.option("--url", required=True, help="The receiver's URL (e.g. http://127.0.0.1:8000"
                                           "/v1/game-action-events).")
@click.option("--count", "-n", type=click.IntRange(1), default=100, show_default=True,
              help="How many game events to generate and deliver.")
@click.option("--auth", "auth_kind", type=_AUTH_CHOICE, default="none", show_default=True,
              help="How to authenticate; secrets from the same GP_WEBHOOK_* variables.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--time-scale", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Simulated seconds per real second (e.g. 100800: 7 days in 6 s); "
                   "default: jump straight to each due time.")
@click.option("--concurrency", type=click.IntRange(1, 256), default=8, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def deliver(url: str, count: int, auth_kind: str, seed: int, time_scale: float | None,
            concurrency: int, as_json: bool) -> None:
    """Make the sandbox deliver COUNT generated game events to a receiver, with the
    provider's retries (5xx and time-outs retried with backoff for 7 simulated days)."""
    from gptools.sandbox._dispatcher import (
        DeliveryTarget,
        ScaledClock,
        SimClock,
        VirtualClock,
        WebhookDispatcher,
    )
    from gptools.sandbox._events import EventGenerator
    from gptools.webhooks._auth import AuthConfigError, ReceiverAuth

    try:
        auth = ReceiverAuth.from_env(auth_kind)
    except AuthConfigError as exc:
        fail(str(exc), bad_input=True)
    if not url.startswith(("http://", "https://")):
        fail(f"--url must be an http(s) URL, got {url!r}", bad_input=True)
    subscription: dict[str, object] = {"callbackUrl": url, "authenticationType": auth.kind}
    if auth.api_key is not None:
        subscription["apiKey"] = auth.api_key
    if auth.username is not None and auth.password is not None:
        subscription["username"] = auth.username.get_secret_value()
        subscription["password"] = auth.password
    # The receiver stamps real time, so the events must have happened already: they are
    # spread over roughly the last COUNT seconds, so their delivery lag reads positive.
    now, gap = datetime.now(UTC), timedelta(seconds=1)
    start = now - count * gap
    events = EventGenerator(seed=seed, start=start, mean_gap=gap).take(count)
    overshoot = max(e.timestamp for e in events) - now
    if overshoot > timedelta(0):
        start -= overshoot
        events = EventGenerator(seed=seed, start=start, mean_gap=gap).take(count)
    clock: SimClock = (ScaledClock(start, time_scale) if time_scale is not None
                       else VirtualClock(start))
    with WebhookDispatcher(clock=clock, target=DeliveryTarget.from_subscription(subscription),
                           concurrency=concurrency) as dispatcher:
        for event in events:
            dispatcher.enqueue(event)
        say(f"delivering {count} events to {url} ...")
        report = dispatcher.run()
    document = {"url": url, "events": count, "attempts": report.attempts,
                "statuses": report.statuses, **report.counts}
    emit(document, as_json=as_json, human=lambda: (
        f"{count} events, {report.attempts} attempts: "
        + ", ".join(f"{k} {v}" for k, v in report.counts.items())
        + "; answers " + ", ".join(f"{k}×{v}" for k, v in sorted(report.statuses.items()))))
