"""GPU figures: NVML collection cost per GPU (with/without GPM and PCIe), the canary idle and beside co-located
load with its verdicts, and the canary's harm to a co-located latency-sensitive loop.

Without a GPU it times sloguard's own collection cost on fake GPUs, runs the canary on the CPU (device=cpu)
and measures the harm design on the CPU (a CPU "decode" loop beside CPU canary runs), labelled so.
Run: .venv/bin/python benchmarks/gpu.py [--collections 50] [--device auto|cpu|cuda:N] [--fake-gpus 8]
        [--load-runs 5] [--harm-windows 20]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.colocated import colocated  # type: ignore[import-not-found]  # noqa: E402

from sloguard.clock import SystemClock  # noqa: E402
from sloguard.config.spec import CanarySpec, GPUSpec, HostSpec, ProcessSpec  # noqa: E402
from sloguard.gpu.canary import CanarySource  # noqa: E402
from sloguard.gpu.nvml import NVMLSource  # noqa: E402
from sloguard.gpu.verdict import Report  # noqa: E402
from sloguard.sources.base import SourceAbsent  # noqa: E402
from sloguard.sources.host import HostSource  # noqa: E402

SERVER = ProcessSpec(name="server", cmdline_regex=r"vllm|sglang|text-generation-launcher|tritonserver")


def fake_nvml(gpus: int) -> Any:
    """The tests' in-memory NVML with `gpus` H100-like devices (GPM, no NVLink): sloguard's own cost only."""
    from support.nvml_fake import FakeGPU, FakeNVML  # type: ignore[import-not-found]

    gpm = {"SM_UTIL": 50.0, "SM_OCCUPANCY": 20.0, "ANY_TENSOR_UTIL": 40.0, "DRAM_BW_UTIL": 30.0, "FP16_UTIL": 1.0,
           "FP32_UTIL": 2.0, "FP64_UTIL": 0.0}
    return FakeNVML([FakeGPU(f"GPU-{i:04d}", bus=f"00000000:{i + 1:02x}:00.0", gpm=dict(gpm)) for i in range(gpus)])


async def nvml_figures(n: int, pcie: bool, gpm: bool, fake_gpus: int = 0) -> dict[str, object]:
    """Time the first (initialising) and then n steady collections; per-GPU time = median / GPUs."""
    src = NVMLSource(GPUSpec(pcie=pcie, gpm=gpm), processes=[SERVER], nvml=fake_nvml(fake_gpus) if fake_gpus else None)
    t0 = time.perf_counter()
    try:
        fams = list((await src.collect()).families)
    except SourceAbsent as exc:
        return {"status": f"no GPU: NVML absent ({exc.reason})"}
    first = time.perf_counter() - t0
    gpus = next((s.value for f in fams for s in f.samples if s.name == "sloguard_gpu_devices"), 0.0)
    if not gpus:
        await src.close()
        return {"status": "no GPU: NVML reports no device"}
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fams = list((await src.collect()).families)
        times.append(time.perf_counter() - t)
    await src.close()
    med = statistics.median(times)
    return {"gpus": int(gpus), "gpm": gpm, "pcie": pcie, "first_collection_ms": round(first * 1e3, 2),
            "collection_ms_median": round(med * 1e3, 3),
            "collection_ms_p99": round(sorted(times)[int(0.99 * (len(times) - 1))] * 1e3, 3),
            "per_gpu_ms": round(med / gpus * 1e3, 3), "series": sum(len(f.samples) for f in fams)}


def _torch_device(device: str) -> str:
    return "cpu" if device == "cpu" else ("cuda:0" if device == "auto" else device)


def summary(rep: Report) -> dict[str, object]:
    """Return the figures and verdict of one canary run."""
    f = rep.figures
    return {"device": f["device"], "gpu": f["gpu_name"], "spec": rep.spec_model,
            "matmul_tflops": round(f["matmul_flops"] / 1e12, 2),
            "copy_gb_per_s": round(f["copy_bandwidth_bytes_per_second"] / 1e9, 1),
            "decoder_tpot_ms": round(f["decoder_tpot_seconds"] * 1e3, 3),
            "fraction_of_spec": {k: round(v, 3) for k, v in rep.fraction_of_spec.items()},
            "fraction_of_baseline": {k: round(v, 3) for k, v in rep.fraction_of_baseline.items()},
            "contended": rep.contended, "contention_share": rep.contention_share,
            "contention_reason": rep.contention_reason, "waited_s": round(rep.waited_seconds, 1),
            "degraded": rep.degraded, "reasons": rep.reasons, "baselined": rep.baseline_stored,
            "busy_s": round(f["busy_seconds"], 2), "wall_s": round(rep.duration_seconds, 2)}


def canary(device: str, state: Path, max_wait: str = "10s") -> CanarySource:
    """Return a canary source as the daemon builds it, with a bounded wait for the benchmark."""
    spec = CanarySpec(enabled=True, device=device, timeout="600s", max_wait=max_wait, quiet_gap="2s")
    return CanarySource(spec, state, SystemClock())




async def canary_runs(device: str, state: Path, runs: int, load: str | None) -> list[dict[str, object]]:
    """Run the canary `runs` times (beside `load` if given) and return each run's summary."""
    src, out = canary(device, state), []
    try:
        for _ in range(runs):
            if load is None:
                out.append(summary(await src.run_once()))
                continue
            with colocated(load, _torch_device(device)):
                out.append(summary(await src.run_once()))
    finally:
        await src.close()
    return out


