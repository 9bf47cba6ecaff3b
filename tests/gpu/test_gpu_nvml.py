"""The real NVML source on a real GPU: every GPU reported, sane values, no sentinels, clean exposition."""

from __future__ import annotations

import asyncio

import pytest
from support.exposition import names, promtool_check, samples

from sloguard.config.spec import GPUSpec
from sloguard.gpu.nvml import NVMLSource

pytestmark = pytest.mark.gpu


def _collect_twice() -> tuple[NVMLSource, list, list]:  # type: ignore[type-arg]
    src = NVMLSource(GPUSpec(nvml="on", pcie=True))

    async def go() -> tuple[list, list]:  # type: ignore[type-arg]
        first = list((await src.collect()).families)
        second = list((await src.collect()).families)
        await src.close()
        return first, second

    first, second = asyncio.run(go())
    return src, first, second


def test_real_nvml_reports_every_gpu() -> None:
    import pynvml

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        uuids = {pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)}
    finally:
        pynvml.nvmlShutdown()
    _, fams, _ = _collect_twice()
    got = samples(fams)
    assert got[("sloguard_gpu_devices", frozenset())] == count
    info = {dict(k[1])["uuid"] for k in got if k[0] == "sloguard_gpu_info"}
    assert info == {u.decode() if isinstance(u, bytes) else u for u in uuids}
    for uuid in info:
        key = frozenset({("uuid", uuid)})
        assert got[("sloguard_gpu_memory_total_bytes", key)] > 2**30
        assert 0 < got[("sloguard_gpu_temperature_celsius", key)] < 120
        assert 0 < got[("sloguard_gpu_sm_clock_hertz", key)] < 5e9


def test_no_sentinels_and_promtool_clean() -> None:
    _, first, second = _collect_twice()
    for fams in (first, second):
        assert promtool_check(fams) == ""
        assert all(v < 2**32 - 1 or "bytes" in n or "joules" in n for (n, _), v in samples(fams).items())
    assert {"sloguard_gpu_info", "sloguard_gpu_utilization_ratio", "sloguard_gpu_power_watts"} <= names(second)
