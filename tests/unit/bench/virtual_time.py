"""A virtual clock for asyncio code that takes `clock` and `sleep`: time moves only when every task waits."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
MIN_SLEEP_NS = 1_000  # sleep(0) still moves time a little, so a polling loop cannot spin forever


class VirtualTime:
    """`clock()` in ns and `sleep(s)`; `run(coro)` drives the loop, jumping to the next wake-up when idle."""

    def __init__(self, start_ns: int = 0) -> None:
        self.now = start_ns
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = 0

    def clock(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time on without yielding: the loop is stuck for that long (a client stall)."""
        self.now += int(seconds * 1e9)

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._heap, (self.now + max(int(seconds * 1e9), MIN_SLEEP_NS), self._seq, fut))
        await fut

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        task = asyncio.ensure_future(coro)
        while not task.done():
            for _ in range(50):  # let every runnable task reach its next wait
                await asyncio.sleep(0)
            while self._heap and self._heap[0][2].cancelled():
                heapq.heappop(self._heap)
            if self._heap and not task.done():
                when, _, fut = heapq.heappop(self._heap)
                self.now = max(self.now, when)
                fut.set_result(None)
        return task.result()
