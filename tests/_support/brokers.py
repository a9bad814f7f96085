"""The real message brokers of the forwarding tests (RabbitMQ 127.0.0.1:5672 guest/guest,
NATS JetStream 127.0.0.1:4222; ``scripts/ensure-services`` starts them), each test with
a queue or stream of its own (a unique name: xdist-safe), read back whole and deleted
afterwards; and an HTTP sink that records what is POSTed to it."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RABBIT = ("127.0.0.1", 5672)
NATS = ("127.0.0.1", 4222)


def _rabbit_url(port: int) -> str:
    return f"amqp://guest:guest@127.0.0.1:{port}/%2F"


@dataclass
class RabbitQueue:
    """A durable queue of this test's own."""

    name: str

    def url(self, port: int = RABBIT[1]) -> str:
        """The forwarding URL of this queue, through ``port`` (a proxy's, say)."""
        return f"{_rabbit_url(port)}?queue={self.name}"

    def messages(self) -> list[tuple[str, str]]:
        """(message_id, body) of every message in the queue, taken off it."""
        import pika

        out: list[tuple[str, str]] = []
        connection = pika.BlockingConnection(pika.URLParameters(_rabbit_url(RABBIT[1])))
        try:
            channel = connection.channel()
            while True:
                method, properties, body = channel.basic_get(self.name, auto_ack=True)
                if method is None:
                    return out
                out.append((properties.message_id, body.decode()))
        finally:
            connection.close()


@contextmanager
def rabbit_queue() -> Iterator[RabbitQueue]:
    """A new durable queue, deleted afterwards."""
    import pika

    queue = RabbitQueue(f"gptools-test-{uuid.uuid4().hex}")
    params = pika.URLParameters(_rabbit_url(RABBIT[1]))
    connection = pika.BlockingConnection(params)
    try:
        connection.channel().queue_declare(queue.name, durable=True)
    finally:
        connection.close()
    try:
        yield queue
    finally:
        connection = pika.BlockingConnection(params)
        try:
            connection.channel().queue_delete(queue.name)
        finally:
            connection.close()


@dataclass
class NatsStream:
    """A JetStream stream of this test's own, over one subject."""

    name: str
    subject: str

    def url(self, port: int = NATS[1]) -> str:
        """The forwarding URL of this stream's subject, through ``port``."""
        return f"nats://127.0.0.1:{port}?subject={self.subject}&stream={self.name}"

    def messages(self) -> list[tuple[str, str]]:
        """(Nats-Msg-Id, body) of every message in the stream, in order."""
        return asyncio.run(self._messages())

    async def _messages(self) -> list[tuple[str, str]]:
        import nats

        nc = await nats.connect(f"nats://{NATS[0]}:{NATS[1]}")
        try:
            js = nc.jetstream()
            info = await js.stream_info(self.name)
            out = []
            for seq in range(info.state.first_seq, info.state.last_seq + 1):
                if info.state.messages == 0:
                    break
                msg = await js.get_msg(self.name, seq)
                out.append(((msg.headers or {}).get("Nats-Msg-Id", ""), (msg.data or b"").decode()))
            return out
        finally:
            await nc.close()


async def _stream(action: str, stream: NatsStream) -> None:
    import nats
    from nats.js.api import StreamConfig

    nc = await nats.connect(f"nats://{NATS[0]}:{NATS[1]}")
    try:
        js = nc.jetstream()
        if action == "add":
            await js.add_stream(
                StreamConfig(name=stream.name, subjects=[stream.subject], duplicate_window=120)
            )
        else:
            await js.delete_stream(stream.name)
    finally:
        await nc.close()


@contextmanager
def nats_stream() -> Iterator[NatsStream]:
    """A new stream (two-minute duplicate window), deleted afterwards."""
    token = uuid.uuid4().hex
    stream = NatsStream(f"GPTOOLS_TEST_{token}", f"gptools.test.{token}")
    asyncio.run(_stream("add", stream))
    try:
        yield stream
    finally:
        asyncio.run(_stream("delete", stream))


@dataclass
class HttpSink:
    """What an HTTP destination received: (Idempotency-Key, body) of each POST, in
    order; ``fail_with`` (while set) is the status it answers instead of 200."""

    url: str
    received: list[tuple[str, str]] = field(default_factory=list)
    fail_with: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def http_sink() -> Iterator[HttpSink]:
    """An HTTP server on loopback (a free port) recording every POST."""
    sink: HttpSink

    class _Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
            status = sink.fail_with or 200
            if status == 200:
                with sink.lock:
                    sink.received.append((self.headers.get("idempotency-key", ""), body))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    sink = HttpSink(f"http://127.0.0.1:{server.server_address[1]}/events")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield sink
    finally:
        server.shutdown()
        server.server_close()


def body_id(body: str) -> str:
    """The actionId a forwarded body names."""
    return str(json.loads(body)["actionId"])
