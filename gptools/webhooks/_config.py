"""The receiver's configuration as one object, :class:`ReceiverConfig` (uvicorn's
``Config`` is the model): every setting of a worker's receiver, its default (from
``_constants.py`` or ``gptools.spec``, named there once) and what it means, checked once
when the object is made.

:func:`~gptools.webhooks.serve` makes one and hands it whole to uvicorn's worker
processes: serialised as JSON into one environment variable (:meth:`~ReceiverConfig.environment`),
which each worker reads back (:meth:`~ReceiverConfig.from_environment`) to build its
receiver. It holds no secret: the credentials are read by each worker from its own
environment and the credentials file, as before; a process's environment is readable by
its owner only. ``gptools webhooks serve`` takes its options' defaults and help from the
fields' documentation here.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import timedelta
from typing import Any, Final

from gptools import spec
from gptools._secrets import redact_url
from gptools._store_url import parse_store_url
from gptools.errors import ConfigurationError
from gptools.webhooks._constants import (
    DEFAULT_FACTOR,
    DEFAULT_FIRST_DELAY,
    DEFAULT_FIRST_SEEN_MAX_VALUES,
    DEFAULT_FORWARD_FIRST_DELAY,
    DEFAULT_FORWARD_LEASE,
    DEFAULT_FORWARD_MAX_ATTEMPTS,
    DEFAULT_FORWARD_MAX_DELAY,
    DEFAULT_FORWARD_TIMEOUT,
    DEFAULT_HANDLER_TIMEOUT,
    DEFAULT_IDLE_WAIT,
    DEFAULT_LEASE,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_DELAY,
    DEFAULT_MAX_HUNG,
    DEFAULT_PURGE_EVERY,
    DEFAULT_QUEUE_BATCH,
    DEFAULT_QUIET_ALERT_AFTER,
    DEFAULT_SPOOL_MAX_BYTES,
    DEFAULT_SPOOL_MAX_ROWS,
    DEFAULT_SPOOL_REPLAY_EVERY,
    DEFAULT_STORE_URL,
    DEFAULT_SUMMARY_EVERY,
    DEFAULT_UNACKNOWLEDGED_REFRESH,
    DEFAULT_WAIT_LIMIT,
)
from gptools.webhooks._first_seen import refused_kinds
from gptools.webhooks._forward_destinations import parse_destinations
from gptools.webhooks._queue import lease_refusal
from gptools.webhooks._server_limits import ServerLimits

#: The one variable a worker process reads its configuration from (JSON).
ENV_CONFIG: Final = "GP_WEBHOOK_CONFIG"
#: The prefixes of the settings handed to the processing queue and the outage recovery
#: under their own parameter names (``queue_lease`` is ``ProcessingQueue(lease=...)``).
QUEUE_PREFIX: Final = "queue_"
OUTAGE_PREFIX: Final = "outage_"
FORWARD_PREFIX: Final = "forward_"

_AUTH_KINDS = ("bearer", "basic", "none")
_HANDLER_SHAPE = re.compile(r"[\w.]+:[\w.]+")


class SettingError(ConfigurationError, ValueError):
    """A receiver setting that cannot work; ``setting`` names it (the field of
    :class:`ReceiverConfig`), so a front end can name its own option instead."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


