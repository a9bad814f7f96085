"""Structured logs (issue 14 item 4, issue 34 item 9): with ``--log-format json`` every line
every process writes on stderr is one JSON object with a registered ``event`` and its pid;
lines about a request carry its request id (echoed in the answer) and the actionId the
body names; no secret, header or handler's password reaches a line, a stored error or the
dead-letters command."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from gptools import spec
from gptools.webhooks import ReceiverAuth, WebhookReceiver, open_store, serve_metrics
from gptools.webhooks import _logs as logs_module
from gptools.webhooks import _metrics as metrics_module
from gptools.webhooks._log_events import EVENTS
from gptools.webhooks._logs import JsonFormatter, request_id, scrub
from tests._support.cli import run_gptools, start_gptools, wait_until_ready
from tests.webhooks.conftest import JSON, ReceiverProcess, event, free_port, serve_in_thread, wire

SECRET = "k-9f8e7d6c5b4a-receiver-secret"
WRONG = "w-1a2b3c4d-wrong-secret"
DB_PASSWORD = "hunter2-db-password"
#: A handler that does what libraries do on stderr, then fails quoting a database URL.
HANDLER = f"""
import sys, threading, warnings

def handle(event):
    warnings.warn("a library's warning", UserWarning)
    sys.stderr.write("a library writes its own line\\n")
    doomed = threading.Thread(target=lambda: 1 / 0, name="doomed")
    doomed.start()
    doomed.join()
    raise RuntimeError("cannot reach postgresql://app:{DB_PASSWORD}@db.internal/app")
