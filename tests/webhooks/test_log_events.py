"""Every ``event`` a log line of the receiver can carry is a stable snake_case name of the
registry (``gptools/webhooks/_log_events.py``), which the site's page lists (issue 34
item 9): read from the code itself, so a line added without a registered name fails here."""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

import pytest

from gptools.webhooks import _logs
from gptools.webhooks._log_events import EVENTS, FIELDS, log_events_markdown

ROOT = Path(__file__).resolve().parents[2]
#: The code that runs in a receiver's processes and logs (the CLI's serve command too).
SOURCES = [*sorted((ROOT / "gptools" / "webhooks").glob("*.py")), ROOT / "gptools/cli/_webhooks.py"]
_LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}
_SNAKE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


def _strings(node: ast.AST) -> list[str]:
    """Every string constant an expression can evaluate to (``"a" if x else "b"``)."""
    return [
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def _logging_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls of ``<a logger>.<level>(...)`` (``logger``, ``_logger``, ``self.logger``)."""
    calls = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        # logger.x(...), self.logger.x(...), logging.getLogger(...).x(...)
        if node.func.attr in _LEVELS and ("logger" in name.lower() or isinstance(owner, ast.Call)):
            calls.append(node)
    return calls


def _events_in(call: ast.Call) -> list[str] | None:
    """The event names a logging call passes (None: it passes none)."""
    extra = next((k.value for k in call.keywords if k.arg == "extra"), None)
    if not isinstance(extra, ast.Dict):
        return None
    for key, value in zip(extra.keys, extra.values, strict=True):
        if isinstance(key, ast.Constant) and key.value == "event":
            return _strings(value)
        if key is None:  # **fields: look for the event in what is spread
            return None
    return None


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_every_log_line_names_a_registered_event(source: Path) -> None:
    tree = ast.parse(source.read_text())
    for call in _logging_calls(tree):
        events = _events_in(call)
        where = f"{source.name}:{call.lineno}"
        assert events, f"{where}: a log line without extra={{'event': NAME}}"
        unknown = [e for e in events if e not in EVENTS]
        assert not unknown, f"{where}: {unknown} not in _log_events.EVENTS"


def test_the_fallbacks_and_uvicorns_lines_are_registered() -> None:
    mapped = {event for _, event in _logs._UVICORN_EVENTS}
    generic = set(_strings(ast.parse(Path(_logs.__file__).read_text())))
    assert mapped <= EVENTS.keys()
    for name in ("listen_failed", "python_warning", "log_message", "stderr_output"):
        assert name in generic and name in EVENTS


def test_names_are_snake_case_and_each_is_used() -> None:
    code = "\n".join(p.read_text() for p in SOURCES)
    for name in EVENTS:
        assert _SNAKE.fullmatch(name), name
        assert f'"{name}"' in code, f"{name} is registered but nothing logs it"
    for name in FIELDS:
        assert re.fullmatch(r"[a-zA-Z_]+", name), name


@pytest.mark.parametrize(
    ("text", "event"),
    [
        ("Started server process [%d]", "server_process_started"),
        ("Child process [12] died", "worker_died"),
        ("Child process [12] failed to start, stopping the parent process.", "worker_start_failed"),
        ("Exception in ASGI application\n", "request_failed"),
        ("Received SIGTERM, exiting.", "signal_received"),
        ("something uvicorn says one day", "log_message"),
    ],
)
def test_uvicorns_lines_get_their_event(text: str, event: str) -> None:
    record = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, text, None, None)
    assert _logs.event_of(record) == event


def test_the_site_page_lists_every_field_and_event() -> None:
    page = log_events_markdown()
    for name in [*FIELDS, *EVENTS]:
        assert f"| `{name}` |" in page, name
    nav = (ROOT / "mkdocs.yml").read_text()
    assert "reference/log-events.md" in nav
