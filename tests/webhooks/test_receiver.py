"""The receiver over real loopback HTTP with a real SQLite store: auth, bad bodies, logging,
dedupe, 503 when the store cannot write, health."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from gptools import spec
from gptools.webhooks import ReceiverAuth, SQLiteStore, WebhookReceiver, open_store
from tests.webhooks.conftest import JSON, ThreadServer, event, log_rows, serve_in_thread, wire

KEY = "s3cret-key"
USER, PASSWORD = "gp-sender", "p@ss:word"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


AUTHS = {
    "BEARER": ReceiverAuth.bearer(KEY),
    "BASIC": ReceiverAuth.basic(USER, PASSWORD),
    "NONE": ReceiverAuth.none(),
}

# (auth kind, Authorization header or None, expected status)
AUTH_MATRIX = [
    ("BEARER", f"Bearer {KEY}", 200),
    ("BEARER", f"bearer {KEY}", 200),
    ("BEARER", "Bearer wrong-key", 401),
    ("BEARER", f"Bearer {KEY}x", 401),
    ("BEARER", f"Bearer {KEY[:-1]}", 401),
    ("BEARER", None, 401),
    ("BEARER", "Bearer", 401),
    ("BEARER", "Bearer  " + KEY + " extra", 401),
    ("BEARER", KEY, 401),
    ("BEARER", f"Token {KEY}", 401),
    ("BEARER", _basic(USER, KEY), 401),
    ("BASIC", _basic(USER, PASSWORD), 200),
    ("BASIC", _basic(USER, "wrong"), 401),
    ("BASIC", _basic("someone", PASSWORD), 401),
    ("BASIC", _basic(USER, ""), 401),
    ("BASIC", None, 401),
    ("BASIC", "Basic not-base64!!", 401),
    ("BASIC", "Basic " + base64.b64encode(USER.encode()).decode(), 401),
    ("BASIC", f"Bearer {PASSWORD}", 401),
    ("BASIC", "Basic", 401),
    ("NONE", None, 200),
    ("NONE", "Bearer anything", 200),
]


@pytest.fixture(scope="module")
def auth_servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, tuple[ThreadServer, Path]]]:
    """One receiver per auth kind, shared by the matrix."""
    base = tmp_path_factory.mktemp("auth")
    dbs = {kind: base / f"{kind}.sqlite3" for kind in AUTHS}
    with (
        serve_in_thread(
            WebhookReceiver(f"sqlite:///{dbs['BEARER']}", auth=AUTHS["BEARER"])
        ) as bearer,
        serve_in_thread(WebhookReceiver(f"sqlite:///{dbs['BASIC']}", auth=AUTHS["BASIC"])) as basic,
        serve_in_thread(WebhookReceiver(f"sqlite:///{dbs['NONE']}", auth=AUTHS["NONE"])) as none,
    ):
        yield {
            "BEARER": (bearer, dbs["BEARER"]),
            "BASIC": (basic, dbs["BASIC"]),
            "NONE": (none, dbs["NONE"]),
        }


@pytest.mark.parametrize(("kind", "header", "expected"), AUTH_MATRIX)
def test_auth_matrix(
    auth_servers: dict[str, tuple[ThreadServer, Path]], kind: str, header: str | None, expected: int
) -> None:
    srv, db = auth_servers[kind]
    body = event()
    headers = dict(JSON)
    if header is not None:
        headers["authorization"] = header
    r = httpx.post(srv.url, content=wire(body), headers=headers)
    assert r.status_code == expected, r.text
    if expected == 401:
        assert r.json()["error"] == "unauthorized"
        assert r.headers["www-authenticate"].lower().startswith(kind.lower())
    rows = [row for row in log_rows(f"sqlite:///{db}") if body["actionId"] in row["body"]]
    assert len(rows) == 1
    assert rows[0]["status"] == expected
    assert rows[0]["auth_ok"] is (expected == 200)
    # A refused row keeps the actionId its body names (the provider never retries a 401).
    assert rows[0]["action_id"] == body["actionId"]
    assert KEY not in repr(AUTHS[kind]) and PASSWORD not in repr(AUTHS[kind])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ThreadServer, Path]]:
    db = tmp_path / "store.sqlite3"
    with serve_in_thread(
        WebhookReceiver(f"sqlite:///{db}", auth=ReceiverAuth.bearer(KEY), max_body_bytes=4096)
    ) as srv:
        yield srv, db


AUTH = {"authorization": f"Bearer {KEY}"}
REQUIRED = [
    "roundId",
    "gameId",
    "playerId",
    "timestamp",
    "bet",
    "currencyCode",
    "events",
    "actionId",
]

# (case id, body bytes, content type, expected status, expected text in the reason)
BAD_BODIES: list[tuple[str, bytes, str | None, int, str]] = [
    *[
        (
            f"missing-{field}",
            wire({k: v for k, v in event().items() if k != field}),
            "application/json",
            422,
            field,
        )
        for field in REQUIRED
    ],
    ("roundId-number", wire(event(roundId=12)), "application/json", 422, "roundId"),
    ("gameId-null", b'{"roundId":"R","gameId":null}', "application/json", 422, "gameId"),
    ("playerId-list", wire(event(playerId=["p"])), "application/json", 422, "playerId"),
    ("bet-string", wire(event(bet="2.10")), "application/json", 422, "bet"),
    ("bet-bool", wire(event(bet=True)), "application/json", 422, "bet"),
    ("currency-number", wire(event(currencyCode=978)), "application/json", 422, "currencyCode"),
    ("events-string", wire(event(events="COIN")), "application/json", 422, "events"),
    ("events-numbers", wire(event(events=[1, 2])), "application/json", 422, "events"),
    ("timestamp-number", wire(event(timestamp=1767225600)), "application/json", 422, "timestamp"),
    # A present but non-canonical actionId is a bad request (issue 14): the identity of the
    # delivery is unreadable. tests/webhooks/test_action_id_rule.py has the spellings.
    ("actionId-not-uuid", wire(event(action_id="not-a-uuid")), "application/json", 400, "actionId"),
    ("actionId-number", wire(event(actionId=42)), "application/json", 400, "actionId"),
    (
        "actionId-braces",
        wire(event(action_id="{6a1f7e4e-8c2a-4c1e-9d7b-0b7d2f6e9a10}")),
        "application/json",
        400,
        "canonical",
    ),
    (
        "timestamp-Z",
        wire(event(timestamp="2026-03-02T10:15:30.123456Z")),
        "application/json",
        422,
        "timestamp",
    ),
    (
        "timestamp-offset",
        wire(event(timestamp="2026-03-02T10:15:30.123+01:00")),
        "application/json",
        422,
        "timestamp",
    ),
    ("invalid-json", b'{"roundId": "R-1",', "application/json", 400, "invalid JSON"),
    ("empty", b"", "application/json", 400, "empty body"),
    ("whitespace", b"  \n", "application/json", 400, "empty body"),
    ("not-utf8", b'{"roundId": "\xff\xfe"}', "application/json", 400, "UTF-8"),
    ("json-array", b"[1, 2]", "application/json", 422, "JSON object"),
    ("json-string", b'"hello"', "application/json", 422, "JSON object"),
    ("huge", b'{"x": "' + b"a" * 10_000 + b'"}', "application/json", 413, "4096"),
    ("text-plain", wire(event()), "text/plain", 415, "application/json"),
    ("form", b"a=1", "application/x-www-form-urlencoded", 415, "application/json"),
    ("no-content-type", wire(event()), None, 415, "none"),
]


@pytest.mark.parametrize(
    ("case", "body", "ctype", "expected", "reason"), BAD_BODIES, ids=[c[0] for c in BAD_BODIES]
)
def test_bad_bodies_get_their_4xx_and_a_log_record(
    server: tuple[ThreadServer, Path],
    case: str,
    body: bytes,
    ctype: str | None,
    expected: int,
    reason: str,
) -> None:
    srv, db = server
    headers = dict(AUTH)
    if ctype is not None:
        headers["content-type"] = ctype
    r = httpx.post(srv.url, content=body, headers=headers)
    assert r.status_code == expected, r.text
    assert r.headers["content-type"] == "application/json"
    assert reason in r.json()["reason"], r.json()
    rows = log_rows(f"sqlite:///{db}")
    assert [row["status"] for row in rows] == [expected]
    # The row names its outcome: a refusal before the body is read by its one name
    # (spec.WEBHOOK_REFUSALS: a 413 is "too_large"), a body read and refused "invalid".
    assert rows[0]["error"].split(":")[0] == spec.WEBHOOK_REFUSALS.get(expected, "invalid")
    # A 415 refuses before the body is read as a delivery, yet keeps the actionId it names.
    named = (
        json.loads(body)["actionId"] if body.startswith(b'{"roundId') and expected == 415 else None
    )
    assert rows[0]["action_id"] == named
    if expected != 413:
        assert rows[0]["body"] == body.decode("utf-8", errors="replace")
    conn = open_store(f"sqlite:///{db}").connect()
    assert conn.action_ids() == set()
    conn.close()


#: What the client offers in the huge-body test: far more than the socket buffers of both
#: ends hold (a few MiB on loopback), so how much went out shows how much the server read.
_HUGE_CHUNKS = 64 * 1024  # × 1 KiB = 64 MiB
_READ_AT_MOST_CHUNKS = 16 * 1024  # 16 MiB: the limit (4 KiB) plus every buffer, with room


def test_huge_body_is_refused_without_reading_it_all(server: tuple[ThreadServer, Path]) -> None:
    srv, db = server
    sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal sent
        for _ in range(_HUGE_CHUNKS):  # 1 KiB each, no Content-Length (chunked)
            sent += 1
            yield b"a" * 1024

    # The server answers 413 and closes while the client is still sending: whether the
    # client reads that answer or only the closed connection is a matter of timing, so
    # the refusal is read from the server's own log row (the answer itself is asserted
    # by the next test, on a request the server reads whole).
    with contextlib.suppress(httpx.TransportError):
        httpx.post(srv.url, content=chunks(), headers={**AUTH, **JSON})
    assert sent < _READ_AT_MOST_CHUNKS, f"the client sent {sent} KiB: the server read on"
    rows = log_rows(f"sqlite:///{db}")
    assert [row["status"] for row in rows] == [413]
    assert len(rows[0]["body"]) <= 4096 + 1024


def test_a_chunked_body_one_byte_over_the_limit_is_answered_413(
    server: tuple[ThreadServer, Path],
) -> None:
    srv, db = server
    url = httpx.URL(srv.url)
    body = b"a" * 4097  # the receiver's limit here is 4096 bytes
    head = (
        f"POST {url.path} HTTP/1.1\r\nHost: {url.host}\r\n"
        f"Authorization: {AUTH['authorization']}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        # One write the server reads whole: its answer cannot be lost to a reset.
        sock.sendall(head + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status, _, rest = answer.partition(b"\r\n\r\n")
    assert status.split(b" ", 2)[:2] == [b"HTTP/1.1", b"413"]
    assert json.loads(rest)["error"] == "payload_too_large"
    assert [row["status"] for row in log_rows(f"sqlite:///{db}")] == [413]


def test_wrong_method_and_path_are_refused_and_logged(server: tuple[ThreadServer, Path]) -> None:
    srv, db = server
    assert httpx.get(srv.url, headers=AUTH).status_code == 405
    assert (
        httpx.post(
            srv.base_url + "/other", content=wire(event()), headers={**AUTH, **JSON}
        ).status_code
        == 404
    )
    assert httpx.get(srv.base_url + "/healthz").json() == {
        "status": "ok",
        "live": True,
        "ready": True,
        "store": "ok",
        "loops": {
            "writer": "ok",
            "sync": "ok",
            "maintenance": "ok",
            "store_watch": "ok",
            "spool": "ok",
        },
    }
    assert sorted(row["status"] for row in log_rows(f"sqlite:///{db}")) == [404, 405]


def test_first_delivery_stored_later_ones_are_duplicates(server: tuple[ThreadServer, Path]) -> None:
    srv, db = server
    body = wire(event())
    answers = [httpx.post(srv.url, content=body, headers={**AUTH, **JSON}) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [a.json()["status"] for a in answers] == ["accepted", "duplicate", "duplicate"]
    rows = log_rows(f"sqlite:///{db}")
    assert [r["duplicate"] for r in rows] == [False, True, True]
    assert all(r["latency_ms"] >= 0 for r in rows)
    assert all(r["received_at"].tzinfo is not None for r in rows)
    raw = sqlite3.connect(db).execute("SELECT received_at FROM delivery_log").fetchone()[0]
    assert raw.endswith("Z") and len(raw) == len("2026-03-02T10:15:30.123456Z")


def test_exact_money_digits_are_stored(server: tuple[ThreadServer, Path]) -> None:
    srv, db = server
    body = (
        b'{"roundId":"R","gameId":"g","playerId":"p","timestamp":"2026-01-01T00:00:00.5",'
        b'"bet":0.10,"currencyCode":"KWD","events":["COIN","BONUS"],'
        b'"actionId":"6a1f7e4e-8c2a-4c1e-9d7b-0b7d2f6e9a10"}'
    )
    assert httpx.post(srv.url, content=body, headers={**AUTH, **JSON}).status_code == 200
    assert log_rows(f"sqlite:///{db}")[0]["body"] == body.decode()


def test_locked_store_answers_503_and_never_200(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    store = SQLiteStore(db, busy_timeout=timedelta(milliseconds=100))
    store.connect().close()
    receiver = WebhookReceiver(store, auth=ReceiverAuth.bearer(KEY))
    blocker = sqlite3.connect(db, isolation_level=None)
    with serve_in_thread(receiver) as srv:
        blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock: unwritable
        ids = [str(uuid.uuid4()) for _ in range(10)]
        statuses = [
            httpx.post(
                srv.url, content=wire(event(i)), headers={**AUTH, **JSON}, timeout=10
            ).status_code
            for i in ids
        ]
        refused = httpx.post(srv.url, content=b"{}", headers=JSON, timeout=10).status_code
        blocker.execute("ROLLBACK")
        assert statuses == [503] * 10
        assert refused == 503  # a 401 is not answered before its log record is written
        assert httpx.get(srv.base_url + "/healthz").status_code == 200
        conn = store.connect()
        assert conn.action_ids() == set()
        # Once the lock is gone the provider's retry succeeds.
        again = httpx.post(srv.url, content=wire(event(ids[0])), headers={**AUTH, **JSON})
        assert again.status_code == 200 and again.json()["status"] == "accepted"
        assert conn.action_ids() == {ids[0]}
        conn.close()
    blocker.close()


def test_store_failing_mid_run_answers_503(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    receiver = WebhookReceiver(f"sqlite:///{db}", auth=ReceiverAuth.none())
    with serve_in_thread(receiver) as srv:
        assert httpx.post(srv.url, content=wire(event()), headers=JSON).status_code == 200
        # The tables vanish under the receiver (an operator's mistake): writes fail.
        raw = sqlite3.connect(db)
        raw.execute("DROP TABLE webhook_actions")
        raw.commit()
        raw.close()
        r = httpx.post(srv.url, content=wire(event()), headers=JSON)
        assert r.status_code == 503
        assert r.json()["error"] == "store_unavailable"
        assert r.headers["retry-after"] == "1"


def test_none_auth_warns_at_start_up(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    receiver = WebhookReceiver(f"sqlite:///{tmp_path / 's.db'}", auth=ReceiverAuth.none())
    with caplog.at_level("WARNING", logger="gptools.webhooks"):
        receiver.start()
    receiver.stop()
    assert any("WITHOUT authentication" in r.getMessage() for r in caplog.records)


def test_configuration_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bearer, basic or none"):
        ReceiverAuth.from_env("digest", {})
    with pytest.raises(ValueError, match="GP_WEBHOOK_API_KEY"):
        ReceiverAuth.from_env("bearer", {})
    with pytest.raises(ValueError, match="GP_WEBHOOK_PASSWORD"):
        ReceiverAuth.from_env("basic", {"GP_WEBHOOK_USERNAME": "u"})
    with pytest.raises(ValueError, match="retry window"):
        SQLiteStore(tmp_path / "s.db", retention=timedelta(days=6))
    with pytest.raises(ValueError, match="sqlite:///PATH"):
        open_store("mysql://x")
    assert spec.WEBHOOK_DEDUPE_RETENTION >= spec.WEBHOOK_RETRY_WINDOW
