"""What the receiver's HTTP guard (``gptools/webhooks/_server.py``) takes from uvicorn's
internals, checked by name and signature: a uvicorn that renamed or reshaped any of it
fails here, loudly, rather than in a connection's edge case. pyproject.toml allows only
the uvicorn minor version this was checked against (requirements.lock's)."""

from __future__ import annotations

import asyncio
import inspect
import re
from pathlib import Path

import uvicorn
from uvicorn.config import Config
from uvicorn.protocols.http import flow_control, httptools_impl
from uvicorn.server import ServerState

from gptools.webhooks._server import GuardedHttpToolsProtocol

ROOT = Path(__file__).resolve().parents[2]

#: The methods of HttpToolsProtocol the guard overrides or calls, with their parameters.
METHODS = {
    "__init__": ["self", "config", "server_state", "app_state", "_loop"],
    "connection_made": ["self", "transport"],
    "connection_lost": ["self", "exc"],
    "data_received": ["self", "data"],
    "on_headers_complete": ["self"],
    "on_message_complete": ["self"],
    "_unset_keepalive_if_required": ["self"],
    "_should_upgrade": ["self"],
    "_unsupported_upgrade_warning": ["self"],
    "handle_websocket_upgrade": ["self"],
    "send_400_response": ["self", "msg"],
}
#: The attributes of a protocol instance the guard reads or replaces.
ATTRIBUTES = ("connections", "pipeline", "cycle", "transport", "parser", "loop", "app", "logger")


def test_the_installed_uvicorn_is_the_pinned_minor_version() -> None:
    pin = re.search(
        r'"uvicorn\[standard\]>=([\d.]+),<([\d.]+)"', (ROOT / "pyproject.toml").read_text()
    )
    locked = re.search(r"^uvicorn==([\d.]+)$", (ROOT / "requirements.lock").read_text(), re.M)
    assert pin is not None and locked is not None
    low, high = (tuple(int(p) for p in v.split(".")) for v in pin.groups())
    installed = tuple(int(p) for p in uvicorn.__version__.split(".")[:2])
    assert uvicorn.__version__ == locked.group(1)
    assert low <= installed < high, (uvicorn.__version__, pin.groups())


def test_the_protocol_methods_the_guard_relies_on_keep_their_signatures() -> None:
    base = httptools_impl.HttpToolsProtocol
    assert GuardedHttpToolsProtocol.__mro__[1] is base
    for name, parameters in METHODS.items():
        method = getattr(base, name, None)
        assert method is not None, f"HttpToolsProtocol.{name} is gone"
        assert list(inspect.signature(method).parameters) == parameters, name


def test_a_protocol_has_the_attributes_the_guard_uses() -> None:
    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("never called")

    config = Config(app=app, http="httptools")
    config.load()
    loop = asyncio.new_event_loop()
    try:
        protocol = GuardedHttpToolsProtocol(config, ServerState(), {}, loop)
        for name in ATTRIBUTES:
            assert hasattr(protocol, name), f"HttpToolsProtocol instances lost {name}"
        # The guard counts, evicts from and discards in the connections; reads the pipeline.
        assert protocol.connections == set() and hasattr(protocol.connections, "discard")
        assert len(protocol.pipeline) == 0
    finally:
        loop.close()
    # The guard asks a request's cycle whether its answer is complete.
    cycle_init = inspect.getsource(httptools_impl.RequestResponseCycle.__init__)
    assert "self.response_complete = " in cycle_init


def test_the_answers_the_guard_writes_itself_come_from_uvicorn() -> None:
    assert httptools_impl.STATUS_LINE[431].startswith(b"HTTP/1.1 431 ")
    assert httptools_impl.STATUS_LINE[503].startswith(b"HTTP/1.1 503 ")
    assert list(inspect.signature(flow_control.service_unavailable).parameters) == [
        "scope",
        "receive",
        "send",
    ]
    assert inspect.iscoroutinefunction(flow_control.service_unavailable)
