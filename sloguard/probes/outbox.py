"""The probe process's side of the results pipe: a feeder thread pickles and writes, so the loop never blocks."""

from __future__ import annotations

import queue
import threading
from multiprocessing.connection import Connection
from typing import Any


class Outbox:
    """Send (kind, value) messages to the parent from a feeder thread; `close` flushes them all."""

    def __init__(self, conn: Connection) -> None:
        self._conn, self._queue = conn, queue.SimpleQueue[tuple[str, Any] | None]()
        self._thread = threading.Thread(target=self._feed, name="sloguard-probe-results", daemon=True)
        self._thread.start()

    def put(self, item: tuple[str, Any]) -> None:
        """Queue one message (never blocks the loop)."""
        self._queue.put(item)

    def _feed(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._conn.send(item)
            except OSError:  # the parent is gone: nothing to deliver to
                return

    def close(self) -> None:
        """Send what is queued, then stop the thread."""
        self._queue.put(None)
        self._thread.join()
        self._conn.close()
