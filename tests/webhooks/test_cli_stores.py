"""Every command that takes a store (issue 34, items 10 and 11): a store that does not
exist is refused by every command but ``serve`` and ``migrate`` (one line, exit 2) and
nothing is left behind (no file, no sidecar, no schema); a malformed store URL is bad
input (one line, exit 2) for every command, never "a bug in gptools"."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from tests.webhooks.conftest import PG_DSN

#: The commands that take a store, with the store as ``{url}`` and an output file ``{out}``.
READERS = {
    "export": ["webhooks", "export", "--store", "{url}", "--format", "jsonl", "{out}"],
    "dead-letters": ["webhooks", "dead-letters", "--store", "{url}"],
    "dead-letters --retry --json": [
        "webhooks",
        "dead-letters",
        "--store",
        "{url}",
        "--retry",
        "--json",
    ],
    "analyze": ["webhooks", "analyze", "{url}"],
}
CREATORS = {
    "serve": ["webhooks", "serve", "--auth", "bearer", "--store", "{url}", "--port", "0"],
    "migrate": ["webhooks", "migrate", "--store", "{url}"],
    "migrate --dry-run": ["webhooks", "migrate", "--store", "{url}", "--dry-run"],
}
MALFORMED = {
    "port out of range": "postgresql://postgres@127.0.0.1:99999/test",
    "port not a number": "postgresql://postgres@127.0.0.1:abc/test",
    "port zero": "postgresql://postgres@127.0.0.1:0/test",
    "no host": "postgresql:///test",
    "unknown option": "postgresql://postgres@127.0.0.1:5432/test?no_such_option=1",
    "integer option": "postgresql://postgres@127.0.0.1:5432/test?connect_timeout=soon",
    "word option": "postgresql://postgres@127.0.0.1:5432/test?sslmode=sometimes",
    "schema name": "postgresql://postgres@127.0.0.1:5432/test?schema=bad-name",
    "retention infinite": "postgresql://postgres@127.0.0.1:5432/test?log_retention_days=inf",
    "retention not a number": "sqlite:///w.sqlite3?log_retention_days=soon",
    "synchronous": "sqlite:///w.sqlite3?synchronous=sometimes",
    "sqlite option": "sqlite:///w.sqlite3?schema=x",
    "option twice": "sqlite:///w.sqlite3?synchronous=FULL&synchronous=NORMAL",
    "query part": "sqlite:///w.sqlite3?FULL",
    "unknown scheme": "mysql://user@127.0.0.1/test",
    "two slashes": "sqlite://w.sqlite3",
}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty working folder; ``serve`` returns where it would start serving."""
    import uvicorn

    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    monkeypatch.setenv("GP_WEBHOOK_API_KEY", "k" * 32)
    yield folder


def _run(template: list[str], url: str, out: Path) -> Any:
    args = [a.format(url=url, out=out) for a in template]
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args,
        repr(result.exception),
    )
    return result


def _one_line(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output and "unexpected" not in result.output
    line: str = lines[0]
    return line


def _schema_exists(name: str) -> bool:
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        row = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone()
    return row is not None


@pytest.mark.parametrize("command", list(READERS))
@pytest.mark.parametrize("spelling", ["sqlite:///webhoks.sqlite3", "webhoks.sqlite3"])
def test_a_mistyped_sqlite_store_is_refused_and_nothing_is_left_behind(
    command: str, spelling: str, here: Path
) -> None:
    result = _run(READERS[command], spelling, here / "out.jsonl")
    assert result.exit_code == 2, result.output
    line = _one_line(result)
    assert "webhoks.sqlite3" in line, line
    if command.endswith("--json"):
        assert json.loads(result.stdout)["error"]["exit"] == 2
    assert sorted(p.name for p in here.iterdir()) == []


@pytest.mark.parametrize("command", list(READERS))
@pytest.mark.parametrize("made", [False, True], ids=["no schema", "empty schema"])
def test_a_postgres_store_that_does_not_exist_is_refused_and_not_created(
    command: str, made: bool, here: Path
) -> None:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    url = f"{PG_DSN}?schema={schema}"
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        if made:
            admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            result = _run(READERS[command], url, here / "out.jsonl")
            assert result.exit_code == 2, result.output
            _one_line(result)
            assert _schema_exists(schema) is made
            if made:
                tables = admin.execute(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
                ).fetchone()
                assert tables == (0,)
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    assert list(here.iterdir()) == []


def test_serve_and_migrate_create_a_new_store(here: Path) -> None:
    for name in ("serve", "migrate"):
        result = _run(CREATORS[name], f"sqlite:///{name}.sqlite3", here / "out.jsonl")
        assert result.exit_code == 0, result.output
        assert (here / f"{name}.sqlite3").is_file()
    dry = _run(CREATORS["migrate --dry-run"], "sqlite:///dry.sqlite3", here / "out.jsonl")
    assert dry.exit_code == 0 and not (here / "dry.sqlite3").exists()


@pytest.mark.parametrize("url", list(MALFORMED.values()), ids=list(MALFORMED))
@pytest.mark.parametrize("command", [*READERS, *CREATORS])
def test_a_malformed_store_url_is_bad_input_for_every_command(
    command: str, url: str, here: Path
) -> None:
    result = _run({**READERS, **CREATORS}[command], url, here / "out.jsonl")
    assert result.exit_code == 2, result.output
    _one_line(result)
    assert list(here.iterdir()) == []
