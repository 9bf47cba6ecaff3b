"""A programmable stand-in for the pynvml module: same names, constants and NVMLError classes."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml as real

NVMLError = real.NVMLError


@dataclass
class FakeGPU:
    """One fake device; `unsupported` getters raise NOT_SUPPORTED, `fail` maps getter -> error code."""

    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    bus: str = "00000000:01:00.0"
    util: tuple[int, int] = (87, 40)
    mem: tuple[int, int] = (10 * 2**30, 80 * 2**30)
    power_mw: int = 350_000
    limit_mw: int = 700_000
    energy_mj: int = 5_000_000
    temp: int = 61
    clocks_mhz: tuple[int, int] = (1980, 2619)
    reasons: int = 0
    ecc: tuple[int, int] = (3, 0)
    pcie_kbs: tuple[int, int] = (100, 200)
    procs: list[tuple[int, int | None]] = field(default_factory=list)
    mig: list[FakeGPU | None] | None = None  # None: MIG disabled; None entries are empty slots
    gi_ci: tuple[int, int] = (0, 0)


class FakeNVML:
    """Module-like fake; counts inits, shutdowns and event sets so leaks are visible."""

    def __init__(self, gpus: list[FakeGPU], driver: str = "550.54.15", cuda: int = 12040) -> None:
        for name in dir(real):
            if name.startswith(("NVML_", "nvmlEventType", "nvmlClocks")):
                setattr(self, name, getattr(real, name))
        self.NVMLError = real.NVMLError
        self.gpus, self.driver, self.cuda = gpus, driver, cuda
        self.init_error: int | None = None
        self.fail: dict[str, int] = {}
        self.unsupported: set[str] = set()
        self.events: list[tuple[FakeGPU, int]] = []
        self.block: threading.Event | None = None
        self.inits = self.shutdowns = self.sets_created = self.sets_freed = 0
        self.registered: list[tuple[str, int]] = []
        self.live = False

    def _check(self, getter: str) -> None:
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


_GETTERS: dict[str, Any] = {
    "nvmlDeviceGetUUID": lambda h: h.uuid.encode(),  # bytes, as older pynvml returns
    "nvmlDeviceGetName": lambda h: h.name,
    "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=h.bus),
    "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=h.util[0], memory=h.util[1]),
    "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(used=h.mem[0], total=h.mem[1], free=h.mem[1] - h.mem[0]),
    "nvmlDeviceGetPowerUsage": lambda h: h.power_mw,
    "nvmlDeviceGetEnforcedPowerLimit": lambda h: h.limit_mw,
    "nvmlDeviceGetTotalEnergyConsumption": lambda h: h.energy_mj,
    "nvmlDeviceGetTemperature": lambda h, sensor: h.temp,
    "nvmlDeviceGetClockInfo": lambda h, c: h.clocks_mhz[0 if c == real.NVML_CLOCK_SM else 1],
    "nvmlDeviceGetCurrentClocksEventReasons": lambda h: h.reasons,
    "nvmlDeviceGetTotalEccErrors": lambda h, kind, counter: h.ecc[kind],
    "nvmlDeviceGetPcieThroughput": lambda h, c: h.pcie_kbs[c],
    "nvmlDeviceGetComputeRunningProcesses": lambda h: [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in h.procs],
    "nvmlDeviceGetMigMode": lambda h: (0, 0) if h.mig is None else (1, 1),
    "nvmlDeviceGetMaxMigDeviceCount": lambda h: len(h.mig or []),
    "nvmlDeviceGetGpuInstanceId": lambda h: h.gi_ci[0],
    "nvmlDeviceGetComputeInstanceId": lambda h: h.gi_ci[1],
}
