"""The receiver's log lines as JSON (``gptools webhooks serve --log-format json``), the ids
of its requests, and the one scrub every logged or stored error text goes through.

In JSON mode every line a process writes on stderr is one JSON object (the fields and
events are registered in ``_log_events.py``): the receiver's lines and uvicorn's carry an
``event`` named there; Python's warnings, an exception that ends a thread or the process,
and whatever a library writes to ``sys.stderr`` itself become lines of their own events.
:func:`log_config` is what serve and each uvicorn worker apply; its handler
(:func:`json_handler`) installs those hooks in every process it is built in.

Only named fields are written, never a request's headers or body, and every text passes
through :func:`scrub`: ``Bearer``/``Basic`` credentials, URL passwords and the secrets the
process knows (:func:`remember_secrets`: the receiver's credentials and store password,
and those of :data:`SECRET_VARIABLES`) are blanked.

A request's id (:func:`request_id`) is its ``X-Request-ID`` when that is short and plain,
else one made here: a random prefix per process and a counter, so it costs no system call.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import logging
import os
import re
import secrets
import sys
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from pydantic import SecretStr

from gptools._secrets import blank_authorization, blank_secrets, scrub_urls
from gptools.webhooks._constants import REQUEST_ID_MAX_BYTES, STDERR_LINE_MAX_CHARS
from gptools.webhooks._log_events import FIELDS

logger = logging.getLogger("gptools.webhooks")

#: The environment variables whose values are secrets, blanked wherever they appear.
SECRET_VARIABLES = ("GP_WEBHOOK_API_KEY", "GP_WEBHOOK_PASSWORD", "GP_WEBHOOK_SSL_KEYFILE_PASSWORD")
#: The header a request's id comes in and goes back in.
REQUEST_ID_HEADER = b"x-request-id"

_SANE_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:+/=@-]{1,%d}" % REQUEST_ID_MAX_BYTES)
#: The fields a record carries as attributes (``extra=``); the others are the record's own.
_RECORD_FIELDS = tuple(
    f for f in FIELDS if f not in ("time", "level", "logger", "pid", "event", "message", "error")
)

# uvicorn's own lines, by the start of their text (uvicorn names no event): checked in order.
_UVICORN_EVENTS = tuple(
    (re.compile(pattern), event)
    for pattern, event in (
        (r"Uvicorn running on", "server_listening"),
        (r"Started parent process", "parent_process_started"),
        (r"Stopping parent process", "parent_process_stopping"),
        (r"Started server process", "server_process_started"),
        (r"Finished server process", "server_process_finished"),
        (r"Waiting for application startup", "startup_begun"),
        (r"Application startup complete", "startup_complete"),
        (r"Application startup failed", "startup_failed"),
        (r"Waiting for application shutdown", "shutdown_begun"),
        (r"Application shutdown complete", "shutdown_complete"),
        (r"Application shutdown failed", "shutdown_failed"),
        (r"Shutting down", "shutting_down"),
        (r"Waiting for connections to close", "draining_connections"),
        (r"Waiting for background tasks", "draining_tasks"),
        (r"Cancel \S+ running task", "shutdown_timed_out"),
        (r"Received SIG", "signal_received"),
        (r"Terminated child process", "worker_terminated"),
        (r"Waiting for child process", "worker_joining"),
        (r"Child process \[\d+\] died", "worker_died"),
        (r"Child process \[\d+\] failed to start", "worker_start_failed"),
        (r"New child process", "worker_restart_aborted"),
        (r"Exception in ASGI application|ASGI callable returned", "request_failed"),
        (r"Invalid HTTP request", "invalid_http_request"),
        (r"Unsupported upgrade|No supported WebSocket", "unsupported_upgrade"),
        (r"Error loading ASGI app", "app_load_failed"),
    )
)

# -- secrets --------------------------------------------------------------------------

_known_secrets: list[str] = []


def remember_secrets(values: Iterable[str]) -> None:
    """Blank ``values`` wherever :func:`scrub` sees them, in this process, from now on."""
    fresh = {v for v in values if v} - set(_known_secrets)
    if fresh:
        # Longest first: a secret that contains another is blanked whole.
        _known_secrets[:] = sorted({*_known_secrets, *fresh}, key=len, reverse=True)


def secret_values(holder: object) -> list[str]:
    """Every :class:`~pydantic.SecretStr` value ``holder`` holds (a dataclass such as a
    receiver's credential, its lists and mappings, searched a few levels down): what the
    receiver's credentials are, however they are arranged."""
    found: list[str] = []

    def visit(value: object, depth: int) -> None:
        if isinstance(value, SecretStr):
            found.append(value.get_secret_value())
        elif depth > 4:
            return
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for field in dataclasses.fields(value):
                visit(getattr(value, field.name, None), depth + 1)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item, depth + 1)
        elif isinstance(value, list | tuple | frozenset | set):
            for item in value:
                visit(item, depth + 1)

    visit(holder, 0)
    return found


