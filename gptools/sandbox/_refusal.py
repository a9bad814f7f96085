"""The error answer of the sandbox: an exception carrying status, code and message, and
the documented error body it becomes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from gptools.errors import GptoolsError


class Refusal(GptoolsError):
    """Raised by a handler to answer with the documented error body."""

    def __init__(
        self, status: int, code: str, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


def utc_timestamp(now: datetime | None = None) -> str:
    """ISO 8601 UTC with milliseconds and a trailing ``Z``, as the error body wants."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def error_body(code: str, message: str, path: str) -> bytes:
    """The documented error body: ``code``, ``message``, ``timestamp``, ``path``."""
    return json.dumps(
        {"code": code, "message": message, "timestamp": utc_timestamp(), "path": path},
        ensure_ascii=False,
    ).encode()
