"""A loopback TCP relay in front of a real server: it counts the connections it accepts,
and the test can cut it (every relayed connection closed, new ones closed at once) and
restore it, to make a server unreachable without stopping it (the machine's PostgreSQL
is shared: it is never stopped for a test)."""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpRelay:
    """Relays each connection accepted on a free loopback port to ``127.0.0.1:port``;
    ``accepted`` counts them (those refused while cut too)."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepted = 0
        self._cut = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                self.accepted += 1
                if self._cut:
                    _close(down)
                    continue
                up = socket.create_connection(("127.0.0.1", self.upstream))
                self._sockets += [down, up]
            for src, dst in ((down, up), (up, down)):
                threading.Thread(target=_pump, args=(src, dst), daemon=True).start()

    def cut(self) -> None:
        """Close every relayed connection, and each new one as soon as it is accepted."""
        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _close(sock)

    def restore(self) -> None:
        """Relay new connections again."""
        with self._lock:
            self._cut = False

    def close(self) -> None:
        """Stop listening and close every connection."""
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self._thread.join(timeout=5)
        self.cut()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
