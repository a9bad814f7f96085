"""Serving the sandbox with uvicorn: in a background thread, or in the foreground."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from gptools.sandbox._accounts import SandboxAccount
from gptools.sandbox._app import SandboxApp, create_app
from gptools.sandbox._config import SandboxConfig
from gptools.sandbox._faults import Faults
from gptools.sandbox._state import SandboxState

_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 10.0


class _Server(uvicorn.Server):
    """A uvicorn server that reports when it listens (or failed to) through a callback."""

    def __init__(
        self, config: uvicorn.Config, on_started: Callable[[_Server], None] | None = None
    ) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.ready.set()
        if self._on_started is not None and self.started:
            self._on_started(self)

    @property
    def port(self) -> int:
        """The port the server listens on (known once started)."""
        port: int = self.servers[0].sockets[0].getsockname()[1]
        return port


def uvicorn_config(app: SandboxApp, host: str, port: int) -> uvicorn.Config:
    """The uvicorn settings of the sandbox: httptools + uvloop, quiet, no access log.

    uvicorn's own ``Date`` header is off: the application sends one, which a fault rule
    can replace (uvicorn would send both).
    """
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
        date_header=False,
    )


@dataclass(eq=False)
class RunningSandbox:
    """A sandbox being served: where it listens, its accounts, state and fault rules.

    ``dispatcher`` is free for the webhook dispatcher to attach itself to.
    """

    base_url: str
    app: SandboxApp
    dispatcher: object | None = None

    @property
    def config(self) -> SandboxConfig:
        """The sandbox's settings."""
        return self.app.config

    @property
    def accounts(self) -> Mapping[str, SandboxAccount]:
        """The demo accounts by key (``individual``, ``partner``, ``third_party``, ``internal``)."""
        return self.app.config.accounts

    @property
    def state(self) -> SandboxState:
        """Requests, campaigns, participants and subscriptions the sandbox remembers."""
        return self.app.state

    @property
    def faults(self) -> Faults:
        """The fault rules (``add``, ``clear``)."""
        return self.app.faults

    @property
    def identity(self) -> str:
        """The identity of the sandbox's state (a client's ``server_identity``): made when
        the state was created, kept when it is persisted, new after :meth:`reset`."""
        return self.app.state.identity

    def reset(self) -> None:
        """Forget requests, campaigns, participants, subscriptions, faults and rate windows
        (the state gets a new :attr:`identity`)."""
        self.app.reset()


@contextmanager
def run_sandbox(
    config: SandboxConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[RunningSandbox]:
    """Serve a new sandbox with a real uvicorn server in a background thread.

    Binds ``host`` on a free port by default, returns once the server accepts
    connections, and stops it (closing its connections) on exit.
    """
    app = create_app(config)
    server = _Server(uvicorn_config(app, host, port))
    thread = threading.Thread(target=server.run, name="gptools-sandbox", daemon=True)
    thread.start()
    if not server.ready.wait(_START_TIMEOUT_S) or not server.started:
        server.should_exit = True
        thread.join(_STOP_TIMEOUT_S)
        raise RuntimeError(
            f"the sandbox did not start on {host}:{port} (see the log above for the reason)"
        )
    try:
        yield RunningSandbox(f"http://{host}:{server.port}", app)
    finally:
        server.should_exit = True
        thread.join(_STOP_TIMEOUT_S)


def serve_forever(
    config: SandboxConfig,
    *,
    host: str,
    port: int,
    on_started: Callable[[str], None],
    sock: socket.socket | None = None,
) -> None:
    """Serve a sandbox in the foreground until interrupted (Ctrl-C); on ``sock`` when given
    (already bound to ``host:port``), else on a socket uvicorn binds."""
    app = create_app(config)
    server = _Server(
        uvicorn_config(app, host, port), on_started=lambda s: on_started(f"http://{host}:{s.port}")
    )
    server.run(sockets=None if sock is None else [sock])
