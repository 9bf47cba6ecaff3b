"""Canary subprocess: GEMM, copy bandwidth and a tiny decoder, measured with torch; prints one JSON line.

The only sloguard module that imports torch. Run as `python -m sloguard.gpu.canary_worker --device D`.
SIGTERM interrupts between kernels: the worker synchronises, releases CUDA and exits 143 within ~1 s.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

SEED = 1234


class Terminated(Exception):
    """Raised in the main thread by the SIGTERM handler."""


@dataclass(frozen=True)
class Sizes:
    """Workload sizes; CUDA sizes keep the whole run under ~1 s of GPU time on an H100."""

    gemm: int
    gemm_iters: int
    copy_bytes: int
    copy_iters: int
    d_model: int
    layers: int
    heads: int
    vocab: int
    prompt: int
    decode: int


SIZES = {
    "cuda": Sizes(8192, 20, 1 << 30, 10, 2048, 4, 16, 32000, 512, 32),
    "cpu": Sizes(256, 4, 16 << 20, 4, 256, 2, 4, 2048, 64, 8),
}


class Timer:
    """Time a callable after warm-up: CUDA events on a GPU, perf_counter on CPU; return seconds per call."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def __call__(self, fn: Callable[[], Any], iters: int, warmup: int = 2, reps: int = 3) -> float:
        # best of `reps`: a transient neighbour slows one repetition, a sick GPU slows all of them
        for _ in range(warmup):
            fn()
        self._sync()
        return min(self._once(fn, iters) for _ in range(reps)) / iters

    def _once(self, fn: Callable[[], Any], iters: int) -> float:
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1000.0
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return time.perf_counter() - t0

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def matmul_flops(dev: torch.device, dtype: torch.dtype, s: Sizes, timer: Timer) -> float:
    """Return achieved FLOP/s of an n×n×n GEMM (2n³ FLOP each)."""
    g = torch.Generator(device=dev).manual_seed(SEED)
    a = torch.randn(s.gemm, s.gemm, device=dev, dtype=dtype, generator=g)
    b = torch.randn(s.gemm, s.gemm, device=dev, dtype=dtype, generator=g)
    return 2.0 * s.gemm**3 / timer(lambda: torch.mm(a, b), s.gemm_iters)


def copy_bandwidth(dev: torch.device, s: Sizes, timer: Timer) -> float:
    """Return device-to-device copy bytes/s, counting read + write (as CUDA's bandwidthTest does)."""
    src = torch.empty(s.copy_bytes, dtype=torch.uint8, device=dev).fill_(1)
    dst = torch.empty_like(src)
    return 2.0 * s.copy_bytes / timer(lambda: dst.copy_(src), s.copy_iters)


class TinyDecoder:
    """A few-layer pre-norm transformer with random weights (fixed seed) and a preallocated KV cache."""

    def __init__(self, dev: torch.device, dtype: torch.dtype, s: Sizes) -> None:
        g = torch.Generator(device=dev).manual_seed(SEED)

        def w(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, device=dev, dtype=dtype, generator=g) * 0.02

        d, self.s = s.d_model, s
        self.emb = w(s.vocab, d)
        self.blocks = [(w(d, 3 * d), w(d, d), w(d, 4 * d), w(4 * d, d)) for _ in range(s.layers)]
        self.head = w(d, s.vocab)
        shape = (s.layers, s.heads, s.prompt + s.decode + 1, d // s.heads)
        self.k, self.v = torch.zeros(shape, device=dev, dtype=dtype), torch.zeros(shape, device=dev, dtype=dtype)

    def weight_bytes(self) -> int:
        """Bytes of weights one decode step reads (all blocks plus the LM head; one embedding row is noise)."""
        return sum(t.numel() * t.element_size() for blk in self.blocks for t in blk) + \
            self.head.numel() * self.head.element_size()

    def step(self, tokens: torch.Tensor, pos: int) -> torch.Tensor:
        """Run tokens at positions pos.. through the model; return the greedy next token (on device)."""
        t, h = tokens.shape[0], self.s.heads
        x = self.emb[tokens]
        for i, (qkv, o, up, down) in enumerate(self.blocks):
            q, k, v = (_norm(x) @ qkv).view(t, 3, h, -1).permute(1, 2, 0, 3)
            self.k[i, :, pos:pos + t], self.v[i, :, pos:pos + t] = k, v
            a = F.scaled_dot_product_attention(q, self.k[i, :, :pos + t], self.v[i, :, :pos + t], is_causal=t > 1)
            x = x + a.transpose(0, 1).reshape(t, -1) @ o
            x = x + F.gelu(_norm(x) @ up) @ down
        return (_norm(x[-1:]) @ self.head).argmax(-1)


def _norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)


