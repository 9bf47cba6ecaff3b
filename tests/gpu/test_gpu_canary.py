"""The canary on CUDA: bf16 figures within sane fractions of the datasheet, uuid matches NVML, SIGTERM is clean."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from support.exposition import promtool_check

from sloguard.clock import FakeClock
from sloguard.config.spec import CanarySpec
from sloguard.gpu.canary import WORKER, CanarySource, _worker_env, stop_gracefully
from sloguard.gpu.verdict import canary_families

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.cuda.is_available() is False")]


def test_canary_on_cuda(tmp_path: Path) -> None:
    import pynvml

    src = CanarySource(CanarySpec(enabled=True, device="cuda:0", timeout="300s"), tmp_path, clock=FakeClock())
    rep = asyncio.run(src.run_once())
    f = rep.figures
    assert (f["device"], f["dtype"]) == ("cuda:0", "bfloat16")
    pynvml.nvmlInit()
    try:
        uuids = {pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
                 for i in range(pynvml.nvmlDeviceGetCount())}
    finally:
        pynvml.nvmlShutdown()
    assert f["gpu_uuid"] in {u.decode() if isinstance(u, bytes) else u for u in uuids}
    if rep.spec_model is not None:
        for test in ("matmul", "copy"):
            assert 0.2 < rep.fraction_of_spec[test] < 1.1, (test, rep.fraction_of_spec)
    assert rep.baseline_stored
    assert promtool_check(canary_families(rep)) == ""
    print({"spec": rep.spec_model, "figures": f, "fraction_of_spec": rep.fraction_of_spec})


def test_sigterm_stops_a_cuda_worker_without_sigkill() -> None:
    async def scenario() -> int:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", WORKER, "--device", "cuda:0", env=_worker_env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        await asyncio.sleep(8)  # let it import torch and create the CUDA context
        return await stop_gracefully(proc, grace=30.0)

    code = asyncio.run(scenario())
    assert code in (0, 143, -15), code  # finished, handled SIGTERM, or died of it; never SIGKILLed (-9)
