"""The parent's side of the worker processes: spawn them, hand out stage orders, collect what comes back.

Workers are spawned once and reused by every stage; the pool grows when a stage needs more of them. A
worker that dies mid-stage is reported (its stage ends with what arrived) and replaced for the next one; so is
one that has not answered STOP_GRACE_S after being told to stop (its loop is wedged): it is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from sloguard.bench import worker
from sloguard.bench.order import LoopLag, StageOrder
from sloguard.bench.record import RequestRecord
from sloguard.bench.workload import WorkloadSpec

QUIT_TIMEOUT_S = 5.0
READY_TIMEOUT_S = 60.0  # spawning imports aiohttp and sloguard: seconds on a loaded 2-core host
STOP_GRACE_S = 10.0  # a worker told to stop cancels its requests at once: 10 s of silence means it cannot


@dataclass
class _Proc:
    proc: Any
    cmd: Connection
    out: Connection


@dataclass
class StageClient:
    """What the workers said about a stage: loop lag per worker, requests cancelled, dead workers."""

    lags: list[LoopLag] = field(default_factory=list)
    cancelled: int = 0
    died: list[int] = field(default_factory=list)


class WorkerPool:
    """Own the worker processes of one run."""

    def __init__(self, workload: WorkloadSpec) -> None:
        self.workload = workload
        self._ctx = mp.get_context("spawn")
        self._procs: list[_Proc] = []
        self._stopping = asyncio.Event()

    @property
    def size(self) -> int:
        """Return the number of live workers."""
        return len(self._procs)

    def pids(self) -> list[int]:
        """Return the worker processes' pids (for CPU accounting in benchmarks)."""
        return [int(p.proc.pid) for p in self._procs]

    async def ensure(self, n: int) -> None:
        """Have at least `n` live workers (replacing dead ones), each ready to take an order."""
        for p in self._procs:
            if not p.proc.is_alive():
                p.cmd.close()
                p.out.close()
        self._procs = [p for p in self._procs if p.proc.is_alive()]
        new = []
        while len(self._procs) < n:
            cmd, cmd_child = self._ctx.Pipe()
            out_child, out = self._ctx.Pipe()
            proc = self._ctx.Process(target=worker.main, args=(self.workload, len(self._procs), cmd_child, out_child),
                                     name=f"sloguard-bench-{len(self._procs)}", daemon=True)
            proc.start()
            cmd_child.close()
            out_child.close()
            self._procs.append(_Proc(proc, cmd, out))
            new.append(self._procs[-1])
        ready = await asyncio.gather(*(asyncio.to_thread(_ready, p.out) for p in new))
        if not all(ready):
            raise RuntimeError(f"a bench worker process did not start within {READY_TIMEOUT_S:g}s")

    async def run(self, orders: Sequence[StageOrder], on_records: Callable[[list[RequestRecord]], None]) -> StageClient:
        """Give worker i orders[i]; feed records to `on_records` as they arrive; return when all are done."""
        loop = asyncio.get_running_loop()
        client = StageClient()
        pending = set(range(len(orders)))
        finished = asyncio.Event()
        self._stopping = asyncio.Event()
        for i, order in enumerate(orders):
            self._procs[i].cmd.send(("stage", order))

        def on_message(i: int) -> None:
            conn = self._procs[i].out
            try:
                while conn.poll():
                    self._handle(i, conn.recv(), client, pending, on_records)
            except (EOFError, OSError):
                client.died.append(i)
                pending.discard(i)
                loop.remove_reader(conn.fileno())
            if not pending:
                finished.set()

        for i in range(len(orders)):
            loop.add_reader(self._procs[i].out.fileno(), on_message, i)
        try:
            if pending:
                await self._until_done(finished, pending, client)
        finally:
            for i in range(len(orders)):
                with contextlib.suppress(ValueError, OSError):
                    loop.remove_reader(self._procs[i].out.fileno())
        return client

    async def _until_done(self, finished: asyncio.Event, pending: set[int], client: StageClient) -> None:
        """Wait for every worker's "done"; kill those still silent STOP_GRACE_S after a stop."""
        done = asyncio.ensure_future(finished.wait())
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait([done, stopping], return_when=asyncio.FIRST_COMPLETED)
            if not done.done():
                await asyncio.wait([done], timeout=STOP_GRACE_S)
        finally:
            done.cancel()
            stopping.cancel()
        for i in sorted(pending):  # told to stop, silent since: its records so far are kept, the rest is lost
            self._procs[i].proc.kill()
            self._procs[i].proc.join(1.0)
            client.died.append(i)
        pending.clear()

    @staticmethod
    def _handle(i: int, msg: Any, client: StageClient, pending: set[int],
                on_records: Callable[[list[RequestRecord]], None]) -> None:
        if msg[0] == "records":
            on_records(worker.unpack(msg[1]))
        elif msg[0] == "done":
            _, _stage, _index, lag, cancelled = msg
            client.lags.append(lag)
            client.cancelled += cancelled
            pending.discard(i)

    def stop_stage(self) -> None:
        """Tell every worker to end its stage now (requests in flight are cancelled and counted)."""
        self._stopping.set()
        for p in self._procs:
            with contextlib.suppress(OSError):
                p.cmd.send(("stop", None))

    def close(self) -> None:
        """Ask every worker to quit; terminate those that do not within QUIT_TIMEOUT_S."""
        for p in self._procs:
            with contextlib.suppress(OSError):
                p.cmd.send(("quit", None))
        for p in self._procs:
            p.proc.join(QUIT_TIMEOUT_S)
            if p.proc.is_alive():
                p.proc.terminate()
                p.proc.join(1.0)
            p.cmd.close()
            p.out.close()
        self._procs = []


def _ready(conn: Connection) -> bool:
    """Wait for a new worker's ("ready", i) message."""
    try:
        return bool(conn.poll(READY_TIMEOUT_S)) and conn.recv()[0] == "ready"
    except (EOFError, OSError):
        return False
