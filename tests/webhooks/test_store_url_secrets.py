"""A store URL's password never reaches a message (issue 22): every path that opens a
store, the CLI's ``webhooks serve``/``export``/``dead-letters``/``analyze`` and the Python
functions, is given URLs carrying a password that each fail differently (unknown scheme,
no server, a bad option, a bad percent-escape libpq quotes back, a password in the query),
and every output (stdout, stderr, logs, the exception) is searched for it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gptools._secrets import redact_url, scrub
from gptools.cli import cli

SECRET = "Pw5ecret42"
URLS = [
    f"postgresql+psycopg://user:{SECRET}@127.0.0.1:1/test",
    f"postgresql://user:{SECRET}@127.0.0.1:1/test",
    f"postgresql://user:{SECRET}@127.0.0.1:1/test?schema=bad-name",
    f"postgresql://user:{SECRET}@127.0.0.1:1/test?no_such_option=1",
    f"postgresql://user:{SECRET}@127.0.0.1:1/test?log_retention_days=x",
    f"postgresql://user:{SECRET}%zz@127.0.0.1:1/test",
    f"postgresql://user@127.0.0.1:1/test?password={SECRET}&sslmode=bogus",
    f"postgres://user:{SECRET}@127.0.0.1:1/test",
]
IDS = ["scheme", "refused", "schema", "option", "retention", "escape", "query", "postgres"]


def leaks(text: str) -> bool:
    return SECRET in text or SECRET.lower() in text.lower()


def _expected_exit(url: str, command: list[str]) -> int:
    """The exit code of docs/reference/cli.md's table: a malformed URL is bad input (2);
    a well-formed one whose server cannot be reached does not stop ``serve`` from
    starting (0, issue 34) and is an I/O failure (1) for every command that reads the
    store: ``export``, ``dead-letters`` and the analyser's ``analyze`` alike
    (tests/test_cli_store_unreachable.py)."""
    if IDS[URLS.index(url)] not in ("refused", "postgres"):
        return 2
    return {"serve": 0, "export": 1, "dead-letters": 1, "analyze": 1}[command[1]]


@pytest.mark.parametrize("url", URLS, ids=IDS)
@pytest.mark.parametrize(
    "command",
    [
        ["webhooks", "serve", "--auth", "bearer", "--store", "{url}", "--port", "0"],
        ["webhooks", "export", "--store", "{url}", "--format", "jsonl", "{tmp}/out.jsonl"],
        ["webhooks", "dead-letters", "--store", "{url}"],
        ["webhooks", "analyze", "{url}"],
        ["webhooks", "analyze", "--format", "postgres", "{url}"],
    ],
    ids=["serve", "export", "dead-letters", "analyze", "analyze-postgres"],
)
def test_no_cli_output_carries_the_password(
    url: str,
    command: list[str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import uvicorn

    monkeypatch.setenv("GP_WEBHOOK_API_KEY", "k" * 32)
    # A store that cannot be reached does not stop serve from starting (issue 34): its
    # serving loop returns at once here, after the warning that names the store.
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    args = [a.format(url=url, tmp=tmp_path) for a in command]
    caplog.set_level(logging.DEBUG)
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == _expected_exit(url, command), result.output
    assert "Traceback" not in result.output and "Usage:" not in result.output
    output = result.output + (result.stderr if result.stderr_bytes else "")
    assert not leaks(output), output
    assert not leaks(caplog.text), caplog.text
    assert not leaks(repr(result.exception)) and not leaks(str(result.exception))


def _open_store(url: str) -> Any:
    from gptools.webhooks import open_store

    return open_store(url).connect()


def _read_log(url: str) -> Any:
    from gptools.deliverylog import read_delivery_log

    return read_delivery_log(url)


def _analyze(url: str) -> Any:
    from gptools.deliverylog import analyze

    return analyze(url)


@pytest.mark.parametrize("url", URLS, ids=IDS)
@pytest.mark.parametrize("opener", [_open_store, _read_log, _analyze])
def test_no_exception_from_the_python_functions_carries_the_password(
    url: str, opener: Callable[[str], Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception) as caught:  # each URL fails its own way
        opener(url)
    assert not leaks(str(caught.value)), str(caught.value)
    assert not leaks(repr(caught.value))
    assert not leaks(caplog.text)


def test_redaction_rules() -> None:
    assert redact_url("postgresql://u:p%40ss@h/d") == "postgresql://u:***@h/d"
    assert redact_url("postgresql://u@h/d?password=x1&a=b") == "postgresql://u@h/d?password=***&a=b"
    assert redact_url("sqlite:///a/b:c@d.sqlite3") == "sqlite:///a/b:c@d.sqlite3"
    assert scrub('bad token: "p@ss"', "postgresql://u:p%40ss@h/d") == 'bad token: "***"'
