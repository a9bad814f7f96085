"""The receiver guide's *Deploying the receiver* (issue 14, item 7; docs/guides/receiver.md),
run as written where systemd is not available: the unit's ExecStart with the guide's
environment file serves, the guide's health checks answer it, a restart the way systemd
does it (SIGTERM to the main process) under load loses no delivery, and two receivers on
one PostgreSQL store keep every action once.

What the test changes, and why: the venv path becomes this one's, the port a free one, and
WorkingDirectory a temporary directory. The README's health-check block runs, in README
order, in tests/test_readme_cli.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gptools.webhooks._log_events import EVENTS
from tests._support.cli import wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "receiver.md"
#: Where the guide installs gptools; the test runs this venv's instead.
GUIDE_VENV_BIN = "/opt/gptools/venv/bin/"
_DEADLINE_S = 120.0


def _section() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index("## Deploying the receiver")
    end = text.find("\n## ", start)  # the next section, or the end of the page
    return text[start : end if end >= 0 else len(text)]


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"^```{kind}\n(.*?)^```", _section(), re.DOTALL | re.MULTILINE)


def _unit() -> dict[str, dict[str, str]]:
    """The guide's unit file, parsed as systemd reads it: sections, ``Key=value`` lines,
    ``#`` comments (no key appears twice in it)."""
    block = next(b for b in _blocks("ini") if b.startswith("[Unit]"))
    unit: dict[str, dict[str, str]] = {}
    section: dict[str, str] = {}
    for raw in block.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = unit.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep and key.strip() not in section, f"not a unit-file line: {raw!r}"
        section[key.strip()] = value.strip()
    return unit


def _environment_file() -> dict[str, str]:
    block = next(b for b in _blocks("ini") if "GP_WEBHOOK_API_KEY=" in b)
    env = {}
    for raw in block.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"not an environment-file line: {raw!r}"
            env[key] = value
    return env


