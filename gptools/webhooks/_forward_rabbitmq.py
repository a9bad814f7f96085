"""Publishing to RabbitMQ (pika's blocking connection, extra ``forward``): persistent
messages with publisher confirms, ``message_id`` the actionId, ``mandatory`` so that a
message no queue takes is a failure, not a silent loss."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from gptools.errors import import_extra
from gptools.webhooks._forward_destinations import OWN_PARAMETERS, Destination

_CAPABILITY = "forwarding to RabbitMQ"


class RabbitPublisher:
    """One destination's connection and confirm-mode channel, opened on first use and
    again after a failure (the caller closes the publisher on any error)."""

    def __init__(self, destination: Destination, timeout: timedelta) -> None:
        self.pika: Any = import_extra("pika", "forward", _CAPABILITY)
        self.destination = destination
        self.exchange = destination.parameter("exchange") or ""
        self.routing_key = destination.parameter("routing_key") or destination.parameter("queue")
        seconds = timeout.total_seconds()
        parts = urlsplit(destination.url)
        theirs = [(k, v) for k, v in parse_qsl(parts.query) if k not in OWN_PARAMETERS["rabbitmq"]]
        theirs += [
            ("connection_attempts", "1"),
            ("socket_timeout", f"{seconds:g}"),
            ("blocked_connection_timeout", f"{seconds:g}"),
        ]
        self._url = urlunsplit(parts._replace(query=urlencode(theirs)))
        self._connection: Any = None
        self._channel: Any = None

    def _open(self) -> Any:
        if self._channel is None:
            self._connection = self.pika.BlockingConnection(self.pika.URLParameters(self._url))
            channel = self._connection.channel()
            channel.confirm_delivery()
            self._channel = channel
        return self._channel

    def publish(self, action_id: str, body: str) -> None:
        """Publish one action and wait for the broker's confirm (raises on a nack, an
        unroutable message, a lost connection)."""
        self._open().basic_publish(
            exchange=self.exchange,
            routing_key=self.routing_key or "",
            body=body.encode(),
            properties=self.pika.BasicProperties(
                message_id=action_id,
                content_type="application/json",
                delivery_mode=2,  # persistent: it survives a broker restart once confirmed
            ),
            mandatory=True,
        )

    def close(self) -> None:
        """Close the connection (never raises)."""
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()
