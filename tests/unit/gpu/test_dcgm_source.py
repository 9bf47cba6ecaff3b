"""dcgm-exporter pages -> the same sloguard_gpu_* series as NVML; health and diagnosis signals from them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sloguard.config.spec import TargetSpec
from sloguard.diagnose.signals import gpu_signals, index
from sloguard.gpu.dcgm_source import DcgmSource, GPUMemory, map_samples
from sloguard.model import Sample
from sloguard.sim import dcgm as simdcgm
from sloguard.sources.base import SourceError
from sloguard.sources.parse import parse_text

PAGE = Path(__file__).resolve().parents[2] / "fixtures" / "dcgm" / "dcgm-exporter-h100.txt"
G0, G1 = "GPU-927d7444-b45a-7c49-8402-5e686e46a026", "GPU-3f1a2b9c-88d0-4e57-a1c6-0b9e7d2c4f11"


def _samples(text: str, target: str = "chat", memory: dict[str, GPUMemory] | None = None) -> list[Sample]:
    fams = map_samples(parse_text(text), target, {} if memory is None else memory, 1000.0)
    return [Sample(s.name, s.labels, s.value) for f in fams for s in f.samples]


def _one(samples: list[Sample], name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_fields_map_with_their_scale_and_labels() -> None:
    s = _samples(PAGE.read_text())
    assert _one(s, "sloguard_gpu_sm_clock_hertz", uuid=G1) == pytest.approx(1185e6)
    assert _one(s, "sloguard_gpu_sm_clock_max_hertz", uuid=G1) == pytest.approx(1980e6)
    assert _one(s, "sloguard_gpu_utilization_ratio", uuid=G0) == pytest.approx(0.93)
    assert _one(s, "sloguard_gpu_memory_used_bytes", uuid=G0) == pytest.approx(74778 * 2**20)  # the MIG row is not
    assert _one(s, "sloguard_gpu_energy_joules_total", uuid=G0) == pytest.approx(4851234.567)
    assert _one(s, "sloguard_gpu_tensor_active_ratio", uuid=G0) == pytest.approx(0.183251)
    assert _one(s, "sloguard_gpu_remapped_rows_total", uuid=G1, cause="correctable") == 2
    info = next(x for x in s if x.name == "sloguard_gpu_info" and x.labels["uuid"] == G0)
    assert info.labels["name"] == "NVIDIA H100 80GB HBM3" and info.labels["driver_version"] == "570.124.06"
    assert all(x.labels.get("target") == "chat" for x in s)


def test_clock_event_bitmask_and_health() -> None:
    s = _samples(PAGE.read_text())
    assert _one(s, "sloguard_gpu_clock_event_active", uuid=G1, reason="hw_thermal_slowdown") == 1
    assert _one(s, "sloguard_gpu_clock_event_active", uuid=G1, reason="sw_thermal_slowdown") == 1
    assert _one(s, "sloguard_gpu_clock_event_active", uuid=G0, reason="hw_thermal_slowdown") == 0
    assert _one(s, "sloguard_gpu_health_problem", uuid=G1, reason="hw_thermal_slowdown") == 1
    assert _one(s, "sloguard_gpu_health_problem", uuid=G0, reason="pcie_width_below_max") == 0
    assert _one(s, "sloguard_gpu_health_problem", uuid=G0, reason="critical_xid") == 0


def test_xid_changes_count_as_events() -> None:
    memory: dict[str, GPUMemory] = {}
    text = PAGE.read_text()
    xid_line = f'DCGM_FI_DEV_XID_ERRORS{{gpu="0",UUID="{G0}"}}'
    _samples(text, memory=memory)
    s = _samples(text.replace(f"{xid_line.split('{')[0]}{{gpu=\"0\"", "IGNORED{") + f"{xid_line} 79\n",
                 memory=memory)
    assert _one(s, "sloguard_gpu_xid_events_total", uuid=G0, xid="79") == 1
    assert _one(s, "sloguard_gpu_health_problem", uuid=G0, reason="critical_xid") == 1


def test_diagnosis_signals_from_the_page() -> None:
    sig, notes = gpu_signals(index(_samples(PAGE.read_text())), "chat")
    assert sig["gpu_throttle_reasons"] == 2  # sw + hw thermal bits (the hw_thermal health problem is the same)
    assert sig["gpu_sm_clock_ratio"] == pytest.approx(1185 / 1980) and G1 in notes["gpu_sm_clock_ratio"]
    assert sig["gpu_health_problems"] == 0
    other, _ = gpu_signals(index(_samples(PAGE.read_text())), "another-target")
    assert other == {}  # another target's GPUs are not this one's


def test_the_simulator_page_follows_its_faults() -> None:
    state = simdcgm.GPUState()
    simdcgm.readings(state, 0.0, 0.0, 1.0, 0.2)
    calm = _samples(simdcgm.render(simdcgm.readings(state, 1.0, 0.8, 1.0, 0.2)).decode())
    assert _one(calm, "sloguard_gpu_sm_clock_hertz", uuid=simdcgm.UUID) == pytest.approx(1980e6)
    assert gpu_signals(index(calm), "chat")[0]["gpu_throttle_reasons"] == 0
    hot = _samples(simdcgm.render(simdcgm.readings(state, 2.0, 1.7, 0.5, 0.2)).decode())
    sig, _ = gpu_signals(index(hot), "chat")
    assert sig["gpu_sm_clock_ratio"] == pytest.approx(0.5) and sig["gpu_throttle_reasons"] >= 2
    idle = _samples(simdcgm.render(simdcgm.readings(state, 3.0, 1.7, 0.5, 0.0)).decode())
    assert "gpu_sm_clock_ratio" not in gpu_signals(index(idle), "chat")[0]  # an idle GPU's clock says nothing


def test_source_reads_a_file_and_fails_cleanly(tmp_path: Path) -> None:
    src = DcgmSource(TargetSpec(name="chat", dcgm_url=f"file://{PAGE}"))
    out = asyncio.run(src.collect())
    assert any(f.name == "sloguard_gpu_sm_clock_hertz" for f in out.families)
    junk = tmp_path / "junk.txt"
    junk.write_text("some_metric 1\n")
    with pytest.raises(SourceError) as err:
        asyncio.run(DcgmSource(TargetSpec(name="chat", dcgm_url=f"file://{junk}")).collect())
    assert err.value.reason == "no_known_metrics"
