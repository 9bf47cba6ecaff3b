"""The real NVML source on a real GPU: every GPU reported, sane values, no sentinels, nvidia-smi agrees."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest
from support.exposition import names, promtool_check, samples

from sloguard.config.spec import GPUSpec
from sloguard.gpu.nvml import NVMLSource

pytestmark = pytest.mark.gpu
NEW = {"sloguard_gpu_memory_reserved_bytes", "sloguard_gpu_memory_free_bytes", "sloguard_gpu_sm_clock_max_hertz",
       "sloguard_gpu_pcie_link_width", "sloguard_gpu_pcie_link_max_width", "sloguard_gpu_pcie_link_generation",
       "sloguard_gpu_pcie_replays_total", "sloguard_gpu_performance_state", "sloguard_gpu_violation_seconds_total",
       "sloguard_gpu_health_problem", "sloguard_gpu_gpm_supported"}


def _collect_twice(gap: float = 1.0) -> tuple[list, list]:  # type: ignore[type-arg]
    src = NVMLSource(GPUSpec(nvml="on", pcie=True))

    async def go() -> tuple[list, list]:  # type: ignore[type-arg]
        first = list((await src.collect()).families)
        await asyncio.sleep(gap)
        second = list((await src.collect()).families)
        await src.close()
        return first, second

    return asyncio.run(go())


def test_real_nvml_reports_every_gpu() -> None:
    import pynvml

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        uuids = {pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)}
    finally:
        pynvml.nvmlShutdown()
    fams, _ = _collect_twice(0.0)
    got = samples(fams)
    assert got[("sloguard_gpu_devices", frozenset())] == count
    info = {dict(k[1])["uuid"] for k in got if k[0] == "sloguard_gpu_info"}
    assert info == {u.decode() if isinstance(u, bytes) else u for u in uuids}
    for uuid in info:
        key = frozenset({("uuid", uuid)})
        assert got[("sloguard_gpu_memory_total_bytes", key)] > 2**30
        assert 0 < got[("sloguard_gpu_temperature_celsius", key)] < 120
        assert 0 < got[("sloguard_gpu_sm_clock_hertz", key)] <= got[("sloguard_gpu_sm_clock_max_hertz", key)]
        parts = [got[(f"sloguard_gpu_memory_{k}_bytes", key)] for k in ("used", "reserved", "free")]
        assert sum(parts) == pytest.approx(got[("sloguard_gpu_memory_total_bytes", key)], rel=1e-3)


def test_no_sentinels_every_new_series_and_promtool_clean() -> None:
    first, second = _collect_twice()
    for fams in (first, second):
        assert promtool_check(fams) == ""
        assert all(v < 2**32 - 1 or "bytes" in n or "joules" in n for (n, _), v in samples(fams).items())
    missing = NEW - names(second)
    print({"new series present": sorted(NEW & names(second)), "missing": sorted(missing),
           "gpm": sorted(n for n in names(second) if n.endswith("_active_ratio"))})
    assert {"sloguard_gpu_info", "sloguard_gpu_utilization_ratio", "sloguard_gpu_power_watts"} <= names(second)
    assert not missing


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="nvidia-smi not on PATH")
def test_memory_used_equals_nvidia_smi() -> None:
    src = NVMLSource(GPUSpec(nvml="on"))
    ours = samples(asyncio.run(src.collect()).families)
    asyncio.run(src.close())
    query = ["nvidia-smi", "--query-gpu=uuid,memory.used,memory.reserved", "--format=csv,noheader,nounits"]
    smi = subprocess.run(query, capture_output=True, text=True, check=True, timeout=30).stdout
    for line in smi.strip().splitlines():
        uuid, used, reserved = (x.strip() for x in line.split(","))
        key = frozenset({("uuid", uuid)})
        mib = ours[("sloguard_gpu_memory_used_bytes", key)] / 2**20
        print({"uuid": uuid, "sloguard_used_mib": round(mib, 1), "nvidia_smi_used_mib": used,
               "nvidia_smi_reserved_mib": reserved})
        assert abs(mib - float(used)) <= 2.0
