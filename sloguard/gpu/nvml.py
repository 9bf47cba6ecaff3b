"""NVML source: per-GPU state keyed by uuid, GPM activity and health; lifecycle errors fail loudly."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from prometheus_client.metrics_core import Metric

from sloguard.clock import Clock, SystemClock
from sloguard.config.spec import GPUSpec, ProcessSpec
from sloguard.families import Families
from sloguard.gpu import device as dv
from sloguard.gpu import families as gf
from sloguard.gpu import fields as nf
from sloguard.gpu import health
from sloguard.gpu.gpm import GPMSampler
from sloguard.gpu.reader import GPU, NVMLReader
from sloguard.sources.base import SourceAbsent, SourceError, SourceOutput
from sloguard.sources.host import ThreadGuard
from sloguard.sources.processes import ProcessFinder

log = logging.getLogger("sloguard.nvml")
INFO_LABELS = gf.INFO_LABELS


def nvml_enabled(spec: GPUSpec) -> bool:
    """Return whether the NVML source should be built ("auto" and "on" do; "off" does not)."""
    return spec.nvml != "off"


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
        self._rd = NVMLReader(nvml, events=True)
        self._processes = tuple(processes)
        self._finder: ProcessFinder | None = None
        self._gpm = GPMSampler()
        self._gpm_ok: dict[str, bool] = {}  # uuid -> GPM supported, decided once per lifecycle
        self._links: dict[str, int] = {}  # uuid -> NVLink link count, decided once per lifecycle
        self._xid: dict[tuple[str, int], tuple[int, float]] = {}
        self._health: dict[str, health.History] = {}
        self._known: dict[str, int] = {}  # every uuid seen since start -> its index, to name lost GPUs
        self._guard = ThreadGuard("nvml")

    async def collect(self) -> SourceOutput:
        """Collect all GPUs; no NVML library raises SourceAbsent (auto) or SourceError (on), as lifecycle errors do."""
        return SourceOutput(families=await self._guard.run(self._collect_sync))

    async def close(self) -> None:
        """Free GPM samples and the event set and shut NVML down (skipped while a hung call still holds NVML)."""
        try:
            await self._guard.run(self._teardown)
        except SourceError:
            log.warning("nvml close skipped: a collection is still running")

    def _teardown(self) -> None:
        self._gpm.drop(self._rd.module() if self._rd.gpus is not None else None)
        self._gpm_ok.clear()
        self._links.clear()
        self._rd.teardown()

    def _collect_sync(self) -> list[Metric]:
        mod = self._rd.module()
        if mod is None:
            return self._missing("pynvml is not installed")
        try:
            gpus = self._rd.ensure()
            return self._read(mod, gpus)
        except mod.NVMLError as exc:
            self._teardown()
            code = getattr(exc, "value", None)
            if code == getattr(mod, nf.MISSING_LIBRARY_ERROR, None):
                return self._missing(str(exc))
            raise SourceError(self._rd.reason(code) or "nvml_error", f"NVML: {exc}") from None

    def _missing(self, why: str) -> list[Metric]:
        if self.spec.nvml == "on":
            raise SourceError("library_not_found", f"NVML unavailable: {why}")
        # `nvml: auto` on a machine without NVIDIA: no GPU series and no sloguard_source_up either
        raise SourceAbsent("library_not_found", f"no NVIDIA driver library: {why}")

    def _read(self, mod: ModuleType, gpus: list[GPU]) -> list[Metric]:
        fams = Families()
        fams.put(gf.DEVICES, {}, float(len(gpus)))
        for (uuid, xid) in self._rd.drain_xids():
            n, _ = self._xid.get((uuid, xid), (0, 0.0))
            self._xid[(uuid, xid)] = (n + 1, self.clock.now())
        matched: dict[str, Any] | None = None
        for g in gpus:
            self._known[g.uuid] = g.index
            self._read_gpu(mod, g, fams)
            matched = self._read_processes(g, fams, matched)
            self._read_mig(mod, g, fams)
        for (uuid, xid), (n, ts) in sorted(self._xid.items()):
            fams.put(gf.XID_EVENTS, {"uuid": uuid, "xid": str(xid)}, float(n))
            fams.put(gf.XID_LAST, {"uuid": uuid, "xid": str(xid)}, ts)
        present = {g.uuid for g in gpus}
        for uuid in sorted(set(self._known) - present):  # seen before, gone now: fell off the bus or lost
            _problem(fams, uuid, "gpu_lost", True)
        return fams.all()

    def _read_gpu(self, mod: ModuleType, g: GPU, fams: Families) -> None:
        values = (g.uuid, str(g.index), g.name, *self._rd.system, g.pci_bus_id)
        fams.put(gf.INFO, dict(zip(INFO_LABELS, values, strict=True)), 1.0)
        readings = dv.read_fields(self._rd, g, fams, nf.FIELDS + (nf.PCIE_FIELDS if self.spec.pcie else ()))
        dv.read_memory(self._rd, g, fams, {"uuid": g.uuid})
        if g.uuid not in self._links:
            self._links[g.uuid] = dv.nvlink_count(self._rd, g)
        dv.read_field_values(self._rd, g, fams, self._links[g.uuid])
        mask = dv.read_clock_events(self._rd, g, fams)
        if self.spec.gpm:
            self._read_gpm(mod, g, g.uuid, fams, {"uuid": g.uuid}, lambda s: mod.nvmlGpmSampleGet(g.handle, s))
        self._read_health(g, health.Reading.of(readings, mask), fams)

    def _read_gpm(self, mod: ModuleType, g: GPU, key: str, fams: Families, labels: dict[str, str],
                  take: Any, prefix: str = "sloguard_gpu_") -> None:
        if key not in self._gpm_ok:
            self._gpm_ok[key] = self._gpm.supported(self._rd, g.handle)
        ok = self._gpm_ok[key]
        values = None
        if ok:
            try:
                values = self._gpm.read(mod, key, take)
            except mod.NVMLError as exc:  # e.g. vGPU or MIG profiles without GPM: absent from now on
                if self._rd.reason(getattr(exc, "value", None)) is not None:
                    raise
                self._rd.note("nvmlGpmSampleGet", int(getattr(exc, "value", -1)), str(exc))
                self._gpm.drop(mod, key)
                self._gpm_ok[key] = ok = False
        if prefix == "sloguard_gpu_":
            fams.put(gf.GPM_SUPPORTED, labels, float(ok))
        for m, v in (values or {}).items():
            fams.add(m.metric.replace("sloguard_gpu_", prefix), "gauge", m.help, labels | dict(m.labels), v)

    def _read_health(self, g: GPU, r: health.Reading, fams: Families) -> None:
        now = self.clock.now()
        hist = self._health[g.uuid] = health.step(r, self._health.get(g.uuid, health.History()), now)
        xids = [(x, ts) for (u, x), (_, ts) in self._xid.items() if u == g.uuid]
        found = health.problems(r, hist, now, xids, xids_watched=self._rd.watching_events)
        for reason in health.REASONS:
            if reason in found:
                _problem(fams, g.uuid, reason, found[reason])

    def _read_processes(self, g: GPU, fams: Families, matched: dict[str, Any] | None) -> dict[str, Any] | None:
        procs = self._rd.get("nvmlDeviceGetComputeRunningProcesses", g.handle) or []
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
            fams.put(gf.PROCESS_MEMORY, {"uuid": g.uuid, "pid": str(p.pid), "process": owner}, float(used))
        return matched

    def _read_mig(self, mod: ModuleType, g: GPU, fams: Families) -> None:
        mode = self._rd.get("nvmlDeviceGetMigMode", g.handle)
        if not mode or mode[0] != getattr(mod, "NVML_DEVICE_MIG_ENABLE", 1):
            return
        for i in range(int(self._rd.get("nvmlDeviceGetMaxMigDeviceCount", g.handle) or 0)):
            try:
                mh = mod.nvmlDeviceGetMigDeviceHandleByIndex(g.handle, i)
            except mod.NVMLError as exc:  # an empty MIG slot answers NOT_FOUND / INVALID_ARGUMENT
                if getattr(exc, "value", None) in (mod.NVML_ERROR_NOT_FOUND, mod.NVML_ERROR_INVALID_ARGUMENT):
                    continue
                raise
            mig = {"uuid": g.uuid, "mig_uuid": nf.text(mod.nvmlDeviceGetUUID(mh))}
            gi = self._rd.get("nvmlDeviceGetGpuInstanceId", mh)
            info = mig | {"gi_id": str(gi), "ci_id": str(self._rd.get("nvmlDeviceGetComputeInstanceId", mh)),
                          "profile": nf.mig_profile(nf.text(mod.nvmlDeviceGetName(mh)))}
            fams.put(gf.MIG_INFO, info, 1.0)
            dv.read_memory(self._rd, GPU(mh, i, mig["mig_uuid"], "", ""), fams, mig, "sloguard_gpu_mig_")
            if self.spec.gpm and gi is not None:
                self._read_gpm(mod, g, mig["mig_uuid"], fams, mig,
                               lambda s, gi=gi: mod.nvmlGpmMigSampleGet(g.handle, gi, s), "sloguard_gpu_mig_")


def _problem(fams: Families, uuid: str, reason: str, holds: bool) -> None:
    fams.put(gf.HEALTH, {"uuid": uuid, "reason": reason}, float(holds))
