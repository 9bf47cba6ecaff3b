"""A bench worker process: one asyncio loop doing only network I/O and timestamps, like the probe process.

Requests go out through the probes' own code (sloguard.bench.behaviour -> sloguard.probes.PROBES), so
the bench times exactly as the daemon's probes do. Results go back in batches through a sender thread,
so a slow parent can never block this loop. Open-loop sends sleep until 1 ms before their scheduled time
and then yield to the loop until it is due (asyncio's timers wake up to 1 ms late: epoll's resolution).
Closed-loop streams start 1 ms apart (stream k at k ms; 1024 streams over ~1 s): one loop cannot send
N requests at the same instant, and a burst of its own making would land in the first requests' lag.
A request not ended OVERDUE_S past its own timeout is cancelled and recorded as failed: one whose deadline
was lost in the HTTP stack cannot hold its stream (and the stage) for ever.
"""

from __future__ import annotations

import asyncio
import gc
import pickle
import queue
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

from sloguard.bench.behaviour import BEHAVIOURS, Send
from sloguard.bench.order import LoopLag, StageOrder
from sloguard.bench.record import RequestRecord, t0_offset
from sloguard.bench.workload import RequestSpec, WorkloadSpec
from sloguard.model import ProbeResult
from sloguard.probes.job import ProbeJob
from sloguard.probes.stream import make_session
from sloguard.probes.timing import percentile

SPIN_S = 0.001  # the last stretch before an open-loop send is waited by yielding, not by a timer
FLUSH_S = 0.1  # records are sent to the parent at least this often
LAG_PERIOD_S = 0.05
STOP_CHECK_S = 0.2
RAMP_NS = 1_000_000  # closed-loop stream k starts k ms after the stage: no start-up burst of the client's own
NS = 1e-9
OVERDUE_S = 5.0


def main(workload: WorkloadSpec, index: int, cmd: Connection, out: Connection) -> None:
    """Entry point of a worker process: serve stage orders from `cmd` until told to quit."""
    gc.freeze()  # import-time objects never die; a full collection over them would stall stamps
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops stages via `cmd`
    outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    sender = threading.Thread(target=_send_loop, args=(outbox, out), daemon=True)
    sender.start()
    asyncio.run(Worker(workload, index, outbox.put).serve(cmd))
    outbox.put(None)
    sender.join(5.0)


def _send_loop(outbox: queue.SimpleQueue[Any], out: Connection) -> None:
    while (item := outbox.get()) is not None:
        try:
            out.send(item)  # records arrive pickled: this pickle is a list of bytes, a copy (GIL-light)
        except (OSError, EOFError):
            return


