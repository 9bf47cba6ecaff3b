"""Host source: CPU, memory, threads, fds and restarts of the configured serving processes (psutil)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from prometheus_client.metrics_core import Metric

from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import HostSpec, ProcessSpec
from sloguard.families import declare
from sloguard.sources.base import SourceError, SourceOutput
from sloguard.sources.processes import ProcessFinder, describe

T = TypeVar("T")
log = logging.getLogger("sloguard.sources.host")
_UNSEEN = (-1, -1.0)  # identity before the first observation of a process


class ThreadGuard:
    """Run one blocking call at a time in a thread; while a timed-out call still hangs, fail fast."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._pending: asyncio.Future[Any] | None = None

    async def run(self, fn: Callable[[], T]) -> T:
        """Return fn() run in a thread; raise SourceError("busy") if the previous call has not returned."""
        if self._pending is not None and not self._pending.done():
            raise SourceError("busy", f"previous {self._what} collection has not returned yet")
        fut: asyncio.Future[T] = asyncio.ensure_future(asyncio.to_thread(fn))
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # no "never retrieved" noise
        self._pending = fut
        # shield: the runner's deadline cancels this await, not the thread's bookkeeping
        return await asyncio.shield(fut)


@dataclass(frozen=True)
class ProcStats:
    """One matched process at one collection; optional fields are None where the OS denies them."""

    name: str
    pid: int
    user: float
    system: float
    rss: float
    threads: float
    fds: float | None
    started: float  # Unix time (exported); moves with the wall clock, so not the process's identity
    since_boot: float  # seconds from boot to its start: with the pid, its identity
    cpu_wait: float | None = None  # seconds its threads were runnable but waited for a CPU (Linux schedstat)


