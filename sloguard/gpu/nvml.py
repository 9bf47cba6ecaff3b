"""NVML source: per-GPU state keyed by uuid; lifecycle errors fail loudly, missing NVML is quiet no data."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from prometheus_client.metrics_core import Metric

from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import GPUSpec, ProcessSpec
from sloguard.exporter.families import Families
from sloguard.gpu import fields as nf
from sloguard.sources.base import SourceError, SourceOutput
from sloguard.sources.host import ProcessFinder, ThreadGuard

log = logging.getLogger("sloguard.nvml")
MAX_EVENTS_PER_RUN = 1000  # bounds the XID drain so a storm cannot stall a collection
INFO_LABELS = ("uuid", "index", "name", "driver_version", "cuda_version", "pci_bus_id")


def nvml_enabled(spec: GPUSpec) -> bool:
    """Return whether the NVML source should be built ("auto" and "on" do; "off" does not)."""
    return spec.nvml != "off"


@dataclass(frozen=True)
class GPU:
    """Static identity of one GPU, read once per NVML initialisation."""

    handle: Any
    index: int
    uuid: str
    name: str
    pci_bus_id: str


class NVMLSource:
    """Read every GPU through NVML in a worker thread; one init per lifecycle, one event set, no leaks."""

    kind = "nvml"
    target = ""

    def __init__(self, spec: GPUSpec, processes: Sequence[ProcessSpec] = (), nvml: ModuleType | None = None,
                 clock: Clock | None = None) -> None:
        self.spec = spec
        self.interval = spec.interval
        self.timeout = min(10.0, spec.interval)
        self.clock = clock or SystemClock()
        self._mod = nvml
        self._processes = tuple(processes)
        self._finder: ProcessFinder | None = None
        self._gpus: list[GPU] | None = None  # None: NVML not initialised
        self._system = ("", "")
        self._events: Any = None
        self._xid: dict[tuple[str, str], tuple[int, float]] = {}
        self._noted: set[tuple[str, int]] = set()
        self._guard = ThreadGuard("nvml")

    async def collect(self) -> SourceOutput:
        """Collect all GPUs; no NVML library is SourceOutput() (quiet), lifecycle errors raise SourceError."""
        return SourceOutput(families=await self._guard.run(self._collect_sync))

    async def close(self) -> None:
        """Free the event set and shut NVML down (skipped while a hung call still holds NVML)."""
        try:
            await self._guard.run(self._teardown)
        except SourceError:
            log.warning("nvml close skipped: a collection is still running")

    def _module(self) -> ModuleType | None:
        if self._mod is None:
            try:
                import pynvml
            except ImportError:
                return None
            self._mod = pynvml
        return self._mod

    def _collect_sync(self) -> list[Metric]:
        mod = self._module()
        if mod is None:
            return self._missing("pynvml is not installed")
        try:
            if self._gpus is None:
                self._init(mod)
            return self._read(mod)
        except mod.NVMLError as exc:
            self._teardown()
            code = getattr(exc, "value", None)
            if code == getattr(mod, nf.MISSING_LIBRARY_ERROR, None):
                return self._missing(str(exc))
            raise SourceError(self._reason(mod, code) or "nvml_error", f"NVML: {exc}") from None

    def _missing(self, why: str) -> list[Metric]:
        if self.spec.nvml == "on":
            raise SourceError("library_not_found", f"NVML unavailable: {why}")
        return []  # `nvml: auto` on a machine without NVIDIA: quiet, no GPU series

    def _reason(self, mod: ModuleType, code: object) -> str | None:
        return next((r for const, r in nf.LIFECYCLE_ERRORS.items() if getattr(mod, const, object()) == code),
                    None)

    def _init(self, mod: ModuleType) -> None:
        mod.nvmlInit()
        self._system = (nf.text(self._get(mod, "nvmlSystemGetDriverVersion") or ""),
                        "" if (cuda := self._get(mod, "nvmlSystemGetCudaDriverVersion")) is None
                        else nf.cuda_version_text(int(cuda)))
        gpus = []
        for i in range(int(mod.nvmlDeviceGetCount())):
            h = mod.nvmlDeviceGetHandleByIndex(i)
            pci = self._get(mod, "nvmlDeviceGetPciInfo", h)
            gpus.append(GPU(h, i, nf.text(mod.nvmlDeviceGetUUID(h)), nf.text(mod.nvmlDeviceGetName(h)),
                            "" if pci is None else nf.text(pci.busId)))
        self._gpus = gpus
        self._events = self._get(mod, "nvmlEventSetCreate")
        for g in gpus if self._events is not None else ():
            self._get(mod, "nvmlDeviceRegisterEvents", g.handle, mod.nvmlEventTypeXidCriticalError,
                      self._events)
        log.info("nvml initialised", extra={"gpus": len(gpus), "driver": self._system[0]})

    def _teardown(self) -> None:
        mod, events, was_init = self._mod, self._events, self._gpus is not None
        self._gpus, self._events = None, None
        if mod is None or not was_init:
            return
        try:  # the GPU may already be gone: freeing is best effort, and shutdown must still run
            if events is not None:
                mod.nvmlEventSetFree(events)
        except mod.NVMLError:
            pass
        with contextlib.suppress(mod.NVMLError):
            mod.nvmlShutdown()

    def _get(self, mod: ModuleType, getter: str, *args: Any) -> Any:
        """Call one NVML getter; lifecycle errors propagate, others mean "absent" (None, noted once)."""
        fn = getattr(mod, getter, None)
        if fn is None:
            return None
        try:
            value = fn(*args)
        except mod.NVMLError as exc:
            code = getattr(exc, "value", -1)
            if self._reason(mod, code) is not None:
                raise
            self._note(mod, getter, code, exc)
            return None
        return None if isinstance(value, int) and value in nf.SENTINELS else value

    def _note(self, mod: ModuleType, getter: str, code: int, exc: Exception) -> None:
        if (getter, code) in self._noted:
            return
        self._noted.add((getter, code))
        absent = any(getattr(mod, c, None) == code for c in nf.ABSENT_ERRORS)
        log.log(logging.DEBUG if absent else logging.WARNING, "nvml field omitted",
                extra={"call": getter, "error": str(exc)})

    def _read(self, mod: ModuleType) -> list[Metric]:
        fams = Families()
        gpus = self._gpus or []
        fams.add("sloguard_gpu_devices", "gauge", "GPUs NVML reports; a drop means a GPU fell off the bus.",
                 {}, float(len(gpus)))
        matched: dict[str, Any] | None = None
        for g in gpus:
            self._read_gpu(mod, g, fams)
            matched = self._read_processes(mod, g, fams, matched)
            self._read_mig(mod, g, fams)
        self._drain_xids(mod)
        for (uuid, xid), (n, ts) in sorted(self._xid.items()):
            fams.add("sloguard_gpu_xid_events", "counter", "XID critical-error events seen since start.",
                     {"uuid": uuid, "xid": xid}, float(n))
            fams.add("sloguard_gpu_xid_last_seen_timestamp_seconds", "gauge",
                     "Unix time of the last such XID.", {"uuid": uuid, "xid": xid}, ts)
        return fams.all()

    def _read_gpu(self, mod: ModuleType, g: GPU, fams: Families) -> None:
        key = {"uuid": g.uuid}
        values = (g.uuid, str(g.index), g.name, *self._system, g.pci_bus_id)
        info = dict(zip(INFO_LABELS, values, strict=True))
        fams.add("sloguard_gpu_info", "gauge", "GPU identity; always 1.", info, 1.0)
        results: dict[tuple[str, tuple[str, ...]], Any] = {}
        for f in nf.FIELDS + (nf.PCIE_FIELDS if self.spec.pcie else ()):
            call = (f.getter, f.args)
            if call not in results:
                results[call] = self._get(mod, f.getter, g.handle, *(getattr(mod, a) for a in f.args))
            v = results[call]
            v = getattr(v, f.attr) if f.attr and v is not None else v
            if v is not None and v not in nf.SENTINELS:
                fams.add(f.metric, f.kind, f.help, key | dict(f.labels), float(v) * f.scale)
        getter = next((n for n in nf.CLOCK_EVENT_GETTERS if hasattr(mod, n)), "")
        mask = self._get(mod, getter, g.handle)
        for reason, active in [] if mask is None else nf.decode_clock_events(int(mask)):
            fams.add("sloguard_gpu_clock_event_active", "gauge", "1 while this reason holds clocks down.",
                     key | {"reason": reason}, active)

    def _read_processes(self, mod: ModuleType, g: GPU, fams: Families,
                        matched: dict[str, Any] | None) -> dict[str, Any] | None:
        procs = self._get(mod, "nvmlDeviceGetComputeRunningProcesses", g.handle) or []
        if procs and matched is None:
            if self._finder is None:
                import psutil

                self._finder = ProcessFinder(self._processes, psutil)
            matched = self._finder.find_all()
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            if used is None or used in nf.SENTINELS:
                continue
            owner = self._finder.owner(int(p.pid), matched or {}) if self._finder else ""
            fams.add("sloguard_gpu_process_memory_bytes", "gauge", "GPU memory used by a compute process.",
                     {"uuid": g.uuid, "pid": str(p.pid), "process": owner}, float(used))
        return matched

    def _read_mig(self, mod: ModuleType, g: GPU, fams: Families) -> None:
        mode = self._get(mod, "nvmlDeviceGetMigMode", g.handle)
        if not mode or mode[0] != getattr(mod, "NVML_DEVICE_MIG_ENABLE", 1):
            return
        for i in range(int(self._get(mod, "nvmlDeviceGetMaxMigDeviceCount", g.handle) or 0)):
            try:
                mh = mod.nvmlDeviceGetMigDeviceHandleByIndex(g.handle, i)
            except mod.NVMLError as exc:  # an empty MIG slot answers NOT_FOUND / INVALID_ARGUMENT
                if getattr(exc, "value", None) in (mod.NVML_ERROR_NOT_FOUND, mod.NVML_ERROR_INVALID_ARGUMENT):
                    continue
                raise
            mig = {"uuid": g.uuid, "mig_uuid": nf.text(mod.nvmlDeviceGetUUID(mh))}
            info = mig | {"gi_id": str(self._get(mod, "nvmlDeviceGetGpuInstanceId", mh)),
                          "ci_id": str(self._get(mod, "nvmlDeviceGetComputeInstanceId", mh)),
                          "profile": nf.mig_profile(nf.text(mod.nvmlDeviceGetName(mh)))}
            fams.add("sloguard_gpu_mig_info", "gauge", "MIG device identity; always 1.", info, 1.0)
            mem = self._get(mod, "nvmlDeviceGetMemoryInfo", mh)
            if mem is not None:
                fams.add("sloguard_gpu_mig_memory_used_bytes", "gauge", "MIG device memory in use.", mig,
                         float(mem.used))
                fams.add("sloguard_gpu_mig_memory_total_bytes", "gauge", "MIG device memory in total.", mig,
                         float(mem.total))

    def _drain_xids(self, mod: ModuleType) -> None:
        if self._events is None:
            return
        for _ in range(MAX_EVENTS_PER_RUN):
            try:
                ev = mod.nvmlEventSetWait_v2(self._events, 0)  # timeout 0: poll, never block
            except mod.NVMLError as exc:
                if self._reason(mod, getattr(exc, "value", None)) is not None:
                    raise
                return  # NVML_ERROR_TIMEOUT: no more events
            if ev.eventType & mod.nvmlEventTypeXidCriticalError:
                key = (nf.text(mod.nvmlDeviceGetUUID(ev.device)), str(ev.eventData))
                self._xid[key] = (self._xid.get(key, (0, 0.0))[0] + 1, self.clock.now())
