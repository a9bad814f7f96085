"""The receiver's supervisor finds a worker that ended without answering its health ping
at once (``_reload_workers._answers``), instead of waiting uvicorn's whole health-check
time: an exiting worker (after a SIGTERM) stops answering before its process ends, and
the supervisor holds the pipe's other end, so no end-of-file tells it. This was the cause
of test_health_gauges' replaced-worker test waiting past its 60 s once (the health check
is 60 s)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from types import SimpleNamespace
from typing import Any

from gptools.webhooks._reload_workers import _answers


def _worker(target: Any, args: tuple[Any, ...]) -> tuple[Any, Any]:
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("fork").Process(target=target, args=args)
    process.start()
    return SimpleNamespace(parent_conn=parent, process=process), child


def test_a_worker_that_ends_without_answering_is_found_when_it_ends() -> None:
    # Alive for a second, never answering, then gone: a worker on its way out.
    worker, _child = _worker(time.sleep, (1.0,))
    started = time.monotonic()
    assert _answers(worker, 30.0) is False  # type: ignore[arg-type]
    assert time.monotonic() - started < 15.0
    assert not worker.process.is_alive()


def test_a_worker_that_answers_is_alive() -> None:
    worker, child = _worker(time.sleep, (30.0,))
    try:

        def pong() -> None:
            child.recv()
            child.send(True)

        threading.Thread(target=pong, daemon=True).start()
        assert _answers(worker, 30.0) is True  # type: ignore[arg-type]
    finally:
        worker.process.kill()
        worker.process.join()
