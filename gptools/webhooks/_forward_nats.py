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
    """One destination's connection, opened on first use; :meth:`close` ends it and the
    publisher's event loop (the forwarding stage makes a new publisher after a failure)."""

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
            # Kept before connecting: a connect that fails half-way (the broker went away
            # between TCP and INFO) leaves a transport that close() must end.
            self._client = self.nats.NATS()
            await self._client.connect(
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
        """End the connection, whatever state it is in, and the event loop (never
        raises; the publisher is not used again)."""
        client, self._client, self._js = self._client, None, None
        loop = self._loop
        if loop.is_closed():
            return
        if client is not None:
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait_for(client.close(), self.timeout))
            transport = getattr(client, "_transport", None)
            if transport is not None:
                with contextlib.suppress(Exception):
                    transport.close()
        with contextlib.suppress(Exception):
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(asyncio.sleep(0))  # let closed transports finish
        loop.close()
