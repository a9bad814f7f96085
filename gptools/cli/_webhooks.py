"""``gptools webhooks serve|export``.

Secrets come from environment variables only (``GP_WEBHOOK_API_KEY``, or
``GP_WEBHOOK_USERNAME`` and ``GP_WEBHOOK_PASSWORD``), never from arguments: arguments show
up in ``ps`` and in shell history.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from gptools import spec
from gptools.cli._common import AUTH_CHOICE
from gptools.cli._main import emit, fail, listening_socket, say, webhooks

_WORKER_HEALTHCHECK_S = 60
_STORE_HELP = "sqlite:///PATH (default sqlite:///webhooks.sqlite3) or postgresql://USER@HOST/DB"


@webhooks.command("serve")
@click.option("--auth", "auth_kind", type=AUTH_CHOICE, required=True,
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

    from gptools.webhooks import (
        AuthConfigError,
        ReceiverAuth,
        StoreError,
        load_handler,
        open_store,
        receiver_environment,
    )

    try:
        ReceiverAuth.from_env(auth_kind)
        store = open_store(store_url)
        if handler:
            load_handler(handler)
    except (AuthConfigError, ValueError, ImportError) as exc:
        fail(str(exc), bad_input=True)
    if not path.startswith("/"):
        fail(f"--path must start with '/', got {path!r}", bad_input=True)
    try:
        # Create the tables once here, so the workers do not race to create them.
        store.connect().close()
    except StoreError as exc:
        fail(str(exc))
    os.environ.update(receiver_environment(store_url, auth_kind, path=path,
                                          max_body_bytes=max_body_bytes, handler=handler))
    # Bind once before the start-up line, so it never announces an address that is taken
    # (exit 3 instead); uvicorn binds again right after, with SO_REUSEADDR as here.
    with listening_socket(host, port) as probe:
        port = probe.getsockname()[1]
    say(f"receiving webhooks on http://{host}:{port}{path} (auth {auth_kind.upper()}, "
        f"store {store.url}, {workers} worker{'s' if workers > 1 else ''}); "
        f"health: http://{host}:{port}/healthz")
    uvicorn.run(
        "gptools.webhooks:receiver_from_env", factory=True, host=host, port=port,
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def export(store_url: str, fmt: str, out: Path, as_json: bool) -> None:
    """Write the store's delivery log to OUT as JSONL or Parquet."""
    from gptools.webhooks import StoreError, export_log, open_store

    try:
        store = open_store(store_url)
    except ValueError as exc:
        fail(str(exc), bad_input=True)
    try:
        result = export_log(store, out, format="jsonl" if fmt == "jsonl" else "parquet")
    except (StoreError, OSError) as exc:
        fail(f"export failed: {exc}")
    emit({"path": str(result.path), "format": result.format, "records": result.records},
         as_json=as_json,
         human=lambda: f"wrote {result.records} delivery records to {result.path} ({fmt})")
