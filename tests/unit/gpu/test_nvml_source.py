"""NVMLSource against an injected fake NVML: values, omissions, every lifecycle error path, no leaks."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pynvml
import pytest
from support.exposition import names, promtool_check, samples
from support.nvml_fake import FakeGPU, FakeNVML

from sloguard.clock import FakeClock
from sloguard.config.spec import GPUSpec, ProcessSpec
from sloguard.gpu.nvml import NVMLSource, nvml_enabled
from sloguard.sources.base import SourceAbsent, SourceError

U0, U1 = "GPU-aaaa", "GPU-bbbb"


def _fake(**kw: Any) -> FakeNVML:
    return FakeNVML([FakeGPU(U0, **kw), FakeGPU(U1, bus="00000000:02:00.0")])


def _src(fake: Any, pcie: bool = False, nvml: str = "auto", **kw: Any) -> NVMLSource:
    return NVMLSource(GPUSpec(pcie=pcie, nvml=nvml), nvml=fake, **kw)  # type: ignore[arg-type]


def _collect(src: NVMLSource) -> Any:
    return asyncio.run(src.collect()).families


def _val(fams: Any, metric: str, /, **labels: str) -> float:
    return samples(fams)[(metric, frozenset(labels.items()))]


@pytest.mark.parametrize(("mode", "enabled"), [("auto", True), ("on", True), ("off", False)])
def test_nvml_enabled(mode: str, enabled: bool) -> None:
    assert nvml_enabled(GPUSpec(nvml=mode)) is enabled  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "labels", "value"), [
    ("sloguard_gpu_devices", {}, 2.0),
    ("sloguard_gpu_utilization_ratio", {"uuid": U0}, 0.87),
    ("sloguard_gpu_memory_utilization_ratio", {"uuid": U0}, 0.40),
    ("sloguard_gpu_memory_used_bytes", {"uuid": U0}, 10 * 2**30),
    ("sloguard_gpu_memory_total_bytes", {"uuid": U0}, 80 * 2**30),
    ("sloguard_gpu_power_watts", {"uuid": U0}, 350.0),
    ("sloguard_gpu_power_limit_watts", {"uuid": U0}, 700.0),
    ("sloguard_gpu_energy_joules_total", {"uuid": U0}, 5000.0),
    ("sloguard_gpu_temperature_celsius", {"uuid": U0}, 61.0),
    ("sloguard_gpu_sm_clock_hertz", {"uuid": U0}, 1980e6),
    ("sloguard_gpu_memory_clock_hertz", {"uuid": U0}, 2619e6),
    ("sloguard_gpu_ecc_errors_total", {"uuid": U0, "type": "corrected"}, 3.0),
    ("sloguard_gpu_ecc_errors_total", {"uuid": U0, "type": "uncorrected"}, 0.0),
    ("sloguard_gpu_clock_event_active", {"uuid": U0, "reason": "sw_power_cap"}, 1.0),
    ("sloguard_gpu_clock_event_active", {"uuid": U0, "reason": "hw_thermal_slowdown"}, 1.0),
    ("sloguard_gpu_clock_event_active", {"uuid": U0, "reason": "gpu_idle"}, 0.0),
    ("sloguard_gpu_info", {"uuid": U1, "index": "1", "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15",
                           "cuda_version": "12.4", "pci_bus_id": "00000000:02:00.0"}, 1.0),
])
def test_healthy_collection_values(name: str, labels: dict[str, str], value: float) -> None:
    fams = _collect(_src(_fake(reasons=0x004 | 0x040)))
    assert _val(fams, name, **labels) == pytest.approx(value)


def test_exposition_passes_promtool() -> None:
    gpu = FakeGPU(U0, procs=[(123, 2**30)], mig=[FakeGPU("MIG-1", name="NVIDIA H100 MIG 1g.10gb")])
    fake = FakeNVML([gpu])
    fake.events.append((gpu, 79))
    fams = _collect(_src(fake, pcie=True))
    assert {"sloguard_gpu_xid_events_total", "sloguard_gpu_mig_info", "sloguard_gpu_pcie_tx_bytes_per_second",
            "sloguard_gpu_process_memory_bytes"} <= names(fams)
    assert promtool_check(fams) == ""
    assert len(samples(fams)) == sum(len(f.samples) for f in fams)  # no series twice


@pytest.mark.parametrize(("getters", "missing"), [
    ({"nvmlDeviceGetPowerUsage"}, "sloguard_gpu_power_watts"),
    ({"nvmlDeviceGetTotalEnergyConsumption"}, "sloguard_gpu_energy_joules_total"),
    ({"nvmlDeviceGetTotalEccErrors"}, "sloguard_gpu_ecc_errors_total"),
    ({"nvmlDeviceGetUtilizationRates"}, "sloguard_gpu_utilization_ratio"),
    ({"nvmlDeviceGetCurrentClocksEventReasons"}, "sloguard_gpu_clock_event_active"),
    ({"nvmlEventSetCreate"}, "sloguard_gpu_xid_events_total"),
])
def test_not_supported_fields_are_omitted(getters: set[str], missing: str) -> None:
    fake = _fake()
    fake.unsupported = getters
    fake.events.append((fake.gpus[0], 13))
    fams = _collect(_src(fake))
    assert missing not in names(fams)
    assert _val(fams, "sloguard_gpu_temperature_celsius", uuid=U0) == 61.0  # the rest still flows


@pytest.mark.parametrize("sentinel", [0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF])
def test_sentinel_values_are_never_exported(sentinel: int) -> None:
    fams = _collect(_src(_fake(temp=sentinel, energy_mj=sentinel)))
    assert ("sloguard_gpu_temperature_celsius", frozenset({("uuid", U0)})) not in samples(fams)
    assert ("sloguard_gpu_energy_joules_total", frozenset({("uuid", U0)})) not in samples(fams)


LIFECYCLE = [
    (pynvml.NVML_ERROR_GPU_IS_LOST, "gpu_lost"),
    (pynvml.NVML_ERROR_UNINITIALIZED, "uninitialized"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "lib_mismatch"),
    (pynvml.NVML_ERROR_NOT_FOUND, "not_found"),
    (pynvml.NVML_ERROR_GPU_NOT_FOUND, "not_found"),
]


@pytest.mark.parametrize(("code", "reason"), LIFECYCLE)
def test_lifecycle_error_at_init_fails_loudly_then_recovers(code: int, reason: str) -> None:
    fake = _fake()
    fake.init_error = code
    src = _src(fake)
    with pytest.raises(SourceError) as exc:
        _collect(src)
    assert exc.value.reason == reason
    fake.init_error = None
    assert _val(_collect(src), "sloguard_gpu_devices") == 2.0


@pytest.mark.parametrize(("code", "reason"), LIFECYCLE)
def test_gpu_lost_mid_collection_reinitialises_without_leaks(code: int, reason: str) -> None:
    fake = _fake()
    src = _src(fake)
    _collect(src)
    fake.fail["nvmlDeviceGetPowerUsage"] = code
    with pytest.raises(SourceError) as exc:
        _collect(src)
    assert exc.value.reason == reason
    assert (fake.shutdowns, fake.sets_freed) == (1, 1)
    del fake.fail["nvmlDeviceGetPowerUsage"]
    fake.gpus.pop()  # the lost GPU stays off the bus: the device count drops
    fams = _collect(src)
    assert _val(fams, "sloguard_gpu_devices") == 1.0
    assert (fake.inits, fake.sets_created, fake.sets_freed) == (2, 2, 1)
    asyncio.run(src.close())
    assert (fake.shutdowns, fake.sets_freed) == (2, 2)


def test_repeated_collections_do_not_reinitialise() -> None:
    fake = _fake()
    src = _src(fake)
    for _ in range(5):
        _collect(src)
    assert (fake.inits, fake.sets_created, fake.shutdowns) == (1, 1, 0)


@pytest.mark.parametrize(("mode", "absent"), [("auto", True), ("on", False)])
def test_missing_library(mode: str, absent: bool) -> None:
    fake = _fake()
    fake.init_error = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    src = _src(fake, nvml=mode)
    with pytest.raises(SourceError, match="no NVIDIA driver library" if absent else "NVML unavailable") as exc:
        _collect(src)
    assert exc.value.reason == "library_not_found"
    assert isinstance(exc.value, SourceAbsent) is absent  # absent: no sloguard_source_up at all


def test_real_pynvml_without_a_driver_is_absent() -> None:
    code = ("import asyncio; from sloguard.config.spec import GPUSpec; from sloguard.gpu.nvml import NVMLSource\n"
            "from sloguard.sources.base import SourceAbsent\n"
            "try:\n    print(len(asyncio.run(NVMLSource(GPUSpec()).collect()).families))\n"
            "except SourceAbsent as exc:\n    print('absent', exc.reason)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    has_gpu = Path("/dev/nvidiactl").exists()
    assert has_gpu or out.stdout.strip() == "absent library_not_found"


def test_unexpected_field_error_omits_field_only() -> None:
    fake = _fake()
    fake.fail["nvmlDeviceGetTemperature"] = pynvml.NVML_ERROR_UNKNOWN
    fams = _collect(_src(fake))
    assert "sloguard_gpu_temperature_celsius" not in names(fams)
    assert fake.shutdowns == 0


def test_xid_events_counted_with_last_seen() -> None:
    fake, clock = _fake(), FakeClock(start=1000.0)
    src = _src(fake, clock=clock)
    fake.events += [(fake.gpus[0], 79), (fake.gpus[0], 79), (fake.gpus[1], 48)]
    _collect(src)
    clock.advance(60)
    fake.events.append((fake.gpus[0], 79))
    fams = _collect(src)
    assert _val(fams, "sloguard_gpu_xid_events_total", uuid=U0, xid="79") == 3.0
    assert _val(fams, "sloguard_gpu_xid_last_seen_timestamp_seconds", uuid=U0, xid="79") == 1060.0
    assert _val(fams, "sloguard_gpu_xid_last_seen_timestamp_seconds", uuid=U1, xid="48") == 1000.0
    assert fake.registered == [(U0, pynvml.nvmlEventTypeXidCriticalError), (U1, pynvml.nvmlEventTypeXidCriticalError)]


@pytest.mark.parametrize(("pcie", "present"), [(False, False), (True, True)])
def test_pcie_is_opt_in(pcie: bool, present: bool) -> None:
    fams = _collect(_src(_fake(), pcie=pcie))
    assert ("sloguard_gpu_pcie_rx_bytes_per_second" in names(fams)) is present
    if present:
        assert _val(fams, "sloguard_gpu_pcie_rx_bytes_per_second", uuid=U0) == 200 * 1024


def test_process_memory_matched_to_configured_process(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        (tmp_path / "srv.pid").write_text(str(os.getpid()))  # the child's parent is the "server"
        fake = _fake(procs=[(child.pid, 2**30), (os.getpid(), 2**20), (2**22 + 7, 5), (child.pid + 1, None)])
        spec = ProcessSpec(name="server", pid_file=str(tmp_path / "srv.pid"))
        fams = _collect(_src(fake, processes=[spec]))
    finally:
        child.kill()
        child.wait()
    got = {dict(k[1])["pid"]: (dict(k[1])["process"], v) for k, v in samples(fams).items()
           if k[0] == "sloguard_gpu_process_memory_bytes"}
    assert got == {str(child.pid): ("server", 2**30), str(os.getpid()): ("server", 2**20), str(2**22 + 7): ("", 5)}


def test_mig_devices_and_empty_slots() -> None:
    mig = [FakeGPU("MIG-1", name="NVIDIA H100 80GB HBM3 MIG 1g.10gb", mem=(1, 10), gi_ci=(7, 0)), None,
           FakeGPU("MIG-2", name="NVIDIA H100 80GB HBM3 MIG 3g.40gb", mem=(2, 40), gi_ci=(1, 0))]
    fams = _collect(_src(_fake(mig=mig)))
    assert _val(fams, "sloguard_gpu_mig_info", uuid=U0, mig_uuid="MIG-1", gi_id="7", ci_id="0", profile="1g.10gb") == 1
    assert _val(fams, "sloguard_gpu_mig_memory_total_bytes", uuid=U0, mig_uuid="MIG-2") == 40
    assert sum(1 for k in samples(fams) if k[0] == "sloguard_gpu_mig_info") == 2


def test_hung_call_fails_fast_until_it_returns() -> None:
    fake = _fake()
    fake.block = threading.Event()
    src = _src(fake)

    async def scenario() -> list[str]:
        seen = []
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(src.collect(), timeout=0.05)
        with pytest.raises(SourceError) as exc:
            await src.collect()
        seen.append(exc.value.reason)
        fake.block.set()  # type: ignore[union-attr]
        while True:  # the abandoned thread finishes; then collection works again
            try:
                await src.collect()
                return seen
            except SourceError:
                await asyncio.sleep(0.01)

    assert asyncio.run(scenario()) == ["busy"]


def test_older_module_falls_back_to_throttle_reasons() -> None:
    class Older(FakeNVML):
        def __getattr__(self, getter: str) -> Any:
            if getter == "nvmlDeviceGetCurrentClocksEventReasons":
                raise AttributeError(getter)
            name = "nvmlDeviceGetCurrentClocksEventReasons" if "Throttle" in getter else getter
            return super().__getattr__(name)

    fams = _collect(_src(Older([FakeGPU(U0, reasons=0x008)])))
    assert _val(fams, "sloguard_gpu_clock_event_active", uuid=U0, reason="hw_slowdown") == 1.0