def scrub(text: str) -> str:
    """``text`` as it may be logged or stored: ``Bearer``/``Basic`` credentials, every
    URL's password, ``password=`` values and the secrets this process knows blanked (as
    :func:`~gptools._secrets.blank_secrets` does: a short one only where it stands alone)."""
    # Every value after the scheme, a word too: a log line loses nothing by a blanked word.
    return blank_secrets(scrub_urls(blank_authorization(text, words=True)), _known_secrets)


# -- request ids ------------------------------------------------------------------------

_counter = itertools.count(1)
_prefix = b""


def _new_prefix() -> None:
    global _prefix, _counter
    _prefix = secrets.token_hex(6).encode() + b"-"
    _counter = itertools.count(1)


_new_prefix()
os.register_at_fork(after_in_child=_new_prefix)


def request_id(header: bytes | None) -> bytes:
    """The id of a request whose ``X-Request-ID`` is ``header`` (None: none sent): the
    header itself when it is at most :data:`REQUEST_ID_MAX_BYTES` of letters, digits and
    ``._:+/=@-``, else a new one (this process's random prefix and a counter)."""
    if header is not None and _SANE_REQUEST_ID.fullmatch(header):
        return header
    return b"%s%x" % (_prefix, next(_counter))


# -- JSON lines ---------------------------------------------------------------------------


def event_of(record: logging.LogRecord) -> str:
    """The ``event`` of a record: its own (``extra={"event": ...}``), uvicorn's line by its
    text, or the generic one of its kind."""
    event = getattr(record, "event", None)
    if event:
        return str(event)
    if record.name.startswith("uvicorn"):
        if isinstance(record.msg, OSError):  # uvicorn logs a failed bind as the error
            return "listen_failed"
        text = str(record.msg)
        for pattern, name in _UVICORN_EVENTS:
            if pattern.match(text):
                return name
    elif record.name == "py.warnings":
        return "python_warning"
    return "log_message"


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        remember_secrets(os.environ.get(name, "") for name in SECRET_VARIABLES)

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the text: still one line
            message = f"{record.msg} {record.args}"
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="microseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "event": event_of(record),
            "message": scrub(message.rstrip()),
        }
        for name in _RECORD_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                document[name] = value.decode("ascii") if isinstance(value, bytes) else value
        if record.exc_info:
            document["error"] = scrub(self.formatException(record.exc_info))
        # ASCII only: a lone surrogate in a message still makes valid JSON.
        return json.dumps(document, separators=(",", ":"), default=str)


def log_config(log_format: str) -> dict[str, Any] | None:
    """uvicorn's ``log_config`` for ``json`` (every logger of every process, uvicorn's and
    the libraries' too, as JSON lines on stderr), or None for uvicorn's default text."""
    if log_format != "json":
        return None
    through_root = {"handlers": [], "level": "INFO", "propagate": True}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"json": {"()": f"{__name__}.json_handler", "formatter": "json"}},
        "root": {"handlers": ["json"], "level": "INFO"},
        "loggers": {
            "uvicorn": through_root,
            "uvicorn.error": through_root,
            "uvicorn.access": through_root,
            "gptools": through_root,
        },
    }


