"""Rotation without loss (issue 34, item 4): SIGHUP to ``gptools webhooks serve``, or
``gptools webhooks reload``, reads the credentials file and the TLS certificate and key
again in every worker, in place: kept-alive connections go on, new handshakes get the new
certificate, and a reload that cannot be used keeps the settings in use."""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import ssl
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trustme

from gptools.errors import ConfigurationError
from gptools.webhooks import open_store
from gptools.webhooks._reload import reload_control
from tests._support.cli import run_gptools
from tests.webhooks.conftest import ReceiverProcess, event, wire

OLD_KEY, NEW_KEY = "old-key-6c1f", "new-key-93ab"


def _replace(path: Path, data: bytes | str, mode: int = 0o600) -> None:
    """Write ``path`` as an operator should: a new file renamed over the old one."""
    partial = path.with_name(path.name + ".new")
    partial.write_bytes(data.encode() if isinstance(data, str) else data)
    partial.chmod(mode)
    os.replace(partial, path)


class Tls:
    """A throw-away CA, two certificates for 127.0.0.1, and the files serve reads."""

    def __init__(self, folder: Path) -> None:
        self.ca = trustme.CA()
        self.old, self.new = self.ca.issue_cert("127.0.0.1"), self.ca.issue_cert("127.0.0.1")
        self.certfile, self.keyfile = folder / "cert.pem", folder / "key.pem"
        self.install(self.old)
        self.context = ssl.create_default_context()
        self.ca.configure_trust(self.context)

    def install(self, cert: trustme.LeafCert, key: trustme.LeafCert | None = None) -> None:
        _replace(self.certfile, cert.cert_chain_pems[0].bytes())
        _replace(self.keyfile, (key or cert).private_key_pem.bytes())

    @staticmethod
    def der(cert: trustme.LeafCert) -> bytes:
        return ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode())

    def served(self, port: int, connections: int = 6) -> set[bytes]:
        """The certificates new connections are handed (several: each worker's, likely)."""
        handed: set[bytes | None] = set()
        for _ in range(connections):
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=self.context, timeout=10)
            try:
                conn.connect()
                assert conn.sock is not None
                handed.add(conn.sock.getpeercert(binary_form=True))
            finally:
                conn.close()
        return handed


class Provider:
    """Threads that deliver continuously, each over one kept-alive HTTPS connection, with
    the key the provider is configured with now (:attr:`key`). Every answer is recorded;
    an exception (a dropped connection) is recorded as an error, and a connection is never
    opened twice."""

    def __init__(self, port: int, tls: Tls, threads: int = 4) -> None:
        self.port, self.tls, self.key = port, tls, OLD_KEY
        self.answers: list[tuple[str, int, str]] = []  # (actionId, status, key used)
        self.errors: list[str] = []
        self.certificates: list[bytes] = []  # each connection's, when it opened
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(random.Random(20260302 + i),), daemon=True)
            for i in range(threads)
        ]

    def __enter__(self) -> Provider:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _run(self, rng: random.Random) -> None:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.tls.context, timeout=10
        )
        conn.connect()
        assert conn.sock is not None
        sock = conn.sock
        with self._lock:
            self.certificates.append(sock.getpeercert(binary_form=True) or b"")
        try:
            while not self._stop.is_set():
                action_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
                key = self.key
                try:
                    conn.request(
                        "POST",
                        "/v1/game-action-events",
                        body=wire(event(action_id)),
                        headers={
                            "authorization": f"Bearer {key}",
                            "content-type": "application/json",
                        },
                    )
                    answer = conn.getresponse()
                    body = answer.read()
                except (OSError, http.client.HTTPException) as exc:
                    with self._lock:
                        self.errors.append(f"{type(exc).__name__}: {exc}")
                    return
                with self._lock:
                    self.answers.append((action_id, answer.status, key))
                    if answer.status != 200 or json.loads(body)["status"] != "accepted":
                        self.errors.append(f"{answer.status} {body[:200]!r} with {key}")
                if conn.sock is not sock:
                    with self._lock:
                        self.errors.append("the connection was opened again")
                    return
                self._stop.wait(0.005)
        finally:
            conn.close()

    def delivered_with(self, key: str) -> int:
        with self._lock:
            return sum(1 for _, status, used in self.answers if status == 200 and used == key)

    def wait_for(self, key: str, more: int, timeout: float = 30.0) -> None:
        """Wait until ``more`` deliveries with ``key`` were acknowledged than now."""
        target = self.delivered_with(key) + more
        deadline = time.monotonic() + timeout
        while self.delivered_with(key) < target:
            assert not self.errors, self.errors[:5]
            assert time.monotonic() < deadline, f"fewer than {more} deliveries with {key}"
            time.sleep(0.02)


