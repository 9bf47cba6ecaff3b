"""Host source: CPU, memory, threads, fds and restarts of the configured serving processes (psutil)."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import HostSpec, ProcessSpec
from sloguard.sources.base import SourceError, SourceOutput

T = TypeVar("T")
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


class ProcessFinder:
    """Find each configured process by pid file, name and/or cmdline regex; the oldest match wins."""

    def __init__(self, specs: Sequence[ProcessSpec], psutil_mod: ModuleType) -> None:
        self.specs = tuple(specs)
        self.ps = psutil_mod
        self._regex = {s.name: re.compile(s.cmdline_regex) for s in specs if s.cmdline_regex}
        self._cache: dict[str, Any] = {}

    def find_all(self) -> dict[str, Any]:
        """Return {spec name: psutil.Process} for the specs that match a running process now."""
        return {s.name: p for s in self.specs if (p := self.find(s)) is not None}

    def find(self, spec: ProcessSpec) -> Any:
        """Return the matching psutil.Process, or None."""
        if spec.pid_file:
            return self._from_pid_file(spec)
        cached = self._cache.get(spec.name)
        if cached is not None and cached.is_running():  # is_running also checks the start time
            return cached
        found = self._scan(spec)
        self._cache[spec.name] = found
        return found

    def owner(self, pid: int, matched: Mapping[str, Any]) -> str:
        """Return the spec name whose process is `pid` or one of its ancestors, else ""."""
        by_pid = {p.pid: name for name, p in matched.items()}
        if pid in by_pid:
            return by_pid[pid]
        try:
            parents = self.ps.Process(pid).parents()
        except (self.ps.Error, OSError):  # not visible from here (another PID namespace) or gone
            return ""
        return next((by_pid[p.pid] for p in parents if p.pid in by_pid), "")

    def _from_pid_file(self, spec: ProcessSpec) -> Any:
        try:
            with open(spec.pid_file or "") as fh:
                proc = self.ps.Process(int(fh.read().strip()))
            info = proc.as_dict(["name", "cmdline"])
        except (OSError, ValueError, self.ps.Error):
            return None
        return proc if self._accepts(spec, info) else None

    def _scan(self, spec: ProcessSpec) -> Any:
        found = [p for p in self.ps.process_iter(["name", "cmdline", "create_time"])
                 if p.pid != os.getpid() and self._accepts(spec, p.info)]
        # oldest first: the serving parent rather than its workers; pid breaks start-time ties (10 ms ticks)
        return min(found, key=lambda p: (p.info["create_time"] or 0.0, p.pid), default=None)

    def _accepts(self, spec: ProcessSpec, info: Mapping[str, Any]) -> bool:
        name = spec.process_name or (None if spec.cmdline_regex or spec.pid_file else spec.name)
        if name is not None and info.get("name") != name:
            return False
        regex = self._regex.get(spec.name)
        return regex is None or regex.search(" ".join(info.get("cmdline") or ())) is not None


def _safe(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception:  # psutil.Error or OSError: the attribute is simply unknown
        return None


def read_stats(name: str, proc: Any, psutil_mod: ModuleType) -> ProcStats | None:
    """Read one process's figures in one oneshot; None if it exited meanwhile."""
    try:
        with proc.oneshot():
            cpu = proc.cpu_times()
            fds = _safe(proc.num_fds) if hasattr(proc, "num_fds") else None
            rss, threads = float(proc.memory_info().rss), float(proc.num_threads())
            started = proc.create_time()
            return ProcStats(name, proc.pid, cpu.user, cpu.system, rss, threads,
                             None if fds is None else float(fds), started, started - psutil_mod.boot_time())
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
    lab = ["process"]
    up = GaugeMetricFamily("sloguard_process_up", "1 if the configured process is running.", labels=lab)
    cpu = CounterMetricFamily("sloguard_process_cpu_seconds", "CPU time of the process.",
                              labels=["process", "mode"])
    rss = GaugeMetricFamily("sloguard_process_resident_memory_bytes", "Resident set size.", labels=lab)
    thr = GaugeMetricFamily("sloguard_process_threads", "OS threads of the process.", labels=lab)
    fds = GaugeMetricFamily("sloguard_process_open_fds", "Open file descriptors.", labels=lab)
    start = GaugeMetricFamily("sloguard_process_start_time_seconds", "Unix start time of the process.",
                              labels=lab)
    cs = CounterMetricFamily("sloguard_server_cold_starts", "Restarts (a new pid, or a new start since boot) seen.",
                             labels=lab)
    for spec in specs:
        st = stats.get(spec.name)
        up.add_metric([spec.name], 0.0 if st is None else 1.0)
        cs.add_metric([spec.name], float(cold.get(spec.name, 0)))
        if st is None:
            continue
        cpu.add_metric([spec.name, "user"], st.user)
        cpu.add_metric([spec.name, "system"], st.system)
        rss.add_metric([spec.name], st.rss)
        thr.add_metric([spec.name], st.threads)
        if st.fds is not None:
            fds.add_metric([spec.name], st.fds)
        start.add_metric([spec.name], st.started)
    return [up, cpu, rss, thr, fds, start, cs]


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
        self._guard = ThreadGuard("host")

    async def collect(self) -> SourceOutput:
        """Match and read every configured process (off the event loop) and build the families."""
        stats = await self._guard.run(self._read)
        return SourceOutput(families=host_families(self.spec.processes, stats, self._cold), payload=stats)

    def _read(self) -> dict[str, ProcStats]:
        stats: dict[str, ProcStats] = {}
        for name, proc in self._finder.find_all().items():
            st = read_stats(name, proc, self._ps)
            if st is not None:
                stats[name] = st
        for spec in self.spec.processes:
            st = stats.get(spec.name)
            ident, restarted = count_restart(self._identity.get(spec.name, _UNSEEN),
                                             None if st is None else (st.pid, st.since_boot))
            self._identity[spec.name] = ident
            self._cold[spec.name] = self._cold.get(spec.name, 0) + int(restarted)
        return stats

    async def close(self) -> None:
        """Nothing to release: psutil holds no handles between collections."""
