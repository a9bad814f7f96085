"""Attacks on the receiver's HTTP server, and what the hostile tests and
``bench_under_attack.py`` measure during them: header bombs, slow-header and slow-body
connections, idle connections, real deliveries sent alongside, the store checked after.

Loopback only; every loop is bounded by a count or a deadline.
"""

from __future__ import annotations

import resource
import selectors
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from gptools import spec
from tests.webhooks.conftest import ReceiverProcess, event, free_port, start_receiver_process, wire

API_KEY = "hostile-test-key"
PATH = spec.DEFAULT_WEBHOOK_PATH.encode()
MB = 1024 * 1024


@contextmanager
def receiver(
    tmp_path: Path,
    *args: str,
    workers: int = 1,
    nofile: int | None = None,
) -> Iterator[ReceiverProcess]:
    """``gptools webhooks serve`` on a fresh SQLite store in ``tmp_path`` with ``args``,
    optionally under ``ulimit -n nofile`` (soft and hard), stopped after the block."""
    port = free_port()

    def lower_nofile() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    rp = start_receiver_process(
        tmp_path,
        f"sqlite:///{tmp_path / f'store-{port}.sqlite3'}",
        *args,
        port=port,
        workers=workers,
        env={"GP_WEBHOOK_API_KEY": API_KEY},
        preexec_fn=lower_nofile if nofile is not None else None,
    )
    try:
        yield rp
    finally:
        rp.terminate()


def store_path(rp: ReceiverProcess) -> Path:
    """The SQLite store :func:`receiver` gave ``rp``."""
    return rp.log.parent / f"store-{rp.port}.sqlite3"


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants (uvicorn's workers)."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += next(
                int(line.split()[1]) * 1024
                for line in status.splitlines()
                if line.startswith("VmRSS:")
            )
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
    return total


def connect(port: int) -> socket.socket:
    """A blocking loopback connection to ``port``."""
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def header_bomb(port: int, size: int, *, chunk: int = MB, finish: bool = True) -> tuple[int, int]:
    """Send a request whose one header is ``size`` bytes long, ``chunk`` bytes at a time,
    until it is all sent or the server stops reading (``finish``: end the head, so an
    unbounded server answers it). Return (bytes sent, the answer's status or 0)."""
    sent = 0
    with connect(port) as sock:
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bomb: ")
            filler = b"a" * chunk
            while sent < size:
                sock.sendall(filler[: size - sent])
                sent += min(chunk, size - sent)
            if finish:
                sock.sendall(b"\r\n\r\n")
        except OSError:
            pass  # the server closed the connection: what a bounded server does
        return sent, read_status(sock)


def read_status(sock: socket.socket) -> int:
    """The status of the answer waiting on ``sock`` (0: none, the connection closed)."""
    data = b""
    try:
        while b"\r\n" not in data and len(data) < 1024:
            more = sock.recv(1024)
            if not more:
                break
            data += more
    except OSError:
        return 0
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def slow_requests(port: int, count: int, kind: str) -> list[socket.socket]:
    """``count`` connections that each send part of a request and stop: ``header`` sends
    an unfinished head, ``body`` a full head and 10 of 500 body bytes, ``idle`` nothing."""
    head = b"POST " + PATH + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    partial = {
        "header": head,
        "body": head + b"Authorization: Bearer " + API_KEY.encode() + b"\r\n"
        b"Content-Length: 500\r\n\r\n" + b'{"actionId"',
        "idle": b"",
    }[kind]
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        if partial:
            sock.sendall(partial)
        socks.append(sock)
    return socks


def closing_times(socks: list[socket.socket], started: float, deadline_s: float) -> list[float]:
    """Seconds from ``started`` (a ``time.monotonic()``) until the server closed each
    socket (it may answer first); ``inf`` for those still open after ``deadline_s``.
    Closes every socket."""
    times = [float("inf")] * len(socks)
    with selectors.DefaultSelector() as selector:
        for i, sock in enumerate(socks):
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, i)
        open_count = len(socks)
        end = started + deadline_s
        while open_count and time.monotonic() < end:
            for key, _ in selector.select(timeout=max(0.0, end - time.monotonic())):
                sock = socks[key.data]
                try:
                    data = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    times[key.data] = time.monotonic() - started
                    selector.unregister(sock)
                    open_count -= 1
    for sock in socks:
        sock.close()
    return times


@dataclass
class Deliveries:
    """Valid deliveries sent while an attack runs: each retried (as the provider does)
    until answered 200, within a deadline."""

    url: str
    acknowledged: list[str] = field(default_factory=list)
    statuses: list[int | str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def send(self, count: int, deadline_s: float) -> None:
        """Send ``count`` deliveries one after the other, each until acknowledged; stop at
        ``deadline_s`` or when :attr:`stop` is set."""
        end = time.monotonic() + deadline_s
        headers = {"authorization": f"Bearer {API_KEY}", "content-type": "application/json"}
        with httpx.Client(timeout=5) as client:
            for _ in range(count):
                action = str(uuid.uuid4())
                body = wire(event(action))
                while time.monotonic() < end and not self.stop.is_set():
                    try:
                        status: int | str = client.post(
                            self.url, content=body, headers=headers
                        ).status_code
                    except httpx.TransportError as exc:
                        status = type(exc).__name__
                    self.statuses.append(status)
                    if status == 200:
                        self.acknowledged.append(action)
                        break
                    self.stop.wait(0.05)  # a pause before the retry, not a synchronisation

    def in_thread(self, count: int, deadline_s: float) -> threading.Thread:
        """:meth:`send` in a started thread."""
        thread = threading.Thread(target=self.send, args=(count, deadline_s), daemon=True)
        thread.start()
        return thread


def stored_once(store: Path, acknowledged: list[str]) -> list[str]:
    """What is wrong with the store after ``acknowledged`` were answered 200 (empty: each
    is in ``webhook_actions`` once and has exactly one first 200 row in the log)."""
    conn = sqlite3.connect(store)
    try:
        actions = [r[0] for r in conn.execute("SELECT action_id FROM webhook_actions")]
        first_ok = [
            r[0]
            for r in conn.execute(
                "SELECT action_id FROM delivery_log WHERE status = 200 AND NOT duplicate"
            )
        ]
    finally:
        conn.close()
    problems = []
    if sorted(actions) != sorted(set(acknowledged)):
        problems.append(f"stored {len(actions)} actions, acknowledged {len(set(acknowledged))}")
    if sorted(first_ok) != sorted(set(acknowledged)):
        problems.append("delivery_log does not hold one first 200 row per acknowledged action")
    return problems


def wait_for(condition: Callable[[], bool], deadline_s: float) -> bool:
    """Poll ``condition`` until it holds or ``deadline_s`` passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()
