"""Publishing to NATS JetStream (nats-py, extra ``forward``): ``Nats-Msg-Id`` is the
actionId, so the stream drops a second publication of an action within its duplicate
window (two minutes by default), and the publish waits for the stream's acknowledgement.
nats-py is asynchronous: the publisher runs its own event loop in the forwarding
thread."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gptools.errors import import_extra
from gptools.webhooks._forward_destinations import Destination

_CAPABILITY = "forwarding to NATS JetStream"


class NatsPublisher:
    """One destination's connection (opened on first use, again after a failure)."""

    def __init__(self, destination: Destination, timeout: timedelta) -> None:
        self.nats: Any = import_extra("nats", "forward", _CAPABILITY)
        self.destination = destination
        self.subject = destination.parameter("subject") or ""
        self.stream = destination.parameter("stream")
        self.timeout = timeout.total_seconds()
        parts = urlsplit(destination.url)
        self._server = urlunsplit(parts._replace(query="", fragment=""))
        self._loop = asyncio.new_event_loop()
        self._client: Any = None
        self._js: Any = None

    async def _quiet(self, exc: Exception) -> None:
        """nats-py's error callback: the failure reaches the caller as an exception."""

    async def _open(self) -> Any:
        if self._js is None:
            self._client = await self.nats.connect(
                self._server,
                connect_timeout=self.timeout,
                allow_reconnect=False,
                max_reconnect_attempts=0,
                error_cb=self._quiet,
                disconnected_cb=None,
            )
            self._js = self._client.jetstream(timeout=self.timeout)
        return self._js

    async def _publish(self, action_id: str, body: str) -> None:
        js = await self._open()
        await js.publish(
            self.subject,
            body.encode(),
            timeout=self.timeout,
            stream=self.stream,
            headers={"Nats-Msg-Id": action_id, "Content-Type": "application/json"},
        )

    def publish(self, action_id: str, body: str) -> None:
        """Publish one action and wait for the stream's acknowledgement (a duplicate
        within the window is acknowledged as one, and not stored twice)."""
        self._loop.run_until_complete(
            asyncio.wait_for(self._publish(action_id, body), self.timeout * 2)
        )

    def close(self) -> None:
        """Close the connection (never raises); the loop stays for the next one."""
        client, self._client, self._js = self._client, None, None
        if client is not None:
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.wait_for(client.close(), self.timeout))

    def __del__(self) -> None:
        if not self._loop.is_closed() and not self._loop.is_running():
            self._loop.close()
