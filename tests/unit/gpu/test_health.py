"""Sick-GPU evidence: each reason from its readings (pure), and through the NVML source with the fake NVML."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.exposition import samples
from support.nvml_fake import FakeGPU, FakeNVML

from sloguard.clock import FakeClock
from sloguard.config.spec import GPUSpec
from sloguard.gpu import health
from sloguard.gpu.health import History, Reading, problems
from sloguard.gpu.nvml import NVMLSource

HEALTHY = Reading(busy=0.9, sm_clock=1.98e9, sm_clock_max=1.98e9, clock_events=0x004, ecc_uncorrected=0,
                  remap_pending=0, remap_failure=0, pcie_gen=5, pcie_gen_max=5, pcie_width=16, pcie_width_max=16)


CLEAN = History(ecc_uncorrected=0)


def _held(r: Reading, hist: History = CLEAN, now: float = 0.0, **kw: Any) -> set[str]:
    return {k for k, v in problems(r, hist, now, **kw).items() if v}


def _r(**kw: Any) -> Reading:
    return Reading(**{**HEALTHY.__dict__, **kw})


def test_healthy_busy_gpu_has_no_problem_and_every_reason_is_checked() -> None:
    found = problems(HEALTHY, History(ecc_uncorrected=0), 0.0, xids_watched=True)
    assert not any(found.values())
    assert set(found) == set(health.REASONS)


@pytest.mark.parametrize(("reading", "reason"), [
    (_r(remap_pending=1), "row_remap_pending"),
    (_r(remap_failure=1), "row_remap_failure"),
    (_r(pcie_width=8), "pcie_width_below_max"),
    (_r(pcie_gen=3), "pcie_gen_below_max"),
    (_r(clock_events=0x008), "hw_slowdown"),
    (_r(clock_events=0x040), "hw_thermal_slowdown"),
    (_r(clock_events=0x080), "hw_power_brake"),
    (_r(sm_clock=0.9e9, clock_events=0), "clocks_below_max"),
])
def test_each_reason(reading: Reading, reason: str) -> None:
    assert _held(reading) == {reason}


@pytest.mark.parametrize(("reading", "why"), [
    (_r(busy=0.1, pcie_gen=1), "an idle link steps its generation down to save power"),
    (_r(busy=0.1, sm_clock=0.3e9, clock_events=0x001), "idle clocks are low"),
    (_r(sm_clock=0.9e9, clock_events=0x004), "the power cap explains low clocks"),
    (_r(sm_clock=0.9e9, clock_events=0x002), "application clocks set lower by the admin"),
    (_r(sm_clock=0.9e9, clock_events=0x020), "software thermal slowdown explains low clocks"),
])
def test_busy_gpu_normal_states_are_not_problems(reading: Reading, why: str) -> None:
    assert _held(reading) == set(), why


def test_absent_inputs_leave_reasons_out_instead_of_clear() -> None:
    found = problems(Reading(busy=0.9), History(), 0.0)
    assert set(found) == {"gpu_lost"}  # nothing else can be decided


def test_uncorrectable_ecc_increase_holds_for_an_hour() -> None:
    hist = health.step(_r(ecc_uncorrected=0), History(), now=0.0)
    hist = health.step(_r(ecc_uncorrected=2), hist, now=100.0)
    assert "uncorrectable_ecc_increase" in _held(_r(ecc_uncorrected=2), hist, now=100.0)
    hist = health.step(_r(ecc_uncorrected=2), hist, now=100.0 + health.HOLD_S)
    assert "uncorrectable_ecc_increase" not in _held(_r(ecc_uncorrected=2), hist, now=100.0 + health.HOLD_S)


def test_first_reading_is_no_increase() -> None:
    hist = health.step(_r(ecc_uncorrected=5), History(), now=0.0)  # errors from before start: not growth
    assert _held(_r(ecc_uncorrected=5), hist) == set()


@pytest.mark.parametrize(("xid", "critical"), [(79, True), (48, True), (63, True), (94, True), (13, False),
                                               (31, False), (43, False)])
def test_critical_xids_only(xid: int, critical: bool) -> None:
    held = _held(HEALTHY, xids=[(xid, 0.0)], xids_watched=True, now=10.0)
    assert ("critical_xid" in held) is critical
    assert "critical_xid" not in _held(HEALTHY, xids=[(xid, 0.0)], xids_watched=True, now=health.HOLD_S + 1)


def test_describe_names_the_numbers() -> None:
    assert health.describe("pcie_width_below_max", _r(pcie_width=8)) == "PCIe link x8 < max x16"
    assert "900 MHz" in health.describe("clocks_below_max", _r(sm_clock=0.9e9))
    assert health.describe("row_remap_pending", HEALTHY) == "row remap pending"


def _problem(fams: Any, uuid: str, reason: str) -> float | None:
    return samples(fams).get(("sloguard_gpu_health_problem", frozenset({("uuid", uuid), ("reason", reason)})))


def test_nvml_source_exports_problems_with_holds_and_lost_gpus() -> None:
    a, b = FakeGPU("GPU-a", remapped=(0, 0, 1, 0)), FakeGPU("GPU-b", bus="00000000:02:00.0")
    fake, clock = FakeNVML([a, b]), FakeClock()
    src = NVMLSource(GPUSpec(), nvml=fake, clock=clock)  # type: ignore[arg-type]
    fams = asyncio.run(src.collect()).families
    assert (_problem(fams, "GPU-a", "row_remap_pending"), _problem(fams, "GPU-b", "row_remap_pending")) == (1.0, 0.0)
    assert _problem(fams, "GPU-a", "uncorrectable_ecc_increase") == 0.0
    b.ecc = (3, 1)
    fake.events.append((b, 79))
    clock.advance(15)
    fams = asyncio.run(src.collect()).families
    assert _problem(fams, "GPU-b", "uncorrectable_ecc_increase") == 1.0
    assert _problem(fams, "GPU-b", "critical_xid") == 1.0
    fake.gpus.pop()  # GPU-b falls off the bus
    fake.fail["nvmlDeviceGetPowerUsage"] = 15  # NVML_ERROR_GPU_IS_LOST: the collection fails, NVML re-inits
    with pytest.raises(Exception, match="NVML"):
        asyncio.run(src.collect())
    del fake.fail["nvmlDeviceGetPowerUsage"]
    fams = asyncio.run(src.collect()).families
    assert _problem(fams, "GPU-b", "gpu_lost") == 1.0 and _problem(fams, "GPU-a", "gpu_lost") == 0.0
