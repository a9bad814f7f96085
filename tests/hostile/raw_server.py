"""A raw asyncio server on 127.0.0.1 in a thread of its own, for the tests whose server
must misbehave as no real one does (drip, stream forever, echo what it was given): a
subclass answers each connection in :meth:`RawServer.handle`."""

from __future__ import annotations

import asyncio
import threading
from typing import Self


class RawServer:
    """A context manager: entering starts the server (:attr:`port`, :attr:`url`), leaving
    stops it and cancels the handlers still running (dripping or streaming to a client
    that left), so that every loop it runs ends."""

    #: The port it listens on, once entered.
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer one connection."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        ready = threading.Event()
        running: set[asyncio.Task[None]] = set()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            running.add(task)
            try:
                await self.handle(reader, writer)
            finally:
                running.discard(task)

        async def main() -> None:
            server = await asyncio.start_server(serve, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self._stop = asyncio.Event()
            ready.set()
            async with server:
                await self._stop.wait()
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(main())
            self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(10), f"the {type(self).__name__} did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"
