"""Credentials (issue 34, items 4 and 10): several valid at once, each with an id; every
request compared with all of them; a credential no request could match refused at start
(one line, exit 2); the credentials file owner-only, like an SSH key."""

from __future__ import annotations

import base64
import hmac
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gptools.webhooks import AuthConfigError, ReceiverAuth, WebhookReceiver, open_store
from tests._support.cli import run_gptools
from tests.webhooks.conftest import JSON, event, serve_in_thread, wire


def _basic(user: str, password: str) -> bytes:
    return b"Basic " + base64.b64encode(f"{user}:{password}".encode())


def _keys(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "keys"
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


# (kind, environment, what the one line names): credentials no request could carry.
UNMATCHABLE = [
    ("bearer", {"GP_WEBHOOK_API_KEY": "s3cr3t "}, "whitespace"),
    ("bearer", {"GP_WEBHOOK_API_KEY": "\ts3cr3t"}, "whitespace"),
    ("bearer", {"GP_WEBHOOK_API_KEY": " "}, "empty"),
    ("bearer", {"GP_WEBHOOK_API_KEY": "s3cr\x7ft"}, "control or non-ASCII"),
    ("bearer", {"GP_WEBHOOK_API_KEY": "s3cr\u00e9t"}, "control or non-ASCII"),
    ("basic", {"GP_WEBHOOK_USERNAME": "gp:sender", "GP_WEBHOOK_PASSWORD": "pw-secret"}, "':'"),
    ("basic", {"GP_WEBHOOK_USERNAME": "gp\x01", "GP_WEBHOOK_PASSWORD": "pw-secret"}, "control"),
]


@pytest.mark.parametrize(("kind", "variables", "named"), UNMATCHABLE)
def test_serve_refuses_a_credential_no_request_could_match(
    tmp_path: Path, kind: str, variables: dict[str, str], named: str
) -> None:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GP_WEBHOOK_API_KEY", "GP_WEBHOOK_USERNAME", "GP_WEBHOOK_PASSWORD"))
    }
    done = run_gptools(
        *("webhooks", "serve", "--auth", kind, "--port", "0"),
        *("--store", f"sqlite:///{tmp_path / 's.db'}"),
        env={**environ, **variables},
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert named in lines[0] and "no delivery could match it" in lines[0]
    assert "GP_WEBHOOK_" in lines[0] and "credential 'env'" in lines[0]
    for secret in variables.values():
        assert not secret.strip() or secret.strip() not in lines[0]
    assert not (tmp_path / "s.db").exists()  # nothing started


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: ReceiverAuth.bearer("k "), "whitespace"),
        (lambda: ReceiverAuth.bearer(" "), "empty"),
        (lambda: ReceiverAuth.bearer("k\r\nx"), "control or non-ASCII"),
        (lambda: ReceiverAuth.basic("a:b", "pw"), "':'"),
        (lambda: ReceiverAuth.basic("a", "p\nw"), "control"),
        (lambda: ReceiverAuth.bearer("k", credential_id="has space"), "credential id"),
        (lambda: ReceiverAuth.bearer("k", credential_id="x" * 33), "credential id"),
    ],
)
def test_python_callers_get_the_same_rules(make: object, named: str) -> None:
    with pytest.raises(AuthConfigError, match=named):
        make()  # type: ignore[operator]


def test_spaces_inside_keys_and_around_basic_secrets_can_travel() -> None:
    # Inside a key, and anywhere in a BASIC pair (base64 carries it intact), they arrive.
    assert ReceiverAuth.bearer("a b").check(b"Bearer a b")
    pair = ReceiverAuth.basic(" gp ", " p w ")
    assert pair.check(_basic(" gp ", " p w "))
    assert not pair.check(_basic("gp", "p w"))


def test_several_credentials_each_matched_by_its_id(tmp_path: Path) -> None:
    keys = _keys(tmp_path, "# rotation of 2025-12\n2025-06 old-key\n\n2025-12  new-key\r\n")
    auth = ReceiverAuth.from_env("bearer", {"GP_WEBHOOK_API_KEY": "env-key"}, credentials_file=keys)
    assert auth.credential_ids == ("env", "2025-06", "2025-12")
    assert auth.match(b"Bearer old-key") == "2025-06"
    assert auth.match(b"Bearer new-key") == "2025-12"
    assert auth.match(b"Bearer env-key") == "env"
    assert auth.match(b"Bearer other") is None
    assert auth.match(None) is None
    for secret in ("old-key", "new-key", "env-key"):
        assert secret not in repr(auth)
    # Without the variable, the file alone.
    only_file = ReceiverAuth.from_env("bearer", {}, credentials_file=keys)
    assert only_file.credential_ids == ("2025-06", "2025-12")
    basic = ReceiverAuth.from_env(
        "basic", {}, credentials_file=_keys(tmp_path, "a gp:pw-a\nb gp:pw:b\n")
    )
    assert basic.match(_basic("gp", "pw-a")) == "a"
    assert basic.match(_basic("gp", "pw:b")) == "b"  # the first ':' separates
    assert basic.match(_basic("gp", "pw")) is None
    combined = ReceiverAuth.any_of(
        ReceiverAuth.bearer("k1", credential_id="one"),
        ReceiverAuth.bearer("k2", credential_id="two"),
    )
    assert combined.match(b"Bearer k2") == "two"


