"""The canary on CUDA: sane bf16 figures, the uuid NVML knows, alone when idle, contended (never degraded, never
baselined) beside a co-located GEMM or copy load, and a clean SIGTERM."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from support.colocated import colocated
from support.exposition import promtool_check, samples

from sloguard.clock import SystemClock
from sloguard.config.spec import CanarySpec
from sloguard.gpu.canary import WORKER, CanarySource, _worker_env, stop_gracefully
from sloguard.gpu.verdict import Report, canary_families

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.cuda.is_available() is False")]
RUNS = 5


def _source(state: Path, max_wait: str = "60s") -> CanarySource:
    spec = CanarySpec(enabled=True, device="cuda:0", timeout="300s", max_wait=max_wait, quiet_gap="2s")
    return CanarySource(spec, state, clock=SystemClock())


def _runs(src: CanarySource, n: int) -> list[Report]:
    async def go() -> list[Report]:
        try:
            return [await src.run_once() for _ in range(n)]
        finally:
            await src.close()
    return asyncio.run(go())




def test_canary_on_cuda_alone(tmp_path: Path) -> None:
    import pynvml

    reps = _runs(_source(tmp_path), 3)
    pynvml.nvmlInit()
    try:
        uuids = {pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
                 for i in range(pynvml.nvmlDeviceGetCount())}
    finally:
        pynvml.nvmlShutdown()
    for rep in reps:
        f = rep.figures
        print({"spec": rep.spec_model, "fraction_of_spec": rep.fraction_of_spec, "contended": rep.contended,
               "reason": rep.contention_reason, "waited_s": rep.waited_seconds, "degraded": rep.reasons})
        assert (f["device"], f["dtype"]) == ("cuda:0", "bfloat16")
        assert f["gpu_uuid"] in {u.decode() if isinstance(u, bytes) else u for u in uuids}
        assert rep.contended is False and rep.baseline_stored and not rep.degraded, rep.reasons
        if rep.spec_model is not None:
            for test in ("matmul", "copy"):
                assert 0.2 < rep.fraction_of_spec[test] < 1.1, (test, rep.fraction_of_spec)
        assert promtool_check(canary_families(rep)) == ""
    assert reps[-1].baseline_runs == 3 and "matmul" in reps[-1].fraction_of_baseline


@pytest.mark.parametrize("kind", ["gemm", "copy"])
def test_canary_beside_load_is_contended_never_degraded_never_baselined(tmp_path: Path, kind: str) -> None:
    _runs(_source(tmp_path), 3)  # an idle baseline first, so a wrongly judged run would show as degraded
    with colocated(kind):
        reps = _runs(_source(tmp_path, max_wait="5s"), RUNS)
    for rep in reps:
        fams = samples(canary_families(rep))
        lab = frozenset({("device", "cuda:0"), ("gpu", rep.figures["gpu_uuid"])})
        print({kind: {"matmul_tflops": rep.figures["matmul_flops"] / 1e12, "of_baseline": rep.fraction_of_baseline,
                      "contended": rep.contended, "share": rep.contention_share, "reason": rep.contention_reason,
                      "degraded": rep.reasons}})
        assert rep.contended is True and not rep.degraded and not rep.baseline_stored, rep.reasons
        assert rep.baseline_runs == 3
        assert fams[("sloguard_canary_contended", lab)] == 1.0


def test_sigterm_stops_a_cuda_worker_without_sigkill() -> None:
    async def scenario() -> int:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", WORKER, "--device", "cuda:0", env=_worker_env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        await asyncio.sleep(8)  # let it import torch and create the CUDA context
        return await stop_gracefully(proc, grace=30.0)

    started = time.monotonic()
    code = asyncio.run(scenario())
    assert code in (0, 143, -15), code  # finished, handled SIGTERM, or died of it; never SIGKILLed (-9)
    assert time.monotonic() - started < 38