def _exec_start(environment: dict[str, str]) -> list[str]:
    """ExecStart split and expanded as systemd does: ``${NAME}`` is one word."""
    words = shlex.split(_unit()["Service"]["ExecStart"])
    out = []
    for word in words:
        word = re.sub(r"\$\{(\w+)\}", lambda m: environment[m.group(1)], word)
        if word.startswith(GUIDE_VENV_BIN):
            word = str(Path(sys.executable).parent / word[len(GUIDE_VENV_BIN) :])
        out.append(word)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _process_env(unit_env: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GP_")}
    env.update(unit_env)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


class Service:
    """The unit's ExecStart, started and stopped the way the unit says."""

    def __init__(self, workdir: Path, unit_env: dict[str, str]) -> None:
        self.workdir = workdir
        self.unit_env = unit_env
        self.env = _process_env(unit_env)
        self.port = int(unit_env["GPTOOLS_PORT"])
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / f"journal-{self.port}.log"

    def start(self) -> None:
        with self.log.open("ab") as journal:
            self.process = subprocess.Popen(
                _exec_start(self.unit_env),
                cwd=self.workdir,
                env=self.env,
                stdout=journal,
                stderr=journal,
                start_new_session=True,
            )
        url = f"http://127.0.0.1:{self.port}/readyz"
        wait_until_ready(self.process, url, self.log, timeout=_DEADLINE_S)

    def stop(self) -> int:
        """KillMode=mixed: KillSignal to the main process, SIGKILL to the group after
        TimeoutStopSec."""
        assert self.process is not None
        service = _unit()["Service"]
        assert service["KillMode"] == "mixed"
        self.process.send_signal(getattr(signal, service["KillSignal"]))
        timeout = float(service["TimeoutStopSec"])
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            pytest.fail(f"the receiver did not stop within TimeoutStopSec={timeout:.0f}")


def _deliver(service: Service, count: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            "gptools",
            "sandbox",
            "deliver",
            "--url",
            f"http://127.0.0.1:{service.port}/v1/game-action-events",
            "-n",
            str(count),
            "--auth",
            "bearer",
            "--json",
            *extra,
        ],
        cwd=service.workdir,
        env=service.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def test_the_unit_file_is_complete(tmp_path: Path) -> None:
    unit = _unit()
    service = unit["Service"]
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    assert service["EnvironmentFile"] in _section()  # the guide names the file it shows
    names = set(re.findall(r"\$\{(\w+)\}", service["ExecStart"]))
    assert names <= set(_environment_file()), "ExecStart uses a variable the file lacks"
    # Longer than the receiver's own drain, so systemd never SIGKILLs a clean shutdown.
    assert float(service["TimeoutStopSec"]) > 10
    if shutil.which("systemd-analyze") is None:
        return  # the parse above is all a machine without systemd can check
    block = next(b for b in _blocks("ini") if b.startswith("[Unit]"))
    path = tmp_path / "gptools-webhooks.service"
    path.write_text(
        block.replace(GUIDE_VENV_BIN, f"{Path(sys.executable).parent}/"), encoding="utf-8"
    )
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    # systemd's own parser: an unknown key or a bad value is reported on stderr.
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def test_the_unit_gives_each_worker_the_descriptors_its_connections_need() -> None:
    # Issue 22: a worker out of descriptors resets real deliveries and logs nothing.
    from gptools.webhooks import ServerLimits
    from gptools.webhooks._server_limits import descriptors_needed

    service = _unit()["Service"]
    words = shlex.split(service["ExecStart"])
    connections = (
        int(words[words.index("--max-connections") + 1])
        if "--max-connections" in words
        else ServerLimits().max_connections
    )
    assert int(service["LimitNOFILE"]) >= descriptors_needed(connections)


def test_exec_start_serves_and_the_health_checks_answer(tmp_path: Path) -> None:
    unit_env = {**_environment_file(), "GPTOOLS_PORT": str(_free_port())}
    service = Service(tmp_path, unit_env)
    service.start()
    try:
        checks = [
            line
            for block in _blocks("bash")
            for line in block.splitlines()
            if line.startswith("curl ")
        ]
        assert len(checks) == 2
        for line in checks:
            command = line.split("#")[0].replace(":8000", f":{service.port}")
            done = subprocess.run(
                ["bash", "-c", command], capture_output=True, text=True, check=False, timeout=30
            )
            assert done.returncode == 0, (command, done.stderr)
            assert json.loads(done.stdout)["status"] == "ok"
    finally:
        assert service.stop() == 0
    assert (tmp_path / "webhooks.sqlite3").exists()  # relative to WorkingDirectory
    # --log-format json: every line of the journal is one JSON object with a known event.
    journal = [json.loads(line) for line in service.log.read_text().splitlines()]
    assert journal and all(record["event"] in EVENTS for record in journal)
    assert {"listening", "worker_ready", "shutdown_complete"} <= {r["event"] for r in journal}


def test_a_restart_under_load_loses_no_delivery(tmp_path: Path) -> None:
    unit_env = {**_environment_file(), "GPTOOLS_PORT": str(_free_port())}
    service = Service(tmp_path, unit_env)
    store = tmp_path / "webhooks.sqlite3"
    service.start()
    # Simulated time 60x real: the provider's 30 s retry comes after 0.5 s.
    sender = _deliver(service, 400, "--time-scale", "60", "--concurrency", "4")
    deadline = time.monotonic() + _DEADLINE_S
    while True:  # restart mid-run, once some deliveries are stored
        with sqlite3.connect(store) as con:
            stored = con.execute("SELECT count(*) FROM webhook_actions").fetchone()[0]
        if stored >= 50:
            break
        assert sender.poll() is None and time.monotonic() < deadline, "no load to restart under"
        time.sleep(0.05)  # polling a condition with a deadline
    assert service.stop() == 0
    service.start()
    try:
        out, _ = sender.communicate(timeout=_DEADLINE_S * 2)
    finally:
        assert service.stop() == 0
    report = json.loads(out)
    assert sender.returncode == 0
    assert report["delivered"] == 400, report
    with sqlite3.connect(store) as con:
        assert con.execute("SELECT count(*) FROM webhook_actions").fetchone()[0] == 400
        assert stored < 400, "the restart came after the run: it proved nothing"


@pytest.mark.postgres
def test_two_hosts_share_one_postgresql_store(tmp_path: Path, pg_url: str) -> None:
    services = []
    for name in ("host-a", "host-b"):
        (tmp_path / name).mkdir()
        unit_env = {
            **_environment_file(),
            "GPTOOLS_PORT": str(_free_port()),
            "GPTOOLS_STORE": pg_url,
        }
        services.append(Service(tmp_path / name, unit_env))
    for service in services:
        service.start()
    try:
        # The same seed: the same 100 actions reach both hosts.
        senders = [_deliver(service, 100, "--seed", "7") for service in services]
        reports = [json.loads(sender.communicate(timeout=_DEADLINE_S * 2)[0]) for sender in senders]
    finally:
        for service in services:
            assert service.stop() == 0
    assert [r["delivered"] for r in reports] == [100, 100]
    import psycopg

    dsn, schema = pg_url.split("?schema=")
    with psycopg.connect(dsn) as conn:
        actions = conn.execute(f'SELECT count(*) FROM "{schema}".webhook_actions').fetchone()
        duplicates = conn.execute(
            f'SELECT count(*) FROM "{schema}".delivery_log WHERE duplicate'
        ).fetchone()
    assert actions is not None and actions[0] == 100
    assert duplicates is not None and duplicates[0] == 100
