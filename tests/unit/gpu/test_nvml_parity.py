"""NVML health parity and GPM against the fake NVML: new fields, memory v2, GPM, NotSupported handling."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pynvml
import pytest
from support.exposition import names, promtool_check, samples
from support.nvml_fake import MIB, FakeGPU, FakeNVML

from sloguard.config.spec import GPUSpec
from sloguard.gpu.nvml import NVMLSource

U0 = "GPU-aaaa"
GEMM = {"SM_UTIL": 95.0, "SM_OCCUPANCY": 40.0, "ANY_TENSOR_UTIL": 92.5, "DRAM_BW_UTIL": 25.0, "FP16_UTIL": 1.0,
        "FP32_UTIL": 3.0, "FP64_UTIL": 0.0}


def _collect(src: NVMLSource) -> Any:
    return asyncio.run(src.collect()).families


def _src(fake: FakeNVML, **spec: Any) -> NVMLSource:
    return NVMLSource(GPUSpec(**spec), nvml=fake)  # type: ignore[arg-type]


def _val(fams: Any, metric: str, /, **labels: str) -> float:
    return samples(fams)[(metric, frozenset(({"uuid": U0} | labels).items()))]


@pytest.mark.parametrize(("name", "labels", "value"), [
    ("sloguard_gpu_sm_clock_max_hertz", {}, 1980e6),
    ("sloguard_gpu_memory_clock_max_hertz", {}, 2619e6),
    ("sloguard_gpu_performance_state", {}, 2.0),
    ("sloguard_gpu_memory_temperature_celsius", {}, 45.0),
    ("sloguard_gpu_pcie_link_generation", {}, 4.0),
    ("sloguard_gpu_pcie_link_max_generation", {}, 5.0),
    ("sloguard_gpu_pcie_link_width", {}, 8.0),
    ("sloguard_gpu_pcie_link_max_width", {}, 16.0),
    ("sloguard_gpu_pcie_replays_total", {}, 7.0),
    ("sloguard_gpu_remapped_rows_total", {"cause": "correctable"}, 2.0),
    ("sloguard_gpu_remapped_rows_total", {"cause": "uncorrectable"}, 1.0),
    ("sloguard_gpu_row_remap_pending", {}, 1.0),
    ("sloguard_gpu_row_remap_failure", {}, 0.0),
    ("sloguard_gpu_violation_seconds_total", {"policy": "power"}, 1.5),
    ("sloguard_gpu_violation_seconds_total", {"policy": "thermal"}, 0.0),
    ("sloguard_gpu_nvlink_up", {"link": "1"}, 0.0),
    ("sloguard_gpu_nvlink_errors_total", {"link": "0", "type": "replay"}, 3.0),
    ("sloguard_gpu_nvlink_errors_total", {"link": "1", "type": "crc"}, 0.0),
])
def test_health_parity_values(name: str, labels: dict[str, str], value: float) -> None:
    gpu = FakeGPU(U0, pstate=2, pcie_link=(4, 5, 8, 16), replays=7, remapped=(2, 1, 1, 0),
                  violations_ns={pynvml.NVML_PERF_POLICY_POWER: 1_500_000_000}, nvlink=[True, False],
                  nvlink_errors={(0, pynvml.NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY): 3})
    assert _val(_collect(_src(FakeNVML([gpu]))), name, **labels) == pytest.approx(value)


def test_memory_v2_separates_reserved_and_adds_up() -> None:
    gpu = FakeGPU(U0, mem=(25715 * MIB, 81559 * MIB), reserved=480 * MIB)
    fams = _collect(_src(FakeNVML([gpu])))
    used, reserved, free, total = (_val(fams, f"sloguard_gpu_memory_{k}_bytes") for k in
                                   ("used", "reserved", "free", "total"))
    assert (used, reserved) == (25715 * MIB, 480 * MIB)  # nvidia-smi's memory.used, not v1's 26195 MiB
    assert used + reserved + free == total


def test_memory_v1_fallback_on_old_driver_has_no_reserved() -> None:
    fake = FakeNVML([FakeGPU(U0, mem=(100 * MIB, 1000 * MIB), reserved=10 * MIB)])
    fake.unsupported = {"nvmlDeviceGetMemoryInfo_v2"}
    fams = _collect(_src(fake))
    assert _val(fams, "sloguard_gpu_memory_used_bytes") == 110 * MIB  # v1 counts reserved as used
    assert "sloguard_gpu_memory_reserved_bytes" not in names(fams)
    assert _val(fams, "sloguard_gpu_memory_free_bytes") == 890 * MIB


def test_gpm_series_from_consecutive_collections_without_extra_samples() -> None:
    fake = FakeNVML([FakeGPU(U0, gpm=dict(GEMM))])
    src = _src(fake)
    first = _collect(src)
    assert "sloguard_gpu_tensor_active_ratio" not in names(first)  # one sample: nothing to difference yet
    assert _val(first, "sloguard_gpu_gpm_supported") == 1.0
    second = _collect(src)
    assert _val(second, "sloguard_gpu_sm_active_ratio") == pytest.approx(0.95)
    assert _val(second, "sloguard_gpu_tensor_active_ratio") == pytest.approx(0.925)
    assert _val(second, "sloguard_gpu_dram_active_ratio") == pytest.approx(0.25)
    assert _val(second, "sloguard_gpu_sm_occupancy_ratio") == pytest.approx(0.40)
    assert _val(second, "sloguard_gpu_pipe_active_ratio", pipe="fp32") == pytest.approx(0.03)
    assert fake.calls["nvmlGpmSampleGet"] == 2 and fake.samples_alloc == 2  # one sample per collection, reused
    asyncio.run(src.close())
    assert fake.samples_freed == 2


@pytest.mark.parametrize("how", ["pre-hopper", "sample call fails", "metric missing"])
def test_gpm_unsupported_is_absent_not_zero(how: str) -> None:
    gpu = FakeGPU(U0, gpm=None if how == "pre-hopper" else {"SM_UTIL": 50.0})
    fake = FakeNVML([gpu])
    if how == "sample call fails":
        fake.unsupported = {"nvmlGpmSampleGet"}
    src = _src(fake)
    for _ in range(3):
        fams = _collect(src)
    gpm = {"sloguard_gpu_sm_active_ratio", "sloguard_gpu_tensor_active_ratio", "sloguard_gpu_dram_active_ratio",
           "sloguard_gpu_sm_occupancy_ratio", "sloguard_gpu_pipe_active_ratio"}
    if how == "metric missing":  # a GPU without one metric: that series is absent, the others are there
        assert gpm & names(fams) == {"sloguard_gpu_sm_active_ratio"}
        return
    assert not gpm & names(fams)
    assert _val(fams, "sloguard_gpu_gpm_supported") == 0.0
    assert fake.calls["nvmlGpmSampleGet"] <= 1


def test_gpm_can_be_switched_off() -> None:
    fake = FakeNVML([FakeGPU(U0, gpm=dict(GEMM))])
    src = _src(fake, gpm=False)
    _collect(src)
    assert "sloguard_gpu_sm_active_ratio" not in names(_collect(src)) and fake.calls["nvmlGpmSampleGet"] == 0


def test_mig_instances_get_their_own_gpm_series() -> None:
    mig = [FakeGPU("MIG-1", name="NVIDIA H100 MIG 3g.40gb", gi_ci=(1, 0), gpm={"SM_UTIL": 30.0}),
           FakeGPU("MIG-2", name="NVIDIA H100 MIG 3g.40gb", gi_ci=(2, 0), gpm=None)]
    src = _src(FakeNVML([FakeGPU(U0, gpm=dict(GEMM), mig=list(mig))]))
    _collect(src)
    fams = _collect(src)
    assert samples(fams)[("sloguard_gpu_mig_sm_active_ratio", frozenset({("uuid", U0), ("mig_uuid", "MIG-1")}))] \
        == pytest.approx(0.30)
    assert not any(k[0] == "sloguard_gpu_mig_sm_active_ratio" and ("mig_uuid", "MIG-2") in k[1] for k in samples(fams))


NEW_GETTERS = ["nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetPerformanceState", "nvmlDeviceGetRemappedRows",
               "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetPcieReplayCounter",
               "nvmlDeviceGetViolationStatus", "nvmlDeviceGetFieldValues", "nvmlDeviceGetMemoryInfo_v2",
               "nvmlGpmQueryDeviceSupport", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetCurrentClocksEventReasons"]


@pytest.mark.parametrize("getter", NEW_GETTERS)
def test_not_supported_is_absent_called_once_and_logged_once(getter: str, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNVML([FakeGPU(U0, gpm=dict(GEMM), nvlink=[True])])
    fake.unsupported = {getter}
    src = _src(fake)
    caplog.set_level(logging.DEBUG, logger="sloguard.nvml")
    for _ in range(4):
        fams = _collect(src)
    calls = fake.calls[getter]
    per_call_args = {"nvmlDeviceGetMaxClockInfo": 2, "nvmlDeviceGetViolationStatus": 8,
                     "nvmlDeviceGetTotalEccErrors": 2}.get(getter, 1)
    assert calls <= per_call_args + 1, f"{getter} called {calls} times in 4 collections"  # +1: link discovery
    omitted = [r for r in caplog.records if r.getMessage() == "nvml field omitted"]
    assert omitted and all(r.levelno == logging.DEBUG for r in omitted)
    assert len({getattr(r, "call", "") for r in omitted}) == len(omitted)  # each call logged once
    assert _val(fams, "sloguard_gpu_temperature_celsius") == 61.0  # the rest flows
    assert promtool_check(fams) == ""


def test_unsupported_field_value_is_dropped_from_later_calls() -> None:
    fake = FakeNVML([FakeGPU(U0, mem_temp=None)])
    src = _src(fake)
    for _ in range(3):
        fams = _collect(src)
    assert "sloguard_gpu_memory_temperature_celsius" not in names(fams)
    assert fake.calls["nvmlDeviceGetFieldValues"] == 2  # link-count probe + the first read; then nothing left


def test_pstate_unknown_is_absent() -> None:
    assert "sloguard_gpu_performance_state" not in names(_collect(_src(FakeNVML([FakeGPU(U0, pstate=32)]))))


def test_everything_on_is_promtool_clean() -> None:
    mig = [FakeGPU("MIG-1", name="NVIDIA H100 MIG 1g.10gb", gi_ci=(1, 0), gpm={"SM_UTIL": 5.0})]
    gpu = FakeGPU(U0, gpm=dict(GEMM), nvlink=[True] * 4, procs=[(7, MIB)], mig=mig)
    fake = FakeNVML([gpu])
    fake.events.append((gpu, 79))
    src = _src(fake, pcie=True)
    _collect(src)
    fams = _collect(src)
    assert promtool_check(fams) == ""
    assert len(samples(fams)) == sum(len(f.samples) for f in fams)  # no series twice