def _reload(pid_file: Path) -> dict[str, object]:
    done = run_gptools("webhooks", "reload", "--pid-file", str(pid_file), "--json", timeout=60)
    document: dict[str, object] = json.loads(done.stdout)
    document["exit"] = done.returncode
    document["stderr"] = done.stderr
    return document


def _metric(scraped: str, name: str) -> dict[str, float]:
    """The values of one labelled metric, by its (one) label's value."""
    return {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in scraped.splitlines()
        if line.startswith(name + "{")
    }


def _files(folder: Path, old_id: str) -> tuple[Path, Path, str]:
    """The credentials file (holding the old key as ``old_id``), the pid file, the store."""
    keys = folder / "keys"
    _replace(keys, f"{old_id} {OLD_KEY}\n")
    return keys, folder / "serve.pid", f"sqlite:///{folder / 's.db'}"


def _serve(
    receiver_process: Callable[..., ReceiverProcess],
    tls: Tls,
    keys: Path,
    pid_file: Path,
    store: str,
    *args: str,
    workers: int = 1,
) -> ReceiverProcess:
    """``webhooks serve`` over TLS with the credentials file alone and a pid file."""
    return receiver_process(
        store,
        workers=workers,
        args=(
            *("--credentials-file", str(keys), "--pid-file", str(pid_file)),
            *("--ssl-certfile", str(tls.certfile), "--ssl-keyfile", str(tls.keyfile)),
            *args,
        ),
        extra_env={"GP_WEBHOOK_API_KEY": ""},  # set but empty: no key from the environment
        scheme="https",
        verify=tls.context,
    )


def test_a_key_and_a_certificate_rotated_under_load_lose_no_delivery(
    tmp_path: Path, receiver_process: Callable[..., ReceiverProcess]
) -> None:
    tls, keys, pid_file, store = Tls(tmp_path), *_files(tmp_path, "2025-06")
    rp = _serve(receiver_process, tls, keys, pid_file, store, workers=2)
    with Provider(rp.port, tls) as provider:
        provider.wait_for(OLD_KEY, 40)
        # A file others may read is refused: the old settings stay, deliveries go on.
        _replace(keys, f"2025-06 {OLD_KEY}\n2025-12 {NEW_KEY}\n", mode=0o644)
        refused = _reload(pid_file)
        assert refused["exit"] == 1 and refused["result"] == "failed", refused
        assert "chmod 600" in str(refused["detail"]) and NEW_KEY not in str(refused)
        provider.wait_for(OLD_KEY, 20)
        # 1. add the new key (and renew the certificate), 2. reload.
        keys.chmod(0o600)
        tls.install(tls.new)
        added = _reload(pid_file)
        assert (added["exit"], added["result"], added["workers"]) == (0, "ok", 2), added
        assert added["credentials"] == ["2025-06", "2025-12"] and added["tls"] is True
        assert tls.served(rp.port) == {Tls.der(tls.new)}
        # 3. the provider switches to the new key; 4. the metric shows it in use.
        provider.key = NEW_KEY
        provider.wait_for(NEW_KEY, 40)
        # 5. remove the old key, 6. reload.
        _replace(keys, f"2025-12 {NEW_KEY}\n")
        removed = _reload(pid_file)
        assert (removed["exit"], removed["credentials"]) == (0, ["2025-12"]), removed
        provider.wait_for(NEW_KEY, 20)
        late = httpx.post(
            rp.url,
            content=wire(event()),
            headers={"authorization": f"Bearer {OLD_KEY}", "content-type": "application/json"},
            verify=tls.context,
        )
        assert late.status_code == 401
    assert provider.errors == []
    # The connections opened before the reload kept their certificate to the end.
    assert provider.certificates == [Tls.der(tls.old)] * 4
    sent = [action_id for action_id, _, _ in provider.answers]
    assert len(sent) == len(set(sent)) and {s for _, s, _ in provider.answers} == {200}
    conn = open_store(store).connect()
    try:
        assert conn.action_ids() == set(sent)
        acknowledged = Counter(r["action_id"] for r in conn.iter_log() if r["status"] == 200)
    finally:
        conn.close()
    assert acknowledged == Counter(sent)  # each exactly once
    deadline = time.monotonic() + 10
    while True:
        scraped = httpx.get(rp.base_url + "/metrics", verify=tls.context).text
        used = _metric(scraped, "gptools_webhook_credential_deliveries_total")
        if sum(used.values()) >= len(sent) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert used == {
        "2025-06": provider.delivered_with(OLD_KEY),
        "2025-12": provider.delivered_with(NEW_KEY),
    }
    assert _metric(scraped, "gptools_webhook_config_reloads_total") == {"ok": 2, "failed": 1}
    assert OLD_KEY not in scraped and NEW_KEY not in scraped