def decoder_latency(dev: torch.device, dtype: torch.dtype, s: Sizes, timer: Timer) -> dict[str, float]:
    """Return TTFT (prefill + first token) and TPOT (per decode step) of the tiny decoder, batch 1."""
    model = TinyDecoder(dev, dtype, s)
    prompt = torch.randint(0, s.vocab, (s.prompt,), device=dev, generator=torch.Generator(dev).manual_seed(SEED))
    ttft = timer(lambda: model.step(prompt, 0), 1, warmup=1)
    first = model.step(prompt, 0)

    def decode() -> None:
        tok = first
        for i in range(s.decode):
            tok = model.step(tok, s.prompt + i)

    tpot = timer(decode, 1, warmup=1) / s.decode
    return {"decoder_ttft_seconds": ttft, "decoder_tpot_seconds": tpot,
            "decoder_weight_bytes": float(model.weight_bytes()),
            "decoder_bandwidth_bytes_per_second": model.weight_bytes() / tpot}


def resolve(device: str) -> torch.device:
    """Map auto|cpu|cuda|cuda:N to a torch device; auto picks cuda:0 when CUDA is available."""
    if device == "auto":
        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    return torch.device("cuda:0" if device == "cuda" else device)


def identity(dev: torch.device) -> dict[str, str]:
    """Return the device's name and uuid (NVML form "GPU-…"; empty on CPU)."""
    if dev.type != "cuda":
        return {"device": "cpu", "gpu_name": _cpu_model(), "gpu_uuid": ""}
    props = torch.cuda.get_device_properties(dev)
    uuid = str(getattr(props, "uuid", ""))
    return {"device": f"cuda:{dev.index or 0}", "gpu_name": props.name,
            "gpu_uuid": uuid if not uuid or uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine() or "cpu"


def run(device: str) -> dict[str, Any]:
    """Run every test once and return the figures."""
    t0 = time.perf_counter()
    dev = resolve(device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    s, timer = SIZES[dev.type], Timer(dev)
    torch.manual_seed(SEED)
    with torch.inference_mode():
        out: dict[str, Any] = {**identity(dev), "dtype": str(dtype).removeprefix("torch."),
                               "torch_version": torch.__version__}
        out["kernels_started_at"] = time.time()  # wall clock: the window a co-located workload may feel
        out["matmul_flops"] = matmul_flops(dev, dtype, s, timer)
        out["copy_bandwidth_bytes_per_second"] = copy_bandwidth(dev, s, timer)
        out.update(decoder_latency(dev, dtype, s, timer))
        out["kernels_finished_at"] = time.time()
    out["busy_seconds"] = time.perf_counter() - t0  # device time incl. context set-up, for the duty cycle
    return out


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    """Parse --device, run, print one JSON object; exit 143 on SIGTERM, 2 on a bad device."""
    p = argparse.ArgumentParser(prog="canary_worker")
    p.add_argument("--device", default="auto")
    p.add_argument("--json", action="store_true", help="accepted for symmetry; output is always JSON")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        print(json.dumps(run(args.device)), flush=True)
        return 0
    except Terminated:
        if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            torch.cuda.synchronize()  # let queued kernels finish so the context is torn down cleanly
        print(json.dumps({"error": "terminated"}), flush=True)
        return 143
    except (RuntimeError, AssertionError) as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
