"""A TCP proxy on loopback that a test opens and closes, to make a server unreachable and
reachable again without stopping it (the PostgreSQL server is shared with other tests).

Its port is bound from the start, so nobody else takes it, but it listens only while
open: a connection attempt before :meth:`TcpProxy.open` is refused, as by a server that
is down."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class TcpProxy:
    """Forwards every connection to ``target`` (host, port) while open."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()

    def open(self) -> None:
        """Start listening and forwarding."""
        self._listener.listen(64)
        accept = threading.Thread(target=self._accept, daemon=True, name="proxy-accept")
        accept.start()
        self._threads.append(accept)

    def close(self) -> None:
        """Stop: the listener and every forwarded connection are closed."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for thread in self._threads:
            thread.join(5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            pump = threading.Thread(
                target=self._pump, args=(client, upstream), daemon=True, name="proxy-pump"
            )
            pump.start()
            self._threads.append(pump)

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as sel, client, upstream:
            for sock in peers:
                sock.setblocking(False)
                sel.register(sock, selectors.EVENT_READ)
            while not self._closed.is_set():
                for key, _ in sel.select(timeout=0.2):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = source.recv(65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        return
                    if not data:
                        return
                    try:
                        peers[source].setblocking(True)
                        peers[source].sendall(data)
                        peers[source].setblocking(False)
                    except OSError:
                        return
