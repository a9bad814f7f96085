"""One call to get a client: the real service when configured, else the embedded sandbox.

Notebooks and the CLI start with :func:`connect`. When ``GP_BASE_URL`` is set (in the
environment or a ``.env`` file) it returns a client for the real service, configured from
``GP_BASE_URL``/``GP_USERNAME``/``GP_PASSWORD``. When it is unset it starts the embedded
sandbox once per process (a real HTTP server on 127.0.0.1 in a background thread), says so
in one visible line, and returns a client logged in as one of the sandbox's demo accounts.

Two variations: when ``GPTOOLS_SANDBOX_URL`` names a sandbox another process serves (``gptools
run-notebooks`` sets it for every notebook), that sandbox is used instead of a new one; and
the CLI starts its sandbox with ``state_dir=`` so that consecutive commands share one state.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

from dotenv import dotenv_values

from gptools.client import AsyncClient, Client
from gptools.sandbox import RunningSandbox, SandboxConfig, run_sandbox
from gptools.sandbox._persist import persisted
from gptools.sandbox._remote import RemoteSandbox, served_sandbox_identity

#: Names the address of a sandbox that another process serves (set by run-notebooks).
SANDBOX_URL_ENV = "GPTOOLS_SANDBOX_URL"

#: Names the sandbox demo account :func:`connect` logs in as when none is given (the CLI's
#: way to act as the aggregator: ``GPTOOLS_SANDBOX_ACCOUNT=aggregator``).
SANDBOX_ACCOUNT_ENV = "GPTOOLS_SANDBOX_ACCOUNT"
#: The account :func:`connect` logs in as when neither it nor the environment names one.
DEFAULT_SANDBOX_ACCOUNT = "partner"

_C = TypeVar("_C", Client, AsyncClient)

_lock = threading.Lock()
_stack: ExitStack | None = None
_sandbox: RunningSandbox | RemoteSandbox | None = None


def real_service_configured() -> bool:
    """True when ``GP_BASE_URL`` is set in the environment, or else in ``./.env``.

    An empty ``GP_BASE_URL`` in the environment means "use the sandbox" even when ``.env``
    names a real service (the main job relies on this).
    """
    if "GP_BASE_URL" in os.environ:
        return bool(os.environ["GP_BASE_URL"])
    return bool(dotenv_values(".env").get("GP_BASE_URL"))


def embedded_sandbox() -> RunningSandbox | RemoteSandbox | None:
    """The sandbox :func:`connect` uses in this process, or ``None``: one it started (a
    :class:`RunningSandbox`), or the one ``GPTOOLS_SANDBOX_URL`` names (a
    :class:`RemoteSandbox`, the same read-only view over HTTP)."""
    return _sandbox


def start_embedded_sandbox(
    config: SandboxConfig | None = None, *, state_dir: Path | None = None
) -> RunningSandbox | RemoteSandbox:
    """Start the embedded sandbox once per process (later calls return the same one).

    It stops when the process exits. ``config`` and ``state_dir`` apply to the first call
    only. With ``state_dir`` the sandbox starts from the state saved there and saves its
    state back when it stops, holding the directory's lock meanwhile (the CLI's way of
    letting consecutive commands share one sandbox). When ``GPTOOLS_SANDBOX_URL`` is set,
    nothing is started: the sandbox served there is used.
    """
    global _stack, _sandbox
    with _lock:
        if _sandbox is None:
            remote = os.environ.get(SANDBOX_URL_ENV)
            if remote:
                _sandbox = RemoteSandbox.at(remote)
                where = f"served by another process, {SANDBOX_URL_ENV}"
            else:
                stack = ExitStack()
                try:
                    running = stack.enter_context(run_sandbox(config or SandboxConfig(seed=0)))
                    where = ""
                    if state_dir is not None:
                        path = stack.enter_context(persisted(running.state, state_dir))
                        where = f"state kept in {path}; `gptools sandbox reset` clears it"
                except BaseException:
                    stack.close()
                    raise
                _sandbox, _stack = running, stack
                atexit.register(stop_embedded_sandbox)
            print(
                f"Using the embedded sandbox at {_sandbox.base_url} "
                + (f"({where}; " if where else "(")
                + "GP_BASE_URL is unset; set it to use the real service).",
                file=sys.stdout,
            )
        return _sandbox


def stop_embedded_sandbox() -> None:
    """Stop the embedded sandbox if this process started one."""
    global _stack, _sandbox
    with _lock:
        if _stack is not None:
            _stack.close()
        _stack, _sandbox = None, None


def _sandbox_credentials(account: str | None) -> dict[str, Any]:
    account = account or os.environ.get(SANDBOX_ACCOUNT_ENV) or DEFAULT_SANDBOX_ACCOUNT
    sb = start_embedded_sandbox()
    try:
        acct = sb.accounts[account]
    except KeyError:
        raise ValueError(
            f"no sandbox account {account!r}; choose one of {sorted(sb.accounts)}"
        ) from None
    return {
        "base_url": sb.base_url,
        "username": acct.username,
        "password": acct.password,
        # The state's identity, not the port: a resumed load finds its journal again.
        "server_identity": sb.identity,
    }


def _with_identity(client: _C, given: bool) -> _C:
    """``client`` named by the identity of the sandbox serving at its address, when one
    does (``gptools sandbox serve``, on this machine) and no identity was given."""
    if given:
        return client
    # Within the client's own deadline for a call: the probe is one more call.
    identity = served_sandbox_identity(client.base_url, deadline=client.deadline)
    return client if identity is None else client.with_options(server_identity=identity)


def connect(account: str | None = None, **client_options: Any) -> Client:
    """A :class:`~gptools.client.Client` for the real service or the embedded sandbox.

    ``account`` names the sandbox demo account to log in as (``individual``, ``partner``,
    ``third_party``, ``internal``, ``aggregator``, ``supplier``; ``None``:
    ``$GPTOOLS_SANDBOX_ACCOUNT``, else ``partner``); it is ignored for the real service.
    Other keyword arguments go to the client.

    The client's :attr:`~gptools.client.Client.server_identity` is the sandbox's state
    identity for a sandbox (the embedded one, the one ``GPTOOLS_SANDBOX_URL`` names, or one
    ``gptools sandbox serve`` serves at a loopback ``GP_BASE_URL``, asked at
    ``/_sandbox/identity``), read when the client is made; else the normalised base URL.
    """
    if real_service_configured():
        return _with_identity(Client(**client_options), "server_identity" in client_options)
    return Client(**{**_sandbox_credentials(account), **client_options})


def connect_async(account: str | None = None, **client_options: Any) -> AsyncClient:
    """Like :func:`connect`, returning an :class:`~gptools.client.AsyncClient`."""
    if real_service_configured():
        return _with_identity(AsyncClient(**client_options), "server_identity" in client_options)
    return AsyncClient(**{**_sandbox_credentials(account), **client_options})


__all__ = [
    "DEFAULT_SANDBOX_ACCOUNT",
    "SANDBOX_ACCOUNT_ENV",
    "SANDBOX_URL_ENV",
    "connect",
    "connect_async",
    "embedded_sandbox",
    "real_service_configured",
    "start_embedded_sandbox",
    "stop_embedded_sandbox",
]
