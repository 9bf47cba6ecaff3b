"""An aiohttp app served on 127.0.0.1:0 from a thread of the test process (for doubles the daemon talks to)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from aiohttp import web


class ThreadServer:
    """Serve `make_app()` in its own event loop thread; `port` is set once started."""

    def __init__(self, make_app: Callable[[], web.Application]) -> None:
        self.make_app = make_app
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ThreadServer:
        self._thread.start()
        assert self._ready.wait(10), "the test server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        runner = web.AppRunner(self.make_app(), shutdown_timeout=0.5)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = runner.addresses[0][1]
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(runner.cleanup())
