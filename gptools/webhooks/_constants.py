"""Every tunable of the receiver in one place (writer, processing queue, maintenance, store,
supervision, serving), like the client's ``_constants.py``.

Those named ``DEFAULT_*`` are the defaults of a setting (a field of
:class:`~gptools.webhooks.ReceiverConfig`, which :func:`~gptools.webhooks.serve` and
:class:`~gptools.webhooks.WebhookReceiver` take) or of a keyword argument (of
:class:`~gptools.webhooks.ProcessingQueue` or a store), so a caller changes a setting or
an argument, never this module; the others are fixed. The bounds the HTTP server holds
against strangers (header size and count, time-outs, connections) are rules users read
and set: they are ``gptools.spec``'s ``RECEIVER_*`` constants, the defaults of
:class:`~gptools.webhooks.ServerLimits`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final

# -- the group-commit writer -----------------------------------------------------------

#: Items one transaction takes at most (``max_batch``).
DEFAULT_MAX_BATCH: Final = 512
#: How long a write waits for its transaction to begin (``ack_timeout``): the provider
#: expects the answer within a second.
DEFAULT_WAIT_LIMIT: Final = timedelta(milliseconds=800)
#: While the store is down and nothing is written, how often the writer tries it again
#: (and the store watch, while its counts fail).
PROBE_EVERY: Final = timedelta(milliseconds=500)
#: How long the writer asks a new connection whether a COMMIT that lost its connection
#: was committed, before it answers 503.
RESOLVE_LIMIT: Final = timedelta(seconds=10)
#: What a request that timed out before its write began is answered and logged with.
TIMED_OUT_STATUS: Final = 503

# -- the processing queue ---------------------------------------------------------------

#: Runs of the handler before an action is dead-lettered.
DEFAULT_MAX_ATTEMPTS: Final = 5
#: Backoff between failed runs: first delay, factor, cap.
DEFAULT_FIRST_DELAY: Final = timedelta(seconds=1)
DEFAULT_FACTOR: Final = 2.0
DEFAULT_MAX_DELAY: Final = timedelta(minutes=10)
#: How long one run holds its action; longer than any run may take.
DEFAULT_LEASE: Final = timedelta(minutes=5)
#: A run that takes longer counts as failed (its thread is abandoned).
DEFAULT_HANDLER_TIMEOUT: Final = timedelta(minutes=1)
#: Timed-out runs still not returned past which the queue runs nothing more.
DEFAULT_MAX_HUNG: Final = 8
#: Actions one round of the queue runs at most.
DEFAULT_QUEUE_BATCH: Final = 32
#: How long an idle queue waits for new work (a commit wakes it sooner).
DEFAULT_IDLE_WAIT: Final = timedelta(milliseconds=200)
#: The longest the queue backs off while the store fails (seconds).
QUEUE_STORE_BACKOFF_CAP: Final = 5.0

# -- maintenance (purges) ---------------------------------------------------------------

#: How often old dedupe keys and log rows are purged (``purge_every``).
DEFAULT_PURGE_EVERY: Final = timedelta(hours=1)
#: Rows deleted per purge step, each step one write transaction. SQLite has one write
#: lock for the whole file: small steps, so that a delivery waits for one step at most
#: (tests/benchmarks/bench_purge.py). PostgreSQL's deletes do not block inserts, and each
#: step scans past the rows deleted before it: big steps.
SQLITE_PURGE_STEP: Final = 200
POSTGRES_PURGE_STEP: Final = 50_000

# -- supervision and store links --------------------------------------------------------

#: Unexpected errors in a row after which a loop counts as failing (health 503).
LOOP_GIVE_UP_AFTER: Final = 5
#: A failing loop's backoff: first delay (seconds) and cap.
LOOP_FIRST_BACKOFF: Final = 0.05
LOOP_MAX_BACKOFF: Final = timedelta(seconds=5)
#: A store link's reconnection backoff: first delay and cap (the writer's, which answers
#: requests; the queue and maintenance wait longer between tries).
LINK_FIRST_BACKOFF: Final = timedelta(milliseconds=50)
LINK_MAX_BACKOFF: Final = timedelta(seconds=1)
QUEUE_LINK_MAX_BACKOFF: Final = timedelta(seconds=5)
MAINTENANCE_LINK_MAX_BACKOFF: Final = timedelta(seconds=30)

# -- the store --------------------------------------------------------------------------

#: Where ``gptools webhooks serve`` keeps it unless told (``ReceiverConfig.store``).
DEFAULT_STORE_URL: Final = "sqlite:///webhooks.sqlite3"
#: How long a SQLite writer waits for a foreign process's write lock.
DEFAULT_SQLITE_BUSY_TIMEOUT: Final = timedelta(seconds=2)
#: How long a PostgreSQL write waits for a lock (then 503), and a connection may take.
DEFAULT_PG_LOCK_TIMEOUT: Final = timedelta(seconds=2)
DEFAULT_PG_CONNECT_TIMEOUT: Final = timedelta(seconds=3)
#: Rows read per round trip when the log is read.
LOG_READ_BATCH: Final = 5000
#: A PostgreSQL table past this size gets the indexes a migration adds built
#: CONCURRENTLY, before the migration's transaction: built inside it, an index blocks
#: every insert (deliveries answered 503) for as long as the build takes, about 0.1 s for
#: this size; CONCURRENTLY blocks none, but waits for every transaction in progress in
#: the database, which on a small table costs more than it saves.
PG_ONLINE_INDEX_BYTES: Final = 16 * 2**20
#: How often a migration waiting for another one's lock asks for it again. It asks
#: (``pg_try_advisory_lock``) rather than waits inside a statement: a waiting statement
#: holds a snapshot, which the other run's CREATE INDEX CONCURRENTLY waits for, while that
#: run holds the lock: a deadlock.
PG_MIGRATION_LOCK_POLL: Final = timedelta(milliseconds=200)

# -- store outages: the spool and the unacknowledged actions ----------------------------

#: The outage spool's bound, per worker process (``spool_max_rows``, ``spool_max_bytes``):
#: the log rows of the 503s answered while the store cannot take them wait there until it
#: is back; past either bound a row is counted (``gptools_webhook_spool_dropped_total``),
#: not kept. 100,000 rows is 14 hours of a provider retrying 2 deliveries a second; 128 MiB
#: holds them with bodies of about 1 KB (a body is kept whole: at most ``max_body_bytes``).
DEFAULT_SPOOL_MAX_ROWS: Final = 100_000
DEFAULT_SPOOL_MAX_BYTES: Final = 128 * 1024 * 1024
#: How often the spool loop looks for rows to replay and for spools of dead workers.
DEFAULT_SPOOL_REPLAY_EVERY: Final = timedelta(seconds=1)
#: How often the unacknowledged actions are refreshed from the store: acknowledged ones
#: cleared, the oldest read (``gptools_webhook_oldest_unacknowledged_seconds``).
DEFAULT_UNACKNOWLEDGED_REFRESH: Final = timedelta(seconds=15)
#: Spooled rows replayed per write transaction (SQLite's one write lock is held that long:
#: about as long as a group commit of that many deliveries).
SPOOL_REPLAY_CHUNK: Final = 500
#: Seconds between two log lines about rows the spool could not keep, per worker.
SPOOL_LOG_EVERY_S: Final = 10.0

# -- export -----------------------------------------------------------------------------

#: How old a row must be before an incremental export takes it (``settle``).
EXPORT_SETTLE: Final = timedelta(minutes=1)
#: Rows a Parquet export holds in memory before it writes them to the file.
PARQUET_CHUNK_ROWS: Final = 50_000
#: A payload number with more digits than this written out (``1e999999999``: a billion)
#: is exported as the body's text: writing its digits would take the export's memory.
EXPORT_MAX_NUMBER_DIGITS: Final = 1_000

# -- the application and serving --------------------------------------------------------

#: How often counts reach prometheus_client, health is reported and refusal summaries
#: are written (seconds).
METRICS_FLUSH_SECONDS: Final = 0.5
#: How often each worker's store watch counts the queue's pending and dead actions for
#: the metrics (two counts over partial indexes; a scrape only reads the last ones).
QUEUE_COUNTS_EVERY: Final = timedelta(seconds=5)
#: ``quiet_alert_after`` (``serve --quiet-alert-after``): how long no delivery may be
#: acknowledged while the receiver is up before the quiet alert fires; exported as
#: ``gptools_webhook_quiet_threshold_seconds`` for the alert rule to compare with.
DEFAULT_QUIET_ALERT_AFTER: Final = timedelta(minutes=30)
#: How often a reason's suppressed refusals become one summary row (at most).
DEFAULT_SUMMARY_EVERY: Final = timedelta(seconds=10)
#: Seconds between two log lines about the same kind of connection refusal, per worker.
CONNECTION_LOG_EVERY_S: Final = 10.0
#: uvicorn kills a worker that does not answer its health ping in time; a worker still
#: importing on a busy machine takes longer than uvicorn's 5 s, and was killed over and over.
WORKER_HEALTHCHECK_S: Final = 60
#: While it waits for a worker's answer, the supervisor looks this often whether the worker
#: has ended (an exiting worker no longer answers: uvicorn alone waited the whole 60 s).
WORKER_ALIVE_POLL_S: Final = 0.1
#: How long uvicorn waits for in-flight requests on shutdown.
GRACEFUL_SHUTDOWN_S: Final = 10

# -- the logs -------------------------------------------------------------------------------

#: The longest incoming ``X-Request-ID`` the receiver takes as the request's id (longer,
#: or with a character outside letters, digits and ``._:+/=@-``, and it makes its own).
REQUEST_ID_MAX_BYTES: Final = 128
#: A line a library writes to stderr without a newline is cut into JSON lines of this size.
STDERR_LINE_MAX_CHARS: Final = 16_384
# -- credentials and reloads ------------------------------------------------------------

#: Credentials one receiver accepts at most: every request is compared with all of them
#: (so that the time taken tells nothing about which one nearly matched).
MAX_CREDENTIALS: Final = 16
#: The largest credentials file read (a few lines of ``ID SECRET``).
CREDENTIALS_FILE_MAX_BYTES: Final = 64 * 1024
#: The largest TLS certificate chain or key file a reload reads.
TLS_FILE_MAX_BYTES: Final = 1024 * 1024
#: How long the serve process waits for each worker to confirm a reload; ``webhooks
#: reload`` waits this long plus ``RELOAD_ANSWER_MARGIN_S`` for the serve process's answer.
RELOAD_TIMEOUT_S: Final = 10.0
RELOAD_ANSWER_MARGIN_S: Final = 5.0
#: How often the serve process and ``webhooks reload`` look for an answer (seconds).
RELOAD_POLL_S: Final = 0.02

# -- the contract watcher (first sightings) ----------------------------------------------

#: Distinct values of one kind the contract watcher keeps (``first_seen_max_values``):
#: past it a new value is not recorded, only counted
#: (``gptools_webhook_first_seen_dropped_total``), so a sender of endless new field names
#: cannot grow the table or a worker's memory without bound.
DEFAULT_FIRST_SEEN_MAX_VALUES: Final = 1000
#: The longest value the watcher keeps and logs (characters); a longer one is kept cut,
#: ending in "…" (a field name may be anything up to the body's limit).
FIRST_SEEN_MAX_VALUE_CHARS: Final = 200

# -- the forwarding stage -----------------------------------------------------------------

#: Publications of one action to one destination before it is dead-lettered.
DEFAULT_FORWARD_MAX_ATTEMPTS: Final = 10
#: Backoff between failed publications: first delay and cap (the factor is the queue's).
DEFAULT_FORWARD_FIRST_DELAY: Final = timedelta(seconds=1)
DEFAULT_FORWARD_MAX_DELAY: Final = timedelta(minutes=5)
#: How long one publication run holds its rows; longer than a publication may take.
DEFAULT_FORWARD_LEASE: Final = timedelta(minutes=2)
#: How long one publication (connect, publish, confirm) may take before it fails.
DEFAULT_FORWARD_TIMEOUT: Final = timedelta(seconds=10)
#: Rows of one destination one round of the forwarding loop leases at most.
FORWARD_BATCH: Final = 64
#: How often the forwarding loop purges the done rows past the log's retention.
FORWARD_PURGE_EVERY: Final = timedelta(hours=1)