def _doc(doc: str) -> dict[str, str]:
    """A field's documentation (``gptools webhooks serve`` shows it as its option's help)."""
    return {"doc": doc}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiverConfig:
    """Every setting of a worker's receiver, checked once (:class:`SettingError` names
    the setting at fault). Times are :class:`~datetime.timedelta`; ``gptools webhooks
    serve`` takes them in seconds. ``store``, ``auth``, ``credentials_file`` and
    ``handler`` name what each worker of :func:`~gptools.webhooks.serve` opens, reads
    and imports; a :class:`~gptools.webhooks.WebhookReceiver` made directly is given
    those as objects and uses the rest."""

    store: str = field(default=DEFAULT_STORE_URL, metadata=_doc("The store's URL."))
    auth: str = field(
        default="bearer",
        metadata=_doc("How deliveries authenticate: bearer, basic or none."),
    )
    credentials_file: str | None = field(
        default=None,
        metadata=_doc("The credentials file (one 'ID SECRET' a line, owner-only)."),
    )
    handler: str | None = field(
        default=None,
        metadata=_doc(
            "Run this function (MODULE:FUNCTION) for every new action, after the acknowledgement."
        ),
    )
    path: str = field(
        default=spec.DEFAULT_WEBHOOK_PATH, metadata=_doc("The POST path deliveries arrive on.")
    )
    max_body_bytes: int = field(
        default=spec.WEBHOOK_MAX_BODY_BYTES,
        metadata=_doc("Bodies larger than this are answered 413."),
    )
    metrics_public: bool = field(
        default=True,
        metadata=_doc(
            "Answer /metrics and /openapi.json on the delivery listener (off with a "
            "metrics port of their own)."
        ),
    )
    ack_timeout: timedelta = field(
        default=DEFAULT_WAIT_LIMIT,
        metadata=_doc(
            "Seconds a delivery waits for its durable write to begin; past it the answer is "
            "503 and the provider retries (it expects an answer within a second)."
        ),
    )
    max_batch: int = field(
        default=DEFAULT_MAX_BATCH,
        metadata=_doc("Deliveries one group-commit transaction takes at most."),
    )
    purge_every: timedelta = field(
        default=DEFAULT_PURGE_EVERY,
        metadata=_doc("Seconds between two purges of old dedupe keys and log rows."),
    )
    refused_rows_per_second: int = field(
        default=spec.WEBHOOK_REFUSED_ROWS_PER_SECOND,
        metadata=_doc(
            "Log rows per second (per worker) for each reason of refusal before "
            "authentication or routing (401, 404, 413, ...); past it they are only counted, "
            "in a summary row now and then (refusal_summary_every) and the metric "
            "gptools_webhook_refusals_suppressed_total."
        ),
    )
    refusal_summary_every: timedelta = field(
        default=DEFAULT_SUMMARY_EVERY,
        metadata=_doc(
            "Seconds between two summary rows of a reason's suppressed refusals (at most)."
        ),
    )
    quiet_alert_after: timedelta = field(
        default=DEFAULT_QUIET_ALERT_AFTER,
        metadata=_doc(
            "Seconds without an acknowledged delivery (while the receiver is up) after which "
            "the shipped quiet alert fires; exported as "
            "gptools_webhook_quiet_threshold_seconds. At most the provider's 7-day retry "
            "window."
        ),
    )
    spool_dir: str | None = field(
        default=None,
        metadata=_doc(
            "Where each worker keeps the log rows of the 503s it answers while the store is "
            "down, until the store is back (a folder per store inside). Default: "
            "$STATE_DIRECTORY (systemd's StateDirectory=), else the SQLite store's folder, "
            "else ~/.local/state/gptools; then /webhook-spool."
        ),
    )
    spool_max_rows: int = field(
        default=DEFAULT_SPOOL_MAX_ROWS,
        metadata=_doc(
            "Rows the outage spool keeps per worker; past it they are only counted "
            "(gptools_webhook_spool_dropped_total)."
        ),
    )
    spool_max_bytes: int = field(
        default=DEFAULT_SPOOL_MAX_BYTES,
        metadata=_doc("Bytes the outage spool keeps per worker; past it rows are only counted."),
    )
    outage_replay_every: timedelta = field(
        default=DEFAULT_SPOOL_REPLAY_EVERY,
        metadata=_doc(
            "Seconds between two looks for spooled rows to replay (and dead workers' spools)."
        ),
    )
    outage_refresh_every: timedelta = field(
        default=DEFAULT_UNACKNOWLEDGED_REFRESH,
        metadata=_doc(
            "Seconds between two reads of the oldest unacknowledged action from the store."
        ),
    )
    queue_max_attempts: int = field(
        default=DEFAULT_MAX_ATTEMPTS,
        metadata=_doc("Runs of the handler before an action is dead-lettered."),
    )
    queue_first_delay: timedelta = field(
        default=DEFAULT_FIRST_DELAY,
        metadata=_doc("Seconds before the first retry of a failed handler run."),
    )
    queue_factor: float = field(
        default=DEFAULT_FACTOR,
        metadata=_doc("What each further retry's delay is multiplied by (at least 1)."),
    )
    queue_max_delay: timedelta = field(
        default=DEFAULT_MAX_DELAY,
        metadata=_doc("The longest delay between two handler runs (seconds)."),
    )
    queue_lease: timedelta = field(
        default=DEFAULT_LEASE,
        metadata=_doc(
            "Seconds one handler run holds its action; longer than its handler time-out."
        ),
    )
    queue_handler_timeout: timedelta = field(
        default=DEFAULT_HANDLER_TIMEOUT,
        metadata=_doc(
            "Seconds after which a handler run counts as failed (its thread is abandoned)."
        ),
    )
    queue_max_hung: int = field(
        default=DEFAULT_MAX_HUNG,
        metadata=_doc(
            "Timed-out handler runs still not returned past which the queue runs nothing "
            "more (and /healthz fails)."
        ),
    )
    queue_batch: int = field(
        default=DEFAULT_QUEUE_BATCH, metadata=_doc("Actions one round of the queue runs.")
    )
    queue_idle_wait: timedelta = field(
        default=DEFAULT_IDLE_WAIT,
        metadata=_doc("Seconds an idle queue waits for new work (a commit wakes it)."),
    )
    first_seen_refuse: str = field(
        default="",
        metadata=_doc(
            "Kinds of value (comma-separated: event_type, field, currency, game) whose "
            "values not seen before are refused with 422 instead of only recorded. The "
            "provider never retries a 4xx: a refused action is lost unless replayed."
        ),
    )
    first_seen_max_values: int = field(
        default=DEFAULT_FIRST_SEEN_MAX_VALUES,
        metadata=_doc(
            "Distinct values of one kind the contract watcher keeps; past it new values are "
            "only counted (gptools_webhook_first_seen_dropped_total)."
        ),
    )
    forward: str = field(
        default="",
        metadata=_doc(
            "Forward every new action, after the acknowledgement, to these destinations "
            "(NAME=URL, separated by spaces: amqp://...?queue=Q, nats://...?subject=S, "
            "https://...); each action once per destination, its actionId the message id."
        ),
    )
    forward_max_attempts: int = field(
        default=DEFAULT_FORWARD_MAX_ATTEMPTS,
        metadata=_doc("Publications of an action to a destination before it is dead-lettered."),
    )
    forward_first_delay: timedelta = field(
        default=DEFAULT_FORWARD_FIRST_DELAY,
        metadata=_doc("Seconds before the first retry of a failed publication."),
    )
    forward_max_delay: timedelta = field(
        default=DEFAULT_FORWARD_MAX_DELAY,
        metadata=_doc("The longest delay between two publications of an action (seconds)."),
    )
    forward_lease: timedelta = field(
        default=DEFAULT_FORWARD_LEASE,
        metadata=_doc("Seconds one publication run holds its rows; longer than its time-out."),
    )
    forward_timeout: timedelta = field(
        default=DEFAULT_FORWARD_TIMEOUT,
        metadata=_doc("Seconds one publication (connect, publish, confirm) may take."),
    )
    limits: ServerLimits = field(
        default=ServerLimits(),
        metadata=_doc("The HTTP server's bounds against strangers."),
    )

    def __post_init__(self) -> None:
        # A path-like spool folder is kept as text: the object stays JSON.
        if isinstance(self.spool_dir, os.PathLike):
            object.__setattr__(self, "spool_dir", os.fspath(self.spool_dir))
        for f in fields(self):
            if (refusal := _type_refusal(f.default, getattr(self, f.name))) is not None:
                raise SettingError(f.name, f"{f.name} {refusal}")
        object.__setattr__(self, "auth", self.auth.lower())
        for name, refusal in _refusals(self):
            if refusal is not None:
                raise SettingError(name, f"{name} {refusal}")

    def __repr__(self) -> str:
        """The settings, the store URL's password blanked (a repr may reach a log)."""
        shown = ((f.name, _shown(f.name, getattr(self, f.name))) for f in fields(self))
        return f"ReceiverConfig({', '.join(f'{name}={value!r}' for name, value in shown)})"

    def replaced(self, **settings: Any) -> ReceiverConfig:
        """This configuration with ``settings`` (fields by name) changed, checked again."""
        unknown = sorted(set(settings) - {f.name for f in fields(self)})
        if unknown:
            raise TypeError(f"no receiver setting named {', '.join(unknown)}")
        return replace(self, **settings)

    def prefixed(self, prefix: str) -> dict[str, Any]:
        """The settings named ``prefix``-something, without the prefix (the processing
        queue's and the outage recovery's keyword arguments)."""
        return {
            f.name.removeprefix(prefix): getattr(self, f.name)
            for f in fields(self)
            if f.name.startswith(prefix)
        }

    # -- the hand-over to the workers -------------------------------------------------

    def to_json(self) -> str:
        """This configuration as JSON (times in whole microseconds: exact)."""
        return json.dumps(
            {f.name: _encode(getattr(self, f.name)) for f in fields(self)},
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> ReceiverConfig:
        """The configuration :meth:`to_json` wrote (checked again)."""
        document = json.loads(text)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in document:
                values[f.name] = _decode(f.default, document[f.name])
        return cls(**values)

    def environment(self) -> dict[str, str]:
        """The one variable :meth:`from_environment` reads, for the worker processes."""
        return {ENV_CONFIG: self.to_json()}

    @classmethod
    def from_environment(cls) -> ReceiverConfig:
        """The configuration ``serve`` handed to this worker, else the defaults."""
        text = os.environ.get(ENV_CONFIG)
        return cls.from_json(text) if text else cls()

    @classmethod
    def documentation(cls, name: str) -> tuple[str, Any]:
        """What the setting ``name`` means, and its default as a front end shows it
        (times in seconds)."""
        for f in fields(cls):
            if f.name == name:
                default = f.default
                if isinstance(default, timedelta):
                    default = default.total_seconds()
                return f.metadata["doc"], default
        raise KeyError(name)

    def shown(self) -> dict[str, Any]:
        """The settings as a worker logs them at start: JSON values, the store left out
        (the line names the store in use, its password blanked)."""
        document: dict[str, Any] = json.loads(self.to_json())
        del document["store"]
        document["forward"] = _shown("forward", self.forward)
        for f in fields(self):
            if isinstance(f.default, timedelta):
                document[f.name] = getattr(self, f.name).total_seconds()
        return document


def _refusals(config: ReceiverConfig) -> list[tuple[str, str | None]]:
    """Each setting checked: its name and why it cannot work, or None."""
    positive = (
        "ack_timeout",
        "purge_every",
        "refusal_summary_every",
        "outage_replay_every",
        "outage_refresh_every",
        "queue_lease",
        "queue_handler_timeout",
        "queue_idle_wait",
        "forward_lease",
    )
    checks: list[tuple[str, str | None]] = [
        ("store", _store_refusal(config.store)),
        (
            "auth",
            None
            if config.auth in _AUTH_KINDS
            else f"must be bearer, basic or none, got {config.auth!r}",
        ),
        (
            "handler",
            None
            if config.handler is None or _HANDLER_SHAPE.fullmatch(config.handler)
            else f"{config.handler!r} must look like package.module:function",
        ),
        (
            "path",
            None if config.path.startswith("/") else f"must start with '/', got {config.path!r}",
        ),
        ("max_body_bytes", _at_least(config.max_body_bytes, 1)),
        ("max_batch", _at_least(config.max_batch, 1)),
        ("refused_rows_per_second", _at_least(config.refused_rows_per_second, 0)),
        ("spool_max_rows", _at_least(config.spool_max_rows, 0)),
        ("spool_max_bytes", _at_least(config.spool_max_bytes, 0)),
        ("queue_max_attempts", _at_least(config.queue_max_attempts, 1)),
        ("first_seen_refuse", _refusal_of(refused_kinds, config.first_seen_refuse)),
        ("first_seen_max_values", _at_least(config.first_seen_max_values, 1)),
        ("forward", _refusal_of(parse_destinations, config.forward)),
        ("forward_max_attempts", _at_least(config.forward_max_attempts, 1)),
        (
            "forward_max_delay",
            None
            if config.forward_max_delay >= config.forward_first_delay
            else f"must be at least forward_first_delay ({config.forward_first_delay}), "
            f"got {config.forward_max_delay}",
        ),
        (
            "forward_timeout",
            None
            if timedelta(0) < config.forward_timeout < config.forward_lease
            else f"must be above 0 and shorter than forward_lease ({config.forward_lease}), "
            f"got {config.forward_timeout}",
        ),
        ("queue_max_hung", _at_least(config.queue_max_hung, 1)),
        ("queue_batch", _at_least(config.queue_batch, 1)),
        (
            "queue_factor",
            None
            if config.queue_factor >= 1 and config.queue_factor != float("inf")
            else f"must be at least 1 and finite, got {config.queue_factor}",
        ),
        (
            "quiet_alert_after",
            None
            if timedelta(0) < config.quiet_alert_after <= spec.WEBHOOK_RETRY_WINDOW
            else "must be above 0 and at most the provider's retry window "
            f"({spec.WEBHOOK_RETRY_WINDOW}), got {config.quiet_alert_after}",
        ),
        *((name, _above_zero(getattr(config, name))) for name in positive),
        (
            "queue_first_delay",
            None
            if config.queue_first_delay >= timedelta(0)
            else f"must be 0 or more, got {config.queue_first_delay}",
        ),
        (
            "queue_max_delay",
            None
            if config.queue_max_delay >= config.queue_first_delay
            else f"must be at least queue_first_delay ({config.queue_first_delay}), "
            f"got {config.queue_max_delay}",
        ),
        ("queue_handler_timeout", lease_refusal(config.queue_handler_timeout, config.queue_lease)),
        *(
            (f"limits.{name}", _timeout_refusal(getattr(config.limits, name)))
            for name in ("header_timeout_s", "body_timeout_s", "keep_alive_timeout_s")
        ),
        *(
            (f"limits.{name}", _at_least(getattr(config.limits, name), 1))
            for name in ("max_header_bytes", "max_header_fields", "max_connections")
        ),
    ]
    return checks


def _timeout_refusal(seconds: float) -> str | None:
    """Unless ``seconds`` is in :data:`~gptools.spec.RECEIVER_TIMEOUT_RANGE` (NaN is not):
    the range."""
    low, high = (bound.total_seconds() for bound in spec.RECEIVER_TIMEOUT_RANGE)
    if low <= seconds <= high:
        return None
    return f"must be between {low:g} and {high:g} seconds, got {seconds}"


def _type_refusal(default: Any, value: Any) -> str | None:
    """Unless ``value`` is of the setting's type (its default's; text or None for those
    without one; a whole number will do for a fraction): what it should be."""
    expected: tuple[type, ...]
    if default is None:
        expected = (str, type(None))
    elif isinstance(default, float):
        expected = (float, int)
    else:
        expected = (type(default),)
    if isinstance(value, expected) and (isinstance(value, bool) == isinstance(default, bool)):
        return None
    names = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
    return f"must be {names}, got {value!r}"


def _shown(name: str, value: Any) -> Any:
    """A setting's value as a repr or a log line may show it: the store's and the
    forwarding destinations' passwords blanked."""
    if name == "store":
        return redact_url(value)
    if name == "forward":
        return " ".join(redact_url(item) for item in value.split())
    return value


def _refusal_of(parse: Any, text: str) -> str | None:
    """Why ``parse`` refuses ``text`` (its ValueError's message), or None."""
    try:
        parse(text)
    except ValueError as exc:
        return f"is not valid: {exc}"
    return None


def _store_refusal(url: str) -> str | None:
    try:
        parse_store_url(url)
    except ValueError as exc:
        return f"is not a store URL: {exc}"
    return None


def _at_least(value: int, minimum: int) -> str | None:
    return None if value >= minimum else f"must be at least {minimum}, got {value}"


def _above_zero(value: timedelta) -> str | None:
    return None if value > timedelta(0) else f"must be above 0, got {value}"


def _encode(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    if isinstance(value, ServerLimits):
        return asdict(value)
    return value


def _decode(default: Any, value: Any) -> Any:
    if isinstance(default, timedelta):
        return timedelta(microseconds=value)
    if isinstance(default, ServerLimits):
        return ServerLimits(**value)
    return value
