"""A programmable stand-in for the pynvml module: same names, constants, NVMLError classes and GPM calls."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml as real

NVMLError = real.NVMLError
MIB = 2**20
GPM_IDS = {getattr(real, n): n.removeprefix("NVML_GPM_METRIC_") for n in dir(real) if n.startswith("NVML_GPM_METRIC_")}


@dataclass
class FakeGPU:
    """One fake device; `unsupported` getters raise NOT_SUPPORTED, `fail` maps getter -> error code."""

    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    bus: str = "00000000:01:00.0"
    util: tuple[int, int] = (87, 40)
    mem: tuple[int, int] = (10 * 2**30, 80 * 2**30)  # (used as nvidia-smi shows it, total)
    reserved: int = 480 * MIB  # v1 `used` = used + reserved
    power_mw: int = 350_000
    limit_mw: int = 700_000
    energy_mj: int = 5_000_000
    temp: int = 61
    mem_temp: int | None = 45
    clocks_mhz: tuple[int, int] = (1980, 2619)
    max_clocks_mhz: tuple[int, int] = (1980, 2619)
    pstate: int = 0
    reasons: int = 0
    ecc: tuple[int, int] = (3, 0)
    remapped: tuple[int, int, int, int] = (0, 0, 0, 0)  # correctable, uncorrectable, pending, failure
    pcie_link: tuple[int, int, int, int] = (5, 5, 16, 16)  # gen, max gen, width, max width
    replays: int = 0
    violations_ns: dict[int, int] = field(default_factory=dict)  # NVML_PERF_POLICY_* -> ns
    pcie_kbs: tuple[int, int] = (100, 200)
    nvlink: list[bool] | None = None  # None: no NVLink (NOT_SUPPORTED); else state per link
    nvlink_errors: dict[tuple[int, int], int] = field(default_factory=dict)  # (link, NVML_FI id) -> count
    gpm: dict[str, float] | None = None  # GPM metric short name ("SM_UTIL") -> percent; None: no GPM
    procs: list[tuple[int, int | None]] = field(default_factory=list)
    proc_util: list[tuple[int, int]] = field(default_factory=list)  # (pid, smUtil %) over the last period
    mig: list[FakeGPU | None] | None = None  # None: MIG disabled; None entries are empty slots
    gi_ci: tuple[int, int] = (0, 0)


class FakeSample:
    """An opaque GPM sample buffer: which GPU's activity it holds and when it was taken."""

    def __init__(self) -> None:
        self.data: tuple[int, dict[str, float]] | None = None


class FakeMetricsGet:
    """Stands in for c_nvmlGpmMetricsGet_t: the same attribute names, plain Python values."""

    def __init__(self) -> None:
        self.version = self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        # 32, not NVML_GPM_METRIC_MAX (477): enough for sloguard's metrics, and cheap for the benchmark
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(32)]


