"""Several workers: uvicorn's multiprocess supervisor, except that SIGHUP reloads every
worker in place (``_reload.py`` tells how) instead of restarting them all, which would close
their kept-alive connections. Imported by ``serve`` only when it runs several workers."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import time
from pathlib import Path
from socket import socket
from typing import Any

from uvicorn.config import Config
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from gptools.webhooks._constants import RELOAD_POLL_S, RELOAD_TIMEOUT_S, WORKER_ALIVE_POLL_S
from gptools.webhooks._reload import (
    ReloadControl,
    ReloadResult,
    answer_reload,
    count_reloads,
    read_json,
    write_json,
)


class ReloadingSupervisor(Multiprocess):
    """uvicorn's multiprocess supervisor, whose SIGHUP reloads each worker in place
    instead of restarting them all (see the module docstring); ``directory`` is the
    private directory the workers confirm in, ``status`` the status file (with a pid
    file)."""

    def __init__(
        self, config: Config, sockets: list[socket], *, directory: Path, status: Path | None
    ) -> None:
        super().__init__(config, sockets)
        self.directory = directory
        self.status = status
        self.generation = 0
        count_reloads()

    def keep_subprocess_alive(self) -> None:
        """uvicorn's check of every worker, with its wait for a worker's answer cut short
        once the worker has ended. uvicorn pings a worker and waits up to
        ``timeout_worker_healthcheck`` for the answer; a worker that is exiting (after a
        SIGTERM) stops answering before its process ends, and as the supervisor holds the
        pipe's other end too no end-of-file comes: the replacement waited the whole
        health-check time (60 s) after the worker was gone."""
        for process in self.processes:
            if not self.should_exit.is_set() and not _answers(
                process, self.config.timeout_worker_healthcheck
            ):
                # Ended (or hung): uvicorn's own check below finds it and replaces it.
                break
        super().keep_subprocess_alive()

    def handle_hup(self) -> None:
        """Reload every worker and answer (the supervisor's loop calls it on SIGHUP)."""
        answer_reload(self._reload_workers(), self.status)

    def _reload_workers(self) -> ReloadResult:
        self.generation += 1
        write_json(self.directory / "generation", {"generation": self.generation})
        deadline = time.monotonic() + RELOAD_TIMEOUT_S
        missing: list[str] = []
        asked: list[int] = []
        for process in list(self.processes):
            # A worker installs its handler before it serves; one still starting reads the
            # files as they are now when it gets there.
            pid = process.pid
            if pid is None or not process.wait_until_ready(max(deadline - time.monotonic(), 0.1)):
                missing.append(f"worker {pid} is not serving")
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGHUP)
                asked.append(pid)
        confirmed = self._confirmations(asked, deadline)
        missing += [
            f"worker {pid} did not confirm within {RELOAD_TIMEOUT_S:g} s"
            for pid in asked
            if pid not in confirmed
        ]
        took = [answer for answer in confirmed.values() if answer["result"] == "ok"]
        problems = [
            f"worker {pid}: {answer['detail']}"
            for pid, answer in confirmed.items()
            if answer["result"] != "ok"
        ] + missing
        if problems:
            detail = problems[0]
            if took:
                detail += (
                    f" ({len(took)} of {len(self.processes)} workers took the new settings: "
                    "reload again once the files are right)"
                )
            return ReloadResult(False, os.getpid(), len(took), detail=detail)
        first = took[0] if took else {}
        return ReloadResult(
            True,
            os.getpid(),
            len(took),
            tuple(first.get("credentials", ())),
            bool(first.get("tls")),
        )

    def _confirmations(self, pids: list[int], deadline: float) -> dict[int, dict[str, Any]]:
        """The confirmations of this generation that ``pids`` wrote by ``deadline``."""
        confirmed: dict[int, dict[str, Any]] = {}
        while True:
            for pid in pids:
                answer = read_json(self.directory / f"worker-{pid}.json")
                if answer.get("generation") == self.generation:
                    confirmed[pid] = answer
            if len(confirmed) == len(pids) or time.monotonic() >= deadline:
                return confirmed
            time.sleep(RELOAD_POLL_S)


def _answers(process: Process, timeout: float) -> bool:
    """Whether ``process`` answers a health ping within ``timeout`` seconds; false as soon
    as its process has ended (checked every :data:`WORKER_ALIVE_POLL_S`)."""
    deadline = time.monotonic() + timeout
    try:
        process.parent_conn.send(b"ping")
        while process.process.is_alive():
            if process.parent_conn.poll(WORKER_ALIVE_POLL_S):
                process.parent_conn.recv()
                return True
            if time.monotonic() >= deadline:
                return False
    except (OSError, EOFError, pickle.UnpicklingError):
        pass
    return False


def run_workers(app: str, options: dict[str, Any], control: ReloadControl) -> None:
    """``uvicorn.run(app, **options)`` for several workers, with :class:`ReloadingSupervisor`
    as their supervisor."""
    config = Config(app, **options)
    assert control.directory is not None
    supervisor = ReloadingSupervisor(
        config, [config.bind_socket()], directory=control.directory, status=control.status
    )
    with contextlib.suppress(KeyboardInterrupt):
        supervisor.run()
