"""Where the forwarding stage publishes: a destination is a name and a URL, its kind read
from the scheme (``amqp://``/``amqps://`` RabbitMQ, ``nats://``/``tls://`` NATS
JetStream, ``http://``/``https://`` an HTTP URL). The URL may carry credentials; they
never reach a repr, a log line or a metric (:attr:`Destination.shown`).

``forward`` (the setting) lists destinations separated by white space, each
``NAME=URL`` (or a bare URL, named for its kind). What each kind reads from the URL:

- RabbitMQ: ``amqp://USER:PASSWORD@HOST:PORT/VHOST?queue=Q`` publishes to queue ``Q``
  through the default exchange; ``?exchange=X&routing_key=K`` to an exchange instead.
  Other query parameters are pika's (``heartbeat``, ``ssl_options``...).
- NATS: ``nats://[USER:PASSWORD@]HOST:PORT?subject=S[&stream=NAME]``: JetStream publish
  to subject ``S`` (a stream must hold it; ``stream`` makes the broker check which).
- HTTP: the URL itself, POSTed the body as JSON (user-info, if any, as Basic auth).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs, urlsplit

from gptools._secrets import redact_url

DestinationKind = Literal["rabbitmq", "nats", "http"]

_KINDS: dict[str, DestinationKind] = {
    "amqp": "rabbitmq",
    "amqps": "rabbitmq",
    "nats": "nats",
    "tls": "nats",
    "http": "http",
    "https": "http",
}
#: What a destination's name may be.
DESTINATION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: The query parameters of a URL that are ours, not the client library's.
OWN_PARAMETERS: dict[DestinationKind, tuple[str, ...]] = {
    "rabbitmq": ("queue", "exchange", "routing_key"),
    "nats": ("subject", "stream"),
    "http": (),
}


@dataclass(frozen=True, slots=True)
class Destination:
    """One forwarding destination: ``name`` (in metrics, logs and the store), ``url``
    (with its credentials: never shown) and ``kind``."""

    name: str
    url: str
    kind: DestinationKind

    @property
    def shown(self) -> str:
        """The URL as it may be shown: its password blanked."""
        return redact_url(self.url)

    def parameter(self, name: str) -> str | None:
        """The URL's query parameter ``name`` (the last one given), or None."""
        values = parse_qs(urlsplit(self.url).query).get(name)
        return values[-1] if values else None

    def __repr__(self) -> str:
        return f"Destination(name={self.name!r}, url={self.shown!r}, kind={self.kind!r})"


def parse_destinations(text: str) -> tuple[Destination, ...]:
    """The destinations a ``forward`` setting lists; ValueError saying what is wrong
    (never quoting a password)."""
    out: list[Destination] = []
    for item in text.split():
        name, sep, url = item.partition("=")
        if not sep or "://" in name:
            name, url = "", item
        scheme = urlsplit(url).scheme.lower()
        kind = _KINDS.get(scheme)
        if kind is None:
            raise ValueError(
                f"{redact_url(url)!r}: a destination's URL starts amqp://, amqps://, "
                "nats://, tls://, http:// or https://"
            )
        name = name or kind
        if not DESTINATION_NAME.fullmatch(name):
            raise ValueError(f"destination name {name!r}: letters, digits, '_', '.', '-' (1-64)")
        if any(d.name == name for d in out):
            raise ValueError(f"two destinations named {name!r}: name them (NAME=URL)")
        destination = Destination(name, url, kind)
        if kind == "rabbitmq" and not (
            destination.parameter("queue") or destination.parameter("routing_key")
        ):
            raise ValueError(f"{destination.shown!r}: name the queue (?queue=Q) or routing_key")
        if kind == "nats" and not destination.parameter("subject"):
            raise ValueError(f"{destination.shown!r}: name the subject (?subject=S)")
        if not urlsplit(url).hostname:
            raise ValueError(f"{destination.shown!r}: no host")
        out.append(destination)
    return tuple(out)