"""


def test_json_lines_without_secrets(
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
) -> None:
    rp = receiver_process(
        f"sqlite:///{tmp_path / 's.db'}",
        args=("--log-format", "json"),
        extra_env={"GP_WEBHOOK_API_KEY": SECRET},
    )
    json_ct = {"content-type": "application/json"}
    good = event()
    ok = httpx.post(
        rp.url, content=wire(good), headers={**json_ct, "authorization": f"Bearer {SECRET}"}
    )
    assert ok.status_code == 200
    assert (
        httpx.post(
            rp.url, content=wire(event()), headers={**json_ct, "authorization": f"Bearer {WRONG}"}
        ).status_code
        == 401
    )
    # A body quoting the secret and a bad actionId: refused, and neither is logged.
    bad = httpx.post(
        rp.url,
        content=wire(event("{" + SECRET + "}")),
        headers={**json_ct, "authorization": f"Bearer {SECRET}"},
    )
    assert bad.status_code == 400
    rp.terminate()

    text = rp.log.read_text()
    assert SECRET not in text and WRONG not in text
    # No header: neither its name nor a "Bearer <token>" value ("auth BEARER" names the kind).
    assert "authorization" not in text.lower()
    assert re.search(r"(?i)bearer\s+[^\s,;)]*secret", text) is None
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert records, "the receiver logged nothing"
    for record in records:
        assert {"time", "level", "event"} <= record.keys()
        assert record["time"].endswith("Z")
    events = [r["event"] for r in records]
    assert "listening" in events
    refused = [r for r in records if r["event"] == "delivery_refused"]
    assert sorted(r["status"] for r in refused) == [400, 401]
    assert all(isinstance(r["latency_ms"], float) and r["latency_ms"] >= 0 for r in refused)


def test_formatter_blanks_credentials_in_any_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GP_WEBHOOK_PASSWORD", "pw-0123456789")
    formatter = JsonFormatter()
    record = logging.LogRecord(
        "gptools.webhooks",
        logging.WARNING,
        __file__,
        1,
        "header was Authorization: Basic dXNlcjpwYXNz, pw %s, store postgresql://u:%s@h/d",
        ("pw-0123456789", "db-pass-42"),
        None,
    )
    record.status = 401
    record.actionId = "6a1f7e4e-8c2a-4c1e-9d7b-0b7d2f6e9a10"
    record.latency_ms = 1.5
    record.request_id = b"req-1"
    line = json.loads(formatter.format(record))
    for secret in ("dXNlcjpwYXNz", "pw-0123456789", "db-pass-42"):
        assert secret not in line["message"]
    assert line["status"] == 401 and line["latency_ms"] == 1.5
    assert line["actionId"] == "6a1f7e4e-8c2a-4c1e-9d7b-0b7d2f6e9a10"
    assert line["level"] == "warning" and line["request_id"] == "req-1"
    assert line["event"] == "log_message" and isinstance(line["pid"], int)


@pytest.mark.parametrize(
    ("text", "logged"),
    [
        ("Authorization: Basic dTpw", "Authorization: Basic ***"),
        # Unlike a server's message (gptools._secrets.blank_credentials), a log line blanks
        # whatever follows the scheme, a word too: it loses nothing by it.
        ("sent bearer abc; basic arithmetic", "sent bearer ***; basic ***"),
        # The whole value, up to a space, a quote, a comma or a semicolon.
        ('token "Bearer p@ss!w(rd)", then', 'token "Bearer ***", then'),
    ],
)
def test_the_scrub_blanks_every_authorization_value(
    text: str, logged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the rule of form: no secret an earlier receiver of this process remembered.
    monkeypatch.setattr(logs_module, "_known_secrets", [])
    assert scrub(text) == logged


def test_a_short_remembered_secret_is_blanked_only_where_it_stands_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A receiver with the key "u" and the password "pass1234": the short one blanked inside
    # "RuntimeError" would mangle every error line of the process.
    monkeypatch.setattr(logs_module, "_known_secrets", [])
    logs_module.remember_secrets(["u", "pass1234"])
    assert scrub("RuntimeError: key u, password pass1234xyz (u)") == (
        "RuntimeError: key ***, password ***xyz (***)"
    )


# -- request ids -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "sent",
    [b"abc-123", b"0f8fad5b-d9cb-469f-a165-70867728950e", b"A" * 128, b"a.b_c:d+e/f=g@h"],
)
def test_a_sane_request_id_is_kept(sent: bytes) -> None:
    assert request_id(sent) == sent


@pytest.mark.parametrize(
    "sent", [None, b"", b"A" * 129, b"has space", b'quote"', b"new\nline", b"\xff\xfe", b"{x}"]
)
def test_any_other_gets_a_new_one(sent: bytes | None) -> None:
    made = {request_id(sent) for _ in range(1000)}
    assert len(made) == 1000
    for rid in made:
        assert rid != sent and re.fullmatch(rb"[0-9a-f]{12}-[0-9a-f]+", rid), rid


# -- every process, every line ----------------------------------------------------------


def _lines(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        record = json.loads(line)  # every line: one JSON object, or this fails
        assert isinstance(record, dict), (number, line)
        records.append(record)
    return records


def _wait_for(path: Path, event_name: str, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in _lines(path) if r["event"] == event_name]
        if found:
            return found[0]
        assert time.monotonic() < deadline, f"no {event_name} line: {path.read_text()}"
        time.sleep(0.05)  # polling the log with a deadline


def test_every_line_of_every_process_is_json(tmp_path: Path) -> None:
    (tmp_path / "noisy_handler.py").write_text(HANDLER)
    db = tmp_path / "s.db"
    port, metrics_port = free_port(), free_port()
    stderr, stdout = tmp_path / "stderr.log", tmp_path / "stdout.log"
    env = {
        **os.environ,
        "GP_WEBHOOK_API_KEY": SECRET,
        "PYTHONPATH": str(tmp_path),
        "TMPDIR": str(tmp_path),
    }
    with stderr.open("wb") as err, stdout.open("wb") as out:
        proc = start_gptools(
            *("webhooks", "serve", "--auth", "bearer", "--store", f"sqlite:///{db}"),
            *("--port", str(port), "--workers", "2", "--metrics-port", str(metrics_port)),
            *("--log-format", "json", "--handler", "noisy_handler:handle"),
            stdout=out,
            stderr=err,
            env=env,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    url = base + spec.DEFAULT_WEBHOOK_PATH
    auth = {**JSON, "authorization": f"Bearer {SECRET}"}
    try:
        wait_until_ready(proc, f"{base}/healthz", stderr, timeout=60)
        with httpx.Client(timeout=10) as http:
            body = wire(event())
            stored = http.post(url, content=body, headers={**auth, "x-request-id": "req-stored"})
            assert stored.status_code == 200
            assert stored.headers["x-request-id"] == "req-stored"
            dup = http.post(url, content=body, headers=auth)
            assert dup.json()["status"] == "duplicate"
            assert re.fullmatch(r"[0-9a-f]{12}-[0-9a-f]+", dup.headers["x-request-id"])
            refused_id, invalid_id = str(uuid.uuid4()), str(uuid.uuid4())
            insane = "x" * 300
            refused = http.post(
                url, content=wire(event(refused_id)), headers={**JSON, "x-request-id": insane}
            )
            assert refused.status_code == 401 and refused.headers["x-request-id"] != insane
            nan = wire(event(invalid_id)).replace(b'"bet":2.10', b'"bet":NaN')
            invalid = http.post(url, content=nan, headers={**auth, "x-request-id": "req-422"})
            assert (invalid.status_code, invalid.headers["x-request-id"]) == (422, "req-422")
            others = [
                http.post(base + "/elsewhere", content=body, headers=auth),
                http.get(url, headers=auth),
                http.post(url, content=b"x" * (spec.WEBHOOK_MAX_BODY_BYTES + 1), headers=auth),
                http.post(url, content=body, headers={**auth, "content-type": "text/plain"}),
                http.post(url, content=b'{"roundId": "R-1",', headers=auth),
            ]
            assert [r.status_code for r in others] == [404, 405, 413, 415, 400]
            scrape = httpx.get(
                f"http://127.0.0.1:{metrics_port}/metrics", headers={"x-request-id": "scrape-1"}
            )
            assert (scrape.status_code, scrape.headers["x-request-id"]) == (200, "scrape-1")
            _wait_for(stderr, "handler_failed")
            # A store error: another connection holds SQLite's write lock past the time-out.
            lock = sqlite3.connect(db, isolation_level=None)
            try:
                lock.execute("BEGIN IMMEDIATE")
                late_id = str(uuid.uuid4())
                late = http.post(url, content=wire(event(late_id)), headers=auth)
                assert late.status_code == 503
                _wait_for(stderr, "store_write_failed")
            finally:
                lock.execute("ROLLBACK")
                lock.close()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise

    assert stdout.read_text() == ""
    text = stderr.read_text()
    assert SECRET not in text and DB_PASSWORD not in text and insane not in text
    records = _lines(stderr)
    for record in records:
        assert {"time", "level", "logger", "pid", "event", "message"} <= record.keys(), record
        assert record["event"] in EVENTS, record
    assert len({r["pid"] for r in records}) >= 3  # serve and its two workers
    events = {r["event"] for r in records}
    assert {
        "listening", "server_process_started", "worker_ready", "delivery_refused",
        "store_unavailable", "store_write_failed", "handler_failed", "python_warning",
        "stderr_output", "thread_crashed", "signal_received", "shutdown_complete",
        "parent_process_stopping",
    } <= events  # fmt: skip
    # A line about a request carries its id; a delivery's, the actionId its body names.
    about_requests = [r for r in records if "status" in r]
    assert about_requests and all("request_id" in r for r in about_requests)
    by_id = {r["request_id"]: r for r in about_requests}
    assert by_id[refused.headers["x-request-id"]]["actionId"] == refused_id
    assert by_id["req-422"]["actionId"] == invalid_id
    assert by_id[late.headers["x-request-id"]]["actionId"] == late_id
    assert by_id[late.headers["x-request-id"]]["event"] == "store_unavailable"
    assert sorted(r["status"] for r in records if r["event"] == "delivery_refused") == sorted(
        [401, 422, 404, 405, 413, 415, 400]
    )


def test_a_failure_to_start_is_one_json_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GP_WEBHOOK")}
    done = run_gptools(
        *("webhooks", "serve", "--auth", "bearer", "--store", f"sqlite:///{tmp_path / 's.db'}"),
        *("--port", "0", "--log-format", "json"),
        env=env,
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    record = json.loads(line)
    assert record["event"] == "serve_failed" and "GP_WEBHOOK_API_KEY" in record["message"]


# -- the metrics port ----------------------------------------------------------------------


def test_a_failed_scrape_on_the_metrics_port_is_a_500_and_a_log_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    def broken(*args: Any, **kwargs: Any) -> tuple[bytes, str]:
        raise RuntimeError(f"store gone: postgresql://u:{DB_PASSWORD}@h/d")

    monkeypatch.setattr(metrics_module, "render", broken)
    port = free_port()
    server = serve_metrics("127.0.0.1", port)
    try:
        with caplog.at_level(logging.ERROR, logger="gptools.webhooks"):
            answer = httpx.get(
                f"http://127.0.0.1:{port}/metrics", headers={"x-request-id": "scrape-9"}
            )
    finally:
        server.shutdown()
        server.server_close()
    assert (answer.status_code, answer.headers["x-request-id"]) == (500, "scrape-9")
    (record,) = [r for r in caplog.records if getattr(r, "event", None) == "metrics_scrape_failed"]
    assert record.request_id == b"scrape-9"  # type: ignore[attr-defined]
    assert DB_PASSWORD not in JsonFormatter().format(record)
    assert "Traceback" not in capfd.readouterr().err


# -- a handler's exception text ---------------------------------------------------------------


def test_a_handlers_exception_is_scrubbed_in_the_log_the_store_and_the_cli(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def handler(_: object) -> None:
        raise RuntimeError(
            f"cannot reach postgresql://app:{DB_PASSWORD}@db.internal/app "
            f"(called with key {SECRET}, password={DB_PASSWORD}x)"
        )

    url = f"sqlite:///{tmp_path / 's.db'}"
    receiver = WebhookReceiver(
        url,
        auth=ReceiverAuth.bearer(SECRET),
        handler=handler,
        queue_options={"max_attempts": 2, "first_delay": timedelta(milliseconds=10)},
    )
    action_id = str(uuid.uuid4())
    with caplog.at_level(logging.INFO, logger="gptools.webhooks"), serve_in_thread(receiver) as srv:
        answer = httpx.post(
            srv.url,
            content=wire(event(action_id)),
            headers={**JSON, "authorization": f"Bearer {SECRET}"},
        )
        assert answer.status_code == 200
        deadline = time.monotonic() + 30
        while not _dead(url):
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.05)  # polling the store with a deadline
    logged = "\n".join(JsonFormatter().format(r) for r in caplog.records)
    stored = (
        sqlite3.connect(tmp_path / "s.db")
        .execute("SELECT last_error FROM webhook_actions")
        .fetchone()[0]
    )
    listed = run_gptools("webhooks", "dead-letters", "--store", url, "--json")
    assert listed.returncode == 0, listed.stderr
    (letter,) = json.loads(listed.stdout)["dead_letters"]
    for text in (logged, stored, letter["last_error"], caplog.text):
        assert DB_PASSWORD not in text and SECRET not in text, text
    assert letter["last_error"] == stored
    assert stored.startswith("RuntimeError: cannot reach postgresql://app:***@db.internal/app")
    lines = [r for r in caplog.records if getattr(r, "actionId", None) == action_id]
    events = [getattr(r, "event", None) for r in lines]
    assert [e for e in events if e != "first_seen"] == ["handler_failed", "action_dead_lettered"]
    # The contract watcher's lines (written in the background) name the action too: the
    # document names no currency or game, so a new store first sees the body's.
    firsts = [r for r in lines if getattr(r, "event", None) == "first_seen"]
    seen = [(getattr(r, "kind", None), getattr(r, "value", None)) for r in firsts]
    assert sorted(seen) == [("currency", "EUR"), ("game", "golden-pharaoh")]


def _dead(url: str) -> bool:
    conn = open_store(url).connect()
    try:
        return conn.queue_counts().dead == 1
    finally:
        conn.close()


def test_an_unexpected_error_is_a_500_with_the_request_id_in_answer_and_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: Any) -> None:
        raise RuntimeError("a bug")

    receiver = WebhookReceiver(f"sqlite:///{tmp_path / 's.db'}", auth=ReceiverAuth.bearer(SECRET))
    monkeypatch.setattr(receiver, "_http", broken)
    caplog.set_level(logging.ERROR, logger="gptools.webhooks")
    with serve_in_thread(receiver) as srv:
        answer = httpx.post(srv.url, content=b"{}", headers={"x-request-id": "req-bug"})
    assert (answer.status_code, answer.headers["x-request-id"]) == (500, "req-bug")
    (record,) = [r for r in caplog.records if getattr(r, "event", None) == "request_failed"]
    assert record.request_id == b"req-bug"  # type: ignore[attr-defined]
    assert record.exc_info is not None
