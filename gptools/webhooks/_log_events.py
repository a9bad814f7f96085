"""The registry of the receiver's log lines: every ``event`` a line can carry and every
field, each with its meaning (``gptools webhooks serve --log-format json``).

``event`` is a stable snake_case name that ops can filter on; the message beside it is for
people and may change. Adding a log line with a new event is one line in :data:`EVENTS`
(``tests/webhooks/test_log_events.py`` fails for a name the code logs that is missing
here); the site's page ``reference/log-events.md`` is generated from this module.
"""

from __future__ import annotations

from typing import Final

#: Every ``event`` a log line of the receiver can carry, and what it means.
EVENTS: Final[dict[str, str]] = {
    # -- serve (the parent process) ----------------------------------------------------
    "listening": "the receiver's start-up line: its URLs, auth kind, store and workers",
    "serve_failed": "serve could not start (settings, store, port): the message says "
    "why; the command then exits with its usual status (2 for bad input, 1, 3)",
    # -- each worker's life ------------------------------------------------------------
    "worker_ready": "a worker opened its store and started its loops",
    "receiver_start_failed": "a worker could not start (uvicorn then stops)",
    "auth_disabled": "the receiver accepts deliveries without authentication (NONE)",
    # -- deliveries (lines about one request: request_id, and actionId when known) ---
    "delivery_stored": "a new action stored and answered 200 (DEBUG only: one a delivery)",
    "delivery_duplicate": "an action stored before, answered 200 duplicate (DEBUG only)",
    "delivery_refused": "a delivery answered 4xx (its status and reason)",
    "store_unavailable": "a delivery answered 503: the store could not take it in time",
    "request_failed": "an unexpected error while answering a request (answered 500)",
    "refusal_summary_deferred": "the summary row of suppressed refusals waits for the store",
    # -- the HTTP server in front of the receiver ---------------------------------------
    "connection_refused": "connections refused or closed before a request (reason, count; "
    "at most one line per reason every 10 s)",
    "invalid_http_request": "a request that is not HTTP, answered 400 by the server",
    "unsupported_upgrade": "a protocol upgrade (WebSocket) request, which is not served",
    # -- the store ----------------------------------------------------------------------
    "store_connected": "a loop opened a connection to the store",
    "store_recovered": "the store answers again after a failure",
    "store_unreachable_at_start": "serve started while the store was unreachable; the "
    "workers answer 503 and are not ready until it answers",
    "store_unreachable": "a worker started while the store was unreachable; it answers 503 "
    "and keeps trying",
    "store_created": "a connection found no store and created one at the current schema",
    "schema_version_mismatch": "the store is at a schema version this gptools does not run "
    "on (once per store and version per process); run gptools webhooks migrate",
    "purge_round_skipped": "another worker holds this round's purge lease (DEBUG only)",
    "store_reconnecting": "a connection broke while idle; the batch goes again on a new one",
    "store_write_failed": "a group-commit batch could not be written (its requests get 503)",
    "store_sync_failed": "committed batches could not be synced to disk (answered 503)",
    "commit_resolved": "a COMMIT that lost its connection was found committed (answered 200)",
    "store_watch_failed": "the store watch could not count the queue (once per outage; the "
    "worker reports not ready until it can)",
    "commit_unresolved": "a COMMIT's outcome stayed unknown (answered 503; rows may say 200)",
    # -- background loops, the processing queue and the purge -------------------------
    "loop_failed": "a background loop raised; it backs off and goes on (error holds the traceback)",
    "loop_recovered": "a background loop that had failed runs cleanly again",
    "queue_store_failed": "the processing queue cannot reach the store (every 20th failure)",
    "handler_failed": "a handler run raised or timed out; it is retried (actionId, attempt)",
    "action_dead_lettered": "an action's handler runs gave up: it is kept as a dead letter",
    # -- replays (gptools webhooks replay) -------------------------------------------
    "replay_started": "a replay began or resumed: its replay_id, who, the filter, the counts",
    "replay_queued": "a batch of a replay's actions was put back in the processing queue "
    "(replay_id, count)",
    "replay_gone": "actions a replay's filter matches whose stored copy is gone past the "
    "store's retention (replay_id, count)",
    "replay_finished": "every action of a replay has been run (replay_id, counts)",
    "replay_count_failed": "the store watch could not add up the replays for their metrics "
    "(once per streak; they keep their last values, the worker stays ready)",
    "handler_lease_lost": "a handler run outlived its lease; another run took the action",
    "purge_done": "the hourly purge removed dedupe keys or log rows",
    "purge_failed": "the hourly purge could not reach the store (tried again next hour)",
    # -- the contract watcher and the forwarding stage (issue 38) ------------------------
    "first_seen": "a value seen for the first time in a field whose set the document "
    "leaves open (kind, value, actionId, refused); once across all workers",
    "first_seen_deferred": "first sightings wait for the store (recorded at the next round)",
    "forward_failed": "a publication to a forwarding destination failed; it is retried "
    "(destination, actionId, attempt)",
    "forward_dead_lettered": "an action's publications to a destination gave up: kept as "
    "a dead letter of that destination",
    "forward_lease_lost": "a publication outlived its lease; another run took the row",
    "forward_store_failed": "the forwarding loop cannot reach the store (every 20th failure)",
    # -- the outage spool (503s answered while the store is down) -----------------------
    "spool_full": "rows not kept: the outage spool is full or its disk failed (counted in "
    "gptools_webhook_spool_dropped_total; at most one line every 10 s)",
    "spool_adopted": "a live worker took over the spool a dead worker left",
    "spool_waiting": "the spool loop cannot reach the store yet (once per failure streak)",
    "spool_replayed": "spooled rows written to delivery_log once the store was back",
    "spool_unreadable": "spool lines that are not rows (a torn write), skipped and counted",
    "spool_sync_failed": "the spool could not be synced to disk",
    "spool_left": "rows left in the spool at shutdown (the next start replays them)",
    # -- reloads (SIGHUP, gptools webhooks reload) ------------------------------------
    "config_reloaded": "every worker took the credentials file and TLS certificate again "
    "(the credential ids in use)",
    "config_reload_failed": "a reload was refused; the settings in use are kept (the "
    "message says why)",
    # -- the metrics port ----------------------------------------------------------------
    "metrics_scrape_failed": "a scrape could not be rendered (answered 500)",
    "metrics_connection_failed": "a metrics-port connection failed before it was answered",
    # -- uvicorn, which runs the workers -------------------------------------------------
    "server_listening": "uvicorn bound the port",
    "parent_process_started": "uvicorn's supervisor of several workers started",
    "parent_process_stopping": "uvicorn's supervisor stops, its workers have ended",
    "server_process_started": "a worker process started",
    "server_process_finished": "a worker process ended cleanly",
    "startup_begun": "a worker starts the receiver",
    "startup_complete": "a worker's receiver started",
    "startup_failed": "a worker's receiver failed to start",
    "shutting_down": "a worker stops accepting connections",
    "draining_connections": "a worker waits for open connections to finish",
    "draining_tasks": "a worker waits for requests still being answered",
    "shutdown_timed_out": "requests still running when the graceful time-out ended",
    "shutdown_begun": "a worker stops the receiver (the writer commits, the queue ends)",
    "shutdown_complete": "a worker's receiver stopped",
    "shutdown_failed": "a worker's receiver failed to stop cleanly",
    "signal_received": "the supervisor got a signal (the message names it)",
    "worker_terminated": "the supervisor sent SIGTERM to a worker",
    "worker_joining": "the supervisor waits for a worker to end",
    "worker_died": "a worker ended unexpectedly; the supervisor starts another",
    "worker_start_failed": "a worker failed to start; the supervisor stops",
    "worker_restart_aborted": "a replacement worker was not ready in time",
    "listen_failed": "uvicorn could not bind the port",
    "app_load_failed": "uvicorn could not load the receiver",
    # -- whatever else reaches stderr ---------------------------------------------------
    "python_warning": "a warning from Python's warnings module (a library's deprecation)",
    "thread_crashed": "an exception ended a thread (error holds the traceback)",
    "uncaught_exception": "an exception nothing caught ended the process",
    "unraisable_exception": "an exception Python could not raise (a finaliser's)",
    "stderr_output": "a line a library wrote to stderr itself, one line each",
    "log_message": "a line of a library that names no event (logger says whose)",
}