def test_one_worker_reloads_on_sighup_and_keeps_its_settings_when_the_new_ones_fail(
    tmp_path: Path, receiver_process: Callable[..., ReceiverProcess]
) -> None:
    tls, keys, pid_file, store = Tls(tmp_path), *_files(tmp_path, "old")
    rp = _serve(receiver_process, tls, keys, pid_file, store, "--log-format", "json")

    def post(key: str) -> int:
        return httpx.post(
            rp.url,
            content=wire(event()),
            headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
            verify=tls.context,
        ).status_code

    # A second receiver on the same pid file is refused before it starts.
    second = run_gptools(
        *("webhooks", "serve", "--auth", "none", "--port", "0", "--pid-file", str(pid_file)),
        *("--store", f"sqlite:///{tmp_path / 'other.db'}"),
        timeout=60,
    )
    assert second.returncode == 2 and "held by a running receiver" in second.stderr
    # A certificate that does not go with its key; a key no request could carry.
    tls.install(tls.new, key=tls.old)
    bad_tls = _reload(pid_file)
    assert bad_tls["exit"] == 1 and "cannot use the TLS certificate" in str(bad_tls["detail"])
    tls.install(tls.new)
    _replace(keys, f"old {OLD_KEY}\nnew {NEW_KEY} \n")
    bad_key = _reload(pid_file)
    assert bad_key["exit"] == 1 and "ends with whitespace" in str(bad_key["detail"])
    assert "reload failed" in str(bad_key["stderr"])
    # Nothing of them was used.
    assert tls.served(rp.port) == {Tls.der(tls.old)}
    assert (post(OLD_KEY), post(NEW_KEY)) == (200, 401)
    # A plain SIGHUP (systemd's ExecReload=kill -HUP) reloads; its answer is in the status.
    _replace(keys, f"new {NEW_KEY}\n")
    status = pid_file.with_name(pid_file.name + ".reload")
    os.kill(int(pid_file.read_text()), signal.SIGHUP)
    deadline = time.monotonic() + 20
    while json.loads(status.read_text()).get("generation") != 3:
        assert time.monotonic() < deadline, status.read_text()
        time.sleep(0.05)
    assert json.loads(status.read_text())["credentials"] == ["new"]
    assert tls.served(rp.port) == {Tls.der(tls.new)}
    assert (post(OLD_KEY), post(NEW_KEY)) == (401, 200)
    scraped = httpx.get(rp.base_url + "/metrics", verify=tls.context).text
    assert _metric(scraped, "gptools_webhook_config_reloads_total") == {"ok": 1, "failed": 2}
    rp.terminate()
    lines = [json.loads(line) for line in rp.log.read_text().splitlines() if line.startswith("{")]
    events = [line["event"] for line in lines if line["event"].startswith("config_reload")]
    assert events == ["config_reload_failed", "config_reload_failed", "config_reloaded"]
    assert NEW_KEY not in rp.log.read_text() and OLD_KEY not in rp.log.read_text()
    assert not pid_file.exists() and not status.exists()


def test_webhooks_reload_needs_a_running_receivers_pid_file(tmp_path: Path) -> None:
    missing = run_gptools("webhooks", "reload", "--pid-file", str(tmp_path / "none.pid"))
    assert missing.returncode == 2 and "no pid file" in missing.stderr
    garbage = tmp_path / "garbage.pid"
    garbage.write_text("not a pid\n")
    bad = run_gptools("webhooks", "reload", "--pid-file", str(garbage))
    assert bad.returncode == 2 and "holds no process id" in bad.stderr
    # A pid file nobody holds (its receiver ended): never signalled, whatever its pid is now.
    stale = tmp_path / "stale.pid"
    stale.write_text(f"{os.getpid()}\n")
    done = run_gptools("webhooks", "reload", "--pid-file", str(stale), "--json")
    assert done.returncode == 1 and "no running receiver holds" in done.stderr
    assert json.loads(done.stdout)["error"]["exit"] == 1


def test_a_pid_file_is_taken_over_when_stale_and_never_when_it_is_another_file(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    with pytest.raises(ConfigurationError, match="not a pid file"), reload_control(notes, 1):
        pass
    assert notes.read_text() == "keep me\n"
    stale = tmp_path / "serve.pid"
    stale.write_text("4194303\n")  # a receiver that ended: its file is not locked
    with reload_control(stale, 2) as control:
        assert stale.read_text() == f"{os.getpid()}\n"
        assert control.status == tmp_path / "serve.pid.reload"
        assert json.loads(control.status.read_text()) == {"generation": 0, "pid": os.getpid()}
        assert control.directory is not None and control.directory.is_dir()
        assert control.environment() == {
            "GP_WEBHOOK_RELOAD_DIR": str(control.directory),
            "GP_WEBHOOK_RELOAD_STATUS": str(control.status),
        }
    assert not stale.exists() and not control.status.exists() and not control.directory.exists()
