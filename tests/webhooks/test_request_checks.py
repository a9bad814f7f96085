"""Headers the receiver cannot read one way only, and what ``auth_ok`` means (issue 34,
item 10): two ``Authorization`` or two ``Content-Type`` headers are answered 400 before
authentication (no longer "the last one wins"), within the refusals' row budget; a row's
``auth_ok`` is true only where credentials were checked and held."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gptools import spec
from gptools.webhooks import ReceiverAuth, WebhookReceiver
from tests.webhooks.conftest import ThreadServer, event, log_rows, serve_in_thread, wire

KEY = "request-checks-key"
GOOD = ("authorization", f"Bearer {KEY}")
JSON_TYPE = ("content-type", "application/json")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ThreadServer, Path]]:
    db = tmp_path / "s.db"
    receiver = WebhookReceiver(
        f"sqlite:///{db}", auth=ReceiverAuth.bearer(KEY), max_body_bytes=2048
    )
    with serve_in_thread(receiver) as srv:
        yield srv, db


# (case, headers): each header the receiver reads once, twice; the last one valid, as
# "the last one wins" accepted it.
TWICE = [
    ("authorization, the second valid", [("authorization", "Bearer wrong"), GOOD, JSON_TYPE]),
    ("authorization, both valid", [GOOD, GOOD, JSON_TYPE]),
    ("content-type, the second valid", [GOOD, ("content-type", "text/plain"), JSON_TYPE]),
    ("content-type, both valid", [GOOD, JSON_TYPE, JSON_TYPE]),
]


@pytest.mark.parametrize(("case", "headers"), TWICE, ids=[c for c, _ in TWICE])
def test_a_repeated_header_is_a_bad_request(
    server: tuple[ThreadServer, Path], case: str, headers: list[tuple[str, str]]
) -> None:
    srv, db = server
    body = event()
    answer = httpx.post(srv.url, content=wire(body), headers=headers)
    assert answer.status_code == 400, answer.text
    name = case.split(",")[0]
    assert answer.json() == {"error": "duplicate_header", "reason": f"more than one {name}"}
    (row,) = log_rows(f"sqlite:///{db}")
    assert row["status"] == 400
    assert row["error"] == f"duplicate_header: more than one {name}"
    assert row["auth_ok"] is False  # never checked
    assert row["action_id"] == body["actionId"]  # what a refusal row keeps
    scraped = httpx.get(srv.base_url + "/metrics").text
    assert 'gptools_webhook_deliveries_total{outcome="duplicate_header",status="400"}' in scraped
    # Once each, the same request is stored.
    assert httpx.post(srv.url, content=wire(body), headers=[GOOD, JSON_TYPE]).status_code == 200


def test_a_repeated_header_comes_after_the_size_check(server: tuple[ThreadServer, Path]) -> None:
    srv, db = server
    big = wire(event(roundId="r" * 4096))
    answer = httpx.post(srv.url, content=big, headers=[GOOD, GOOD, JSON_TYPE])
    assert answer.status_code == 413
    assert [r["status"] for r in log_rows(f"sqlite:///{db}")] == [413]


def test_repeated_headers_share_the_refusals_row_budget(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    receiver = WebhookReceiver(
        f"sqlite:///{db}", auth=ReceiverAuth.bearer(KEY), refused_rows_per_second=0
    )
    with serve_in_thread(receiver) as srv:
        for _ in range(5):
            answer = httpx.post(srv.url, content=wire(event()), headers=[GOOD, GOOD, JSON_TYPE])
            assert answer.status_code == 400
    # No row each: one summary row (written at shutdown) counts them.
    (row,) = log_rows(f"sqlite:///{db}")
    assert row["status"] == spec.WEBHOOK_SUMMARY_STATUS
    summary = json.loads(row["body"])
    assert (summary["suppressed"], summary["reason"], summary["status"]) == (
        5,
        spec.WEBHOOK_DUPLICATE_HEADER,
        400,
    )


def test_auth_ok_only_where_credentials_were_checked_and_held(
    server: tuple[ThreadServer, Path],
) -> None:
    srv, db = server
    # Refused before authentication, with good credentials: never checked.
    assert httpx.get(srv.url, headers=[GOOD]).status_code == 405
    assert httpx.post(srv.base_url + "/x", content=b"{}", headers=[GOOD]).status_code == 404
    big = wire(event(roundId="r" * 4096))
    assert httpx.post(srv.url, content=big, headers=[GOOD, JSON_TYPE]).status_code == 413
    # Checked: refused, then held (whatever came after).
    assert httpx.post(srv.url, content=wire(event()), headers=[JSON_TYPE]).status_code == 401
    assert httpx.post(srv.url, content=wire(event()), headers=[GOOD]).status_code == 415
    assert httpx.post(srv.url, content=b"{", headers=[GOOD, JSON_TYPE]).status_code == 400
    assert httpx.post(srv.url, content=wire(event()), headers=[GOOD, JSON_TYPE]).status_code == 200
    assert [(r["status"], r["auth_ok"]) for r in log_rows(f"sqlite:///{db}")] == [
        (405, False),
        (404, False),
        (413, False),
        (401, False),
        (415, True),
        (400, True),
        (200, True),
    ]
