"""HTTPS (issue 14 item 2): ``gptools webhooks serve --ssl-certfile/--ssl-keyfile`` (or the
``GP_WEBHOOK_SSL_*`` variables) serves TLS with a certificate from a throw-away CA
(``trustme``); clients verify it, and the sandbox's dispatcher delivers to it verifying
against the CA bundle it is given."""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trustme

from gptools.webhooks import open_store
from tests._support.cli import run_gptools
from tests.webhooks.conftest import ReceiverProcess, event, wire

KEY = "test-key"  # what the receiver_process fixture sets as GP_WEBHOOK_API_KEY
HEADERS = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}


@pytest.fixture
def tls(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(CA bundle, server certificate chain, server key) as PEM files for 127.0.0.1."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = (tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem")
    ca.cert_pem.write_to_path(str(paths[0]))
    cert.private_key_and_cert_chain_pem.write_to_path(str(paths[1]))
    cert.private_key_pem.write_to_path(str(paths[2]))
    return paths


def test_serve_https_from_arguments_and_deliver_verified(
    tmp_path: Path,
    tls: tuple[Path, Path, Path],
    receiver_process: Callable[..., ReceiverProcess],
) -> None:
    ca, cert, key = tls
    verified = ssl.create_default_context(cafile=str(ca))
    store = f"sqlite:///{tmp_path / 's.db'}"
    rp = receiver_process(
        store,
        args=("--ssl-certfile", str(cert), "--ssl-keyfile", str(key)),
        scheme="https",
        verify=verified,
    )
    assert "https://127.0.0.1:" in rp.log.read_text()

    body = event()
    r = httpx.post(rp.url, content=wire(body), headers=HEADERS, verify=verified)
    assert r.status_code == 200 and r.json()["status"] == "accepted"
    # A client that trusts only the system's CAs refuses the throw-away CA's certificate,
    # and plain HTTP is not served on the port.
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.post(rp.url, content=wire(event()), headers=HEADERS)
    with pytest.raises(httpx.TransportError):
        httpx.post(rp.url.replace("https://", "http://"), content=wire(event()), headers=HEADERS)

    env = {**os.environ, "GP_WEBHOOK_API_KEY": KEY}
    done = run_gptools(
        "sandbox",
        "deliver",
        "--url",
        rp.url,
        "-n",
        "20",
        "--auth",
        "bearer",
        "--ca-bundle",
        str(ca),
        "--json",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["delivered"] == 20 and report["statuses"] == {"200": 20}
    # Without the bundle the dispatcher verifies against the system's CAs: nothing arrives,
    # and the command says why and fails.
    refused = run_gptools(
        "sandbox",
        "deliver",
        "--url",
        rp.url,
        "-n",
        "3",
        "--auth",
        "bearer",
        "--time-scale",
        "1e9",
        "--json",
        env=env,
    )
    assert refused.returncode == 1, refused.stderr
    assert json.loads(refused.stdout)["delivered"] == 0
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr, refused.stderr

    conn = open_store(store).connect()
    try:
        assert len(conn.action_ids()) == 21
    finally:
        conn.close()


def test_serve_https_from_environment(
    tmp_path: Path,
    tls: tuple[Path, Path, Path],
    receiver_process: Callable[..., ReceiverProcess],
) -> None:
    ca, cert, key = tls
    verified = ssl.create_default_context(cafile=str(ca))
    rp = receiver_process(
        f"sqlite:///{tmp_path / 's.db'}",
        scheme="https",
        verify=verified,
        extra_env={"GP_WEBHOOK_SSL_CERTFILE": str(cert), "GP_WEBHOOK_SSL_KEYFILE": str(key)},
    )
    r = httpx.post(rp.url, content=wire(event()), headers=HEADERS, verify=verified)
    assert r.status_code == 200


def test_serve_refuses_half_or_wrong_tls_configuration(
    tmp_path: Path,
    tls: tuple[Path, Path, Path],
) -> None:
    ca, cert, key = tls
    env = {**os.environ, "GP_WEBHOOK_API_KEY": KEY}
    store = f"sqlite:///{tmp_path / 's.db'}"
    half = run_gptools(
        "webhooks",
        "serve",
        "--auth",
        "bearer",
        "--store",
        store,
        "--ssl-certfile",
        str(cert),
        env=env,
    )
    assert half.returncode == 2 and "go together" in half.stderr
    assert "Traceback" not in half.stderr
    # The CA's certificate is not the key's: one line, not a traceback.
    wrong = run_gptools(
        "webhooks",
        "serve",
        "--auth",
        "bearer",
        "--store",
        store,
        "--ssl-certfile",
        str(ca),
        "--ssl-keyfile",
        str(key),
        env=env,
    )
    assert wrong.returncode == 2 and "cannot use the TLS certificate" in wrong.stderr
    assert "Traceback" not in wrong.stderr
