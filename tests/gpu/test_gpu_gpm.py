"""GPM on a real GPU tells tensor-bound from memory-bound work: GEMM, copy and idle read as the issue measured."""

from __future__ import annotations

import asyncio
import time

import pytest
from support.colocated import colocated
from support.exposition import samples

from sloguard.config.spec import GPUSpec
from sloguard.gpu.nvml import NVMLSource

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.cuda.is_available() is False")]




def _gpm(window: float = 3.0) -> dict[str, float]:
    """Return GPU 0's GPM series over `window` seconds (two collections: no sleeping inside either)."""
    src = NVMLSource(GPUSpec(nvml="on"))

    async def go() -> dict[str, float]:
        await src.collect()
        await asyncio.sleep(window)
        fams = (await src.collect()).families
        await src.close()
        got = samples(fams)
        info = sorted(dict(k[1])["uuid"] for k in got if k[0] == "sloguard_gpu_info")
        return {n: v for (n, labels), v in got.items() if n.endswith("_active_ratio") or n.endswith("occupancy_ratio")
                if dict(labels).get("uuid") == info[0] and "pipe" not in dict(labels)}

    return asyncio.run(go())


def _supported() -> bool:
    got = samples(asyncio.run(NVMLSource(GPUSpec(nvml="on")).collect()).families)
    return any(k[0] == "sloguard_gpu_gpm_supported" and v == 1.0 for k, v in got.items())


@pytest.fixture(scope="module", autouse=True)
def _needs_gpm() -> None:
    if not _supported():
        pytest.skip("this GPU has no GPM (pre-Hopper or vGPU)")


def test_gemm_is_tensor_bound() -> None:
    with colocated("gemm"):
        time.sleep(1.0)
        got = _gpm()
    print({"gemm": got})
    assert got["sloguard_gpu_tensor_active_ratio"] >= 0.8
    assert got["sloguard_gpu_sm_active_ratio"] >= 0.8


def test_copy_is_memory_bound() -> None:
    with colocated("copy"):
        time.sleep(1.0)
        got = _gpm()
    print({"copy": got})
    assert got["sloguard_gpu_dram_active_ratio"] >= 0.7
    assert got["sloguard_gpu_tensor_active_ratio"] <= 0.05


def test_idle_is_idle() -> None:
    time.sleep(1.0)
    got = _gpm()
    print({"idle": got})
    assert got["sloguard_gpu_tensor_active_ratio"] <= 0.05 and got["sloguard_gpu_dram_active_ratio"] <= 0.05
