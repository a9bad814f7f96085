"""A TCP proxy on loopback that a test opens, cuts, hangs and opens again: a server made
unreachable and reachable without stopping it (the machine's PostgreSQL is shared by
other engineers' tests, so it is never stopped for a test).

Its port is bound from the start, so nobody else takes it, whatever state it is in:

- closed (``TcpProxy(target, closed=True)``, until :meth:`TcpProxy.open`): the port does
  not listen, so a connection attempt is refused, as by a server that is down;
- cut (:meth:`TcpProxy.cut`): every forwarded connection is ended and each new one closed
  as soon as it is accepted, as by a server that restarts;
- hanging (:meth:`TcpProxy.hang`): every forwarded connection is ended and each new one
  held open without an answer, as by a host that went away;
- open: every connection is forwarded to the target.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import threading
from collections.abc import Callable
from types import TracebackType

_CHUNK = 65536
_JOIN_S = 5.0


class _State(enum.Enum):
    FORWARDING = enum.auto()
    CUT = enum.auto()
    HANGING = enum.auto()


class TcpProxy:
    """Forwards each connection to ``127.0.0.1:PORT`` (:attr:`port`) to ``target``;
    :attr:`accepted` counts the connections it accepted (those it closed or held at once
    too). A context manager: leaving it is :meth:`close`."""

    def __init__(self, target: tuple[str, int], *, closed: bool = False) -> None:
        self.target = target
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self._state = _State.FORWARDING
        self._lock = threading.Lock()
        # Forwarded connections (both ends) and the connections a hang holds.
        self._connections: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._acceptor: threading.Thread | None = None
        self._closed = threading.Event()
        if not closed:
            self.open()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def open(self) -> None:
        """Forward new connections: start listening if the proxy was made closed, end a
        :meth:`cut` or a :meth:`hang` (the connections a hang held are ended)."""
        self._drop(_State.FORWARDING)
        with self._lock:
            if self._acceptor is not None or self._closed.is_set():
                return
            self._listener.listen(64)
            self._acceptor = self._start(self._accept, "proxy-accept")

    def cut(self) -> None:
        """End every connection; close each new one as soon as it is accepted, until
        :meth:`open`."""
        self._drop(_State.CUT)

    def hang(self) -> None:
        """End every connection; hold each new one open without an answer, until
        :meth:`open`."""
        self._drop(_State.HANGING)

    def close(self) -> None:
        """Stop listening, end every connection and wait for the proxy's threads."""
        self._closed.set()
        # shutdown() wakes the acceptor blocked in accept(), which close() does not.
        _close(self._listener)
        if self._acceptor is not None:
            self._acceptor.join(_JOIN_S)
        self._drop(_State.CUT)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(_JOIN_S)

    def _drop(self, state: _State) -> None:
        """Enter ``state`` and end every connection through the proxy or held by it."""
        with self._lock:
            self._state = state
            doomed, self._connections = self._connections, set()
        for sock in doomed:
            _close(sock)

    def _start(
        self, target: Callable[..., None], name: str, *args: socket.socket
    ) -> threading.Thread:
        """A thread of the proxy, started (called with the lock held)."""
        thread = threading.Thread(target=target, args=args, daemon=True, name=name)
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()
        return thread

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.accepted += 1
                state = self._state
                if state is _State.HANGING:
                    self._connections.add(client)
                    continue
            if state is _State.CUT:
                _close(client)  # the connection ends before the server's first byte
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=_JOIN_S)
            except OSError:
                _close(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                forwarding = self._state is _State.FORWARDING and not self._closed.is_set()
                if forwarding:
                    self._connections |= {client, upstream}
                    for source, sink in ((client, upstream), (upstream, client)):
                        self._start(self._pump, "proxy-pump", source, sink)
            if not forwarding:  # cut, hung or closed while connecting upstream
                _close(client)
                _close(upstream)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(_CHUNK):
                sink.sendall(data)
        except OSError:
            pass  # cut, or the other side went away
        finally:
            # Either side ending ends both (shutdown wakes the other pump's recv).
            with self._lock:
                self._connections -= {source, sink}
            _close(source)
            _close(sink)


def _close(sock: socket.socket) -> None:
    # shutdown() first: it wakes a thread blocked in recv() or accept() on it, which
    # close() does not.
    with contextlib.suppress(OSError):  # not connected, or already shut
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
