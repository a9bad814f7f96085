"""A PostgreSQL store that does not answer is an I/O failure, exit 1 (the exit-code table
of docs/reference/cli.md), for every command that reads a store: the analyser's reading
(``webhooks analyze``) as the store commands' (``webhooks export``, ``dead-letters``)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from gptools.cli import cli


@pytest.fixture
def unreachable_store() -> str:
    """A PostgreSQL URL on a loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://postgres@127.0.0.1:{port}/test?connect_timeout=2"


@pytest.mark.parametrize(
    "command",
    [
        ["webhooks", "analyze", "{store}"],
        ["webhooks", "export", "--store", "{store}", "--format", "jsonl", "{out}"],
        ["webhooks", "dead-letters", "--store", "{store}"],
    ],
    ids=["analyze", "export", "dead-letters"],
)
def test_an_unreachable_postgresql_store_is_exit_1(
    unreachable_store: str, tmp_path: Path, command: list[str]
) -> None:
    args = [a.format(store=unreachable_store, out=tmp_path / "out.jsonl") for a in command]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert "127.0.0.1" in result.stderr
