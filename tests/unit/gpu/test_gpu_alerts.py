"""Built-in GPU alerts fire in the live engine on what the NVML source exports for a sick GPU, and only then."""

from __future__ import annotations

import asyncio

import pytest
from support.nvml_fake import FakeGPU, FakeNVML

from sloguard.alerts import engine
from sloguard.alerts.rules import builtin_rules
from sloguard.config.spec import GPUSpec
from sloguard.gpu.alerts import GPU_ALERTS
from sloguard.gpu.health import REASONS
from sloguard.gpu.nvml import NVMLSource
from sloguard.model import Sample


def _firing(gpus: list[FakeGPU]) -> set[tuple[str, str]]:
    src = NVMLSource(GPUSpec(), nvml=FakeNVML(gpus))  # type: ignore[arg-type]
    fams = asyncio.run(src.collect()).families
    samples = [Sample(s.name, s.labels, s.value) for f in fams for s in f.samples]
    gpu_alerts = {a.name for a in GPU_ALERTS}
    rules = [r for r in builtin_rules() if r.name in gpu_alerts]
    active: dict[str, engine.Alert] = {}
    for t in (0.0, 600.0, 1200.0):  # past every `for:`
        active, _ = engine.evaluate(rules, active, samples, t)
    return {(a.name, dict(a.labels)["uuid"]) for a in active.values() if a.state == "firing"}


def test_every_gpu_alert_is_a_builtin_rule_on_a_known_reason() -> None:
    names = {r.name for r in builtin_rules()}
    assert {a.name for a in GPU_ALERTS} <= names
    for a in GPU_ALERTS:
        assert a.runbook and a.severity in ("warning", "critical")
        assert any(reason in a.expr for reason in REASONS), a.expr


def test_healthy_busy_gpus_fire_nothing() -> None:
    idle_link_down = FakeGPU("GPU-b", bus="00000000:02:00.0", util=(0, 0), pcie_link=(1, 5, 16, 16))
    assert _firing([FakeGPU("GPU-a"), idle_link_down]) == set()


@pytest.mark.parametrize(("gpu", "alert"), [
    (FakeGPU("GPU-a", remapped=(0, 1, 1, 0)), "SloguardGPURowRemapPending"),
    (FakeGPU("GPU-a", remapped=(0, 9, 0, 1)), "SloguardGPURowRemapFailure"),
    (FakeGPU("GPU-a", pcie_link=(5, 5, 8, 16)), "SloguardGPUPCIeLinkDegraded"),
    (FakeGPU("GPU-a", reasons=0x080), "SloguardGPUHardwareSlowdown"),
])
def test_sick_gpu_fires_its_alert(gpu: FakeGPU, alert: str) -> None:
    assert _firing([gpu, FakeGPU("GPU-b", bus="00000000:02:00.0")]) == {(alert, "GPU-a")}