def quantiles(xs: list[float]) -> dict[str, float]:
    """Return p50/p99/max in milliseconds and the count."""
    s = sorted(xs)
    at = (lambda q: s[min(len(s) - 1, int(q * len(s)))]) if s else (lambda q: float("nan"))
    return {"n": len(s), "p50_ms": round(at(0.5) * 1e3, 3), "p99_ms": round(at(0.99) * 1e3, 3),
            "max_ms": round((s[-1] if s else float("nan")) * 1e3, 3)}


def harm(steps: list[tuple[float, float]], windows: list[tuple[float, float]]) -> dict[str, object]:
    """Split co-located step latencies into those overlapping a canary kernel window and the others."""
    inside, outside = [], []
    for end, lat in steps:
        start = end - lat
        (inside if any(start < b and end > a for a, b in windows) else outside).append(lat)
    span = (steps[-1][0] - steps[0][0]) if len(steps) > 1 else 0.0
    busy = sum(b - a for a, b in windows)
    return {"inside_canary_windows": quantiles(inside), "outside": quantiles(outside), "windows": len(windows),
            "canary_time_share": round(busy / span, 4) if span else None,
            "mean_window_s": round(busy / len(windows), 3) if windows else None}


async def harm_figures(device: str, state: Path, windows: int) -> dict[str, object]:
    """Run a decode-like loop and >= `windows` canary runs beside it; compare its step latency in and out."""
    src, spans, verdicts = canary(device, state, max_wait="1s"), [], []
    out = str(state / "steps.txt")
    with colocated("decode", _torch_device(device), out):
        await asyncio.sleep(5.0)  # a stretch without the canary before the first window
        for _ in range(windows):
            rep = await src.run_once()
            spans.append((rep.figures["kernels_started_at"], rep.figures["kernels_finished_at"]))
            verdicts.append((rep.contended, rep.degraded))
            await asyncio.sleep(2.0)
    await src.close()
    steps = [(float(a), float(b)) for a, b in (ln.split() for ln in Path(out).read_text().splitlines())]
    return harm(steps, spans) | {"verdicts_contended_degraded": sorted({str(v) for v in verdicts})}


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    out: dict[str, object] = {"nvml": {f"gpm={g},pcie={p}": await nvml_figures(args.collections, p, g)
                                       for g in (False, True) for p in (False, True)}}
    if args.fake_gpus:
        out["nvml_fake_gpus"] = {f"gpm={g}": await nvml_figures(args.collections, False, g, args.fake_gpus)
                                 for g in (False, True)}
    host = HostSource(HostSpec(processes=[SERVER]))
    await host.collect()
    with tempfile.TemporaryDirectory(prefix="sloguard-canary-") as tmp:
        state = Path(tmp)
        idle = out["canary_idle"] = await canary_runs(args.device, state, max(1, args.load_runs), None)
        on_gpu = idle[0]["device"] != "cpu"
        for load in ("gemm", "copy") if args.load_runs and on_gpu else ():
            out[f"canary_beside_{load}"] = await canary_runs(args.device, state, args.load_runs, load)
        if not on_gpu:
            out["canary_beside_load"] = "skipped: no GPU (on the CPU there is no contention to measure)"
        if args.harm_windows:
            key = "harm" if on_gpu else "harm_cpu_only (a CPU decode loop beside CPU canary runs; not a GPU figure)"
            out[key] = await harm_figures(args.device if on_gpu else "cpu", state, args.harm_windows)
    out["rss_mib_with_nvml_host_canary_sources"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    out["torch_in_daemon_process"] = "torch" in sys.modules
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--collections", type=int, default=50)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--fake-gpus", type=int, default=8, help="also time sloguard's own cost on N fake GPUs (0: no)")
    ap.add_argument("--load-runs", type=int, default=5, help="canary runs idle and beside each co-located load")
    ap.add_argument("--harm-windows", type=int, default=20, help="canary windows beside the decode loop (0: skip)")
    print(json.dumps(asyncio.run(main_async(ap.parse_args())), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