def json_handler() -> logging.Handler:
    """The handler of :func:`log_config`: a stream handler on this process's stderr, built
    once the hooks that turn everything else written there into JSON lines are in place
    (the logging configuration builds it in every process, serve's and each worker's)."""
    return logging.StreamHandler(_install_hooks())


class _StderrLines(io.TextIOBase):
    """What stands for ``sys.stderr`` in JSON mode: each line written becomes one JSON line
    (event ``stderr_output``) on the real stderr."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._partial = ""
        self._lock = threading.Lock()
        self._formatter = JsonFormatter()

    def writable(self) -> bool:
        """Always."""
        return True

    def write(self, text: str) -> int:
        """Buffer ``text``; every complete line goes out as one JSON line."""
        with self._lock:
            lines = (self._partial + text).split("\n")
            self._partial = lines.pop()
            if len(self._partial) > STDERR_LINE_MAX_CHARS:
                lines.append(self._partial)
                self._partial = ""
            for line in lines:
                self._emit(line)
        return len(text)

    def flush(self) -> None:
        """Write a pending partial line too."""
        with self._lock:
            if self._partial:
                self._emit(self._partial)
                self._partial = ""
        self.stream.flush()

    def fileno(self) -> int:
        """The real stderr's descriptor (for those who write to it below Python)."""
        fileno: int = self.stream.fileno()
        return fileno

    def _emit(self, line: str) -> None:
        if not line.strip():
            return
        record = logging.LogRecord("stderr", logging.WARNING, "", 0, line, None, None)
        record.event = "stderr_output"
        self.stream.write(self._formatter.format(record) + "\n")
        self.stream.flush()


def _install_hooks() -> Any:
    """Route Python's warnings, exceptions that end a thread or the process, and every
    line written to ``sys.stderr`` through JSON lines; return the real stderr (for the
    handler). Done once per process."""
    current = sys.stderr
    if isinstance(current, _StderrLines):
        return current.stream
    logging.captureWarnings(True)
    threading.excepthook = _thread_crashed
    sys.excepthook = _uncaught
    sys.unraisablehook = _unraisable
    sys.stderr = _StderrLines(current)
    return current


def _thread_crashed(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logger.error(
        "thread %s ended by an exception",
        name,
        exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback),
        extra={"event": "thread_crashed"},
    )


def _uncaught(
    kind: type[BaseException], value: BaseException, traceback: TracebackType | None
) -> None:
    logger.critical(
        "uncaught %s", kind.__name__, exc_info=(kind, value, traceback),
        extra={"event": "uncaught_exception"},
    )  # fmt: skip


def _unraisable(unraisable: Any) -> None:
    value = unraisable.exc_value
    logger.warning(
        "%s: %r",
        unraisable.err_msg or "Exception ignored in",
        unraisable.object,
        exc_info=(unraisable.exc_type, value, unraisable.exc_traceback) if value else None,
        extra={"event": "unraisable_exception"},
    )


def metrics_request_failed(rid: bytes | None, *, scrape: bool) -> None:
    """Log the exception being handled as one line, without its traceback: a scrape that
    could not be rendered (``scrape``, on either listener), or a metrics-port connection
    http.server could not answer at all (a client gone while its answer was written); with
    the request's id when it has one."""
    exc = sys.exc_info()[1]
    logger.log(
        logging.ERROR if scrape else logging.WARNING,
        "%s: %s: %s",
        "a metrics scrape failed" if scrape else "a metrics-port connection failed",
        type(exc).__name__,
        exc,
        extra={
            "event": "metrics_scrape_failed" if scrape else "metrics_connection_failed",
            "request_id": rid,
        },
    )