class FakeNVML:
    """Module-like fake; counts inits, shutdowns, event sets, GPM buffers and calls so leaks are visible."""

    c_nvmlGpmMetricsGet_t = FakeMetricsGet

    def __init__(self, gpus: list[FakeGPU], driver: str = "550.54.15", cuda: int = 12040) -> None:
        for name in dir(real):
            if name.startswith(("NVML_", "nvmlEventType", "nvmlClocks", "nvmlMemory_v")):
                setattr(self, name, getattr(real, name))
        self.NVMLError = real.NVMLError
        self.gpus, self.driver, self.cuda = gpus, driver, cuda
        self.init_error: int | None = None
        self.fail: dict[str, int] = {}
        self.unsupported: set[str] = set()
        self.unsupported_fields: set[int] = set()
        self.events: list[tuple[FakeGPU, int]] = []
        self.block: threading.Event | None = None
        self.inits = self.shutdowns = self.sets_created = self.sets_freed = 0
        self.samples_alloc = self.samples_freed = self.tick = 0
        self.registered: list[tuple[str, int]] = []
        self.calls: Counter[str] = Counter()
        self.live = False

    def _check(self, getter: str) -> None:
        self.calls[getter] += 1
        if not self.live:
            raise NVMLError(real.NVML_ERROR_UNINITIALIZED)
        if getter in self.fail:
            raise NVMLError(self.fail[getter])
        if getter in self.unsupported:
            raise NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        if self.block is not None and getter == "nvmlDeviceGetPowerUsage":
            self.block.wait(30)

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.inits += 1
        self.live = True

    def nvmlShutdown(self) -> None:
        self._check("nvmlShutdown")
        self.shutdowns += 1
        self.live = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self._check("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check("nvmlSystemGetCudaDriverVersion")
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        self._check("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> FakeGPU:
        self._check("nvmlDeviceGetHandleByIndex")
        return self.gpus[i]

    def __getattr__(self, getter: str) -> Any:
        if getter not in _GETTERS:
            raise AttributeError(getter)

        def call(h: FakeGPU, *args: Any) -> Any:
            self._check(getter)
            return _GETTERS[getter](h, *args)

        return call

    def nvmlDeviceGetMemoryInfo(self, h: FakeGPU, version: int | None = None) -> SimpleNamespace:
        self._check("nvmlDeviceGetMemoryInfo" + ("_v2" if version else ""))
        used, total = h.mem
        if not version:
            return SimpleNamespace(used=used + h.reserved, total=total, free=total - used - h.reserved)
        return SimpleNamespace(used=used, reserved=h.reserved, total=total, free=total - used - h.reserved)

    def nvmlDeviceGetFieldValues(self, h: FakeGPU, ids: list[tuple[int, int]]) -> list[SimpleNamespace]:
        self._check("nvmlDeviceGetFieldValues")
        return [_field_value(h, fid, scope, fid in self.unsupported_fields) for fid, scope in ids]

    def nvmlDeviceGetProcessUtilization(self, h: FakeGPU, ts: int) -> list[SimpleNamespace]:
        self._check("nvmlDeviceGetProcessUtilization")
        if not h.proc_util:
            raise NVMLError(real.NVML_ERROR_NOT_FOUND)  # as NVML: no samples since `ts`
        self.tick += 1
        return [SimpleNamespace(pid=pid, timeStamp=ts + self.tick, smUtil=sm, memUtil=0, encUtil=0, decUtil=0)
                for pid, sm in h.proc_util]

    def nvmlEventSetCreate(self) -> str:
        self._check("nvmlEventSetCreate")
        self.sets_created += 1
        return f"set{self.sets_created}"

    def nvmlEventSetFree(self, es: str) -> None:
        self._check("nvmlEventSetFree")
        self.sets_freed += 1

    def nvmlDeviceRegisterEvents(self, h: FakeGPU, types: int, es: str) -> None:
        self._check("nvmlDeviceRegisterEvents")
        self.registered.append((h.uuid, types))

    def nvmlEventSetWait_v2(self, es: str, timeout_ms: int) -> SimpleNamespace:
        self._check("nvmlEventSetWait_v2")
        if not self.events:
            raise NVMLError(real.NVML_ERROR_TIMEOUT)
        gpu, xid = self.events.pop(0)
        return SimpleNamespace(device=gpu, eventType=real.nvmlEventTypeXidCriticalError, eventData=xid)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: FakeGPU, i: int) -> FakeGPU:
        self._check("nvmlDeviceGetMigDeviceHandleByIndex")
        slot = (h.mig or [])[i]
        if slot is None:
            raise NVMLError(real.NVML_ERROR_NOT_FOUND)
        return slot

    def nvmlGpmQueryDeviceSupport(self, h: FakeGPU) -> SimpleNamespace:
        self._check("nvmlGpmQueryDeviceSupport")
        return SimpleNamespace(isSupportedDevice=int(h.gpm is not None))

    def nvmlGpmSampleAlloc(self) -> FakeSample:
        self._check("nvmlGpmSampleAlloc")
        self.samples_alloc += 1
        return FakeSample()

    def nvmlGpmSampleFree(self, s: FakeSample) -> None:
        self._check("nvmlGpmSampleFree")
        self.samples_freed += 1

    def nvmlGpmSampleGet(self, h: FakeGPU, s: FakeSample) -> FakeSample:
        self._check("nvmlGpmSampleGet")
        return self._fill(h.gpm, s)

    def nvmlGpmMigSampleGet(self, h: FakeGPU, gi: int, s: FakeSample) -> FakeSample:
        self._check("nvmlGpmMigSampleGet")
        mig = next((m for m in h.mig or [] if m is not None and m.gi_ci[0] == gi), None)
        return self._fill(None if mig is None else mig.gpm, s)

    def _fill(self, gpm: dict[str, float] | None, s: FakeSample) -> FakeSample:
        if gpm is None:
            raise NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        self.tick += 1
        s.data = (self.tick, dict(gpm))
        return s

    def nvmlGpmMetricsGet(self, mg: FakeMetricsGet) -> FakeMetricsGet:
        self._check("nvmlGpmMetricsGet")
        first, second = mg.sample1.data, mg.sample2.data
        if first is None or second is None or first[0] >= second[0] or mg.version != real.NVML_GPM_METRICS_GET_VERSION:
            raise NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        for m in mg.metrics[:mg.numMetrics]:
            value = second[1].get(GPM_IDS.get(m.metricId, ""))
            m.nvmlReturn, m.value = (0, value) if value is not None else (real.NVML_ERROR_NOT_SUPPORTED, 0.0)
        return mg


def _field_value(h: FakeGPU, fid: int, scope: int, unsupported: bool) -> SimpleNamespace:
    value: float | None = None
    if fid == real.NVML_FI_DEV_MEMORY_TEMP:
        value = h.mem_temp
    elif h.nvlink is not None and fid == real.NVML_FI_DEV_NVLINK_LINK_COUNT:
        value = len(h.nvlink)
    elif h.nvlink is not None and fid == real.NVML_FI_DEV_NVLINK_GET_STATE and scope < len(h.nvlink):
        value = int(h.nvlink[scope])
    elif h.nvlink is not None and scope < len(h.nvlink) and fid in (
            real.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY, real.NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY,
            real.NVML_FI_DEV_NVLINK_ERROR_DL_CRC):
        value = h.nvlink_errors.get((scope, fid), 0)
    code = real.NVML_ERROR_NOT_SUPPORTED if value is None or unsupported else real.NVML_SUCCESS
    num = int(value or 0)
    return SimpleNamespace(fieldId=fid, scopeId=scope, nvmlReturn=code,
                           valueType=real.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
                           value=SimpleNamespace(ullVal=num, uiVal=num, dVal=float(num)))


_GETTERS: dict[str, Any] = {
    "nvmlDeviceGetUUID": lambda h: h.uuid.encode(),  # bytes, as older pynvml returns
    "nvmlDeviceGetName": lambda h: h.name,
    "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=h.bus),
    "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=h.util[0], memory=h.util[1]),
    "nvmlDeviceGetPowerUsage": lambda h: h.power_mw,
    "nvmlDeviceGetEnforcedPowerLimit": lambda h: h.limit_mw,
    "nvmlDeviceGetTotalEnergyConsumption": lambda h: h.energy_mj,
    "nvmlDeviceGetTemperature": lambda h, sensor: h.temp,
    "nvmlDeviceGetClockInfo": lambda h, c: h.clocks_mhz[0 if c == real.NVML_CLOCK_SM else 1],
    "nvmlDeviceGetMaxClockInfo": lambda h, c: h.max_clocks_mhz[0 if c == real.NVML_CLOCK_SM else 1],
    "nvmlDeviceGetPerformanceState": lambda h: h.pstate,
    "nvmlDeviceGetCurrentClocksEventReasons": lambda h: h.reasons,
    "nvmlDeviceGetTotalEccErrors": lambda h, kind, counter: h.ecc[kind],
    "nvmlDeviceGetRemappedRows": lambda h: h.remapped,
    "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: h.pcie_link[0],
    "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: h.pcie_link[1],
    "nvmlDeviceGetCurrPcieLinkWidth": lambda h: h.pcie_link[2],
    "nvmlDeviceGetMaxPcieLinkWidth": lambda h: h.pcie_link[3],
    "nvmlDeviceGetPcieReplayCounter": lambda h: h.replays,
    "nvmlDeviceGetViolationStatus": lambda h, policy: SimpleNamespace(
        referenceTime=0, violationTime=h.violations_ns.get(policy, 0)),
    "nvmlDeviceGetPcieThroughput": lambda h, c: h.pcie_kbs[c],
    "nvmlDeviceGetComputeRunningProcesses": lambda h: [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in h.procs],
    "nvmlDeviceGetMigMode": lambda h: (0, 0) if h.mig is None else (1, 1),
    "nvmlDeviceGetMaxMigDeviceCount": lambda h: len(h.mig or []),
    "nvmlDeviceGetGpuInstanceId": lambda h: h.gi_ci[0],
    "nvmlDeviceGetComputeInstanceId": lambda h: h.gi_ci[1],
}