#: Every field a JSON line can carry, in the order it is written, and what it means.
#: ``time``, ``level``, ``logger``, ``pid`` and ``event`` are on every line.
FIELDS: Final[dict[str, str]] = {
    "time": "when, ISO 8601 UTC with microseconds and Z",
    "level": "debug, info, warning, error or critical",
    "logger": "the Python logger (gptools.webhooks, uvicorn.error, py.warnings, stderr...)",
    "pid": "the process id: the worker's, or serve's own (the supervisor, the metrics port)",
    "event": "the stable name of what happened (the table below)",
    "message": "the same for people; may change between versions",
    "request_id": "the request's id: its X-Request-ID when sane, else generated; sent back "
    "in the answer's X-Request-ID",
    "status": "the HTTP status answered",
    "actionId": "the delivery's actionId, when the body names a canonical one",
    "latency_ms": "milliseconds from the request's arrival to its answer",
    "reason": "a short machine-readable cause (connection_refused)",
    "count": "how many the line stands for (connection_refused)",
    "attempt": "the handler run's number (handler_failed, action_dead_lettered)",
    "kind": "the kind of value first seen: event_type, field, currency or game (first_seen)",
    "value": "the value first seen, cut to 200 characters (first_seen)",
    "refused": "whether the delivery was refused for the value (first_seen)",
    "destination": "the forwarding destination's name (forward_*)",
    "replay_id": "the replay's id (replay_started, replay_queued, replay_gone, replay_finished)",
    "settings": "the receiver's settings a worker runs with, times in seconds, the store "
    "apart (worker_ready)",
    "error": "an exception's traceback, secrets blanked",
}


def log_events_markdown() -> str:
    """The site's page of log fields and events, from :data:`FIELDS` and :data:`EVENTS`."""
    lines = [
        "| field | meaning |",
        "| --- | --- |",
        *(f"| `{name}` | {meaning} |" for name, meaning in FIELDS.items()),
        "",
        "## Events",
        "",
        "| event | meaning |",
        "| --- | --- |",
        *(f"| `{name}` | {meaning} |" for name, meaning in EVENTS.items()),
    ]
    return "\n".join(lines)
