"""GPU figures: NVML collection time per GPU, the canary's figures and fractions of spec, RSS with the sources.

Without a GPU it says "no GPU" for the NVML part and runs the canary on CPU (labelled device=cpu).
Run: .venv/bin/python benchmarks/gpu.py [--collections 50] [--device auto|cpu|cuda:N] [--fake-gpus 8] [--pcie]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from sloguard.clock import SystemClock
from sloguard.config.spec import CanarySpec, GPUSpec, HostSpec, ProcessSpec
from sloguard.gpu.canary import CanarySource
from sloguard.gpu.nvml import NVMLSource
from sloguard.sources.host import HostSource

SERVER = ProcessSpec(name="server", cmdline_regex=r"vllm|sglang|text-generation-launcher|tritonserver")


def fake_nvml(gpus: int) -> Any:
    """The tests' in-memory NVML with `gpus` devices: measures sloguard's own cost without driver calls."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from support.nvml_fake import FakeGPU, FakeNVML  # type: ignore[import-not-found]

    return FakeNVML([FakeGPU(f"GPU-{i:04d}") for i in range(gpus)])


async def nvml_figures(n: int, pcie: bool, fake_gpus: int = 0) -> dict[str, object]:
    """Time the first (initialising) and then n steady collections; per-GPU time = median / GPUs."""
    mod = fake_nvml(fake_gpus) if fake_gpus else None
    src = NVMLSource(GPUSpec(pcie=pcie), processes=[SERVER], nvml=mod)
    t0 = time.perf_counter()
    fams = list((await src.collect()).families)
    first = time.perf_counter() - t0
    gpus = next((s.value for f in fams for s in f.samples if s.name == "sloguard_gpu_devices"), 0.0)
    if not gpus:
        await src.close()
        return {"status": "no GPU: NVML unavailable or reports no device (quiet no data)"}
    times = []
    for _ in range(n):
        t = time.perf_counter()
        await src.collect()
        times.append(time.perf_counter() - t)
    await src.close()
    med = statistics.median(times)
    return {"gpus": int(gpus), "first_collection_ms": round(first * 1e3, 2),
            "collection_ms_median": round(med * 1e3, 3),
            "collection_ms_p99": round(sorted(times)[int(0.99 * (len(times) - 1))] * 1e3, 3),
            "per_gpu_ms": round(med / gpus * 1e3, 3), "series": sum(len(f.samples) for f in fams), "pcie": pcie}


async def canary_figures(device: str) -> dict[str, object]:
    """Run the canary once (calibrating a throwaway baseline) and return figures and fractions."""
    with tempfile.TemporaryDirectory(prefix="sloguard-canary-") as state:
        src = CanarySource(CanarySpec(enabled=True, device=device, timeout="600s"), Path(state), SystemClock())
        rep = await src.run_once()
    f = rep.figures
    return {"device": f["device"], "gpu": f["gpu_name"], "spec": rep.spec_model, "dtype": f["dtype"],
            "matmul_tflops": round(f["matmul_flops"] / 1e12, 2),
            "copy_gb_per_s": round(f["copy_bandwidth_bytes_per_second"] / 1e9, 1),
            "decoder_ttft_ms": round(f["decoder_ttft_seconds"] * 1e3, 3),
            "decoder_tpot_ms": round(f["decoder_tpot_seconds"] * 1e3, 3),
            "fraction_of_spec": {k: round(v, 3) for k, v in rep.fraction_of_spec.items()},
            "busy_s": round(f["busy_seconds"], 2), "wall_s": round(rep.duration_seconds, 2)}


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    out: dict[str, object] = {"nvml": await nvml_figures(args.collections, args.pcie)}
    if args.fake_gpus:
        out["nvml_fake_driver"] = await nvml_figures(args.collections, args.pcie, args.fake_gpus)
    host = HostSource(HostSpec(processes=[SERVER]))
    await host.collect()
    out["canary"] = await canary_figures(args.device)
    out["rss_mib_with_nvml_host_canary_sources"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    out["torch_in_daemon_process"] = "torch" in sys.modules
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--collections", type=int, default=50)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--fake-gpus", type=int, default=0, help="also time sloguard's own cost on N fake GPUs")
    ap.add_argument("--pcie", action="store_true", help="include the opt-in PCIe counters (20 ms sample each)")
    print(json.dumps(asyncio.run(main_async(ap.parse_args())), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