class Worker:
    """Run stage orders on the current loop; `emit` receives ("records", [pickled RequestRecord, ...]) and
    ("done", stage, worker, LoopLag, cancelled) tuples (see `unpack`)."""

    def __init__(self, workload: WorkloadSpec, index: int, emit: Callable[[Any], None],
                 clock: Callable[[], int] = time.perf_counter_ns,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 behaviours: Mapping[str, Callable[[str], Send]] = BEHAVIOURS) -> None:
        self.workload, self.index, self.emit = workload, index, emit
        self.clock, self.sleep, self.behaviours = clock, sleep, behaviours
        self.session: Any = None
        self._batch: list[bytes] = []
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    async def serve(self, cmd: Connection) -> None:
        """Read commands: ("stage", order) runs it, ("stop", None) ends the running stage, ("quit", None)."""
        loop = asyncio.get_running_loop()
        orders: asyncio.Queue[StageOrder | None] = asyncio.Queue()

        def on_command() -> None:
            try:
                while cmd.poll():
                    kind, value = cmd.recv()
                    if kind == "stop":
                        self._stop.set()
                    else:
                        orders.put_nowait(value if kind == "stage" else None)
            except (EOFError, OSError):
                loop.remove_reader(cmd.fileno())
                self._stop.set()
                orders.put_nowait(None)

        loop.add_reader(cmd.fileno(), on_command)
        async with make_session(self.workload.settle_s) as self.session:
            self.emit(("ready", self.index))
            while (order := await orders.get()) is not None:
                await self.run(order)
        loop.remove_reader(cmd.fileno())

    async def run(self, order: StageOrder) -> None:
        """Run one stage order to its end (or a stop), then emit its last records and its loop lag."""
        self._stop.clear()
        lags: list[float] = []
        monitor = asyncio.create_task(self._monitor(lags))
        flusher = asyncio.create_task(self._flusher())
        cancelled = 0
        try:
            if order.kind == "rate":
                await self._open_loop(order)
            else:
                await self._closed_loop(order)
            stopper = asyncio.ensure_future(self._stop.wait())
            while self._tasks and not self._stop.is_set():
                await asyncio.wait([*self._tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
        finally:
            cancelled = len(self._tasks)  # in flight when the stage was stopped: never measured
            for task in (monitor, flusher, *self._tasks):
                task.cancel()
            await asyncio.gather(monitor, flusher, *self._tasks, return_exceptions=True)
            self._tasks.clear()
        self._flush()
        self.emit(("done", order.stage, self.index, _lag(lags), cancelled))

    async def _open_loop(self, order: StageOrder) -> None:
        slots = asyncio.Semaphore(order.max_inflight)
        for seq, offset in order.arrivals:
            due = order.start_ns + int(offset / NS)
            await self._until(due)
            if self._stop.is_set():
                return
            await slots.acquire()  # a client at its in-flight limit sends late, and the lag is recorded
            self._spawn(self._timed(order, self.workload.request(order.stage, seq), due, slots.release))

    async def _until(self, due_ns: int) -> None:
        while (ahead := (due_ns - self.clock()) * NS - SPIN_S) > 0 and not self._stop.is_set():
            await self.sleep(min(ahead, STOP_CHECK_S))  # long waits still notice a stop
        while self.clock() < due_ns and not self._stop.is_set():
            await self.sleep(0)

    async def _closed_loop(self, order: StageOrder) -> None:
        counter = iter(range(order.first_seq, 1 << 62, order.stride))
        started = {"measured": 0}
        for k in range(order.streams):
            first = order.start_ns + (order.first_seq + k * order.stride) * RAMP_NS
            self._spawn(self._stream(order, counter, started, first))

    async def _stream(self, order: StageOrder, counter: Any, started: dict[str, int], first_ns: int) -> None:
        scheduled = first_ns
        await self._until(first_ns)
        while not self._stop.is_set():
            offset = (scheduled - order.start_ns) * NS
            if order.end_s is not None and offset >= order.end_s:
                return
            if order.quota is not None and started["measured"] >= order.quota:
                return
            req = self.workload.request(order.stage, next(counter))
            if not order.is_warmup(req.seq, offset):
                started["measured"] += 1
            scheduled = await self._timed(order, req, scheduled, None)

    async def _timed(self, order: StageOrder, req: RequestSpec, scheduled_ns: int,
                     release: Callable[[], None] | None) -> int:
        """Send one request, stamp it, queue its record; return when it ended (ns)."""
        job = self.workload.job_for(req)
        send = self.behaviours[req.behaviour](job.api)
        sent = self.clock()
        try:
            result = await self._bounded(send(self.session, job, req.prompt), job.timeout + OVERDUE_S)
        except Exception as exc:  # a client bug must show up as a failed request, not a silent gap
            result = _failed(job, req, f"probe crashed: {type(exc).__name__}")
        if result is None:
            result = _failed(job, req, f"timeout after {job.timeout:g}s (abandoned {OVERDUE_S:g}s later: its "
                                       "own deadline did not end it)")
        ended = self.clock()
        if release is not None:
            release()
        start = order.start_ns
        sched_s = (scheduled_ns - start) * NS
        record = RequestRecord(
            stage=order.stage, seq=req.seq, worker=self.index, behaviour=req.behaviour, max_tokens=req.max_tokens,
            scheduled_s=sched_s, sent_s=(sent - start) * NS, t0_s=(t0_offset(result, sent) - start) * NS,
            ended_s=(ended - start) * NS, warmup=order.is_warmup(req.seq, sched_s), result=result)
        asyncio.get_running_loop().call_soon(self._pack, record)  # not between this end and the next send
        return ended

    async def _bounded(self, send: Awaitable[ProbeResult], limit_s: float) -> ProbeResult | None:
        """Return the send's result, or None when it has not ended within `limit_s` (it is cancelled then).

        The send runs in this task (no extra hop before it starts: its send lag stays the stream's own); a
        timer task on the worker's clock cancels this one at the limit, the way asyncio.timeout does.
        """
        me = asyncio.current_task()
        assert me is not None
        fired = False

        async def expire() -> None:
            nonlocal fired
            await self.sleep(limit_s)
            fired = True
            me.cancel()

        timer = asyncio.ensure_future(expire())
        try:
            return await send
        except asyncio.CancelledError:
            if fired and me.uncancel() == 0:  # our cancel alone: the stage's stop is not swallowed
                return None
            raise
        finally:
            timer.cancel()

    def _pack(self, record: RequestRecord) -> None:
        """Pickle one record here (~20 us), so the sender thread never holds the GIL for a whole batch."""
        self._batch.append(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flusher(self) -> None:
        while True:
            await self.sleep(FLUSH_S)
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            batch, self._batch = self._batch, []
            self.emit(("records", batch))

    async def _monitor(self, lags: list[float]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.sleep(LAG_PERIOD_S)
            fut: asyncio.Future[int] = loop.create_future()
            start = self.clock()
            loop.call_soon(_resolve, fut, self.clock)
            lags.append((await fut - start) * NS)


def _failed(job: ProbeJob, req: RequestSpec, error: str) -> ProbeResult:
    return ProbeResult(ts=time.time(), probe=job.name, target=job.target, model=job.model, api=job.api, ok=False,
                       error=error, prompt_bucket=req.prompt.bucket)


def _resolve(fut: asyncio.Future[int], clock: Callable[[], int]) -> None:
    if not fut.done():
        fut.set_result(clock())


def _lag(samples: list[float]) -> LoopLag:
    if not samples:
        return LoopLag(0, 0.0, 0.0, 0.0)
    ordered = sorted(samples)
    return LoopLag(len(ordered), percentile(ordered, 0.5), percentile(ordered, 0.99), ordered[-1])


def unpack(batch: list[bytes]) -> list[RequestRecord]:
    """Return the records of one ("records", batch) message."""
    return [pickle.loads(b) for b in batch]
