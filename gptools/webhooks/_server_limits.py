"""The bounds the receiver's HTTP server holds against strangers (issue 22), as one
setting per worker; their defaults are ``gptools.spec``'s ``RECEIVER_*`` constants.

A delivery is a few hundred bytes with a handful of headers; nothing legitimate comes near
these limits, and everything past them is refused by the server before the receiver's
application sees it (``_server.GuardedHttpToolsProtocol``). They reach each uvicorn worker
as part of the receiver's configuration (``_config.ReceiverConfig.limits``).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from typing import Any

from gptools import spec

#: The ``http`` setting uvicorn imports in each worker: httptools behind the guard.
PROTOCOL = "gptools.webhooks._server:GuardedHttpToolsProtocol"


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """The connection-level bounds of ``gptools webhooks serve`` (one set per worker)."""

    max_header_bytes: int = spec.RECEIVER_MAX_HEADER_BYTES
    max_header_fields: int = spec.RECEIVER_MAX_HEADER_FIELDS
    header_timeout_s: float = spec.RECEIVER_HEADER_TIMEOUT.total_seconds()
    body_timeout_s: float = spec.RECEIVER_BODY_TIMEOUT.total_seconds()
    keep_alive_timeout_s: float = spec.RECEIVER_KEEP_ALIVE_TIMEOUT.total_seconds()
    max_connections: int = spec.RECEIVER_MAX_CONNECTIONS


def descriptors_needed(max_connections: int) -> int:
    """File descriptors one worker needs for ``max_connections`` connections: the
    deploy section's ``LimitNOFILE`` is at least this for the default."""
    return max_connections + spec.RECEIVER_FD_OVERHEAD


def fit_to_descriptor_limit(max_connections: int) -> tuple[int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` (the workers inherit it) as far as
    ``max_connections`` needs and the hard limit allows; return the connection limit that
    fits in it, and the soft limit. A worker then never runs out of descriptors, which
    would cost real deliveries a reset connection and nothing logged."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = descriptors_needed(max_connections)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        if target > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft == resource.RLIM_INFINITY:
        return max_connections, soft
    return min(max_connections, soft - spec.RECEIVER_FD_OVERHEAD), soft


def uvicorn_settings(limits: ServerLimits) -> dict[str, Any]:
    """The ``uvicorn.run`` settings of the guarded server (the limits themselves reach
    each worker in its :class:`~gptools.webhooks.ReceiverConfig`)."""
    return {
        "http": PROTOCOL,
        "loop": "uvloop",
        "timeout_keep_alive": limits.keep_alive_timeout_s,
    }