def test_every_credential_is_compared_whichever_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth = ReceiverAuth.from_env(
        "bearer", {}, credentials_file=_keys(tmp_path, "a key-a\nb key-b\nc key-c\n")
    )
    compared: list[tuple[int, int]] = []
    compare = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append((len(a), len(b)))
        return compare(a, b)

    monkeypatch.setattr("gptools.webhooks._auth.hmac.compare_digest", counting)
    for header in (b"Bearer key-a", b"Bearer key-c", b"Bearer nearly-key-a", b"Bearer k"):
        compared.clear()
        auth.match(header)
        # All three, and digests of one length: neither which credential nor how long the
        # secrets are shows in the time taken.
        assert compared == [(32, 32)] * 3


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("a key-a\nb key-a\n", "same secret"),
        ("a key-a\na key-b\n", "given twice"),
        ("a key-a \n", "ends with whitespace"),
        ("only-an-id\n", "no secret"),
        ("bad/id key\n", "credential id"),
        ("a \u00e9t\u00e9\n", "control or non-ASCII"),
        ("".join(f"k{i} key-{i}\n" for i in range(17)), "at most 16"),
    ],
)
def test_bad_credentials_files_are_refused_naming_the_line(
    tmp_path: Path, text: str, named: str
) -> None:
    keys = _keys(tmp_path, text)
    with pytest.raises(AuthConfigError, match=named) as caught:
        ReceiverAuth.from_env("bearer", {}, credentials_file=keys)
    assert "key-a" not in str(caught.value) and "t\u00e9" not in str(caught.value)


def test_the_credentials_file_must_be_owner_only_and_bounded(tmp_path: Path) -> None:
    for mode in (0o644, 0o640, 0o604, 0o620):
        keys = _keys(tmp_path, "a key-a\n", mode)
        with pytest.raises(AuthConfigError, match=f"{mode:04o}.*chmod 600"):
            ReceiverAuth.from_env("bearer", {}, credentials_file=keys)
    with pytest.raises(AuthConfigError, match="cannot read"):
        ReceiverAuth.from_env("bearer", {}, credentials_file=tmp_path / "missing")
    with pytest.raises(AuthConfigError, match="not a regular file"):
        ReceiverAuth.from_env("bearer", {}, credentials_file=tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(AuthConfigError, match="not a regular file"):
        ReceiverAuth.from_env("bearer", {}, credentials_file=fifo)
    big = _keys(tmp_path, "# " + "x" * 70_000 + "\na key-a\n")
    with pytest.raises(AuthConfigError, match="larger than"):
        ReceiverAuth.from_env("bearer", {}, credentials_file=big)
    binary = tmp_path / "binary"
    binary.write_bytes(b"a \xff\xfe\n")
    binary.chmod(0o600)
    with pytest.raises(AuthConfigError, match="not UTF-8"):
        ReceiverAuth.from_env("bearer", {}, credentials_file=binary)
    with pytest.raises(AuthConfigError, match="NONE"):
        ReceiverAuth.from_env("none", {}, credentials_file=_keys(tmp_path, "a k\n"))
    empty = _keys(tmp_path, "# no key yet\n")
    with pytest.raises(AuthConfigError, match="needs an API key"):
        ReceiverAuth.from_env("bearer", {}, credentials_file=empty)


@pytest.fixture
def two_keys(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    db = tmp_path / "s.db"
    auth = ReceiverAuth.any_of(
        ReceiverAuth.bearer("old-key", credential_id="metric-old"),
        ReceiverAuth.bearer("new-key", credential_id="metric-new"),
    )
    with serve_in_thread(WebhookReceiver(f"sqlite:///{db}", auth=auth)) as srv:
        yield srv.url, db


def test_the_metric_counts_deliveries_by_credential_id(two_keys: tuple[str, Path]) -> None:
    url, db = two_keys
    for key, n in (("old-key", 2), ("new-key", 3)):
        for _ in range(n):
            r = httpx.post(
                url, content=wire(event()), headers={**JSON, "authorization": f"Bearer {key}"}
            )
            assert r.status_code == 200
    assert httpx.post(url, content=wire(event()), headers=JSON).status_code == 401
    scraped = httpx.get(url.rsplit("/v1/", 1)[0] + "/metrics").text
    counts = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith("gptools_webhook_credential_deliveries_total{")
    }
    # Ids of this test's own: the counter lives as long as the test process.
    assert {k: v for k, v in counts.items() if k.startswith("metric-")} == {
        "metric-old": 2.0,
        "metric-new": 3.0,
    }
    assert "old-key" not in scraped and "new-key" not in scraped
    conn = open_store(f"sqlite:///{db}").connect()
    try:
        rows = list(conn.iter_log())
    finally:
        conn.close()
    assert [r["auth_ok"] for r in rows] == [True] * 5 + [False]
