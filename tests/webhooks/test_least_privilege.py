"""A receiver with data rights only (issue 34, item 7): the GRANT statements of the
operations guide, run as written (with roles and a schema of this test's own, dropped
afterwards; no existing role is changed), let a role that cannot run any DDL serve
deliveries, run the processing queue and the purge, export with a target and retry dead
letters, on a store migrated by the owner role."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from click.testing import CliRunner

from gptools.cli import cli
from gptools.webhooks import ReceiverAuth, WebhookReceiver, migrate, open_store
from gptools.webhooks._migrations import SCHEMA_VERSION
from gptools.webhooks._records import LogEntry, WriteItem
from tests.webhooks.conftest import JSON, PG_DSN, ReceiverProcess, event, serve_in_thread, wire
from tests.webhooks.legacy_store import PG_DDL as PREVIOUS_DDL

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "operations.md"


def _guide_sql() -> tuple[list[str], list[str]]:
    """The statements of the guide's two ``sql`` blocks under "Least privilege": those
    run as a superuser before the first migration, and those run as the owner after it."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Least privilege", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sql\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert len(blocks) == 2, blocks

    def statements(block: str) -> list[str]:
        code = "\n".join(line.split("--", 1)[0] for line in block.splitlines())
        return [" ".join(s.split()) for s in code.split(";") if s.strip()]

    return statements(blocks[0]), statements(blocks[1])


@dataclass
class Roles:
    """This test's owner and data-only roles and its schema, as store URLs."""

    owner: str
    app: str
    schema: str

    def url(self, role: str) -> str:
        return f"postgresql://{role}@127.0.0.1:5432/test?schema={self.schema}"

    def named(self, sql: str) -> str:
        """A guide statement with this test's names."""
        sql = re.sub(r"\bgptools_owner\b", self.owner, sql)
        sql = re.sub(r"\bgptools_app\b", self.app, sql)
        return re.sub(r"\bwebhooks\b", self.schema, sql)


@pytest.fixture
def roles() -> Iterator[Roles]:
    """The guide's roles and schema under names of this test's own, dropped afterwards."""
    suffix = uuid.uuid4().hex[:10]
    made = Roles(f"gptools_t_owner_{suffix}", f"gptools_t_app_{suffix}", f"t_{suffix}")
    before, _ = _guide_sql()
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        try:
            for sql in before:
                admin.execute(made.named(sql))
            yield made
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{made.schema}" CASCADE')
            for role in (made.app, made.owner):
                exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
                if exists.fetchone() is not None:
                    admin.execute(f'DROP OWNED BY "{role}"')
                    admin.execute(f'DROP ROLE "{role}"')


def _seed(url: str, now: datetime) -> tuple[list[str], str]:
    """Old log rows and done actions past every retention, and one dead letter, written
    as the owner; returns (the old actions, the dead letter)."""
    old = [str(uuid.uuid4()) for _ in range(3)]
    dead = str(uuid.uuid4())
    at = now - timedelta(days=200)
    conn = open_store(url).connect()
    try:
        conn.write_batch(
            [
                WriteItem(LogEntry(at, 200, wire(event(a)).decode(), a, latency_ms=1.0), True)
                for a in old
            ],
            state="done",
        )
        conn.write_batch(
            [WriteItem(LogEntry(now, 200, wire(event(dead)).decode(), dead, latency_ms=1.0), True)]
        )
        conn.raw.execute(
            "UPDATE webhook_actions SET state = 'dead', last_error = 'seeded' WHERE action_id = %s",
            (dead,),
        )
    finally:
        conn.close()
    return old, dead


def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


def test_a_data_only_role_runs_the_receiver_on_a_migrated_store(
    roles: Roles, tmp_path: Path, receiver_process: Any
) -> None:
    owner_url, app_url = roles.url(roles.owner), roles.url(roles.app)
    assert migrate(owner_url).to_version == SCHEMA_VERSION
    _, after = _guide_sql()
    with psycopg.connect(owner_url.partition("?")[0], autocommit=True) as owner:
        for sql in after:
            owner.execute(roles.named(sql))
    now = datetime.now(UTC)
    old, dead = _seed(owner_url, now)

    # The role cannot change the layout: the DDL the previous gptools ran at every
    # connection fails (but a DROP INDEX IF EXISTS of an index that is not there, which
    # touches nothing), so a receiver that ran DDL could not serve.
    with psycopg.connect(app_url.partition("?")[0], autocommit=True) as app:
        app.execute(f'SET search_path TO "{roles.schema}"')
        changes = [d for d in PREVIOUS_DDL if not d.startswith("DROP INDEX IF EXISTS")]
        for ddl in (*changes, "CREATE TABLE scratch (a int)"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                app.execute(ddl)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("DELETE FROM webhook_schema_version")

    handled: list[str] = []
    receiver = WebhookReceiver(
        app_url, auth=ReceiverAuth.none(), handler=lambda e: handled.append(str(e.action_id))
    )
    sent = [str(uuid.uuid4()) for _ in range(3)]
    with serve_in_thread(receiver) as srv, httpx.Client(timeout=10) as client:
        for action_id in [*sent, sent[0]]:
            answer = client.post(srv.url, content=wire(event(action_id)), headers=JSON)
            assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "duplicate"
        _until(lambda: set(sent) <= set(handled), 20, "the handler ran for every action")
        ready = client.get(f"{srv.base_url}/readyz")
        assert ready.status_code == 200, ready.text

        def purged() -> bool:
            conn = open_store(owner_url).connect()
            try:
                return not (set(old) & conn.action_ids())
            finally:
                conn.close()

        _until(purged, 20, "the purge round removed the old rows")
    assert receiver.maintenance.rounds_skipped == 0

    runner = CliRunner()
    retried = runner.invoke(
        cli, ["webhooks", "dead-letters", "--store", app_url, "--retry", "--json"]
    )
    assert retried.exit_code == 0, retried.output
    document = json.loads(retried.stdout)
    assert [d["action_id"] for d in document["dead_letters"]] == [dead]
    assert document["retried"] == 1
    out = tmp_path / "export.jsonl"
    exported = runner.invoke(
        cli,
        ["webhooks", "export", "--store", app_url, "--format", "jsonl", str(out), "--target", "t"],
    )
    assert exported.exit_code == 0, exported.output
    conn = open_store(owner_url).connect()
    try:
        assert conn.export_mark("t") is not None
    finally:
        conn.close()
    up_to_date = runner.invoke(cli, ["webhooks", "migrate", "--store", app_url, "--json"])
    assert up_to_date.exit_code == 0, up_to_date.output
    assert json.loads(up_to_date.stdout)["applied"] == []

    served: ReceiverProcess = receiver_process(app_url)  # the command's own start-up check
    answer = httpx.post(
        served.url,
        content=wire(event(sent[1])),
        headers={**JSON, "authorization": "Bearer test-key"},
        timeout=10,
    )
    assert (answer.status_code, answer.json()["status"]) == (200, "duplicate")
