"""A TCP proxy on loopback that a test can cut: a store outage without stopping the
machine's database (other engineers' tests share it). ``cut()`` ends every connection
through it and refuses new ones, as a database that went away would; ``restore()``
forwards again."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

_CHUNK = 65536


class TcpProxy:
    """Forwards each connection to ``127.0.0.1:PORT`` (:attr:`port`) to ``target``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="tcp-proxy")
        self._acceptor.start()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def cut(self) -> None:
        """End every forwarded connection and refuse new ones until :meth:`restore`."""
        self._cut.set()
        with self._lock:
            doomed, self._open = self._open, set()
        for sock in doomed:
            _close(sock)

    def restore(self) -> None:
        """Forward new connections again."""
        self._cut.clear()

    def close(self) -> None:
        """Stop listening and end every connection."""
        self._closed.set()
        _close(self._listener)
        self.cut()
        self._acceptor.join(5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self._cut.is_set():
                _close(client)  # the connection ends before the server's first byte
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(_CHUNK):
                sink.sendall(data)
        except OSError:
            pass  # cut, or the other side went away
        finally:
            with self._lock:
                self._open.difference_update((source, sink))
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    # shutdown() first: it wakes a thread blocked in recv() on it, which close() does not.
    with contextlib.suppress(OSError):  # not connected, or already shut
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