def _safe(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception:  # psutil.Error or OSError: the attribute is simply unknown
        return None


def _thread_waits(pid: int, proc_root: str) -> dict[str, int] | None:
    """Return each thread's run-queue wait (ns) from /proc/PID/task/TID/schedstat; None off Linux."""
    try:
        tids = os.listdir(f"{proc_root}/{pid}/task")
    except OSError:
        return None
    out: dict[str, int] = {}
    for tid in tids:
        try:
            with open(f"{proc_root}/{pid}/task/{tid}/schedstat", encoding="ascii") as fh:
                out[tid] = int(fh.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that exited between the listing and the read
    return out or None


class RunQueueWait:
    """A process's run-queue wait as a counter that never goes down while the process lives.

    schedstat's second field is the time a thread was runnable but waited for a CPU: on a CPU-bound engine, what
    a neighbour on its cores takes from it (its own CPU time only falls). Summing the live threads alone would
    drop a thread's wait when it exits (a request's worker thread), so retired threads keep their last value.
    """

    def __init__(self, proc_root: str = "/proc") -> None:
        self.proc_root = proc_root
        self._pid = -1
        self._threads: dict[str, int] = {}
        self._retired = 0

    def read(self, pid: int) -> float | None:
        """Return the process's summed wait in seconds (restarts from 0 with a new pid), or None off Linux."""
        now = _thread_waits(pid, self.proc_root)
        if now is None:
            return None
        if pid != self._pid:
            self._pid, self._threads, self._retired = pid, {}, 0
        self._retired += sum(v for tid, v in self._threads.items() if tid not in now)
        self._threads = now
        return (self._retired + sum(now.values())) * 1e-9


def read_stats(name: str, proc: Any, psutil_mod: ModuleType, wait: RunQueueWait | None = None) -> ProcStats | None:
    """Read one process's figures in one oneshot; None if it exited meanwhile."""
    try:
        with proc.oneshot():
            cpu = proc.cpu_times()
            fds = _safe(proc.num_fds) if hasattr(proc, "num_fds") else None
            rss, threads = float(proc.memory_info().rss), float(proc.num_threads())
            started = proc.create_time()
            return ProcStats(name, proc.pid, cpu.user, cpu.system, rss, threads,
                             None if fds is None else float(fds), started, started - psutil_mod.boot_time(),
                             None if wait is None else wait.read(proc.pid))
    except psutil_mod.Error:
        return None


# psutil's create_time() is the kernel's start in ticks since boot plus /proc/stat's btime, which the kernel
# derives from the wall clock at every read: an NTP slew across a second boundary or a clock step moves it, and
# with it every process's start (a benchmark run counted cold starts of all four watched processes of a round
# at once, twice 3.4 s apart, and of the next round's four once; none had restarted, and a KV shrink was named
# engine_restart). Identity is therefore the start since boot, and a start that moved by up to SAME_START_S
# under the same pid is the same process (create_time and boot_time are two reads of btime, which a flip can
# fall between); a pid reused by a new process starts at least the old one's whole life later.
SAME_START_S = 2.0
_P = ("process",)
PROC_UP = declare("sloguard_process_up", "gauge", "1 if the configured process is running.", _P)
PROC_CPU = declare("sloguard_process_cpu_seconds", "counter", "CPU time of the process.", ("process", "mode"))
PROC_WAIT = declare("sloguard_process_cpu_wait_seconds", "counter", "Time the process's threads were runnable but "
                    "waited for a CPU (Linux schedstat run-queue wait, summed over threads).", _P)
PROC_RSS = declare("sloguard_process_resident_memory_bytes", "gauge", "Resident set size.", _P)
PROC_THREADS = declare("sloguard_process_threads", "gauge", "OS threads of the process.", _P)
PROC_FDS = declare("sloguard_process_open_fds", "gauge", "Open file descriptors.", _P)
PROC_START = declare("sloguard_process_start_time_seconds", "gauge", "Unix start time of the process.", _P)
COLD_STARTS = declare("sloguard_server_cold_starts", "counter", "Restarts (a new pid, or a new start since boot) seen.",
                      _P)


def count_restart(prev: tuple[int, float], now: tuple[int, float] | None) -> tuple[tuple[int, float], bool]:
    """Return (identity to remember, whether a cold start happened); first sight of a running one is not.

    An identity is (pid, start in seconds since boot); the same pid with a start within SAME_START_S is the
    same process.
    """
    if now is None:
        return (prev if prev != _UNSEEN else (0, 0.0)), False
    same = now[0] == prev[0] and abs(now[1] - prev[1]) <= SAME_START_S
    return now, prev != _UNSEEN and not same


def host_families(specs: Sequence[ProcessSpec], stats: Mapping[str, ProcStats],
                  cold: Mapping[str, int]) -> list[Metric]:
    """Build the sloguard_process_* and sloguard_server_cold_starts_total families."""
    up, cpu, rss, thr = PROC_UP.gauge(), PROC_CPU.counter(), PROC_RSS.gauge(), PROC_THREADS.gauge()
    fds, start, cs, wait = PROC_FDS.gauge(), PROC_START.gauge(), COLD_STARTS.counter(), PROC_WAIT.counter()
    for spec in specs:
        st = stats.get(spec.name)
        up.add_metric([spec.name], 0.0 if st is None else 1.0)
        cs.add_metric([spec.name], float(cold.get(spec.name, 0)))
        if st is None:
            continue
        cpu.add_metric([spec.name, "user"], st.user)
        cpu.add_metric([spec.name, "system"], st.system)
        if st.cpu_wait is not None:
            wait.add_metric([spec.name], st.cpu_wait)
        rss.add_metric([spec.name], st.rss)
        thr.add_metric([spec.name], st.threads)
        if st.fds is not None:
            fds.add_metric([spec.name], st.fds)
        start.add_metric([spec.name], st.started)
    return [up, cpu, wait, rss, thr, fds, start, cs]


class HostSource:
    """Collect per-process figures for the configured serving processes; never host-wide metrics."""

    kind = "host"
    target = ""

    def __init__(self, spec: HostSpec, clock: Clock | None = None,
                 psutil_mod: ModuleType | None = None) -> None:
        if psutil_mod is None:
            import psutil

            psutil_mod = psutil
        self.spec = spec
        self.clock = clock or SystemClock()
        self.interval = spec.interval
        self.timeout = min(10.0, spec.interval)
        self._ps = psutil_mod
        self._finder = ProcessFinder(spec.processes, psutil_mod)
        self._identity: dict[str, tuple[int, float]] = {}
        self._cold: dict[str, int] = {}
        self._unmatched: set[str] = set()  # specs logged as matching no process (logged again once found)
        self._waits: dict[str, RunQueueWait] = {}
        self._guard = ThreadGuard("host")

    async def collect(self) -> SourceOutput:
        """Match and read every configured process (off the event loop) and build the families."""
        stats = await self._guard.run(self._read)
        return SourceOutput(families=host_families(self.spec.processes, stats, self._cold), payload=stats)

    def _read(self) -> dict[str, ProcStats]:
        stats: dict[str, ProcStats] = {}
        for name, proc in self._finder.find_all().items():
            st = read_stats(name, proc, self._ps, self._waits.setdefault(name, RunQueueWait()))
            if st is not None:
                stats[name] = st
        for spec in self.spec.processes:
            st = stats.get(spec.name)
            self._log_match(spec, st)
            ident, restarted = count_restart(self._identity.get(spec.name, _UNSEEN),
                                             None if st is None else (st.pid, st.since_boot))
            self._identity[spec.name] = ident
            self._cold[spec.name] = self._cold.get(spec.name, 0) + int(restarted)
        return stats

    def _log_match(self, spec: ProcessSpec, st: ProcStats | None) -> None:
        """Warn once when a configured process matches nothing (a typo, or the engine is down); note its return."""
        if st is None and spec.name not in self._unmatched:
            self._unmatched.add(spec.name)
            log.warning("host.processes entry %s matches no running process (%s): its CPU and restarts are not "
                        "watched and the diagnosis cannot name serving_cpu_bound for it", spec.name, describe(spec))
        elif st is not None and spec.name in self._unmatched:
            self._unmatched.discard(spec.name)
            log.info("host.processes entry %s matches pid %d again", spec.name, st.pid)

    async def close(self) -> None:
        """Nothing to release: psutil holds no handles between collections."""
