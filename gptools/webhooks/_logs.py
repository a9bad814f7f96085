"""The receiver's log lines as JSON (``gptools webhooks serve --log-format json``).

One object a line with ``time`` (UTC), ``level``, ``logger``, ``event`` and, for a
delivery, ``status``, ``actionId`` and ``latency_ms``. Only those named fields are
written, never the request's headers or body, and the text of a message has credentials
blanked (an ``Authorization`` value, the receiver's own secrets) in case one slipped in.
"""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import UTC, datetime
from typing import Any

#: The record attributes (set with ``extra=``) a JSON line carries besides the message.
FIELDS = ("status", "actionId", "latency_ms")
#: The environment variables whose values are secrets, blanked wherever they appear.
SECRET_VARIABLES = ("GP_WEBHOOK_API_KEY", "GP_WEBHOOK_PASSWORD", "GP_WEBHOOK_SSL_KEYFILE_PASSWORD")
_CREDENTIALS = re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+")
REDACTED = "[redacted]"


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self._secrets = [v for name in SECRET_VARIABLES if (v := os.environ.get(name))]

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        document: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="microseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": self._clean(getattr(record, "event", None) or record.getMessage()),
        }
        if getattr(record, "event", None):
            document["message"] = self._clean(record.getMessage())
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                document[name] = value
        if record.exc_info:
            document["error"] = self._clean(self.formatException(record.exc_info))
        return json.dumps(document, separators=(",", ":"), default=str)

    def _clean(self, text: str) -> str:
        text = _CREDENTIALS.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text


def log_config(log_format: str) -> dict[str, Any] | None:
    """uvicorn's ``log_config`` for ``json`` (uvicorn's and gptools' loggers as JSON
    lines on stderr, in every worker), or None for uvicorn's default text."""
    if log_format != "json":
        return None
    handler = {"handlers": ["json"], "level": "INFO", "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {
            "json": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "loggers": {
            "uvicorn": handler,
            "uvicorn.error": handler,
            "uvicorn.access": handler,
            "gptools": handler,
        },
    }
