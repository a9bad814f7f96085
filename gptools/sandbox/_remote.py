"""A sandbox served by another process, read through its inspection paths.

``gptools run-notebooks`` starts one sandbox and hands its address to every notebook
kernel; in the kernel, :class:`RemoteSandbox` gives the same read-only view of accounts,
campaigns and participants that a :class:`~gptools.sandbox.RunningSandbox` gives in
process. It talks plain HTTP (httpx), never through :mod:`gptools.client`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from gptools._bounded_transport import CALL_DEADLINE, bounded_sync_transport
from gptools.sandbox._accounts import SandboxAccount
from gptools.sandbox._inspect import PREFIX
from gptools.sandbox._state import IDENTITY_RE, StoredCampaign

_TIMEOUT_S = 10.0
#: The longest :func:`served_sandbox_identity` takes, the whole exchange (it asks loopback
#: only, where a sandbox answers in milliseconds).
_PROBE_TIMEOUT_S = 2.0
#: The largest answer :func:`served_sandbox_identity` reads.
_PROBE_MAX_BYTES = 1024
#: The hosts :func:`served_sandbox_identity` asks: a sandbox serves on this machine.
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def _get(base_url: str, path: str) -> Any:
    answer = httpx.get(f"{base_url}{PREFIX}{path}", timeout=_TIMEOUT_S)
    answer.raise_for_status()
    return answer.json()


def served_sandbox_identity(base_url: str, *, deadline: float = _PROBE_TIMEOUT_S) -> str | None:
    """The identity of the sandbox serving at ``base_url`` (``gptools sandbox serve``), or
    ``None`` when the address is not on this machine or what answers there is not a
    sandbox. Only loopback addresses are asked: the real provider never is one, and it is
    never sent a request for a sandbox-only path.

    The probe ends within ``deadline`` seconds (at most :data:`_PROBE_TIMEOUT_S`) for the
    whole exchange, every socket wait included: whatever answers on a loopback port (one
    byte every half second, say) cannot hold the command that asks."""
    host = httpx.URL(base_url).host.lower()
    if host not in _LOOPBACK_HOSTS and not host.startswith("127."):
        return None
    seconds = max(0.0, min(deadline, _PROBE_TIMEOUT_S))
    token = CALL_DEADLINE.set(time.monotonic() + seconds)
    try:
        probe = f"{base_url.rstrip('/')}{PREFIX}/identity"
        with (
            httpx.Client(transport=bounded_sync_transport(None), timeout=seconds) as http,
            http.stream("GET", probe) as answer,
        ):
            if answer.status_code != 200:
                return None
            body = b""
            for part in answer.iter_bytes():
                body += part
                if len(body) > _PROBE_MAX_BYTES:
                    return None  # a sandbox's answer is a few dozen bytes
        value = json.loads(body).get("identity")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    finally:
        CALL_DEADLINE.reset(token)
    # Bounded and well-formed, or not a sandbox's answer.
    return value if isinstance(value, str) and IDENTITY_RE.fullmatch(value) else None


@dataclass(frozen=True)
class RemoteState:
    """The campaigns and participants of a sandbox in another process (read on access)."""

    base_url: str

    @property
    def campaigns(self) -> dict[str, StoredCampaign]:
        """Campaign id -> the stored campaign, as the sandbox has them now."""
        return {
            c["campaignId"]: StoredCampaign(
                c["campaignId"],
                c["brandId"],
                c["requestId"],
                c["body"],
                datetime.fromisoformat(c["createdAt"]),
            )
            for c in _get(self.base_url, "/campaigns")
        }

    def participants(self, campaign_id: str) -> dict[str, int]:
        """Player id -> how many times it was added (empty for an unknown campaign)."""
        answer = httpx.get(
            f"{self.base_url}{PREFIX}/campaigns/{campaign_id}/participants", timeout=_TIMEOUT_S
        )
        if answer.status_code == 404:
            return {}
        answer.raise_for_status()
        return {str(k): int(v) for k, v in answer.json().items()}


@dataclass(frozen=True)
class RemoteSandbox:
    """A sandbox another process serves at ``base_url``: its demo accounts and state."""

    base_url: str
    accounts: Mapping[str, SandboxAccount] = field(default_factory=dict)

    @classmethod
    def at(cls, base_url: str) -> RemoteSandbox:
        """The sandbox at ``base_url``; reads its accounts (raises if nothing answers)."""
        base_url = base_url.rstrip("/")
        accounts = {
            a["key"]: SandboxAccount(
                a["key"], a["username"], a["password"], a["principalType"], tuple(a["brandIds"])
            )
            for a in _get(base_url, "/accounts")
        }
        return cls(base_url, accounts)

    @property
    def identity(self) -> str:
        """The identity of the sandbox's state, read now (new after a reset)."""
        value = _get(self.base_url, "/identity").get("identity")
        if not isinstance(value, str) or not IDENTITY_RE.fullmatch(value):
            raise ValueError(f"{self.base_url} gave no sandbox identity ({value!r:.80})")
        return value

    @property
    def state(self) -> RemoteState:
        """Campaigns and participants, read over HTTP."""
        return RemoteState(self.base_url)

    def reset(self) -> None:
        """Forget requests, campaigns, participants, subscriptions, faults and rate windows."""
        httpx.post(f"{self.base_url}{PREFIX}/reset", timeout=_TIMEOUT_S).raise_for_status()
