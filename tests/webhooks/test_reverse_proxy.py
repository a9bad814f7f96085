"""The operations guide's nginx example (*Deployment*, docs/guides/operations.md), run as
written in front of a real ``gptools webhooks serve`` (only its ports and certificate
paths changed): TLS ends at nginx, a delivery's row names the sender's address, not
nginx's, one request id names a request in the answer and in the receiver's log line, a
body over the receiver's limit gets the receiver's 413 (with its row), not nginx's, and
what is not a delivery or readiness stays behind nginx."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import trustme

from gptools import spec
from tests._support.tools import installed
from tests.webhooks.conftest import JSON, ReceiverProcess, event, free_port, wire

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "operations.md"
#: The address the test's client sends from: nginx itself connects from 127.0.0.1.
SENDER = "127.0.0.2"


def _guide_nginx() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("## Deployment")
    end = text.find("\n## ", start + 1)
    (block,) = re.findall(r"^```nginx\n(.*?)^```", text[start:end], re.DOTALL | re.MULTILINE)
    return block


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Callable[[str], int]]:
    """Start nginx with the guide's block (a function of the receiver's port); its port."""
    program = installed("nginx", "ensure-nginx")
    started: list[subprocess.Popen[bytes]] = []
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    cert, key = tmp_path / "proxy.crt", tmp_path / "proxy.key"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem.bytes())

    def start(block: str) -> int:
        port = free_port()
        block = block.replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
        block = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {cert};", block)
        block = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {key};", block)
        temp = {
            f"{kind}_temp_path {tmp_path / kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        }
        conf = tmp_path / "nginx.conf"
        conf.write_text(
            ("user root;\n" if os.geteuid() == 0 else "")
            + f"daemon off;\nworker_processes 1;\npid {tmp_path / 'nginx.pid'};\n"
            + f"error_log {tmp_path / 'error.log'};\nevents {{}}\n"
            + "http {\n"
            + "log_format ids '$remote_addr $request_id $status';\n"
            + f"access_log {tmp_path / 'access.log'} ids;\n"
            + "\n".join(sorted(temp))
            + f"\n{block}\n}}\n"
        )
        proc = subprocess.Popen(
            [program, "-c", str(conf), "-p", str(tmp_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        started.append(proc)
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "error.log").read_text()
            try:
                with httpx.Client(verify=_ca(tmp_path), timeout=2) as http:
                    if http.get(f"https://127.0.0.1:{port}/readyz").status_code == 200:
                        return port
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "error.log").read_text()
            time.sleep(0.05)  # polling nginx with a deadline

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)  # nginx's graceful stop
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _ca(tmp_path: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))


def test_the_guides_nginx_in_front_of_a_receiver(
    tmp_path: Path,
    receiver_process: Callable[..., ReceiverProcess],
    nginx: Callable[[str], int],
) -> None:
    db = tmp_path / "s.db"
    rp = receiver_process(f"sqlite:///{db}", args=("--log-format", "json"))
    block = _guide_nginx().replace("server 127.0.0.1:8000;", f"server 127.0.0.1:{rp.port};")
    port = nginx(block)
    base = f"https://127.0.0.1:{port}"
    url = base + spec.DEFAULT_WEBHOOK_PATH
    auth = {**JSON, "authorization": "Bearer test-key"}
    transport = httpx.HTTPTransport(local_address=SENDER, verify=_ca(tmp_path))
    with httpx.Client(transport=transport, timeout=10) as http:
        stored = [http.post(url, content=wire(event()), headers=auth) for _ in range(5)]
        refused = http.post(url, content=wire(event()), headers=JSON)
        too_large = http.post(url, content=b"x" * (spec.WEBHOOK_MAX_BODY_BYTES + 1), headers=auth)
        hidden = [http.get(base + path) for path in ("/metrics", "/healthz", "/openapi.json")]
    rp.terminate()

    assert [a.status_code for a in stored] == [200] * 5
    ids = [a.headers["x-request-id"] for a in [*stored, refused, too_large]]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids), ids  # nginx's $request_id
    assert len(set(ids)) == len(ids)
    assert refused.status_code == 401
    # The receiver's own 413 (its JSON answer and its row), not nginx's page.
    assert (too_large.status_code, too_large.json()["error"]) == (413, "payload_too_large")
    assert [a.status_code for a in hidden] == [404, 404, 404]

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, remote_addr FROM delivery_log").fetchall()
    assert sorted(rows) == sorted([(200, SENDER)] * 5 + [(401, SENDER), (413, SENDER)])
    lines = [json.loads(line) for line in rp.log.read_text().splitlines()]
    logged = {r["request_id"]: r["status"] for r in lines if r["event"] == "delivery_refused"}
    assert logged == {refused.headers["x-request-id"]: 401, too_large.headers["x-request-id"]: 413}
    access = (tmp_path / "access.log").read_text()
    assert f"{SENDER} {refused.headers['x-request-id']} 401" in access
