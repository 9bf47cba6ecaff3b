"""The canary's view of its GPU through NVML: other work's activity, health readings, XIDs (an I/O edge).

Before a run, activity is device-wide (GPM SM activity, else NVML utilisation): nothing of the canary runs
yet. During a run, it is other processes' SM use (nvmlDeviceGetProcessUtilization), the canary's own
process left out. Every NVML failure here makes the answer "unknown", never a canary failure.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from types import ModuleType

from sloguard.clock import Clock, SystemClock
from sloguard.families import Families
from sloguard.gpu import device as dv
from sloguard.gpu import fields as nf
from sloguard.gpu import health
from sloguard.gpu.contention import Sample
from sloguard.gpu.gpm import GPM_METRICS, GPMSampler
from sloguard.gpu.reader import GPU, NVMLReader

log = logging.getLogger("sloguard.canary")
HEALTH_FIELDS = tuple(f for f in nf.FIELDS if f.key)
CLOCK_REASONS = frozenset({"clocks_below_max", *(r for _, r in health.HW_SLOWDOWNS)})


def pick_gpu(gpus: list[GPU], device: str, visible: str | None) -> GPU | None:
    """Return the NVML GPU that `cuda:N` means for a worker with CUDA_DEVICE_ORDER=PCI_BUS_ID, or None."""
    if device == "cpu":
        return None
    index = int(device.partition(":")[2] or 0)
    by_bus = sorted(gpus, key=lambda g: g.pci_bus_id.lower())
    if visible is not None:
        chosen: list[GPU] = []
        for entry in (e.strip() for e in visible.split(",") if e.strip()):
            if entry.isdigit() and int(entry) < len(by_bus):
                chosen.append(by_bus[int(entry)])
            elif entry.startswith("GPU-"):
                chosen += [g for g in by_bus if g.uuid.startswith(entry)][:1]
            else:
                return None  # MIG instances and anything else: not resolvable to one whole GPU
        by_bus = chosen
    return by_bus[index] if index < len(by_bus) else None


def others_share(samples: Iterable[tuple[int, float]], own: int, seen_before: set[int]) -> float:
    """Return other processes' summed mean SM share from (pid, smUtil %) samples, leaving the canary out.

    Where the canary's pid is not among them (a container's pid namespace hides it), a pid first seen
    during the run is taken to be the canary's.
    """
    by_pid: dict[int, list[float]] = {}
    for pid, sm in samples:
        by_pid.setdefault(pid, []).append(sm)
    mine = {own} if own in by_pid else set(by_pid) - seen_before
    return min(1.0, sum(sum(v) / len(v) for pid, v in by_pid.items() if pid not in mine) / 100.0)


class ActivityMonitor:
    """Sample one GPU's activity and health for the canary; safe to use without NVML (answers unknown)."""

    def __init__(self, nvml: ModuleType | None = None, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._rd = NVMLReader(nvml, events=True)
        self._gpm = GPMSampler(GPM_METRICS[:1])  # SM activity
        self.gpu: GPU | None = None
        self._gpm_ok = False
        self._proc_ts = 0
        self._seen: set[int] = set()
        self._hist: dict[str, health.History] = {}
        self._xids: dict[str, list[tuple[int, float]]] = {}
        self._logged: set[object] = set()

    @property
    def driver(self) -> str:
        """Return the NVML driver version ("" before open)."""
        return self._rd.system[0]

    def open(self, device: str) -> GPU | None:
        """Resolve the canary's device to its GPU (None: no NVML, the CPU, or no single GPU it maps to)."""
        mod = self._rd.module()
        if mod is None or device == "cpu":
            return None
        try:
            gpus = self._rd.ensure()
            if self.gpu is None:
                self.gpu = pick_gpu(gpus, "cuda:0" if device == "auto" else device,
                                    os.environ.get("CUDA_VISIBLE_DEVICES"))
                self._gpm_ok = self.gpu is not None and GPMSampler.supported(self._rd, self.gpu.handle)
            self._seen = {int(p.pid) for p in self._rd.get("nvmlDeviceGetComputeRunningProcesses",
                                                            self.gpu.handle) or ()} if self.gpu else set()
            self._drain()
        except mod.NVMLError as exc:
            self._lost(exc)
        return self.gpu

    def sample(self, own_pid: int | None = None) -> Sample:
        """Return other work's busy share now: device-wide before the run, per process (own_pid) during it."""
        now = self.clock.monotonic()
        if self.gpu is None:
            return Sample(now, None)
        mod = self._rd.mod
        try:
            if own_pid is not None:
                return Sample(now, self._per_process(own_pid))
            procs = self._per_process(-1)  # also learns which pids were on the GPU before the run
            if self._gpm_ok:
                g = self.gpu
                got = self._gpm.read(mod, "canary", lambda s: mod.nvmlGpmSampleGet(g.handle, s))
                if got:
                    return Sample(now, next(iter(got.values())))
            util = self._rd.get("nvmlDeviceGetUtilizationRates", self.gpu.handle)
            return Sample(now, util.gpu / 100.0 if util is not None else procs)
        except mod.NVMLError as exc:
            self._lost(exc)
            return Sample(now, None)

    def _per_process(self, own: int) -> float | None:
        assert self.gpu is not None
        mod = self._rd.mod
        try:
            got = mod.nvmlDeviceGetProcessUtilization(self.gpu.handle, self._proc_ts)
        except mod.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == mod.NVML_ERROR_NOT_FOUND:
                return 0.0  # no process ran kernels since the last read
            if self._rd.reason(code) is not None:
                raise
            self._rd.note("nvmlDeviceGetProcessUtilization", int(code or -1), str(exc))
            return None
        self._proc_ts = max([self._proc_ts, *(int(s.timeStamp) for s in got)])
        pairs = [(int(s.pid), float(s.smUtil)) for s in got]
        if own < 0:
            self._seen |= {pid for pid, _ in pairs}
        return others_share(pairs, own, self._seen)

    def reading(self) -> health.Reading | None:
        """Return the health readings of the GPU now (None without a GPU or on an NVML failure)."""
        if self.gpu is None:
            return None
        try:
            fams = Families()  # thrown away: the NVML source exports these series
            values = dv.read_fields(self._rd, self.gpu, fams, HEALTH_FIELDS)
            return health.Reading.of(values, dv.read_clock_events(self._rd, self.gpu, fams))
        except self._rd.mod.NVMLError as exc:
            self._lost(exc)
            return None

    def problems(self, during: list[health.Reading], after: health.Reading | None) -> dict[str, str]:
        """Return {reason: description} of sick-GPU evidence around a run; clock reasons need half the run."""
        if self.gpu is None or after is None:
            return {}
        now, uuid = self.clock.now(), self.gpu.uuid
        self._drain()
        hist = self._hist[uuid] = health.step(after, self._hist.get(uuid, health.History()), now)
        found = {r for r, on in health.problems(after, hist, now, self._xids.get(uuid, ()),
                                                self._rd.watching_events).items() if on and r not in CLOCK_REASONS}
        out = {r: health.describe(r, after) for r in sorted(found)}
        for reason in sorted(CLOCK_REASONS):
            hits = [r for r in during if health.problems(r, hist, now).get(reason)]
            if during and len(hits) * 2 >= len(during):
                out[reason] = health.describe(reason, hits[-1])
        return out

    def _drain(self) -> None:
        mod = self._rd.module()
        if mod is None or self._rd.gpus is None:
            return
        try:
            now = self.clock.now()
            for uuid, xid in self._rd.drain_xids():
                self._xids.setdefault(uuid, []).append((xid, now))
            for uuid, seen in self._xids.items():
                self._xids[uuid] = [(x, ts) for x, ts in seen if now - ts < health.HOLD_S]
        except mod.NVMLError as exc:
            self._lost(exc)

    def _lost(self, exc: Exception) -> None:
        code = getattr(exc, "value", None)
        if code not in self._logged:  # once per error: a host without NVIDIA says so once, not every run
            self._logged.add(code)
            quiet = code == getattr(self._rd.mod, nf.MISSING_LIBRARY_ERROR, object())
            log.log(logging.INFO if quiet else logging.WARNING, "canary: NVML unavailable; contention and health "
                    "unknown", extra={"error": str(exc)})
        self.close()

    def close(self) -> None:
        """Free GPM samples and the event set; shut NVML down (idempotent)."""
        mod = self._rd.module()
        self._gpm.drop(mod if self._rd.gpus is not None else None)
        self._rd.teardown()
        self.gpu = None
