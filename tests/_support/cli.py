"""The ``gptools`` command as a child process, run as a user runs it: the console script
of this interpreter's environment (so the package under test, not one found on PATH).

Tests that must run the command in a process of its own (signals, exit codes past the
click runner, several processes at once, ``kill -9``) use these instead of spelling out
``subprocess`` each time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

#: The console script installed next to this interpreter.
GPTOOLS = str(Path(sys.executable).parent / "gptools")


def run_gptools(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 120,
    **options: Any,
) -> subprocess.CompletedProcess[str]:
    """Run ``gptools ARGS`` to its end and return it, stdout and stderr as text; a failing
    exit status is the test's to check (it is never raised). ``env`` replaces the whole
    environment (``None`` inherits this one); ``options`` go to :func:`subprocess.run`.

    ``timeout`` is under pytest's own (300 s), so that a command that hangs is killed and
    named by :class:`subprocess.TimeoutExpired` rather than left running."""
    return subprocess.run(
        [GPTOOLS, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
        **options,
    )


def start_gptools(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    **options: Any,
) -> subprocess.Popen[str]:
    """Start ``gptools ARGS`` and return the running process, stdout and stderr piped as
    text unless ``options`` (for :class:`subprocess.Popen`) send them elsewhere. The caller
    waits for it, or kills it."""
    streams: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.Popen([GPTOOLS, *args], text=True, env=env, cwd=cwd, **{**streams, **options})


def stop_gptools(process: subprocess.Popen[Any], *, grace: float) -> None:
    """Stop ``process`` (started in a session of its own, ``start_new_session=True``) as
    a service manager does: SIGTERM, ``grace`` seconds to end, then SIGKILL to its whole
    process group (its workers too)."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def serve_workers(pid: int) -> set[int]:
    """The pids of the uvicorn workers of the ``gptools webhooks serve`` process ``pid``:
    its living children that multiprocessing spawned (neither its resource tracker nor a
    killed worker not reaped yet)."""
    import psutil

    found = set()
    for child in psutil.Process(pid).children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(child.cmdline()):
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue  # it ended meanwhile
    return found


def wait_until_ready(
    process: subprocess.Popen[Any],
    url: str,
    log: Path,
    *,
    timeout: float = 120.0,
    verify: Any = True,
) -> None:
    """Poll ``url`` until it answers 200; fail with ``log`` (the process's output) if
    ``process`` ends first or ``timeout`` seconds pass. ``verify`` is httpx's (a CA for a
    server on TLS)."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"the server exited: {log.read_text()}"
        try:
            if httpx.get(url, timeout=2, verify=verify).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{url} not ready in {timeout} s: {log.read_text()}"
        time.sleep(0.05)  # polling a condition with a deadline
