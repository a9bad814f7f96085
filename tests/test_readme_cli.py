"""Every command of the README's ``bash`` blocks runs as written, in README order, against
the embedded sandbox (issue 11, item 2): the README cannot drift from what works.

The commands are read from the README itself. What the test changes, and why:
- fixed ports (``--port N`` and the same ``:N`` in URLs) become free ports, as other test
  runs share the machine;
- commands that serve until stopped are started in the background, used by the commands
  after them once they answer HTTP, and stopped with Ctrl-C (SIGINT) at the end of their
  block, as a reader would;
- the commands in :data:`EXCLUDED` are not run, each for the reason given there.
It runs in a temporary directory holding a copy of ``data/``, with its own sandbox state.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: Commands (by prefix) that are not run, and why.
EXCLUDED: dict[str, str] = {
    "make run": "runs every notebook for minutes; `gptools run-notebooks`, what it calls, is "
    "run by tests/test_run_notebooks.py and the notebooks by `make notebooks`",
    "make test": "is the whole suite, this test included",
    "gptools webhooks analyze 'postgresql://": "needs a PostgreSQL store filled by receivers; "
    "the analyser reads real PostgreSQL stores in tests/analysis",
}
#: Commands that serve until stopped.
SERVERS = ("gptools sandbox serve", "gptools webhooks serve")
_START_TIMEOUT_S = 120.0
_COMMAND_TIMEOUT_S = 300.0


def bash_blocks(text: str) -> list[list[str]]:
    """The command lines of every ```bash block, in order (continuations joined)."""
    blocks = []
    for body in re.findall(r"^```bash\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        lines: list[str] = []
        for raw in body.replace("\\\n", " ").splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                lines.append(line)
        blocks.append(lines)
    return blocks


def _excluded(line: str) -> str | None:
    return next((why for prefix, why in EXCLUDED.items() if line.startswith(prefix)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _with_free_ports(blocks: list[list[str]]) -> list[list[str]]:
    fixed = {
        int(p) for block in blocks for line in block for p in re.findall(r"--port (\d+)", line)
    }
    mapping = {p: _free_port() for p in fixed if p != 0}
    out = []
    for block in blocks:
        lines = []
        for line in block:
            for old, new in mapping.items():
                line = re.sub(rf"(?<=--port ){old}\b|(?<=:){old}\b", str(new), line)
            lines.append(line)
        out.append(lines)
    return out


def _wait_until_serving(line: str, process: subprocess.Popen[bytes]) -> None:
    port = re.search(r"--port (\d+)", line)
    assert port is not None, f"a server example must name its --port: {line}"
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{line!r} exited with {process.returncode}"
        try:
            httpx.get(f"http://127.0.0.1:{port.group(1)}/", timeout=2.0)
            return
        except httpx.TransportError:
            time.sleep(0.2)  # polling a condition with a deadline
    pytest.fail(f"{line!r} did not answer within {_START_TIMEOUT_S:.0f} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"{process.args!r} did not stop on Ctrl-C")


def test_readme_lists_commands_and_reasons() -> None:
    lines = [line for block in bash_blocks(README.read_text(encoding="utf-8")) for line in block]
    gptools = [line for line in lines if line.startswith("gptools ")]
    assert len(gptools) >= 10
    # The sequence the issue names: a campaign created by one command, used by the next.
    apply = next(i for i, line in enumerate(lines) if line.startswith("gptools campaigns apply"))
    load = next(i for i, line in enumerate(lines) if line.startswith("gptools participants load"))
    assert apply < load and "--campaign CMP-000001" in lines[load]
    for prefix in EXCLUDED:
        assert any(line.startswith(prefix) for line in lines), f"stale exclusion {prefix!r}"


def test_every_readme_command_runs_in_order(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "data", tmp_path / "data")
    env = {
        **os.environ,
        "GP_BASE_URL": "",
        "GPTOOLS_SANDBOX_STATE_DIR": str(tmp_path / "state"),
        "GPTOOLS_JOURNAL_DIR": str(tmp_path / "journals"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    for name in ("GPTOOLS_SANDBOX_URL", "GP_USERNAME", "GP_PASSWORD"):
        env.pop(name, None)
    ran = []
    for block in _with_free_ports(bash_blocks(README.read_text(encoding="utf-8"))):
        servers: list[subprocess.Popen[bytes]] = []
        try:
            for line in block:
                if _excluded(line) is not None:
                    continue
                if line.startswith("export "):
                    for word in shlex.split(line, comments=True)[1:]:
                        name, _, value = word.partition("=")
                        env[name] = value
                    continue
                if line.startswith(SERVERS):
                    command = line.rstrip("&").strip()
                    server = subprocess.Popen(
                        ["bash", "-c", f"exec {command}"],
                        cwd=tmp_path,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                    servers.append(server)
                    _wait_until_serving(command, server)
                    ran.append(command)
                    continue
                done = subprocess.run(
                    ["bash", "-c", line],
                    cwd=tmp_path,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=_COMMAND_TIMEOUT_S,
                )
                assert done.returncode == 0, (
                    f"README command failed with exit {done.returncode}: {line}\n"
                    f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}"
                )
                ran.append(line)
        finally:
            for server in servers:
                _stop(server)
    assert any(line.startswith("gptools participants load") for line in ran)
    assert (tmp_path / "webhooks.sqlite3").exists() and (tmp_path / "lost.csv").exists()
