"""The receiver the chaos tests run under uvicorn (``--factory``, several workers).

Configured by environment variables, because each uvicorn worker builds its own:
``CHAOS_STORE`` (store URL), ``CHAOS_MAX_PAGES`` (SQLite only: the file cannot grow past
this many pages, SQLite's own "database or disk is full", so the test can fill and free
the "disk"), ``CHAOS_KILLERS`` (comma-separated actionIds whose handler run SIGKILLs its
own process) and ``CHAOS_PROCESSED`` (a file the handler appends each processed
actionId to).
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta

from gptools.models import GameEventNotification
from gptools.webhooks import ReceiverAuth, Store, WebhookReceiver, open_store
from tests._support.stores import CappedSQLiteStore


def _handler(event: GameEventNotification) -> None:
    action_id = str(event.action_id)
    if action_id in os.environ.get("CHAOS_KILLERS", "").split(","):
        os.kill(os.getpid(), signal.SIGKILL)  # segfault, OOM kill: the process is gone
    with open(os.environ["CHAOS_PROCESSED"], "a", encoding="utf-8") as out:
        out.write(action_id + "\n")


def make() -> WebhookReceiver:
    """One worker's receiver."""
    url = os.environ["CHAOS_STORE"]
    store: Store
    if url.startswith("sqlite:///") and "CHAOS_MAX_PAGES" in os.environ:
        store = CappedSQLiteStore(url[len("sqlite:///") :], int(os.environ["CHAOS_MAX_PAGES"]))
    else:
        store = open_store(url)
    return WebhookReceiver(
        store,
        auth=ReceiverAuth.none(),
        handler=_handler,
        queue_options={
            "max_attempts": 3,
            "lease": timedelta(seconds=2),
            "handler_timeout": timedelta(seconds=1),
            "first_delay": timedelta(milliseconds=100),
            "idle_wait": timedelta(milliseconds=50),
        },
        purge_every=timedelta(seconds=1),
    )
