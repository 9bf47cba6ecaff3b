"""A request's deadline judged on arrival, not on when the event loop got round to it.

`asyncio.timeout()` cancels a request when its timer callback runs. The probe loop can run that callback late
(another stream's parsing, a GC pause, the process descheduled on a busy host), and then in the same loop turn
as the read that completes the answer, ahead of the task that would consume it: a request whose bytes arrived
well before the deadline failed as `timeout`. Here the timer asks `arrived(deadline_ns)` first (the caller reads
what the kernel holds for the connection and compares the arrival stamps of the answer's last bytes with the
deadline); an answer complete by its deadline is left to finish, within one more `timeout` at most, and a late
or incomplete one is cancelled and raises TimeoutError, as `asyncio.timeout()` does. `missed(end_ns)` applies
the same rule to a request that finished before the timer ran: its last byte's stamp decides, not the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import TracebackType

Arrived = Callable[[int], bool]  # deadline (perf_counter_ns) -> whether the whole answer arrived by then


class Deadline:
    """Async context manager: cancel the block `timeout_s` after entry unless the answer had arrived by then."""

    __slots__ = ("_arrived", "_cancelling", "_handle", "_task", "deadline_ns", "expired", "extended", "timeout_s")

    def __init__(self, timeout_s: float, arrived: Arrived) -> None:
        self.timeout_s, self._arrived = timeout_s, arrived
        self.deadline_ns = 0  # perf_counter_ns, set on entry
        self.expired = False  # the timer cancelled the block
        self.extended = False  # the timer found the answer complete in time and let the block finish
        self._task: asyncio.Task[object] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._cancelling = 0

    async def __aenter__(self) -> Deadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("Deadline must be used inside a task")
        loop = asyncio.get_running_loop()
        self._task, self._cancelling = task, task.cancelling()
        self.deadline_ns = time.perf_counter_ns() + int(self.timeout_s * 1e9)
        self._handle = loop.call_at(loop.time() + self.timeout_s, self._fire)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self.expired and self._task is not None and self._task.uncancel() <= self._cancelling \
                and kind is asyncio.CancelledError:
            raise TimeoutError from exc

    def missed(self, end_ns: int) -> bool:
        """Tell whether an answer whose last byte arrived at `end_ns` (perf_counter_ns) missed the deadline."""
        return end_ns > self.deadline_ns > 0

    def _fire(self) -> None:
        self._handle = None
        if not self.extended and self._judge():
            self.extended = True  # finishing a complete answer is CPU work only: one more timeout bounds it
            loop = asyncio.get_running_loop()
            self._handle = loop.call_at(loop.time() + self.timeout_s, self._fire)
            return
        if self._task is not None and not self._task.done():
            self.expired = True
            self._task.cancel()

    def _judge(self) -> bool:
        try:
            return self._arrived(self.deadline_ns)
        except Exception:  # a peer's bytes that break the check make this request a timeout, never a hung one
            return False
