"""A TCP proxy on loopback that a test cuts and restores: a database outage without
stopping the machine's database server (other engineers' tests share it)."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class CuttableProxy:
    """Forwards ``127.0.0.1:port`` to ``target``. :meth:`cut` closes every connection
    and answers new ones by closing them at once (as a server that restarts does);
    :meth:`hang` closes every connection and holds new ones open without an answer (as
    a host that went away does); :meth:`restore` forwards again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open = True
        self._hanging = False
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="proxy")

    def __enter__(self) -> CuttableProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closed.set()
        self._listener.close()
        self.cut()

    def cut(self, *, hang: bool = False) -> None:
        """Drop every connection; refuse new ones until :meth:`restore`."""
        with self._lock:
            self._open = False
            self._hanging = hang
            connections, self._connections = self._connections, set()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def hang(self) -> None:
        """Drop every connection; hold new ones unanswered until :meth:`restore`."""
        self.cut(hang=True)

    def restore(self) -> None:
        """Forward new connections again (and drop the ones held by :meth:`hang`)."""
        with self._lock:
            self._open = True
            self._hanging = False
            held, self._connections = self._connections, set()
        for conn in held:
            conn.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._hanging:
                    self._connections.add(client)
                    continue
                if not self._open:
                    client.close()
                    continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._connections |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            # Either side ending ends both (shutdown wakes the other pump's recv).
            for conn in (source, sink):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            with self._lock:
                self._connections -= {source, sink}
